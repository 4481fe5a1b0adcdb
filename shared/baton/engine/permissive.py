"""Permissive steps (Conductor's ``permissive``): a failure the list goes past.

A ``permissive`` step that fails after its retries stays FAILED (or TIMED_OUT) and its list goes
on as if it had succeeded (``DecisionFlow.fail``). What follows from that is here:

- The instance ends when nothing is left to run: its root list ended and no execution is open
  (an instance retry may rerun a permissive failure its list had gone past, see below). It then
  fails if the latest execution of any permissive step (in any scope) failed, with Conductor's
  reason text for each (:func:`failures`), else completes.
- An instance retry reruns, as well as what the walk down from the root reruns
  (``engine.reopen``), every permissive step whose latest execution in its list failed or was
  cancelled after the list had gone past it (:func:`candidates`). Such a rerun does not move its
  list on when it ends (the steps after it ran already, or the operator owning the list ended):
  its end only ends the instance if nothing else is left (:func:`passed`), as Conductor reruns a
  failed task without scheduling again the tasks that followed it.

A PARALLEL or MAP whose branch or item ends on a permissive failure lets the others finish and
then fails (``operators.parallel``, ``operators.map``); inside a DO_WHILE a permissive failure
fails the loop at once, as Conductor's loop fails on any failed task of its iteration.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from baton.engine.records import Exec, NewStep, parent_of
from baton.status import StepStatus

if TYPE_CHECKING:
    from baton.engine.operators.protocol import Decision
    from baton.steps import Step

_OPEN = (StepStatus.SCHEDULED, StepStatus.IN_PROGRESS)
_FAILED = (StepStatus.FAILED, StepStatus.TIMED_OUT)
# What an instance retry reruns of a permissive step its list went past.
_RERUN = (StepStatus.FAILED, StepStatus.TIMED_OUT, StepStatus.CANCELLED)


def latest(d: Decision) -> list[dict[str, Any]]:
    """The latest execution of each permissive step in each scope, as this decision leaves it,
    oldest first."""
    ids = d.plan.permissive
    # What workers said failing an attempt in this decision (not written yet), by job and attempt.
    said = {
        (a.job_id, a.detail.get("attempt")): (a.detail.get("error"), a.detail.get("retryable"))
        for a in d.changes.audit
        if a.event == "JOB_FAILED" and a.detail is not None
    }
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for read in d.reader.latest_of(sorted(ids)):
        row = dict(read)
        update = d.changes.step_updates.get(row["id"])
        if update is not None:
            row["status"] = update.status
            row["attempt"] = update.attempt or row["attempt"]
            if update.error is not None:
                row["error"] = update.error or None  # '' clears it
            if (row["job_id"], row["attempt"]) in said:
                error, retryable = said[(row["job_id"], row["attempt"])]
                row["job_error"], row["job_terminal"] = error, retryable is False
        rows[(row["scope"], row["step_id"])] = row
    for new in d.changes.new_steps.values():
        if new.step_id in ids:
            job = next((j.id for j in d.changes.new_jobs if j.step_execution_id == new.id), None)
            rows[(new.scope, new.step_id)] = {
                "id": new.id,
                "step_id": new.step_id,
                "scope": new.scope,
                "status": new.status,
                "attempt": new.attempt,
                "error": new.error,
                "job_id": job,
                "job_error": said.get((job, new.attempt), (None, None))[0],
                "job_terminal": said.get((job, new.attempt), (None, None))[1] is False,
            }
    return list(rows.values())


def failures(d: Decision) -> str | None:
    """Conductor's reason for an instance whose permissive steps' latest executions failed
    (``Task <id> failed with status: FAILED and reason: '…'`` for each, joined by ``. ``), or
    None when none did. A task's id, status and reason are Conductor's: ``<jobId>.<attempt>``,
    FAILED_WITH_TERMINAL_ERROR when its worker said not to retry, and what the worker said
    failing that attempt for a step with a job; else the execution's id, status and error."""
    said = []
    for row in latest(d):
        if row["status"] not in _FAILED:
            continue
        task_id = f"{row['job_id']}.{row['attempt']}" if row["job_id"] else str(row["id"])
        reason = row.get("job_error") or row["error"]
        reason = "null" if reason is None else reason
        # Conductor's status of a task its worker failed saying not to retry.
        status = "FAILED_WITH_TERMINAL_ERROR" if row.get("job_terminal") else row["status"]
        said.append(f"Task {task_id} failed with status: {status} and reason: '{reason}'")
    return ". ".join(said) or None


def anything_open(d: Decision) -> bool:
    """Whether any execution of the instance is still open, as this decision leaves it (outside
    what it cancelled)."""
    cancelled = d.changes.cancel_scopes
    open_ids: set[uuid.UUID] = set()
    for row in d.reader.open_steps():
        if not any(row["scope"].startswith(p) for p in cancelled):
            open_ids.add(row["id"])
    for exec_id, update in d.changes.step_updates.items():
        if update.status in _OPEN:
            open_ids.add(exec_id)
        else:
            open_ids.discard(exec_id)
    open_ids.update(n.id for n in d.changes.new_steps.values() if n.status in _OPEN)
    return bool(open_ids)


def passed(d: Decision, e: Exec | NewStep, nxt: Step | None) -> bool:
    """Whether the list of ``e`` (an execution of a permissive step that just ended) had already
    gone past it: the next step ran in the same scope, or the operator owning the list ended.
    True only for a rerun an instance retry started (see the module's docstring)."""
    if nxt is not None:
        if any(n.step_id == nxt.id and n.scope == e.scope for n in d.changes.new_steps.values()):
            return True
        return d.reader.record(nxt.id, e.scope) is not None
    if e.scope == "":
        return False
    owner = parent_of(e.scope)
    assert owner is not None
    return d.execution(owner).status not in _OPEN


def root_ended(d: Decision) -> bool:
    """Whether the root list ran to its end: its last step's latest execution ended (a failure
    its list went past included)."""
    last = d.plan.root[-1].id
    for new in reversed(d.changes.new_steps.values()):
        if new.step_id == last and new.scope == "":
            return new.status not in _OPEN
    row = d.reader.record(last, "")
    if row is None:
        return False
    update = d.changes.step_updates.get(row["id"])
    status = update.status if update is not None else row["status"]
    return status not in _OPEN


def candidates(d: Decision, latest_by_step: Mapping[str, Mapping[str, Exec]]) -> list[Exec]:
    """An instance retry's reruns of permissive failures its lists went past: the latest
    execution of a permissive step that failed or was cancelled, in a list where a later step
    ran (``latest_by_step``: by scope, the latest execution of each step there)."""
    out: list[Exec] = []
    for by_step in latest_by_step.values():
        furthest = max(d.plan.position(sid).index for sid in by_step)
        for sid, e in by_step.items():
            if (
                sid in d.plan.permissive
                and e.status in _RERUN
                and d.plan.position(sid).index < furthest
            ):
                out.append(e)
    return out


def furthest(d: Decision, latest_by_step: Mapping[str, Mapping[str, Exec]]) -> dict[str, Exec]:
    """The last execution of each list, by scope: that of the furthest step reached in it."""
    return {
        scope: max(by_step.values(), key=lambda e: d.plan.position(e.step_id).index)
        for scope, by_step in latest_by_step.items()
    }
