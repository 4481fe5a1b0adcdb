"""SqsTransport: a delivery becomes a claimed job, a refused claim drops its message, a throttled
one is left on the queue, a foreign job type is handed back (fakes for SQS and the API)."""

from __future__ import annotations

import json
import socket
from typing import Any

import pytest
from baton_worker import BatonClient, SqsTransport
from baton_worker.env import DISPATCH_QUEUE_FILE, dispatch_queue_from_env
from baton_worker.errors import (
    ConflictError,
    NotFoundError,
    RateLimitedError,
    TransportError,
    UnavailableError,
    is_transient,
)

from tests.support.sqs import fifo_queue, moto_endpoint, sqs_client

__all__ = ["moto_endpoint"]  # the fixture, used by name


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
    url = "http://127.0.0.1:8080"  # a local server's, as the transport's own client had

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


# --- where the queue is found ------------------------------------------------------------------


def _kept(data_dir: Any, queue_url: str, endpoint: str | None) -> None:
    data_dir.mkdir(parents=True, exist_ok=True)
    body = {"queueUrl": queue_url, "endpoint": endpoint, "region": "us-east-1", "mode": "outbox"}
    (data_dir / DISPATCH_QUEUE_FILE).write_text(json.dumps(body))


def test_the_queue_is_found_in_the_environment_then_in_a_local_servers_data_dir(
    tmp_path: Any,
) -> None:
    local = "http://127.0.0.1:8080"
    data = {"BATON_DATA_DIR": str(tmp_path)}
    assert dispatch_queue_from_env(local, data) is None  # nothing written yet
    _kept(tmp_path, "http://127.0.0.1:4566/1/baton-dispatch.fifo", "http://127.0.0.1:4566")
    found = dispatch_queue_from_env(local, data)
    assert found is not None and found.local
    assert (found.queue_url, found.endpoint) == (
        "http://127.0.0.1:4566/1/baton-dispatch.fifo",
        "http://127.0.0.1:4566",
    )
    # A remote server's queue is never taken from this machine's files.
    assert dispatch_queue_from_env("https://api.example.com/prod", data) is None
    # The environment wins; the region comes from the queue's URL unless AWS_REGION says.
    aws = {**data, "BATON_DISPATCH_QUEUE_URL": "https://sqs.eu-west-1.amazonaws.com/1/q.fifo"}
    found = dispatch_queue_from_env(local, aws)
    assert found is not None and not found.local
    assert (found.region, found.endpoint, found.source) == (
        "eu-west-1",
        None,
        "BATON_DISPATCH_QUEUE_URL",
    )
    assert dispatch_queue_from_env(local, {**aws, "AWS_REGION": "us-west-2"}).region == "us-west-2"  # type: ignore[union-attr]
    legacy = {"BATON_DISPATCH_QUEUE_URL": "https://ap-south-1.queue.amazonaws.com/1/q.fifo"}
    assert dispatch_queue_from_env(local, legacy).region == "ap-south-1"  # type: ignore[union-attr]
    # A file that is not what baton dev writes is no queue.
    for garbage in ("", "{", '{"endpoint": "x"}', '{"queueUrl": 7}', "[]"):
        (tmp_path / DISPATCH_QUEUE_FILE).write_text(garbage)
        assert dispatch_queue_from_env(local, data) is None, garbage


def test_from_env_without_a_queue_says_where_to_set_one(tmp_path: Any) -> None:
    client = BatonClient("http://127.0.0.1:8080", api_key="k")
    with pytest.raises(ValueError, match="BATON_DISPATCH_QUEUE_URL"):
        SqsTransport.from_env(client, env={"BATON_DATA_DIR": str(tmp_path)})


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_local_queue_that_moved_is_followed_and_an_unreachable_one_is_transient(
    tmp_path: Any, moto_endpoint: str
) -> None:
    client = BatonClient("http://127.0.0.1:8080", api_key="k")
    env = {"BATON_DATA_DIR": str(tmp_path)}
    gone = f"http://127.0.0.1:{_closed_port()}"
    _kept(tmp_path, f"{gone}/123456789012/baton-dispatch.fifo", gone)
    transport = SqsTransport.from_env(client, env=env, wait_seconds=0)
    # Nothing else written: the failure is reported, as a transient one (the runner backs off
    # with one log line instead of a traceback).
    with pytest.raises(TransportError) as refused:
        transport.fetch(worker_id="w", job_types=["t"], max_jobs=1)
    assert is_transient(refused.value) and gone in str(refused.value)
    # baton dev restarted with its SQS on another port: the next fetch follows it.
    queue = fifo_queue(moto_endpoint)
    _kept(tmp_path, queue, moto_endpoint)
    sqs_client(moto_endpoint).send_message(
        QueueUrl=queue,
        MessageBody=json.dumps(_body("j1")),
        MessageGroupId="i",
        MessageDeduplicationId="j1-1",
    )
    transport.client = FakeClient({"j1": {"id": "j1", "jobType": "t"}})  # type: ignore[assignment]
    jobs = transport.fetch(worker_id="w", job_types=["work"], max_jobs=1)
    assert [j["id"] for j in jobs] == ["j1"] and transport.queue_url == queue
