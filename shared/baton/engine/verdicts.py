"""Pure verdicts on a worker's result: may it be applied, is it a repeat, or is it refused?

Given the job row as read (status, holder, current attempt) and the worker's report (its worker id
and, from current clients, the attempt it ran). An attempt ends when its worker reports, when its
lease lapses (the next delivery is a new attempt) or when a timeout ends it. A result for the
current attempt from the worker holding it is applied; the repeat of a result already applied to
that attempt is harmless (200, nothing changes); anything else is refused (409). A client that
sends no attempt is judged on the holder alone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from baton.errors import AttemptNotCurrent, Conflict, LeaseNotHeld
from baton.status import JobStatus

Verdict = Literal["apply", "duplicate"]


def completion_verdict(row: dict[str, Any], worker_id: str, attempt: int | None) -> Verdict:
    """May ``worker_id`` complete ``attempt`` of this job?"""
    status, current = row["job_status"], row["attempt"]
    job = str(row["job_id"])
    _not_future(job, attempt, current)
    if status == JobStatus.COMPLETED and _same_attempt(row, worker_id, attempt):
        return "duplicate"
    if attempt is not None and attempt < current:
        raise AttemptNotCurrent(job, attempt, current, "it ended before this result arrived")
    if status in (JobStatus.COMPLETED, JobStatus.CANCELLED, JobStatus.FAILED):
        raise Conflict(f"job {job} is {status}; it can no longer be completed")
    if status == JobStatus.LOCKED and row["worker_id"] == worker_id:
        return "apply"
    if status == JobStatus.LOCKED:
        raise LeaseNotHeld(job, worker_id, "another worker holds the lease")
    raise LeaseNotHeld(job, worker_id, "the job is not claimed by this worker")


def failure_verdict(
    row: dict[str, Any],
    worker_id: str,
    attempt: int | None,
    attempt_failed: Callable[[int], bool],
) -> Verdict:
    """May ``worker_id`` fail ``attempt`` of this job? ``attempt_failed(n)`` says whether attempt
    ``n`` ended by a reported failure (looked up only for an attempt that is over)."""
    status, current = row["job_status"], row["attempt"]
    job = str(row["job_id"])
    _not_future(job, attempt, current)
    if attempt is not None and attempt < current:
        if attempt_failed(attempt):
            return "duplicate"  # a re-sent fail: its retry is already scheduled
        raise AttemptNotCurrent(job, attempt, current, "its lease lapsed or it timed out")
    if status == JobStatus.FAILED and _same_attempt(row, worker_id, attempt):
        return "duplicate"
    if status in (JobStatus.COMPLETED, JobStatus.CANCELLED, JobStatus.FAILED):
        raise Conflict(f"job {job} is {status}; it can no longer fail")
    if status == JobStatus.LOCKED and row["worker_id"] == worker_id:
        return "apply"
    raise LeaseNotHeld(job, worker_id, "the lease is not held by this worker")


def _same_attempt(row: dict[str, Any], worker_id: str, attempt: int | None) -> bool:
    """Did the result that ended the job come from this report's attempt? Without an attempt
    number, the worker that sent it is all there is to go by."""
    if attempt is not None:
        return bool(attempt == row["attempt"])
    return bool(row["worker_id"] == worker_id)


def _not_future(job: str, attempt: int | None, current: int) -> None:
    if attempt is not None and attempt > current:
        raise AttemptNotCurrent(job, attempt, current, "that attempt has not started")
