"""SIMPLE ⇄ SERVICE_TASK: ``jobType`` is the task's name, the step id its reference; a
WorkflowTask ``retryCount``, an inline ``taskDefinition``'s retry and timeout settings and
``startDelay`` are the step's own. ``${CPEWF_TASK_ID}`` in its inputParameters is the task's own
id as its worker is handed it (``<jobId>.<attempt>``)."""

from __future__ import annotations

import re
from typing import Any

from baton.conductor.tasks.common import TASK_SETTINGS, base, fail, label, task_input

_OWN_TASK_ID_EXPR = re.compile(r"\$\{\s*CPEWF_TASK_ID\s*\}")


def to_step(task: dict[str, Any], path: str) -> dict[str, Any]:
    step = base(task, path)
    step["name"] = task.get("name") or step["id"]
    own = f"${{{step['id']}.jobId}}.${{{step['id']}.attempt}}"
    params = _own_task_id(task.get("inputParameters") or {}, own)
    step.update(
        type="SERVICE_TASK",
        jobType=task.get("name"),
        input=task_input({**task, "inputParameters": params}, path),
    )
    settings(task, step, path)
    return step


def settings(task: dict[str, Any], step: dict[str, Any], path: str) -> None:
    """The worker task's own settings: an inline ``taskDefinition``'s, the WorkflowTask's
    ``retryCount`` and ``startDelay``."""
    inline = task.get("taskDefinition")
    if isinstance(inline, dict):
        step.update({k: inline[k] for k in TASK_SETTINGS if inline.get(k) is not None})
        if step.get("responseTimeoutSeconds") == 0:
            del step["responseTimeoutSeconds"]
    if task.get("retryCount") is not None:
        step["retryCount"] = task["retryCount"]
    delay = task.get("startDelay")
    if delay:
        if not isinstance(delay, int) or isinstance(delay, bool) or delay < 0:
            raise fail(label(task, path), "startDelay must be a whole number of seconds")
        step["startDelaySeconds"] = delay


def _own_task_id(value: Any, own: str) -> Any:
    if isinstance(value, str):
        return _OWN_TASK_ID_EXPR.sub(lambda _m: own, value)
    if isinstance(value, dict):
        return {k: _own_task_id(v, own) for k, v in value.items()}
    if isinstance(value, list):
        return [_own_task_id(v, own) for v in value]
    return value


def back(s: dict[str, Any], task: dict[str, Any]) -> list[dict[str, Any]]:
    task["name"] = s["jobType"]
    task["type"] = "SIMPLE"
    back_settings(s, task)
    return [task]


def back_settings(s: dict[str, Any], task: dict[str, Any]) -> None:
    if s.get("retryCount") is not None:
        task["retryCount"] = s["retryCount"]
    if s.get("startDelaySeconds"):
        task["startDelay"] = s["startDelaySeconds"]
    inline = {k: s[k] for k in TASK_SETTINGS if k != "retryCount" and k in s}
    if inline:
        task["taskDefinition"] = {"name": s["jobType"], **inline}
