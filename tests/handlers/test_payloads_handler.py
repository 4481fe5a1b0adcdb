"""GET /v1/config and POST /v1/payloads, through the real handlers, with the local S3."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

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
