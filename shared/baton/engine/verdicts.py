"""Pure verdicts on a worker's result: may it be applied, is it a repeat, or is it refused?

Given the job row as read (status, holder, former holders) and the worker that sent the result.
A refusal raises the error the API answers with (409).
"""

from __future__ import annotations

from typing import Any, Literal

from baton.errors import Conflict, LeaseNotHeld
from baton.status import JobStatus

Verdict = Literal["apply", "duplicate"]


def completion_verdict(row: dict[str, Any], worker_id: str) -> Verdict:
    """May ``worker_id`` complete this job? Repeats are accepted and applied once."""
    status = row["job_status"]
    if status == JobStatus.COMPLETED:
        return "duplicate"
    if status in (JobStatus.CANCELLED, JobStatus.FAILED):
        raise Conflict(f"job {row['job_id']} is {status}; it can no longer be completed")
    if row["worker_id"] == worker_id and status == JobStatus.LOCKED:
        return "apply"
    # A late complete from a worker whose lease expired is still good work: accept it once.
    if worker_id in row["previous_worker_ids"]:
        return "apply"
    if status == JobStatus.LOCKED:
        raise LeaseNotHeld(str(row["job_id"]), worker_id, "another worker holds the lease")
    raise LeaseNotHeld(str(row["job_id"]), worker_id, "the job is not claimed by this worker")


def failure_verdict(row: dict[str, Any], worker_id: str) -> Verdict:
    """May ``worker_id`` fail this job? Only the current lease holder may."""
    status = row["job_status"]
    if status == JobStatus.FAILED:
        return "duplicate"
    if status in (JobStatus.COMPLETED, JobStatus.CANCELLED):
        raise Conflict(f"job {row['job_id']} is {status}; it can no longer fail")
    if status == JobStatus.LOCKED and row["worker_id"] == worker_id:
        return "apply"
    raise LeaseNotHeld(str(row["job_id"]), worker_id, "the lease is not held by this worker")
