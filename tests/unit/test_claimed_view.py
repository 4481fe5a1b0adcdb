"""A poll's answer: ``views.claimed_jobs`` (the lease's end formatted once per distinct time)
answers each job as ``views.claimed_job`` does."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from baton.engine import views
from baton.store import job_sql


def _row(at: datetime | None) -> dict[str, Any]:
    return {
        "id": uuid.uuid4(),
        "instance_id": uuid.uuid4(),
        "step_id": "s",
        "step_execution_id": uuid.uuid4(),
        "job_type": "t",
        "attempt": 1,
        "retries_remaining": 3,
        "lock_expires_at": at,
        "payload": {"n": 1},
    }


def test_claimed_jobs_answers_each_job_as_claimed_job_does() -> None:
    now = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
    later = now + timedelta(seconds=30)
    rows = [_row(now), _row(now), _row(later), _row(now), _row(None), _row(later)]
    answers = views.claimed_jobs(rows)
    assert answers == [views.claimed_job(r) for r in rows]
    assert [a["lockExpiresAt"] for a in answers] == [
        "2026-11-26T12:00:00Z",
        "2026-11-26T12:00:00Z",
        "2026-11-26T12:00:30Z",
        "2026-11-26T12:00:00Z",
        None,
        "2026-11-26T12:00:30Z",
    ]


def _as_claimed(row: dict[str, Any]) -> list[Any]:
    """``row`` as the poll's claim returns it (``job_sql.claim``): a list of values in
    ``CLAIMED_KEYS``' order, ids and times as PostgreSQL's JSON writes them."""
    at = row["lock_expires_at"]
    values = {
        "id": str(row["id"]),
        "instanceId": str(row["instance_id"]),
        "stepId": row["step_id"],
        "stepExecutionId": str(row["step_execution_id"]),
        "jobType": row["job_type"],
        "attempt": row["attempt"],
        "retriesRemaining": row["retries_remaining"],
        # PostgreSQL trims the fraction's trailing zeros, and writes none for a whole second.
        "lockExpiresAt": None if at is None else _pg_json_time(at),
        "input": row["payload"],
        "reclaimed": False,
        "latency_ms": 1.5,
        "state_bytes": 10,
    }
    return [*(values[k] for k in job_sql.CLAIMED_KEYS), None]


def _pg_json_time(at: datetime) -> str:
    text = at.strftime("%Y-%m-%dT%H:%M:%S")
    if at.microsecond:
        text += f".{at.microsecond:06d}".rstrip("0")
    offset = at.strftime("%z")
    return text + offset[:3] + ":" + offset[3:]


def test_the_claims_lists_are_answered_as_claimed_job_answers_its_rows() -> None:
    """``claimed_answers`` (the poll's claim, one JSON value) and ``claimed_job`` (a typed row:
    the claim by id, a limited type's claim) answer a job alike."""
    assert job_sql.CLAIMED_KEYS[:9] == tuple(views.claimed_job(_row(None)))
    now = datetime(2026, 11, 26, 12, 0, 0, 120_000, tzinfo=UTC)
    paris = timezone(timedelta(hours=1))
    times = [now, now, now + timedelta(seconds=30), now.replace(microsecond=0), None]
    times += [now.astimezone(paris), now.replace(microsecond=1)]
    rows = [_row(at) for at in times]
    answers = views.claimed_answers([_as_claimed(r) for r in rows])
    assert answers == [views.claimed_job(r) for r in rows]
    assert answers[0]["lockExpiresAt"] == "2026-11-26T12:00:00.120000Z"
    assert answers[3]["lockExpiresAt"] == "2026-11-26T12:00:00Z"
    assert answers[5]["lockExpiresAt"] == "2026-11-26T13:00:00.120000+01:00"
