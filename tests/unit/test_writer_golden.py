"""The exact SQL a complete and a fail send, kept in ``tests/golden/`` so a reviewer reads the
statement that runs on every completion (and sees any change to it in the diff).

Run with ``BATON_UPDATE_GOLDEN=1`` to rewrite the files after an intended change.
"""

from __future__ import annotations

import os
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
from baton.definitions import parse_definition
from baton.engine import writer
from baton.engine.decide import Decider, InstanceState, JobRef, NoReads
from baton.engine.plan import Plan
from baton.status import InstanceStatus, JobStatus

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
NOW = datetime(2026, 1, 1, tzinfo=UTC)
TWO_STEPS = {
    "name": "flow",
    "steps": [
        {"id": "charge", "type": "SERVICE_TASK", "jobType": "charge", "retryCount": 2},
        {"id": "ship", "type": "SERVICE_TASK", "jobType": "ship"},
    ],
}


def _job() -> JobRef:
    return JobRef(uuid.uuid4(), "charge", uuid.uuid4(), JobStatus.LOCKED, "w", 1, 2)


def _decider() -> Decider:
    state = InstanceState(uuid.uuid4(), "flow", InstanceStatus.RUNNING, 3, {}, {})
    return Decider(Plan(parse_definition(TWO_STEPS)), state, NoReads(), NOW)


def _rendered(d: Decider) -> str:
    pieces = writer.pieces_of(d.instance, d.changes, new_instance=False, insert=None)
    sql, _ = writer.statement(pieces)
    return sql.decode() + "\n"


def _check(name: str, sql: str) -> None:
    path = GOLDEN / name
    if os.environ.get("BATON_UPDATE_GOLDEN"):
        path.write_text(sql)
    assert path.read_text() == sql, f"{name} changed; rerun with BATON_UPDATE_GOLDEN=1 if intended"


@pytest.mark.parametrize(
    ("name", "event"),
    [
        (
            "complete.sql",
            lambda d: d.job_completed(_job(), {"receipt": "R-1"}),
        ),
        (
            "fail_ending_the_instance.sql",
            lambda d: d.job_failed(_job(), error="card stolen", retryable=False),
        ),
        (
            "fail_with_retry.sql",
            lambda d: d.job_failed(_job(), error="card declined", retryable=True),
        ),
    ],
)
def test_the_statement_a_job_result_sends_is_the_golden_one(name: str, event: object) -> None:
    d = _decider()
    event(d)  # type: ignore[operator]
    _check(name, _rendered(d))
