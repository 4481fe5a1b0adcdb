"""Verdicts on a worker's result: apply, harmless repeat, or refused."""

from __future__ import annotations

import pytest
from baton.engine.verdicts import completion_verdict, failure_verdict
from baton.errors import Conflict, LeaseNotHeld


def _row(status: str, worker: str | None, previous: list[str]) -> dict[str, object]:
    return {
        "job_id": "j",
        "job_status": status,
        "worker_id": worker,
        "previous_worker_ids": previous,
    }


def test_completion_verdicts() -> None:
    assert completion_verdict(_row("LOCKED", "a", []), "a") == "apply"
    assert completion_verdict(_row("LOCKED", "b", ["a"]), "a") == "apply"  # late, re-claimed
    assert completion_verdict(_row("COMPLETED", "b", ["a"]), "z") == "duplicate"
    with pytest.raises(LeaseNotHeld):
        completion_verdict(_row("LOCKED", "b", []), "z")
    with pytest.raises(LeaseNotHeld):
        completion_verdict(_row("UNLOCKED", None, []), "z")
    with pytest.raises(Conflict):
        completion_verdict(_row("CANCELLED", "a", []), "a")


def test_failure_verdicts() -> None:
    assert failure_verdict(_row("LOCKED", "a", []), "a") == "apply"
    assert failure_verdict(_row("FAILED", "a", []), "a") == "duplicate"
    with pytest.raises(LeaseNotHeld):
        failure_verdict(_row("LOCKED", "b", ["a"]), "a")  # a lost its lease: its failure is stale
    with pytest.raises(Conflict):
        failure_verdict(_row("COMPLETED", "a", []), "a")
