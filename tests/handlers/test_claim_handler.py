"""POST /v1/jobs/{id}/claim through the jobs function: the claim by id of event-driven dispatch,
and the relay function draining the outbox to SQS (moto)."""

from __future__ import annotations

import json
import threading
import uuid

import pytest

from tests.support.lambda_events import FakeContext, Invoke, load_function
from tests.support.sqs import fifo_queue, moto_endpoint, receive_all

__all__ = ["moto_endpoint"]  # the fixture, used by name

CLAIM = "/v1/jobs/{id}/claim"


def _start(invoke: Invoke, job_type: str = "charge") -> str:
    step = {
        "id": "s",
        "type": "SERVICE_TASK",
        "jobType": job_type,
        "input": {"n": "${workflow.input.n}"},
    }
    definition = {"name": "one", "steps": [step]}
    assert invoke("definitions", "POST", "/v1/definitions", body=definition)[0] == 201
    status, _, inst = invoke(
        "instances", "POST", "/v1/instances", body={"definitionName": "one", "input": {"n": 1}}
    )
    assert status == 201
    return str(inst["id"])


@pytest.fixture
def outbox_env(monkeypatch: pytest.MonkeyPatch, moto_endpoint: str) -> str:
    queue = fifo_queue(moto_endpoint)
    monkeypatch.setenv("BATON_DISPATCH_MODE", "outbox")
    monkeypatch.setenv("BATON_DISPATCH_QUEUE_URL", queue)
    monkeypatch.setenv("BATON_SQS_ENDPOINT", moto_endpoint)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    return queue


def test_relay_function_publishes_and_the_claim_takes_the_lease_once(
    invoke: Invoke, outbox_env: str, moto_endpoint: str
) -> None:
    instance_id = _start(invoke)
    result = load_function("relay").handler({"source": "aws.events"}, FakeContext())
    assert result["relayed"] == 1
    (message,) = receive_all(moto_endpoint, outbox_env)
    delivered = json.loads(message["Body"])
    assert delivered["instanceId"] == instance_id
    path = {"id": delivered["jobId"]}
    body = {"workerId": "w1", "attempt": delivered["attempt"]}
    status, _, job = invoke("jobs", "POST", CLAIM, path_params=path, body=body)
    assert status == 200
    assert job["id"] == delivered["jobId"] and job["input"] == {"n": 1} and job["attempt"] == 1
    # The duplicate delivery: 409 problem+json, nothing taken.
    status, headers, problem = invoke("jobs", "POST", CLAIM, path_params=path, body=body)
    assert status == 409 and headers["content-type"] == "application/problem+json"
    assert "not claimable" in problem["detail"]
    status, _, done = invoke(
        "jobs", "POST", "/v1/jobs/complete", body={"jobId": job["id"], "workerId": "w1"}
    )
    assert status == 200 and done["applied"]


def test_claim_of_an_unknown_job_is_404_and_hostile_input_is_4xx(invoke: Invoke) -> None:
    status, _, _ = invoke(
        "jobs", "POST", CLAIM, path_params={"id": str(uuid.uuid4())}, body={"workerId": "w"}
    )
    assert status == 404
    for path_id, body in [
        ("not-a-uuid", {"workerId": "w"}),
        (str(uuid.uuid4()), {"workerId": ""}),
        (str(uuid.uuid4()), {"workerId": "w", "attempt": 0}),
        (str(uuid.uuid4()), {"workerId": "w", "extra": 1}),
        ("\u0000", {"workerId": "w"}),
    ]:
        status, _, _ = invoke("jobs", "POST", CLAIM, path_params={"id": path_id}, body=body)
        assert 400 <= status < 500, (path_id, body, status)


def test_claim_held_back_by_a_concurrency_limit_is_429_with_retry_after(invoke: Invoke) -> None:
    status, _, _ = invoke(
        "definitions",
        "PUT",
        "/v1/taskdefs/{name}",
        path_params={"name": "capped"},
        body={"concurrentExecLimit": 1},
    )
    assert status in (200, 201)
    _start(invoke, "capped")
    invoke("instances", "POST", "/v1/instances", body={"definitionName": "one", "input": {"n": 2}})
    status, _, polled = invoke(
        "jobs", "POST", "/v1/jobs/poll", body={"workerId": "p", "jobTypes": ["capped"]}
    )
    assert status == 200 and len(polled["jobs"]) == 1
    from baton.store.db import connect
    from baton_lambda import runtime

    with connect(runtime.settings().database_url or "") as conn:
        row = conn.execute("SELECT id FROM job WHERE status = 'UNLOCKED'").fetchone()
    assert row is not None
    status, headers, _ = invoke(
        "jobs", "POST", CLAIM, path_params={"id": str(row["id"])}, body={"workerId": "w"}
    )
    assert status == 429 and headers["retry-after"] == "1"


def test_a_looping_relay_publishes_a_job_created_while_it_runs(
    invoke: Invoke, outbox_env: str, moto_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BATON_DUTY_LOOP_SECONDS", "1")
    _start(invoke)  # registers the definition; its job goes out on the relay's first drain
    relay = load_function("relay")
    started = threading.Timer(0.3, lambda: _start(invoke))
    started.start()
    result = relay.handler({"source": "aws.events"}, FakeContext())
    started.join()
    assert result["relayed"] == 2 and result["passes"] >= 1
    assert len(receive_all(moto_endpoint, outbox_env)) == 2
