"""FORK_JOIN_DYNAMIC + JOIN ⇄ a keyed MAP: one forked task per item, all at once, the JOIN's
output (the MAP's) an object by the forked tasks' reference names, as Conductor's.

- ``dynamicForkTasksParam`` + ``dynamicForkTasksInputParamName``: the first names the input
  parameter giving the list of tasks (``{name, taskReferenceName, type}``), the second the one
  giving their inputs by reference name (an object, or a ``${…}`` giving one). The MAP runs over
  the tasks, keyed by ``taskReferenceName``, ``inputs`` the inputs: its one step is a
  SWITCH on the task's ``type``: a SUB_WORKFLOW entry starts the child its ``subWorkflowParam``
  names (or its inline ``workflowDefinition``, a Conductor WorkflowDef), any other is a worker
  task of its ``name`` (``${map.item.name}``); either's input is the task's entry
  (``${map.input}``); an HTTP entry calls its input's ``http_request``. The join reads the
  output of the task each item ran.
- ``forkTaskInputs`` with ``forkTaskName`` (or ``forkTaskWorkflow``, a sub-workflow, or
  ``forkTaskType``): the MAP runs that task over the inputs, each its whole input with its index
  as ``__index`` (an input that is no object is ``{input, __index}``), keyed
  ``_<forkTaskName>_<index>`` as Conductor names and hands the forked tasks (the MAP's
  ``indexAs``). ``forkTaskType`` HTTP forks HTTP tasks, each calling its input's
  ``http_request``; without ``forkTaskName`` a forked task is named by its system type, or else
  by the fork's reference name (Conductor's ``getDynamicTasksSimple``).
"""

from __future__ import annotations

from typing import Any

from baton.conductor.tasks.common import (
    WHOLE,
    back,
    base,
    fail,
    items_in,
    items_out,
    join_back,
    join_note,
    label,
    params_in,
    params_out,
)
from baton.steps import MAX_MAP_CONCURRENCY

# The step id of a dynamic fork's task, inside its MAP: the fork's reference plus this (in the
# task-list form, the SWITCH choosing by type; its worker task and sub-workflow add these).
FORKED = "_forked"
FORKED_TASK, FORKED_FLOW, FORKED_HTTP = "_task", "_flow", "_http"
TASK_TYPE = "${map.item.type}"
# The key of a task of the dynamicForkTasksParam form, and the input it reads.
TASK_KEY = "${map.item.taskReferenceName}"
TASK_NAME = "${map.item.name}"
TASK_INPUT = "${map.input}"
# A forked task's own ``optional`` (its failure recorded, the fork going on), read when it fails.
TASK_OPTIONAL = "${map.item.optional}"
# And its own ``permissive`` (the JOIN waits for the others, then fails).
TASK_PERMISSIVE = "${map.item.permissive}"
# Conductor's own parameter names, used when a /v1 MAP reads back as this form.
TASKS_PARAM, INPUTS_PARAM = "dynamicTasks", "dynamicTasksInput"
# Where Conductor gives each task of the forkTaskName form its index, in its input.
INDEX = "__index"
# The request of each task of a forkTaskType HTTP fork.
HTTP_REQUEST = "${map.input.http_request}"


def to_step(task: dict[str, Any], join: dict[str, Any], path: str) -> dict[str, Any]:
    where = label(task, path)
    params = task.get("inputParameters") or {}
    if not isinstance(params, dict):
        raise fail(where, "inputParameters must be an object")
    if task.get("dynamicForkTasksParam") and (
        params.get("forkTaskName") is None
        and params.get("forkTaskWorkflow") is None
        and params.get("forkTaskInputs") is None
    ):
        step = _task_list(task, params, path)
    else:
        step = _one_task(task, params, path)
    join_note(step, join)
    return step


def _whole(value: Any, where: str, field: str) -> str:
    """A parameter Baton reads when the fork starts (given as no list or object): one ``${…}``
    expression."""
    if not (isinstance(value, str) and WHOLE.match(value)):
        raise fail(where, f"{field} must be one ${{…}} expression (the fork reads it at run time)")
    return value


def _task_list(task: dict[str, Any], params: dict[str, Any], path: str) -> dict[str, Any]:
    where = label(task, path)
    step = base(task, path)
    if len(step["id"]) + len(FORKED) + len(FORKED_TASK) > 64:
        raise fail(
            where, "taskReferenceName is too long for a dynamic fork (at most 52 characters)"
        )
    tasks_param = task["dynamicForkTasksParam"]
    inputs_param = task.get("dynamicForkTasksInputParamName")
    if not isinstance(tasks_param, str) or tasks_param not in params:
        raise fail(where, f"dynamicForkTasksParam {tasks_param!r} names no input parameter")
    if not isinstance(inputs_param, str) or inputs_param not in params:
        raise fail(
            where, f"dynamicForkTasksInputParamName {inputs_param!r} names no input parameter"
        )
    items = params[tasks_param]
    if not isinstance(items, list):
        items = _whole(items, where, f"inputParameters.{tasks_param}")
    inputs = params[inputs_param]
    if not isinstance(inputs, dict):
        inputs = _whole(inputs, where, f"inputParameters.{inputs_param}")
    own = step["id"][: 64 - len(FORKED)]
    # Each task by its type: a SUB_WORKFLOW entry starts its child, an HTTP entry calls its
    # input's http_request, any other is a worker task.
    inner = {
        "id": f"{own}{FORKED}",
        "type": "SWITCH",
        "on": TASK_TYPE,
        "cases": {
            "SUB_WORKFLOW": [
                {
                    "id": f"{own}{FORKED_FLOW}",
                    "type": "SUB_WORKFLOW",
                    "definitionName": "${map.item.subWorkflowParam.name}",
                    "definitionVersion": "${map.item.subWorkflowParam.version}",
                    # An entry's inline WorkflowDef runs when it has one, as in Conductor.
                    "definition": "${map.item.subWorkflowParam.workflowDefinition}",
                    "definitionDialect": "conductor",
                    "input": TASK_INPUT,
                    "optional": TASK_OPTIONAL,
                    "permissive": TASK_PERMISSIVE,
                }
            ],
            "HTTP": [
                {
                    "id": f"{own}{FORKED_HTTP}",
                    "type": "HTTP",
                    "request": HTTP_REQUEST,
                    "input": TASK_INPUT,
                    "optional": TASK_OPTIONAL,
                    "permissive": TASK_PERMISSIVE,
                }
            ],
        },
        "default": [
            {
                "id": f"{own}{FORKED_TASK}",
                "type": "SERVICE_TASK",
                "jobType": TASK_NAME,
                "input": TASK_INPUT,
                "optional": TASK_OPTIONAL,
                "permissive": TASK_PERMISSIVE,
            }
        ],
    }
    step.update(
        type="MAP",
        items=items_in(items, f"{path}.inputParameters.{tasks_param}"),
        key=TASK_KEY,
        inputs=params_in(inputs, f"{path}.inputParameters.{inputs_param}"),
        maxConcurrency=MAX_MAP_CONCURRENCY,
        steps=[inner],
    )
    return step


def _one_task(task: dict[str, Any], params: dict[str, Any], path: str) -> dict[str, Any]:
    where = label(task, path)
    step = base(task, path)
    name, flow = params.get("forkTaskName"), params.get("forkTaskWorkflow")
    kind = params.get("forkTaskType")
    inputs = params.get("forkTaskInputs")
    if inputs is None:
        raise fail(
            where,
            "FORK_JOIN_DYNAMIC needs dynamicForkTasksParam and dynamicForkTasksInputParamName, "
            "or forkTaskInputs (with forkTaskName, forkTaskWorkflow or forkTaskType)",
        )
    if flow is None and kind not in (None, "SIMPLE", "HTTP"):
        raise fail(
            where,
            f"forkTaskType {kind!r}: a dynamic fork of forkTaskInputs forks SIMPLE or HTTP "
            "tasks (or, with forkTaskWorkflow, sub-workflows)",
        )
    if name is None and flow is None:
        # Conductor's names: a system task's type, else the fork's own reference name.
        name = kind if kind == "HTTP" else task.get("taskReferenceName")
    if not (isinstance(inputs, list) or (isinstance(inputs, str) and WHOLE.match(inputs))):
        raise fail(where, "forkTaskInputs must be a list, or one ${…} expression giving one")
    inner: dict[str, Any] = {"id": f"{step['id'][: 64 - len(FORKED)]}{FORKED}"}
    if name is not None and flow is None:
        if not isinstance(name, str) or not name:
            raise fail(where, "forkTaskName must be a task name")
        if kind == "HTTP":
            # Each call is its input's http_request (as a forked HTTP task reads it).
            inner.update(name=name, type="HTTP", request=HTTP_REQUEST)
        else:
            inner.update(name=name, type="SERVICE_TASK", jobType=name)
    else:
        if not isinstance(flow, str) or not flow:
            raise fail(where, "forkTaskWorkflow must be a workflow name")
        inner.update(type="SUB_WORKFLOW", definitionName=flow)
        version = params.get("forkTaskWorkflowVersion")
        if isinstance(version, int) and version >= 1:
            inner["definitionVersion"] = version
    inner["input"] = TASK_INPUT  # the item with its __index (indexAs)
    # Conductor names each forked task _<forkTaskName>_<index> (the fork's reference without one).
    named = name if name is not None else step["id"]
    step.update(
        type="MAP",
        items=items_in(inputs, f"{path}.inputParameters.forkTaskInputs"),
        key=f"_{named}_${{map.index}}",
        indexAs=INDEX,
        maxConcurrency=MAX_MAP_CONCURRENCY,
        steps=[inner],
    )
    return step


def back_map(s: dict[str, Any], task: dict[str, Any]) -> list[dict[str, Any]]:
    inner = _dynamic_fork(s)
    task["type"] = "FORK_JOIN_DYNAMIC"
    if inner is None:
        task["inputParameters"] = {"items": items_out(s["items"])}
        task["loopOver"] = back(s["steps"])  # informational: Baton's MAP body
        return [task]
    if inner["type"] == "SWITCH":
        task["inputParameters"] = {
            TASKS_PARAM: items_out(s["items"]),
            INPUTS_PARAM: params_out(s.get("inputs")),
        }
    else:
        if inner["type"] == "SERVICE_TASK":
            fork: dict[str, Any] = {"forkTaskName": inner["jobType"]}
        elif inner["type"] == "HTTP":
            fork = {"forkTaskName": inner.get("name") or "HTTP", "forkTaskType": "HTTP"}
        else:
            fork = {"forkTaskWorkflow": inner["definitionName"]}
            if inner.get("definitionVersion"):
                fork["forkTaskWorkflowVersion"] = inner["definitionVersion"]
        task["inputParameters"] = {**fork, "forkTaskInputs": items_out(s["items"])}
    task["dynamicForkTasksParam"] = TASKS_PARAM
    task["dynamicForkTasksInputParamName"] = INPUTS_PARAM
    join_ref, task = join_back(s, task)
    join = {"name": join_ref, "taskReferenceName": join_ref, "type": "JOIN"}
    return [task, {**join, "inputParameters": {}, "joinOn": []}]


def _dynamic_fork(s: dict[str, Any]) -> dict[str, Any] | None:
    """The one task of a MAP that reads as a FORK_JOIN_DYNAMIC: each item its whole input, or
    a task list's task with its input by reference name."""
    body = s.get("steps") or []
    if len(body) != 1:
        return None
    inner = body[0]
    whole = (
        inner.get("type") in ("SERVICE_TASK", "SUB_WORKFLOW")
        or (inner.get("type") == "HTTP" and inner.get("request") == HTTP_REQUEST)
    ) and (
        inner.get("input") == "${map.item}"
        or (inner.get("input") == TASK_INPUT and s.get("indexAs") is not None)
    )
    listed = (
        inner.get("type") == "SWITCH"
        and inner.get("on") == TASK_TYPE
        and s.get("key") == (TASK_KEY)
    )
    return dict(inner) if whole or listed else None
