"""FORK_JOIN_DYNAMIC + JOIN ⇄ MAP.

With ``forkTaskName`` (or ``forkTaskWorkflow``) and ``forkTaskInputs``: a MAP running that one
task (or sub-workflow) per input, all at once, each input its whole input."""

from __future__ import annotations

from typing import Any

from baton.conductor.tasks.common import (
    WHOLE,
    back,
    base,
    fail,
    join_back,
    join_note,
    label,
    params_in,
    params_out,
)
from baton.steps import MAX_MAP_CONCURRENCY

# The step id of a dynamic fork's task, inside its MAP: the fork's reference plus this.
FORKED = "_forked"


def to_step(task: dict[str, Any], join: dict[str, Any], path: str) -> dict[str, Any]:
    """FORK_JOIN_DYNAMIC with ``forkTaskName`` (or ``forkTaskWorkflow``) and ``forkTaskInputs``:
    a MAP running that one task (or sub-workflow) per input, all at once, each input its whole
    input. The older form, a list of tasks chosen at run time (``dynamicForkTasksParam``), names
    the job types only at run time: Baton has no equivalent and refuses it."""
    where = label(task, path)
    step = base(task, path)
    params = task.get("inputParameters") or {}
    if not isinstance(params, dict):
        raise fail(where, "inputParameters must be an object")
    name, flow = params.get("forkTaskName"), params.get("forkTaskWorkflow")
    inputs = params.get("forkTaskInputs")
    if (name is None and flow is None) or inputs is None:
        raise fail(
            where,
            "FORK_JOIN_DYNAMIC is translated from forkTaskName (or forkTaskWorkflow) and "
            "forkTaskInputs; a list of tasks chosen at run time (dynamicForkTasksParam, "
            "dynamicTasks) has no Baton equivalent",
        )
    if not (isinstance(inputs, list) or (isinstance(inputs, str) and WHOLE.match(inputs))):
        raise fail(where, "forkTaskInputs must be a list or one ${…} expression giving one")
    inner: dict[str, Any] = {"id": f"{step['id'][: 64 - len(FORKED)]}{FORKED}"}
    if name is not None:
        if not isinstance(name, str) or not name:
            raise fail(where, "forkTaskName must be a task name")
        inner.update(name=name, type="SERVICE_TASK", jobType=name)
    else:
        if not isinstance(flow, str) or not flow:
            raise fail(where, "forkTaskWorkflow must be a workflow name")
        inner.update(type="SUB_WORKFLOW", definitionName=flow)
        version = params.get("forkTaskWorkflowVersion")
        if isinstance(version, int) and version >= 1:
            inner["definitionVersion"] = version
    inner["input"] = "${map.item}"
    step.update(
        type="MAP",
        items=params_in(inputs, f"{path}.inputParameters.forkTaskInputs"),
        maxConcurrency=MAX_MAP_CONCURRENCY,
        steps=[inner],
    )
    join_note(step, join)
    return step


def back_map(s: dict[str, Any], task: dict[str, Any]) -> list[dict[str, Any]]:
    inner = _dynamic_fork(s)
    task["type"] = "FORK_JOIN_DYNAMIC"
    if inner is None:
        task["inputParameters"] = {"items": params_out(s["items"])}
        task["loopOver"] = back(s["steps"])  # informational: Baton's MAP body
        return [task]
    if inner["type"] == "SERVICE_TASK":
        fork: dict[str, Any] = {"forkTaskName": inner["jobType"]}
    else:
        fork = {"forkTaskWorkflow": inner["definitionName"]}
        if inner.get("definitionVersion"):
            fork["forkTaskWorkflowVersion"] = inner["definitionVersion"]
    task["inputParameters"] = {**fork, "forkTaskInputs": params_out(s["items"])}
    task["dynamicForkTasksParam"] = "dynamicTasks"
    task["dynamicForkTasksInputParamName"] = "dynamicTasksInput"
    join_ref, task = join_back(s, task)
    join = {"name": join_ref, "taskReferenceName": join_ref, "type": "JOIN"}
    return [task, {**join, "inputParameters": {}, "joinOn": []}]


def _dynamic_fork(s: dict[str, Any]) -> dict[str, Any] | None:
    """The one task of a MAP that reads as a FORK_JOIN_DYNAMIC (each item its whole input)."""
    body = s.get("steps") or []
    if len(body) != 1:
        return None
    inner = body[0]
    if inner.get("type") in ("SERVICE_TASK", "SUB_WORKFLOW") and inner.get("input") == (
        "${map.item}"
    ):
        return dict(inner)
    return None
