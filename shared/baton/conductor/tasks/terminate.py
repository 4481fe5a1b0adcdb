"""TERMINATE ⇄ TERMINATE (``terminationStatus`` COMPLETED, FAILED or TERMINATED, Baton's
CANCELLED; ``terminationReason``, ``workflowOutput``), SET_VARIABLE ⇄ SET_VARIABLE (its
inputParameters are the variables) and NOOP ⇄ NOOP."""

from __future__ import annotations

from typing import Any

from baton.conductor.tasks.common import base, fail, label, params_in, params_out, task_input

# Conductor's terminationStatus → Baton's instance status (TERMINATED is a cancelled instance,
# which /api shows as TERMINATED).
_STATUS = {"COMPLETED": "COMPLETED", "FAILED": "FAILED", "TERMINATED": "CANCELLED"}
_BACK_STATUS = {v: k for k, v in _STATUS.items()}


def to_step(task: dict[str, Any], path: str) -> dict[str, Any]:
    where = label(task, path)
    step = base(task, path)
    params = task.get("inputParameters") or {}
    status = params.get("terminationStatus", "COMPLETED")
    if status not in _STATUS:
        raise fail(
            where,
            f"terminationStatus {status!r} is not one of {', '.join(_STATUS)}",
        )
    step.update(type="TERMINATE", status=_STATUS[status])
    if params.get("terminationReason") is not None:
        step["reason"] = params_in(params["terminationReason"], where)
    if params.get("workflowOutput") is not None:
        step["output"] = params_in(params["workflowOutput"], where)
    return step


def set_variable(task: dict[str, Any], path: str) -> dict[str, Any]:
    step = base(task, path)
    step.update(type="SET_VARIABLE", variables=task_input(task, path))
    return step


def back_terminate(s: dict[str, Any], task: dict[str, Any]) -> list[dict[str, Any]]:
    task["type"] = "TERMINATE"
    ends: dict[str, Any] = {"terminationStatus": _BACK_STATUS[s["status"]]}
    if s.get("reason") is not None:
        ends["terminationReason"] = params_out(s["reason"])
    if s.get("output") is not None:
        ends["workflowOutput"] = params_out(s["output"])
    task["inputParameters"] = ends
    return [task]


def back_set_variable(s: dict[str, Any], task: dict[str, Any]) -> list[dict[str, Any]]:
    task["type"] = "SET_VARIABLE"
    task["inputParameters"] = params_out(s["variables"])
    return [task]


def noop(task: dict[str, Any], path: str) -> dict[str, Any]:
    step = base(task, path)
    step.update(type="NOOP", input=task_input(task, path))
    return step


def back_noop(s: dict[str, Any], task: dict[str, Any]) -> list[dict[str, Any]]:
    task["type"] = "NOOP"
    return [task]
