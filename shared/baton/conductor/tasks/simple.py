"""SIMPLE ⇄ SERVICE_TASK: ``jobType`` is the task's name, the step id its reference; a
WorkflowTask ``retryCount``, an inline ``taskDefinition``'s retry and timeout settings and
``startDelay`` are the step's own. ``${CPEWF_TASK_ID}`` in its inputParameters is the task's own
id as its worker is handed it (``<jobId>.<attempt>``)."""

from __future__ import annotations

import re
from typing import Any

from baton.conductor.tasks.common import (
    back_worker_settings,
    base,
    task_input,
    worker_settings,
)

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
    worker_settings(task, step, path)
    return step


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
    back_worker_settings(s, task)
    return [task]
