"""Verdicts on a worker's result: apply, apply late, harmless repeat, or refused."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from baton.engine.verdicts import (
    AttemptEnds,
    Late,
    completion_verdict,
    duplicate_status,
    failure_verdict,
)
from baton.errors import AttemptNotCurrent, Conflict, LeaseNotHeld

LAPSED, FAILED, COMPLETED, TIMED_OUT = (
    "JOB_LEASE_EXPIRED",
    "JOB_FAILED",
    "JOB_COMPLETED",
    "JOB_TIMED_OUT",
)


def _row(status: str, worker: str | None, attempt: int = 1) -> dict[str, object]:
    return {"job_id": "j", "job_status": status, "worker_id": worker, "attempt": attempt}


def _ends(*rows: tuple[str, int, str | None]) -> Callable[[], AttemptEnds]:
    return lambda: AttemptEnds(rows)


def _unread() -> AttemptEnds:
    raise AssertionError("the current holder's report is judged without the history")


NONE = _ends()


def test_the_current_holder_s_results() -> None:
    assert completion_verdict(_row("LOCKED", "a"), "a", None, _unread) == "apply"
    assert completion_verdict(_row("LOCKED", "a", 2), "a", 2, _unread) == "apply"
    assert completion_verdict(_row("COMPLETED", "b"), "b", None, _unread) == "duplicate"
    assert completion_verdict(_row("COMPLETED", "a", 3), "a", 3, _unread) == "duplicate"
    assert failure_verdict(_row("LOCKED", "a"), "a", None, _unread) == "apply"
    assert failure_verdict(_row("FAILED", "a"), "a", None, _unread) == "duplicate"
    assert failure_verdict(_row("FAILED", "a", 2), "a", 2, _unread) == "duplicate"


def test_refusals_that_have_nothing_to_do_with_lateness() -> None:
    with pytest.raises(Conflict):  # completed by another worker, which this one never was
        completion_verdict(_row("COMPLETED", "b"), "z", None, NONE)
    with pytest.raises(AttemptNotCurrent, match="has not started"):
        completion_verdict(_row("LOCKED", "a", 1), "a", 2, NONE)
    with pytest.raises(LeaseNotHeld, match="another worker"):
        completion_verdict(_row("LOCKED", "b"), "z", None, NONE)
    with pytest.raises(LeaseNotHeld, match="not claimed"):
        completion_verdict(_row("UNLOCKED", None), "z", None, NONE)
    with pytest.raises(LeaseNotHeld):
        failure_verdict(_row("LOCKED", "b"), "a", None, NONE)
    with pytest.raises(Conflict):
        failure_verdict(_row("FAILED", "a"), "z", None, NONE)
    with pytest.raises(Conflict):
        failure_verdict(_row("COMPLETED", "a"), "a", 1, NONE)


@pytest.mark.parametrize("status", ["CANCELLED", "FAILED", "TIMED_OUT"])
def test_a_settled_job_refuses_every_completion_late_or_not(status: str) -> None:
    lapsed = _ends((LAPSED, 1, "a"))
    for worker, attempt in (("a", 1), ("a", None), ("b", 2), ("b", None)):
        with pytest.raises(Conflict, match=status):
            completion_verdict(_row(status, "b", 2), worker, attempt, lapsed)


def test_a_lapsed_attempt_s_completion_is_applied_late_while_the_job_is_open() -> None:
    lapsed = _ends((LAPSED, 1, "a"))
    # Re-queued by the reaper (attempt 2 not yet claimed), or claimed again by "b".
    assert completion_verdict(_row("UNLOCKED", None, 2), "a", 1, lapsed) == Late(1, "a")
    assert completion_verdict(_row("LOCKED", "b", 2), "a", 1, lapsed) == Late(1, "a")
    # Without an attempt number: the last attempt whose lease this worker let lapse.
    assert completion_verdict(_row("LOCKED", "b", 2), "a", None, lapsed) == Late(1, "a")
    # Claimed again by the same worker: attempt 1's result is late, attempt 2's is current.
    assert completion_verdict(_row("LOCKED", "a", 2), "a", 1, lapsed) == Late(1, "a")
    assert completion_verdict(_row("LOCKED", "a", 2), "a", 2, lapsed) == "apply"
    # Two attempts lapsed: the first one's result counts as well.
    both = _ends((LAPSED, 1, "a"), (LAPSED, 2, "b"))
    assert completion_verdict(_row("LOCKED", "c", 3), "a", 1, both) == Late(1, "a")
    assert completion_verdict(_row("LOCKED", "c", 3), "b", None, both) == Late(2, "b")


def test_a_stranger_cannot_complete_a_lapsed_attempt() -> None:
    lapsed = _ends((LAPSED, 1, "a"))
    with pytest.raises(LeaseNotHeld, match="run by 'a'"):
        completion_verdict(_row("LOCKED", "b", 2), "z", 1, lapsed)
    with pytest.raises(LeaseNotHeld):
        completion_verdict(_row("LOCKED", "b", 2), "z", None, lapsed)


def test_after_a_late_completion_every_other_completion_is_a_repeat() -> None:
    done = _ends((LAPSED, 1, "a"), (COMPLETED, 1, "a"))
    row = _row("COMPLETED", "b", 2)  # "b" held attempt 2 when "a"'s late result landed
    assert completion_verdict(row, "b", 2, done) == "duplicate"  # the superseded holder
    assert completion_verdict(row, "b", None, done) == "duplicate"
    assert completion_verdict(row, "a", 1, done) == "duplicate"  # the late result, re-sent
    assert completion_verdict(row, "a", None, done) == "duplicate"
    # ...and the superseded holder's failure is a repeat too, answered with the job's status.
    assert failure_verdict(row, "b", 2, done) == "duplicate"
    assert failure_verdict(row, "b", None, done) == "duplicate"
    assert duplicate_status(row, failure=True) == "COMPLETED"
    # The late attempt itself cannot fail now.
    with pytest.raises(AttemptNotCurrent):
        failure_verdict(row, "a", 1, done)


def test_a_lapsed_attempt_s_completion_after_the_job_completed_is_a_repeat() -> None:
    ends = _ends((LAPSED, 1, "a"), (COMPLETED, 2, "b"))
    assert completion_verdict(_row("COMPLETED", "b", 2), "a", 1, ends) == "duplicate"
    assert completion_verdict(_row("COMPLETED", "b", 2), "a", None, ends) == "duplicate"
    # The holder completed normally: its failure afterwards is still a contradiction.
    with pytest.raises(Conflict):
        failure_verdict(_row("COMPLETED", "b", 2), "b", 2, ends)


def test_an_attempt_a_failure_or_a_timeout_ended_cannot_complete() -> None:
    failed = _ends((FAILED, 1, "a"))
    with pytest.raises(AttemptNotCurrent, match="a failure ended it"):
        completion_verdict(_row("LOCKED", "b", 2), "a", 1, failed)
    with pytest.raises(LeaseNotHeld):  # no lapsed attempt of "a" to stand for
        completion_verdict(_row("LOCKED", "b", 2), "a", None, failed)
    timed_out = _ends((TIMED_OUT, 1, None))
    with pytest.raises(AttemptNotCurrent, match="a timeout ended it"):
        completion_verdict(_row("UNLOCKED", None, 2), "a", 1, timed_out)
    with pytest.raises(AttemptNotCurrent, match="a timeout ended it"):
        completion_verdict(_row("COMPLETED", "b", 2), "a", 1, timed_out)


def test_a_failure_of_an_attempt_that_is_no_longer_current() -> None:
    # A fail re-sent after its retry was claimed (attempt 2) is a repeat, not a second failure.
    assert failure_verdict(_row("LOCKED", "a", 2), "a", 1, _ends((FAILED, 1, "a"))) == "duplicate"
    with pytest.raises(AttemptNotCurrent, match="its lease lapsed"):
        failure_verdict(_row("LOCKED", "b", 2), "a", 1, _ends((LAPSED, 1, "a")))
    with pytest.raises(AttemptNotCurrent, match="its lease lapsed"):
        failure_verdict(_row("UNLOCKED", None, 2), "a", 1, _ends((LAPSED, 1, "a")))
    with pytest.raises(LeaseNotHeld):  # without its attempt: judged on the holder alone
        failure_verdict(_row("LOCKED", "b", 2), "a", None, _ends((LAPSED, 1, "a")))
