"""GET /v1/config and POST /v1/payloads, through the real handlers, with the local S3."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator

import boto3
import httpx
import pytest
from baton.engine.payloads import signed_url_terms
from baton.local.s3 import LOCAL_ACCESS_KEY, LOCAL_SECRET_KEY, LocalS3

from tests.support.lambda_events import Invoke

BUCKET = "baton-payloads-test"


@pytest.fixture(scope="module")
def local_s3() -> Iterator[LocalS3]:
    s3 = LocalS3(BUCKET)
    s3.start()
    yield s3
    s3.stop()


@pytest.fixture
def with_bucket(local_s3: LocalS3, monkeypatch: pytest.MonkeyPatch, lambda_env: None) -> LocalS3:
    from baton_lambda import runtime

    monkeypatch.setenv("BATON_PAYLOAD_BUCKET", BUCKET)
    monkeypatch.setenv("BATON_S3_ENDPOINT", str(local_s3.endpoint))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", LOCAL_ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", LOCAL_SECRET_KEY)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("BATON_STEP_OUTPUT_HARD_LIMIT_BYTES", "1000000")
    runtime.reset()
    return local_s3


def test_config_exposes_the_limits(invoke: Invoke, monkeypatch: pytest.MonkeyPatch) -> None:
    from baton_lambda import runtime

    monkeypatch.setenv("BATON_STEP_INPUT_SOFT_LIMIT_BYTES", "1234")
    runtime.reset()
    status, _, body = invoke("definitions", "GET", "/v1/config")
    assert status == 200
    assert body["payloadLimits"]["stepInput"] == {
        "softLimitBytes": 1234,
        "hardLimitBytes": 50 * 1024 * 1024,
    }
    assert body["payloadLimits"]["workflowInput"]["softLimitBytes"] == 256 * 1024
    assert body["presignSeconds"] == 900


def test_an_upload_through_the_granted_url_lands_under_the_path(
    invoke: Invoke, with_bucket: LocalS3
) -> None:
    data = b'{"blob": "' + b"x" * 500_000 + b'"}'
    status, _, body = invoke(
        "instances",
        "POST",
        "/v1/payloads",
        body={"kind": "STEP_OUTPUT", "sizeBytes": len(data)},
    )
    assert status == 201, body
    assert body["path"].startswith("payloads/step-output/")
    assert "content-length" in signed_url_terms(body["uploadUrl"])["signedHeaders"]
    put = httpx.put(body["uploadUrl"], content=data, headers=body["uploadHeaders"], timeout=30)
    assert put.status_code == 200, put.text
    got = with_bucket._client().get_object(Bucket=BUCKET, Key=body["path"])["Body"].read()
    assert got == data


def test_the_local_s3_stores_a_put_body_whatever_its_content_type(
    invoke: Invoke, with_bucket: LocalS3
) -> None:
    """``curl --data-binary @file`` labels the body as a form; S3 stores the bytes anyway, and so
    must the local S3 (moto's WSGI layer parsed it as a form and stored nothing)."""
    data = json.dumps({"blob": "x" * 50_000}).encode()
    status, _, grant = invoke(
        "instances", "POST", "/v1/payloads", body={"kind": "WORKFLOW_INPUT", "sizeBytes": len(data)}
    )
    assert status == 201, grant
    headers = {**grant["uploadHeaders"], "Content-Type": "application/x-www-form-urlencoded"}
    put = httpx.put(grant["uploadUrl"], content=data, headers=headers, timeout=30)
    assert put.status_code == 200, put.text
    got = boto3.client(
        "s3",
        endpoint_url=with_bucket.endpoint,
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
    ).get_object(Bucket=with_bucket.bucket, Key=grant["path"])
    assert got["Body"].read() == data


def test_a_declared_digest_travels_with_the_grant(invoke: Invoke, with_bucket: LocalS3) -> None:
    data = b"[1, 2, 3]"
    digest = hashlib.sha256(data).hexdigest()
    status, _, body = invoke(
        "instances",
        "POST",
        "/v1/payloads",
        body={"kind": "WORKFLOW_INPUT", "sizeBytes": len(data), "contentSha256": digest},
    )
    assert status == 201
    assert "x-amz-checksum-sha256" in body["uploadHeaders"]
    assert "x-amz-checksum-sha256" in signed_url_terms(body["uploadUrl"])["signedHeaders"]


def test_above_the_hard_limit_is_413(invoke: Invoke, with_bucket: LocalS3) -> None:
    status, headers, body = invoke(
        "instances", "POST", "/v1/payloads", body={"kind": "STEP_OUTPUT", "sizeBytes": 1_000_001}
    )
    assert status == 413
    assert headers["content-type"] == "application/problem+json"
    assert "1000001" in body["detail"] and "1000000" in body["detail"]


@pytest.mark.parametrize(
    "request_body",
    [
        {"kind": "NOPE", "sizeBytes": 1},
        {"kind": "STEP_OUTPUT", "sizeBytes": -1},
        {"kind": "STEP_OUTPUT"},
        {"kind": "STEP_OUTPUT", "sizeBytes": 1, "contentSha256": "abc"},
        {"kind": "STEP_OUTPUT", "sizeBytes": 1, "extra": True},
        {"kind": "STEP_OUTPUT", "sizeBytes": 1e300},
    ],
)
def test_malformed_requests_are_422(
    invoke: Invoke, with_bucket: LocalS3, request_body: dict[str, object]
) -> None:
    status, _, _ = invoke("instances", "POST", "/v1/payloads", body=request_body)
    assert status == 422


def test_without_a_bucket_the_answer_is_503_not_500(invoke: Invoke) -> None:
    status, headers, body = invoke(
        "instances", "POST", "/v1/payloads", body={"kind": "STEP_OUTPUT", "sizeBytes": 1}
    )
    assert status == 503
    assert "BATON_PAYLOAD_BUCKET" in body["detail"]
    assert headers["retry-after"]


def _upload(invoke: Invoke, kind: str, data: bytes) -> str:
    status, _, grant = invoke(
        "instances", "POST", "/v1/payloads", body={"kind": kind, "sizeBytes": len(data)}
    )
    assert status == 201, grant
    put = httpx.put(grant["uploadUrl"], content=data, headers=grant["uploadHeaders"], timeout=30)
    assert put.status_code == 200, put.text
    return str(grant["path"])


DEFINITION = {
    "name": "offloaded",
    "steps": [{"id": "make", "type": "SERVICE_TASK", "jobType": "make-big"}],
}


def test_an_instance_starts_from_an_uploaded_input_and_a_job_completes_with_one(
    invoke: Invoke, with_bucket: LocalS3
) -> None:
    assert invoke("definitions", "POST", "/v1/definitions", body=DEFINITION)[0] == 201
    data = json.dumps({"items": list(range(100_000))}).encode()
    path = _upload(invoke, "WORKFLOW_INPUT", data)
    status, _, inst = invoke(
        "instances",
        "POST",
        "/v1/instances",
        body={"definitionName": "offloaded", "inputPayloadPath": path},
    )
    assert status == 201, inst
    assert inst["input"] == {"$payload": path, "sizeBytes": len(data)}
    status, _, polled = invoke(
        "jobs", "POST", "/v1/jobs/poll", body={"workerId": "w", "jobTypes": ["make-big"]}
    )
    (job,) = polled["jobs"]
    out = json.dumps({"blob": "y" * 400_000}).encode()
    out_path = _upload(invoke, "STEP_OUTPUT", out)
    body = {"jobId": job["id"], "workerId": "w", "outputPayloadPath": out_path}
    status, _, done = invoke("jobs", "POST", "/v1/jobs/complete", body=body)
    assert (status, done["applied"]) == (200, True), done
    status, _, final = invoke(
        "instances", "GET", "/v1/instances/{id}", path_params={"id": inst["id"]}
    )
    assert final["status"] == "COMPLETED"
    (step,) = final["steps"]
    assert step["output"]["$payload"] == out_path
    assert step["output"]["sizeBytes"] == len(out)
    # Offloaded fields are shown as their path and a presigned GET, never inlined.
    assert httpx.get(step["output"]["downloadUrl"], timeout=30).content == out
    assert httpx.get(final["input"]["downloadUrl"], timeout=30).content == data
    # The reference is the step's own: it is not merged into the variables.
    assert "$payload" not in final["variables"]
    # Asked for, small ones are inlined.
    _, _, inlined = invoke(
        "instances",
        "GET",
        "/v1/instances/{id}",
        path_params={"id": inst["id"]},
        query={"resolvePayloads": "true"},
    )
    assert inlined["input"] == json.loads(data)
    assert inlined["steps"][0]["output"] == json.loads(out)


@pytest.mark.parametrize(
    "forged",
    [
        "payloads/workflow-input/not-uploaded-at-all-aaaaaaaaaaaaaaaaaaaa",
        "payloads/step-output/wrong-kind",
        "../etc/passwd",
        "payloads/workflow-input/a/b",
    ],
)
def test_a_forged_or_missing_input_path_is_422(
    invoke: Invoke, with_bucket: LocalS3, forged: str
) -> None:
    invoke("definitions", "POST", "/v1/definitions", body=DEFINITION)
    status, _headers, body = invoke(
        "instances",
        "POST",
        "/v1/instances",
        body={"definitionName": "offloaded", "inputPayloadPath": forged},
    )
    assert status == 422, body
    assert body["errors"][0]["path"] == "inputPayloadPath"


@pytest.mark.parametrize("content", [b"", b"not json", b'{"a": "\xff"}'])
def test_an_upload_that_is_not_json_is_refused_as_422_and_starts_nothing(
    invoke: Invoke, with_bucket: LocalS3, content: bytes
) -> None:
    invoke("definitions", "POST", "/v1/definitions", body=DEFINITION)
    path = _upload(invoke, "WORKFLOW_INPUT", content)
    status, _, body = invoke(
        "instances",
        "POST",
        "/v1/instances",
        body={"definitionName": "offloaded", "inputPayloadPath": path, "correlationId": path},
    )
    assert status == 422, body
    assert "not a JSON document" in body["detail"]
    status, _, found = invoke("instances", "GET", "/v1/instances", query={"correlationId": path})
    assert status == 200 and found["instances"] == [], found


def test_input_and_a_path_together_are_422(invoke: Invoke, with_bucket: LocalS3) -> None:
    invoke("definitions", "POST", "/v1/definitions", body=DEFINITION)
    path = _upload(invoke, "WORKFLOW_INPUT", b"{}")
    status, _, _body = invoke(
        "instances",
        "POST",
        "/v1/instances",
        body={"definitionName": "offloaded", "input": {}, "inputPayloadPath": path},
    )
    assert status == 422


def test_an_object_larger_than_the_hard_limit_is_422_and_the_job_stays_claimed(
    invoke: Invoke, with_bucket: LocalS3
) -> None:
    invoke("definitions", "POST", "/v1/definitions", body=DEFINITION)
    invoke("instances", "POST", "/v1/instances", body={"definitionName": "offloaded"})
    _, _, polled = invoke(
        "jobs", "POST", "/v1/jobs/poll", body={"workerId": "w", "jobTypes": ["make-big"]}
    )
    (job,) = polled["jobs"]
    # Written past the API (the hard limit is 1,000,000 bytes here): refused when referenced.
    key = "payloads/step-output/written-behind-the-apis-back-0123456789"
    with_bucket._client().put_object(Bucket=BUCKET, Key=key, Body=b"z" * 1_000_001)
    body = {"jobId": job["id"], "workerId": "w", "outputPayloadPath": key}
    status, _, problem = invoke("jobs", "POST", "/v1/jobs/complete", body=body)
    assert status == 422
    assert "1000001" in problem["errors"][0]["message"]
    assert "1000000" in problem["errors"][0]["message"]
    ok = _upload(invoke, "STEP_OUTPUT", b'{"small": 1}')
    body["outputPayloadPath"] = ok
    status, _, done = invoke("jobs", "POST", "/v1/jobs/complete", body=body)
    assert (status, done["applied"]) == (200, True)


READER = {
    "name": "reads-offloaded",
    "steps": [
        {
            "id": "make",
            "type": "SERVICE_TASK",
            "jobType": "make-big",
            "input": {"first": "${workflow.input.items[0]}"},
        },
        {
            "id": "use",
            "type": "SERVICE_TASK",
            "jobType": "use-one",
            "input": {"picked": "${make.output.picked}", "n": "${workflow.input.items[2]}"},
        },
    ],
}


def test_expressions_read_fields_of_offloaded_input_and_output(
    invoke: Invoke, with_bucket: LocalS3
) -> None:
    assert invoke("definitions", "POST", "/v1/definitions", body=READER)[0] == 201
    data = json.dumps({"items": list(range(100_000))}).encode()
    path = _upload(invoke, "WORKFLOW_INPUT", data)
    status, _, inst = invoke(
        "instances",
        "POST",
        "/v1/instances",
        body={"definitionName": "reads-offloaded", "inputPayloadPath": path},
    )
    assert status == 201, inst
    _, _, polled = invoke(
        "jobs", "POST", "/v1/jobs/poll", body={"workerId": "w", "jobTypes": ["make-big"]}
    )
    (job,) = polled["jobs"]
    assert job["input"] == {"first": 0}
    out = json.dumps({"picked": "needle", "blob": "y" * 400_000}).encode()
    out_path = _upload(invoke, "STEP_OUTPUT", out)
    body = {"jobId": job["id"], "workerId": "w", "outputPayloadPath": out_path}
    assert invoke("jobs", "POST", "/v1/jobs/complete", body=body)[0] == 200
    _, _, polled = invoke(
        "jobs", "POST", "/v1/jobs/poll", body={"workerId": "w", "jobTypes": ["use-one"]}
    )
    (job,) = polled["jobs"]
    assert job["input"] == {"picked": "needle", "n": 2}


def test_the_reader_fetches_each_path_once_and_passes_other_values_through(
    with_bucket: LocalS3,
) -> None:
    from baton.engine.payloads import PayloadReader
    from baton.payload_ref import payload_ref

    client = with_bucket._client()
    client.put_object(Bucket=BUCKET, Key="payloads/step-output/cached", Body=b'{"a": [1, 2]}')
    reader = PayloadReader(BUCKET, client=client, cache_bytes=100)
    ref = payload_ref("payloads/step-output/cached", 13)
    assert reader(ref) == {"a": [1, 2]}
    assert reader(dict(ref)) == {"a": [1, 2]}
    assert reader.fetches == 1
    assert reader({"plain": 1}) == {"plain": 1}
    assert reader(None) is None


PASS_ON = {
    "name": "passes-big-input",
    "steps": [
        {
            "id": "work",
            "type": "SERVICE_TASK",
            "jobType": "take-big",
            "input": {"items": "${workflow.input.items}"},
        }
    ],
}


def _start_with_items(invoke: Invoke, n: int) -> tuple[dict[str, object], bytes]:
    assert invoke("definitions", "POST", "/v1/definitions", body=PASS_ON)[0] in (200, 201, 409)
    data = json.dumps({"items": [f"item-{i:06d}" for i in range(n)]}).encode()
    path = _upload(invoke, "WORKFLOW_INPUT", data)
    status, _, inst = invoke(
        "instances",
        "POST",
        "/v1/instances",
        body={"definitionName": "passes-big-input", "inputPayloadPath": path},
    )
    assert status == 201, inst
    return inst, data


def test_a_step_input_above_the_soft_limit_is_handed_out_as_a_path_and_a_url(
    invoke: Invoke, with_bucket: LocalS3, monkeypatch: pytest.MonkeyPatch
) -> None:
    from baton_lambda import runtime

    monkeypatch.setenv("BATON_STEP_INPUT_SOFT_LIMIT_BYTES", "1000")
    runtime.reset()
    _, data = _start_with_items(invoke, 20_000)
    status, _, polled = invoke(
        "jobs", "POST", "/v1/jobs/poll", body={"workerId": "w", "jobTypes": ["take-big"]}
    )
    assert status == 200
    (job,) = polled["jobs"]
    assert job.get("input") is None
    assert job["inputPayloadPath"].startswith("payloads/step-input/")
    got = httpx.get(job["inputDownloadUrl"], timeout=30)
    assert got.status_code == 200
    assert got.json() == json.loads(data)


def test_a_step_input_above_the_hard_limit_fails_the_step_naming_the_limit(
    invoke: Invoke, with_bucket: LocalS3, monkeypatch: pytest.MonkeyPatch
) -> None:
    from baton_lambda import runtime

    monkeypatch.setenv("BATON_STEP_INPUT_SOFT_LIMIT_BYTES", "1000")
    monkeypatch.setenv("BATON_STEP_INPUT_HARD_LIMIT_BYTES", "100000")
    runtime.reset()
    inst, _ = _start_with_items(invoke, 20_000)
    _, _, final = invoke(
        "instances", "GET", "/v1/instances/{id}", path_params={"id": str(inst["id"])}
    )
    assert final["status"] == "FAILED"
    (step,) = final["steps"]
    assert step["status"] == "FAILED"
    assert "step input hard limit of 100000 bytes" in step["error"]
    assert "its resolved input is" in step["error"]
