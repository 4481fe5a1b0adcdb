"""Credentials: the API key header, and AWS SigV4 signatures for an IAM-protected API Gateway."""

from __future__ import annotations

import json
import re

import httpx
import pytest
from baton_worker.auth import ApiKeyAuth, AwsSigV4Auth
from baton_worker.client import BatonClient

botocore_credentials = pytest.importorskip("botocore.credentials")


def capture(auth: httpx.Auth) -> tuple[BatonClient, list[httpx.Request]]:
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"jobs": []})

    client = BatonClient(
        "https://abc123.execute-api.eu-west-1.amazonaws.com/prod",
        auth=auth,
        transport=httpx.MockTransport(handle),
    )
    return client, seen


def test_api_key_goes_in_x_api_key_and_never_in_repr() -> None:
    client, seen = capture(ApiKeyAuth("s3cret"))
    client.list_definitions()
    assert seen[0].headers["x-api-key"] == "s3cret"
    assert "s3cret" not in repr(ApiKeyAuth("s3cret"))


def test_sigv4_signs_method_path_body_and_host_for_execute_api() -> None:
    creds = botocore_credentials.Credentials("AKIDEXAMPLE", "secret", "session-token")
    client, seen = capture(AwsSigV4Auth(region="eu-west-1", credentials=creds))
    client.poll_jobs(worker_id="w", job_types=["t"], max_jobs=2)
    request = seen[0]
    authorization = request.headers["authorization"]
    match = re.fullmatch(
        r"AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/(\d{8})/eu-west-1/execute-api/aws4_request, "
        r"SignedHeaders=([a-z0-9;-]+), Signature=([0-9a-f]{64})",
        authorization,
    )
    assert match, authorization
    assert match.group(1) == request.headers["x-amz-date"][:8]
    assert match.group(2).split(";") == [
        "content-type",
        "host",
        "x-amz-date",
        "x-amz-security-token",
    ]
    assert request.headers["x-amz-security-token"] == "session-token"
    # The body that was signed is the body that was sent.
    assert json.loads(request.content)["maxJobs"] == 2


def test_sigv4_signature_changes_with_the_body() -> None:
    creds = botocore_credentials.Credentials("AKIDEXAMPLE", "secret")
    client, seen = capture(AwsSigV4Auth(region="eu-west-1", credentials=creds))
    client.poll_jobs(worker_id="w", job_types=["a"])
    client.poll_jobs(worker_id="w", job_types=["b"])
    signatures = {r.headers["authorization"].rsplit("=", 1)[1] for r in seen}
    assert len(signatures) == 2


def test_sigv4_covers_the_api_key_when_both_are_sent() -> None:
    creds = botocore_credentials.Credentials("AKIDEXAMPLE", "secret")
    signer = AwsSigV4Auth(region="eu-west-1", credentials=creds)
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={})

    with httpx.Client(
        auth=signer, transport=httpx.MockTransport(handle), headers={"x-api-key": "k"}
    ) as http:
        http.get("https://api.example.com/v1/definitions")
    assert "x-api-key" in seen[0].headers["authorization"]


def test_sigv4_needs_a_region(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_CONFIG_FILE", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    creds = botocore_credentials.Credentials("AKIDEXAMPLE", "secret")
    with pytest.raises(ValueError, match="region"):
        AwsSigV4Auth(credentials=creds)
