"""An offloaded payload that is no longer in the bucket: every path of the engine that reads one
answers 409 ``payload-missing`` naming the path (a fact no retry changes), never a 503."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import httpx
import pytest
from baton.local.s3 import LOCAL_ACCESS_KEY, LOCAL_SECRET_KEY, LocalS3

from tests.support.lambda_events import Invoke

BUCKET = "baton-payloads-missing"
DATA = json.dumps({"items": list(range(60_000))}).encode()  # ~400 KB: above the soft limit


@pytest.fixture(scope="module")
def local_s3() -> Iterator[LocalS3]:
    s3 = LocalS3(BUCKET)
    s3.start()
    yield s3
    s3.stop()


@pytest.fixture
def bucket(local_s3: LocalS3, monkeypatch: pytest.MonkeyPatch, lambda_env: None) -> LocalS3:
    from baton_lambda import runtime

    monkeypatch.setenv("BATON_PAYLOAD_BUCKET", BUCKET)
    monkeypatch.setenv("BATON_S3_ENDPOINT", str(local_s3.endpoint))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", LOCAL_ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", LOCAL_SECRET_KEY)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    runtime.reset()
    return local_s3


def _start(invoke: Invoke, definition: dict[str, Any]) -> tuple[str, str]:
    """Register ``definition``, start it on an uploaded input; (instance id, payload path)."""
    assert invoke("definitions", "POST", "/v1/definitions", body=definition)[0] in (200, 201)
    status, _, grant = invoke(
        "instances", "POST", "/v1/payloads", body={"kind": "WORKFLOW_INPUT", "sizeBytes": len(DATA)}
    )
    assert status == 201, grant
    put = httpx.put(grant["uploadUrl"], content=DATA, headers=grant["uploadHeaders"], timeout=30)
    assert put.status_code == 200, put.text
    body = {"definitionName": definition["name"], "inputPayloadPath": grant["path"]}
    status, _, inst = invoke("instances", "POST", "/v1/instances", body=body)
    assert status == 201, inst
    return str(inst["id"]), str(grant["path"])


def _lose(s3: LocalS3, path: str) -> None:
    """Delete the object, and forget what this process read (a new process, as after a crash)."""
    from baton_lambda import runtime

    client = boto3.client(
        "s3",
        endpoint_url=s3.endpoint,
        region_name="us-east-1",
        aws_access_key_id=LOCAL_ACCESS_KEY,
        aws_secret_access_key=LOCAL_SECRET_KEY,
    )
    client.delete_object(Bucket=BUCKET, Key=path)
    runtime.reset()


def _assert_missing(status: int, headers: dict[str, str], body: Any, path: str) -> None:
    assert status == 409, body
    assert headers["content-type"] == "application/problem+json"
    assert "retry-after" not in headers  # nothing to wait for
    assert body["type"].endswith("/payload-missing")
    assert path in body["detail"]


ONE_JOB = {
    "name": "missing-one-job",
    "steps": [{"id": "work", "type": "SERVICE_TASK", "jobType": "missing-work", "retryCount": 0}],
}


def test_a_view_resolving_a_missing_payload_is_409_and_the_plain_view_still_works(
    invoke: Invoke, bucket: LocalS3
) -> None:
    iid, path = _start(invoke, ONE_JOB)
    _lose(bucket, path)
    answer = invoke(
        "instances",
        "GET",
        "/v1/instances/{id}",
        path_params={"id": iid},
        query={"resolvePayloads": "true"},
    )
    _assert_missing(*answer, path)
    status, _, plain = invoke("instances", "GET", "/v1/instances/{id}", path_params={"id": iid})
    assert status == 200, plain
    assert plain["input"]["$payload"] == path


def test_restarting_an_instance_whose_input_is_missing_is_409(
    invoke: Invoke, bucket: LocalS3
) -> None:
    iid, path = _start(invoke, ONE_JOB)
    status, _, cancelled = invoke(
        "instances", "POST", "/v1/instances/{id}/cancel", path_params={"id": iid}, body={}
    )
    assert status == 200, cancelled
    _lose(bucket, path)
    answer = invoke(
        "instances", "POST", "/v1/instances/{id}/restart", path_params={"id": iid}, body={}
    )
    _assert_missing(*answer, path)


def test_retrying_an_instance_whose_input_is_missing_is_409(
    invoke: Invoke, bucket: LocalS3
) -> None:
    definition = {
        "name": "missing-retry",
        "steps": [
            {
                "id": "work",
                "type": "SERVICE_TASK",
                "jobType": "missing-retry-work",
                "retryCount": 0,
                "input": {"n": "${workflow.input.items[1]}"},
            }
        ],
    }
    iid, path = _start(invoke, definition)
    _, _, polled = invoke(
        "jobs", "POST", "/v1/jobs/poll", body={"workerId": "w", "jobTypes": ["missing-retry-work"]}
    )
    (job,) = polled["jobs"]
    body = {"jobId": job["id"], "workerId": "w", "errorMessage": "no", "retryable": False}
    assert invoke("jobs", "POST", "/v1/jobs/fail", body=body)[0] == 200
    _lose(bucket, path)
    answer = invoke(
        "instances", "POST", "/v1/instances/{id}/retry", path_params={"id": iid}, body={}
    )
    _assert_missing(*answer, path)


def test_an_expression_reading_a_missing_input_refuses_the_call_that_needs_it_with_409(
    invoke: Invoke, bucket: LocalS3
) -> None:
    definition = {
        "name": "missing-expression",
        "steps": [
            {"id": "wait", "type": "USER_TASK"},
            {
                "id": "use",
                "type": "SERVICE_TASK",
                "jobType": "missing-use",
                "input": {"n": "${workflow.input.items[2]}"},
            },
        ],
    }
    iid, path = _start(invoke, definition)
    _lose(bucket, path)
    answer = invoke(
        "instances",
        "POST",
        "/v1/instances/{id}/user-tasks/{stepId}/complete",
        path_params={"id": iid, "stepId": "wait"},
        body={},
    )
    _assert_missing(*answer, path)
