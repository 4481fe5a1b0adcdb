"""SUB_WORKFLOW ⇄ SUB_WORKFLOW: ``subWorkflowParam.name``/``version`` (each may be ``${…}``,
resolved when the child starts) or an inline ``workflowDefinition`` (an object: one given as
``${…}`` is refused)."""

from __future__ import annotations

from typing import Any

from baton.conductor.tasks.common import WHOLE, WORKFLOW, base, fail, label, params_in, task_input


def to_step(task: dict[str, Any], path: str) -> dict[str, Any]:
    step = base(task, path)
    param = task.get("subWorkflowParam") or {}
    if not isinstance(param, dict) or not (param.get("name") or param.get("workflowDefinition")):
        raise fail(label(task, path), "subWorkflowParam needs a name or a workflowDefinition")
    step.update(type="SUB_WORKFLOW", input=task_input(task, path))
    inline = param.get("workflowDefinition")
    if inline is not None and not isinstance(inline, dict):
        # Conductor resolves it when the task starts and runs the Conductor definition it gives;
        # Baton would have to translate a definition mid-run, inside the engine, which does not
        # know Conductor's JSON. Refused rather than run by its name instead.
        raise fail(
            label(task, path),
            "subWorkflowParam.workflowDefinition must be the definition itself (an object): "
            "one given as ${…} is resolved at run time, which Baton does not do; register the "
            "child and name it (subWorkflowParam.name may be ${…})",
        )
    if isinstance(inline, dict):
        step["definition"] = WORKFLOW["in"](inline)
    else:
        # A name or version given as ${…} is resolved when the child starts.
        step["definitionName"] = params_in(param["name"], label(task, path))
        version = param.get("version")
        if isinstance(version, int) or (isinstance(version, str) and WHOLE.match(version)):
            step["definitionVersion"] = params_in(version, label(task, path))
    if task.get("retryCount"):
        step["retryCount"] = task["retryCount"]
    return step


def back_sub_workflow(s: dict[str, Any], task: dict[str, Any]) -> list[dict[str, Any]]:
    task["type"] = "SUB_WORKFLOW"
    param: dict[str, Any] = {}
    if s.get("definition"):
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
