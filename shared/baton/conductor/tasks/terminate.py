"""TERMINATE ⇄ TERMINATE (``terminationStatus`` COMPLETED or FAILED, ``terminationReason``,
``workflowOutput``) and SET_VARIABLE ⇄ SET_VARIABLE (its inputParameters are the variables)."""

from __future__ import annotations

from typing import Any

from baton.conductor.tasks.common import base, fail, label, params_in, params_out, task_input


def to_step(task: dict[str, Any], path: str) -> dict[str, Any]:
    where = label(task, path)
    step = base(task, path)
    params = task.get("inputParameters") or {}
    status = params.get("terminationStatus", "COMPLETED")
    if status not in ("COMPLETED", "FAILED"):
        raise fail(where, f"terminationStatus {status!r}: Baton ends with COMPLETED or FAILED")
    step.update(type="TERMINATE", status=status)
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
    ends: dict[str, Any] = {"terminationStatus": s["status"]}
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
