"""Verdicts on a worker's result: apply, harmless repeat, or refused."""

from __future__ import annotations

import pytest
from baton.engine.verdicts import completion_verdict, failure_verdict
from baton.errors import AttemptNotCurrent, Conflict, LeaseNotHeld


def _row(status: str, worker: str | None, attempt: int = 1) -> dict[str, object]:
    return {"job_id": "j", "job_status": status, "worker_id": worker, "attempt": attempt}


def _never_failed(_attempt: int) -> bool:
    return False


def test_completion_verdicts() -> None:
    assert completion_verdict(_row("LOCKED", "a"), "a", None) == "apply"
    assert completion_verdict(_row("LOCKED", "a", 2), "a", 2) == "apply"
    assert completion_verdict(_row("COMPLETED", "b"), "b", None) == "duplicate"
    with pytest.raises(Conflict):  # completed by another worker's attempt
        completion_verdict(_row("COMPLETED", "b"), "z", None)
    assert completion_verdict(_row("COMPLETED", "a", 3), "a", 3) == "duplicate"
    with pytest.raises(AttemptNotCurrent):  # attempt 1 lapsed; "b" runs attempt 2
        completion_verdict(_row("LOCKED", "b", 2), "a", 1)
    with pytest.raises(AttemptNotCurrent):  # a completed job, but not by that attempt
        completion_verdict(_row("COMPLETED", "b", 2), "a", 1)
    with pytest.raises(AttemptNotCurrent):
        completion_verdict(_row("LOCKED", "a", 1), "a", 2)  # not started
    with pytest.raises(LeaseNotHeld):
        completion_verdict(_row("LOCKED", "b"), "z", None)
    with pytest.raises(LeaseNotHeld):
        completion_verdict(_row("UNLOCKED", None), "z", None)
    with pytest.raises(Conflict):
        completion_verdict(_row("CANCELLED", "a"), "a", 1)


def test_failure_verdicts() -> None:
    assert failure_verdict(_row("LOCKED", "a"), "a", None, _never_failed) == "apply"
    assert failure_verdict(_row("FAILED", "a"), "a", None, _never_failed) == "duplicate"
    with pytest.raises(Conflict):
        failure_verdict(_row("FAILED", "a"), "z", None, _never_failed)
    assert failure_verdict(_row("FAILED", "a", 2), "a", 2, _never_failed) == "duplicate"
    # A fail re-sent after its retry was claimed (attempt 2) is a repeat, not a second failure.
    assert failure_verdict(_row("LOCKED", "a", 2), "a", 1, lambda n: n == 1) == "duplicate"
    with pytest.raises(AttemptNotCurrent):  # attempt 1 lapsed rather than failed
        failure_verdict(_row("LOCKED", "b", 2), "a", 1, _never_failed)
    with pytest.raises(LeaseNotHeld):
        failure_verdict(_row("LOCKED", "b"), "a", None, _never_failed)
    with pytest.raises(Conflict):
        failure_verdict(_row("COMPLETED", "a"), "a", 1, _never_failed)
