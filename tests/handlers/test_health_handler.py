"""GET /v1/health: the database and the payload bucket, each reported; 503 only without the
database."""

from __future__ import annotations

import pytest

from tests.support.lambda_events import Invoke
from tests.support.servers import free_port


def test_health_is_ok_with_a_database_and_no_bucket_configured(invoke: Invoke) -> None:
    status, headers, body = invoke("definitions", "GET", "/v1/health")
    assert status == 200
    assert body["status"] == "ok"
    assert body["database"]["status"] == "ok" and body["database"]["latencyMs"] >= 0
    assert body["s3"] == {"status": "unconfigured"}
    assert body["version"]
    assert headers["cache-control"] == "no-store"


def test_unreachable_bucket_degrades_health_but_answers_200(
    invoke: Invoke, monkeypatch: pytest.MonkeyPatch
) -> None:
    from baton_lambda import runtime

    monkeypatch.setenv("BATON_PAYLOAD_BUCKET", "payloads")
    monkeypatch.setenv("BATON_S3_ENDPOINT", f"http://127.0.0.1:{free_port()}")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    runtime.reset()
    status, _, body = invoke("definitions", "GET", "/v1/health")
    assert status == 200
    assert body["status"] == "degraded"
    assert body["database"]["status"] == "ok"
    assert body["s3"]["status"] == "unreachable"
    assert body["s3"]["bucket"] == "payloads"
    assert body["s3"]["error"]


def test_unreachable_database_is_503_with_the_report(
    invoke: Invoke, monkeypatch: pytest.MonkeyPatch
) -> None:
    from baton_lambda import runtime

    monkeypatch.setenv("DATABASE_URL", f"postgresql://baton@127.0.0.1:{free_port()}/baton")
    runtime.reset()
    status, headers, body = invoke("definitions", "GET", "/v1/health")
    assert status == 503
    assert headers["retry-after"] == "5"
    assert body["status"] == "degraded"
    assert body["database"]["status"] == "unreachable"
    assert body["database"]["error"]
