"""SUB_WORKFLOW ⇄ SUB_WORKFLOW: ``subWorkflowParam.name``/``version`` (each may be ``${…}``,
resolved when the child starts) or an inline ``workflowDefinition``: an object (translated when
the parent is registered), or a ``${…}`` giving a Conductor WorkflowDef when the child starts
(``definitionDialect`` conductor: translated and validated then; a bad one fails the task)."""

from __future__ import annotations

from typing import Any

from baton.conductor.tasks.common import (
    WHOLE,
    WORKFLOW,
    base,
    fail,
    label,
    params_in,
    params_out,
    task_input,
)


def to_step(task: dict[str, Any], path: str) -> dict[str, Any]:
    step = base(task, path)
    param = task.get("subWorkflowParam") or {}
    if not isinstance(param, dict) or not (param.get("name") or param.get("workflowDefinition")):
        raise fail(label(task, path), "subWorkflowParam needs a name or a workflowDefinition")
    step.update(type="SUB_WORKFLOW", input=task_input(task, path))
    inline = param.get("workflowDefinition")
    if inline is not None and not isinstance(inline, dict | str):
        raise fail(label(task, path), _INLINE)
    if isinstance(inline, dict):
        step["definition"] = WORKFLOW["in"](inline)
        return _retry(task, step)
    if isinstance(inline, str):
        if not WHOLE.match(inline):
            raise fail(label(task, path), _INLINE)
        # Resolved when the child starts, as Conductor does, and read as a Conductor WorkflowDef
        # (the engine calls the translator the Conductor surface registers: baton.dialects);
        # when it gives nothing, the named definition runs, as in Conductor.
        step["definition"] = params_in(inline, label(task, path))
        step["definitionDialect"] = "conductor"
    if param.get("name"):
        # A name or version given as ${…} is resolved when the child starts.
        step["definitionName"] = params_in(param["name"], label(task, path))
        version = param.get("version")
        # Conductor's SubWorkflow runs the latest version for a version of 0, as for none.
        if (isinstance(version, int) and version != 0) or (
            isinstance(version, str) and WHOLE.match(version)
        ):
            step["definitionVersion"] = params_in(version, label(task, path))
    return _retry(task, step)


_INLINE = (
    "subWorkflowParam.workflowDefinition is the definition itself (an object) or one ${…} "
    "expression giving it when the task starts"
)


def _retry(task: dict[str, Any], step: dict[str, Any]) -> dict[str, Any]:
    if task.get("retryCount"):
        step["retryCount"] = task["retryCount"]
    return step


def back_sub_workflow(s: dict[str, Any], task: dict[str, Any]) -> list[dict[str, Any]]:
    task["type"] = "SUB_WORKFLOW"
    param: dict[str, Any] = {}
    if isinstance(s.get("definition"), str):
        # Conductor's model wants a name: the step's own when it runs none by name.
        param["name"] = s.get("definitionName") or s["id"]
        if s.get("definitionVersion") is not None:
            param["version"] = s["definitionVersion"]
        param["workflowDefinition"] = params_out(s["definition"])
    elif s.get("definition"):
        param["name"] = s["definition"]["name"]
        param["workflowDefinition"] = WORKFLOW["out"](s["definition"])
    else:
        param["name"] = s.get("definitionName")
        if s.get("definitionVersion") is not None:
            param["version"] = s["definitionVersion"]
    task["subWorkflowParam"] = param
    if s.get("retryCount"):
        task["retryCount"] = s["retryCount"]
    return [task]
