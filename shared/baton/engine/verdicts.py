"""Pure verdicts on a worker's result: may it be applied, is it a repeat, or is it refused?

Given the job row as read (status, holder, current attempt), the worker's report (its worker id
and, from current clients, the attempt it ran) and, when the report is not from the current
attempt's holder, how the job's earlier attempts ended (:class:`AttemptEnds`, read from the audit
log). An attempt ends when its worker reports, when its lease lapses (the next delivery is a new
attempt) or when a timeout ends it. A client that sends no attempt is judged on its worker id
alone: its attempt is the current one if it holds the lease, else the last one whose lease it let
lapse.

- A result of the current attempt from the worker holding it is applied; a repeat of a result
  already applied changes nothing (200, ``applied: false``).
- A **completion** whose lease lapsed is applied while the job is not settled, even if the job
  was re-queued or claimed again (a later attempt): the work was done, so it counts, once
  (:class:`Late`). The attempt in flight is then superseded: its completion or failure is a
  repeat, its heartbeat is refused. A completion of a lapsed attempt that arrives once the job
  is completed is a repeat too: the step's result is in, from whichever attempt came first.
- A **failure** of an attempt that is no longer current is refused (a re-sent failure of its own
  is a repeat); so is any result for a job that was cancelled, failed or timed out, and a
  completion of an attempt that a failure or a timeout ended (409).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

from baton.errors import AttemptNotCurrent, Conflict, LeaseNotHeld
from baton.status import JobStatus

# The audit events that end an attempt of a job, as AttemptEnds reads them.
COMPLETED, FAILED, LAPSED, TIMED_OUT = (
    "JOB_COMPLETED",
    "JOB_FAILED",
    "JOB_LEASE_EXPIRED",
    "JOB_TIMED_OUT",
)
ENDING_EVENTS = (COMPLETED, FAILED, LAPSED, TIMED_OUT)


@dataclass(frozen=True, slots=True)
class Late:
    """Apply the completion of ``attempt`` by ``worker_id``, whose lease lapsed, in place of the
    job's current attempt (which it supersedes)."""

    attempt: int
    worker_id: str


Verdict = Literal["apply", "duplicate"] | Late


class AttemptEnds:
    """How each earlier attempt of one job ended: (event, attempt, worker id) rows from the
    audit log, oldest first (the worker of a timeout is not recorded)."""

    def __init__(self, rows: Iterable[tuple[str, int | None, str | None]]) -> None:
        self.rows = [(event, n, worker) for event, n, worker in rows if n is not None]

    def end_of(self, attempt: int) -> tuple[str, str | None] | None:
        """The event that ended ``attempt`` and its worker (its first end: a late completion of
        a lapsed attempt is recorded after the lapse), or None if it has not ended."""
        for event, n, worker in self.rows:
            if n == attempt:
                return event, worker
        return None

    def lapsed_attempt_of(self, worker_id: str) -> int | None:
        """The last attempt of ``worker_id`` whose lease lapsed."""
        found = [n for event, n, worker in self.rows if event == LAPSED and worker == worker_id]
        return found[-1] if found else None

    def completions(self) -> list[tuple[int, str | None]]:
        """(attempt, worker) of the completions applied."""
        return [(n, worker) for event, n, worker in self.rows if event == COMPLETED]


History = Callable[[], AttemptEnds]

_HOW_IT_ENDED = {
    COMPLETED: "it completed",
    FAILED: "a failure ended it",
    LAPSED: "its lease lapsed",
    TIMED_OUT: "a timeout ended it",
}

# A job ended otherwise than by a completion: nothing can complete it any more.
_SETTLED = (JobStatus.CANCELLED, JobStatus.FAILED, JobStatus.TIMED_OUT)


def completion_verdict(
    row: dict[str, Any], worker_id: str, attempt: int | None, history: History
) -> Verdict:
    """May ``worker_id`` complete ``attempt`` of this job?"""
    status, current = row["job_status"], row["attempt"]
    if status == JobStatus.LOCKED and row["worker_id"] == worker_id and attempt in (None, current):
        return "apply"  # the common case, first: the holder of the attempt in flight
    job = str(row["job_id"])
    _not_future(job, attempt, current)
    if _holds_current(row, worker_id, attempt):
        if status == JobStatus.LOCKED:
            return "apply"
        if status == JobStatus.COMPLETED:
            # Its repeat; or the result of an attempt a late completion superseded.
            return "duplicate"
    if status in _SETTLED:
        raise Conflict(f"job {job} is {status}; it can no longer be completed")
    if attempt is not None and attempt == current:
        # The current attempt, not held by this worker (claimed by another, or not yet).
        if status == JobStatus.COMPLETED:
            return "duplicate"
        why = "another worker holds the lease" if status == JobStatus.LOCKED else "not claimed"
        raise LeaseNotHeld(job, worker_id, why)
    ends = history()
    if attempt is None:
        if status == JobStatus.COMPLETED and worker_id in (w for _, w in ends.completions()):
            return "duplicate"  # the repeat of a late completion
        attempt = ends.lapsed_attempt_of(worker_id)
        if attempt is None:
            why = "the job is not claimed by this worker"
            if status == JobStatus.LOCKED:
                why = "another worker holds the lease"
            elif status == JobStatus.COMPLETED:
                why = "the job is COMPLETED"
            raise LeaseNotHeld(job, worker_id, why)
    end = ends.end_of(attempt)
    if end is not None and end[0] in (LAPSED, COMPLETED):
        if end[1] is not None and end[1] != worker_id:
            raise LeaseNotHeld(job, worker_id, f"attempt {attempt} was run by {end[1]!r}")
        if status == JobStatus.COMPLETED:
            return "duplicate"  # the step's result is in already
        if end[0] == LAPSED:
            return Late(attempt, worker_id)
    why = _HOW_IT_ENDED.get(end[0] if end else "", "it ended before this result arrived")
    raise AttemptNotCurrent(job, attempt, current, why)


def failure_verdict(
    row: dict[str, Any], worker_id: str, attempt: int | None, history: History
) -> Verdict:
    """May ``worker_id`` fail ``attempt`` of this job? Never :class:`Late`: a failure of an
    attempt that is no longer current is refused (a re-sent one is a repeat)."""
    status, current = row["job_status"], row["attempt"]
    job = str(row["job_id"])
    _not_future(job, attempt, current)
    if status == JobStatus.LOCKED and _holds_current(row, worker_id, attempt):
        return "apply"
    if status == JobStatus.FAILED and _same_attempt(row, worker_id, attempt):
        return "duplicate"
    if (
        status == JobStatus.COMPLETED
        and _same_attempt(row, worker_id, attempt)
        and any(n < current for n, _ in history().completions())
    ):
        return "duplicate"  # a late completion superseded this attempt: the step's result is in
    if attempt is not None and attempt < current:
        end = history().end_of(attempt)
        if end is not None and end[0] == FAILED:
            return "duplicate"  # a re-sent fail: its retry is already scheduled
        why = _HOW_IT_ENDED.get(end[0] if end else "", "it ended before this result arrived")
        raise AttemptNotCurrent(job, attempt, current, why)
    if status in _SETTLED or status == JobStatus.COMPLETED:
        raise Conflict(f"job {job} is {status}; it can no longer fail")
    raise LeaseNotHeld(job, worker_id, "the lease is not held by this worker")


def duplicate_status(row: dict[str, Any], failure: bool) -> str:
    """The status a repeat is answered with: the job's, when a completion superseded the
    failure's attempt; else what the result itself said."""
    if failure and row["job_status"] == JobStatus.COMPLETED:
        return str(JobStatus.COMPLETED)
    return "FAILED" if failure else "COMPLETED"


def _holds_current(row: dict[str, Any], worker_id: str, attempt: int | None) -> bool:
    """Is the report from the job's current attempt, by the worker that holds (or held) it?
    Without an attempt number, the worker id is all there is to go by."""
    if attempt is not None:
        return bool(attempt == row["attempt"] and row["worker_id"] == worker_id)
    return bool(row["worker_id"] == worker_id)


def _same_attempt(row: dict[str, Any], worker_id: str, attempt: int | None) -> bool:
    """Is the report about the job's current attempt (by whichever worker)? Without an attempt
    number, the worker that sent it is all there is to go by."""
    if attempt is not None:
        return bool(attempt == row["attempt"])
    return bool(row["worker_id"] == worker_id)


def _not_future(job: str, attempt: int | None, current: int) -> None:
    if attempt is not None and attempt > current:
        raise AttemptNotCurrent(job, attempt, current, "that attempt has not started")
