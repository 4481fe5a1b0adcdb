"""A poll's answer: ``views.claimed_jobs`` (the lease's end formatted once per distinct time)
answers each job as ``views.claimed_job`` does."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from baton.engine import views


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
