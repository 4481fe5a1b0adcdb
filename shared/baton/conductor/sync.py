"""Conductor's synchronous execution (``POST /api/workflow/execute/{name}/{version}``, as Orkes'
``WorkflowResourceSync`` serves it): when a started workflow's wait is over, and the
``WorkflowRun`` it answers.

The wait is over when the workflow is terminal (COMPLETED, FAILED, TIMED_OUT, TERMINATED: a
PAUSED workflow is waited on) or when a task whose reference name is one of ``waitUntilTaskRef``
(comma-separated, matched case-insensitively, as Conductor does) is among its tasks: scheduled,
in progress or ended, i.e. the workflow reached it."""

from __future__ import annotations

from typing import Any

from baton.conductor import views

DEFAULT_WAIT_SECONDS = 10  # Conductor's default waitForSeconds
TERMINAL = frozenset({"COMPLETED", "FAILED", "TIMED_OUT", "TERMINATED"})


def task_refs(raw: str | None) -> frozenset[str]:
    """The reference names of ``waitUntilTaskRef`` (lower-cased; empty: none)."""
    return frozenset(r.strip().lower() for r in (raw or "").split(",") if r.strip())


def reached(instance: dict[str, Any], refs: frozenset[str]) -> bool:
    """Whether the wait on ``instance`` (a Baton instance with its steps) is over."""
    if views.workflow_status(instance["status"]) in TERMINAL:
        return True
    if not refs:
        return False
    # A task inside a loop is reached by its name with its iteration (``ref__2``) or without.
    return any(
        name.lower() in refs
        for t in views.tasks_of(instance, [])
        for name in (t["referenceTaskName"], views.without_iteration(t["referenceTaskName"]))
    )


def workflow_run(
    instance: dict[str, Any], audit: list[dict[str, Any]], request_id: str | None
) -> dict[str, Any]:
    """Conductor's WorkflowRun for ``instance``: the workflow's id, status, input, output,
    variables and tasks, and the ``requestId`` the caller sent."""
    wf = views.workflow(instance, audit)
    run = {
        "workflowId": wf["workflowId"],
        "requestId": request_id,
        "correlationId": wf.get("correlationId"),
        "status": wf["status"],
        "input": wf.get("input") or {},
        "output": wf.get("output") or {},
        "variables": wf.get("variables") or {},
        "tasks": wf.get("tasks") or [],
        "priority": wf.get("priority", 0),
        "createTime": wf.get("createTime"),
        "updateTime": wf.get("updateTime"),
        "reasonForIncompletion": wf.get("reasonForIncompletion"),
    }
    return {k: v for k, v in run.items() if v is not None}
