"""SqsTransport: a delivery becomes a claimed job, a refused claim drops its message, a throttled
one is left on the queue, a foreign job type is handed back (fakes for SQS and the API)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from baton_worker import SqsTransport
from baton_worker.errors import ConflictError, NotFoundError, RateLimitedError, UnavailableError


class FakeSqs:
    def __init__(self, bodies: list[Any]) -> None:
        self.messages = [
            {"ReceiptHandle": f"r{k}", "Body": b if isinstance(b, str) else json.dumps(b)}
            for k, b in enumerate(bodies)
        ]
        self.deleted: list[str] = []
        self.released: list[tuple[str, int]] = []
        self.received_with: dict[str, Any] = {}

    def receive_message(self, **kw: Any) -> dict[str, Any]:
        self.received_with = kw
        batch, self.messages = self.messages[: kw["MaxNumberOfMessages"]], []
        return {"Messages": batch}

    def delete_message(self, *, QueueUrl: str, ReceiptHandle: str) -> None:
        self.deleted.append(ReceiptHandle)

    def change_message_visibility(self, **kw: Any) -> None:
        self.released.append((kw["ReceiptHandle"], kw["VisibilityTimeout"]))


class FakeClient:
    def __init__(self, outcomes: dict[str, Any]) -> None:
        self.outcomes = outcomes
        self.claims: list[tuple[str, str, int | None]] = []

    def claim_job(
        self, job_id: str, *, worker_id: str, attempt: int | None = None, retry: Any = None
    ) -> dict[str, Any]:
        self.claims.append((job_id, worker_id, attempt))
        outcome = self.outcomes[job_id]
        if isinstance(outcome, Exception):
            raise outcome
        return dict(outcome)


def _body(job_id: str, job_type: str = "work", attempt: int = 1) -> dict[str, Any]:
    return {"jobId": job_id, "instanceId": "i", "jobType": job_type, "attempt": attempt}


def _transport(client: FakeClient, sqs: FakeSqs) -> SqsTransport:
    return SqsTransport(client, "https://q.fifo", sqs=sqs, wait_seconds=1)  # type: ignore[arg-type]


def test_claimed_deliveries_become_jobs_and_refused_ones_are_dropped() -> None:
    sqs = FakeSqs([_body("a"), _body("dup", attempt=2), _body("gone")])
    client = FakeClient(
        {
            "a": {"id": "a", "attempt": 1},
            "dup": ConflictError(409, "Conflict", "job dup is not claimable"),
            "gone": NotFoundError(404, "Not found"),
        }
    )
    transport = _transport(client, sqs)
    jobs = transport.fetch(worker_id="w", job_types=["work"], max_jobs=25)
    assert jobs == [{"id": "a", "attempt": 1}]
    assert client.claims == [("a", "w", 1), ("dup", "w", 2), ("gone", "w", 1)]
    assert sqs.deleted == ["r0", "r1", "r2"] and sqs.released == []
    assert transport.duplicates == 2
    assert sqs.received_with["MaxNumberOfMessages"] == 10  # SQS's own maximum
    assert sqs.received_with["WaitTimeSeconds"] == 1


def test_throttled_or_unavailable_claims_leave_the_message_for_later() -> None:
    sqs = FakeSqs([_body("capped"), _body("down")])
    client = FakeClient(
        {
            "capped": RateLimitedError(429, "Too many requests", retry_after=3),
            "down": UnavailableError(503, "Service unavailable"),
        }
    )
    assert _transport(client, sqs).fetch(worker_id="w", job_types=["work"], max_jobs=5) == []
    assert sqs.deleted == [] and sqs.released == [("r0", 3), ("r1", 1)]


def test_a_foreign_job_type_is_handed_back_and_garbage_is_dropped() -> None:
    sqs = FakeSqs([_body("x", job_type="other"), "not json", {"no": "fields"}])
    client = FakeClient({})
    assert _transport(client, sqs).fetch(worker_id="w", job_types=["work"], max_jobs=5) == []
    assert client.claims == []
    assert sqs.released == [("r0", 2)] and sqs.deleted == ["r1", "r2"]


def test_wait_seconds_is_bounded_by_sqs_long_poll() -> None:
    with pytest.raises(ValueError, match="wait_seconds"):
        SqsTransport(FakeClient({}), "q", sqs=FakeSqs([]), wait_seconds=21)  # type: ignore[arg-type]
