"""Behind an HTTP API (no usage-plan keys) the functions check ``x-api-key`` themselves against the
hashed keys in Secrets Manager (moto): no key is a 401, a wrong key a 403 (problem+json), a key
added to the secret works on its next request without a deploy, a removed one stops working."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from baton_lambda import api_keys
from baton_lambda.api_keys import KeyRing, new_key
from moto import mock_aws

from tests.support.lambda_events import FakeContext, api_event, load_function


@pytest.fixture
def secret(lambda_env: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    import boto3

    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with mock_aws():
        client = boto3.client("secretsmanager")
        arn = client.create_secret(Name="baton-keys", SecretString='{"keys": []}')["ARN"]
        monkeypatch.setenv("BATON_API_KEYS_SECRET_ARN", arn)

        def put(*entries: dict[str, str]) -> None:
            client.put_secret_value(SecretId=arn, SecretString=json.dumps({"keys": entries}))

        yield put


def _get(
    path: str, key: str | None, params: dict[str, str] | None = None
) -> tuple[int, dict[str, Any]]:
    event = api_event("GET", path, path_params=params)
    event["headers"] = {"X-Api-Key": key} if key is not None else {}
    event["multiValueHeaders"] = {}
    response = load_function("definitions").handler(event, FakeContext())
    headers = {**response.get("headers", {}), **response.get("multiValueHeaders", {})}
    assert "Content-Type" in headers
    return response["statusCode"], json.loads(response["body"])


def test_the_key_check_refuses_a_missing_or_wrong_key_and_accepts_a_rotated_one(
    secret: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(api_keys, "REREAD_FLOOR_SECONDS", 0.0)
    old, old_entry = new_key("ci")
    secret(old_entry)
    assert _get("/v1/definitions", old)[0] == 200

    status, problem = _get("/v1/definitions", None)
    assert (status, problem["status"]) == (401, 401)
    assert "x-api-key" in problem["detail"]
    status, problem = _get("/v1/definitions", old[:-1] + ("A" if old[-1] != "A" else "B"))
    assert (status, problem["status"]) == (403, 403)
    assert _get("/v1/definitions", "not-a-key")[0] == 403

    # Rotation: the new key is added (no deploy, the warm container re-reads on the miss) ...
    new, new_entry = new_key("ci-2")
    secret(old_entry, new_entry)
    assert _get("/v1/definitions", new)[0] == 200
    # ... and a fallback of a guarded prefix is guarded too; the public routes stay public.
    assert _get("/v1/{proxy+}", None, {"proxy": "nothing-here"})[0] == 401
    assert _get("/v1/{proxy+}", new, {"proxy": "nothing-here"})[0] == 404
    assert _get("/v1/health", None)[0] in (200, 503)


def test_a_removed_key_stops_working_once_the_cache_expires() -> None:
    now = [0.0]
    old, old_entry = new_key("a")
    new, new_entry = new_key("b")
    document = {"keys": [old_entry]}
    reads: list[float] = []

    def fetch() -> str:
        reads.append(now[0])
        return json.dumps(document)

    ring = KeyRing(fetch, clock=lambda: now[0])
    assert ring.check(old) == "ok"
    document = {"keys": [new_entry]}
    now[0] = 0.5
    assert ring.check(new) == "wrong"  # within the re-read floor: no second read yet
    now[0] = 1.5
    assert ring.check(new) == "ok"  # a miss past the floor re-reads: the added key works
    assert ring.check(old) == "wrong"  # and the removed one is gone with that read
    for _ in range(100):  # a flood of wrong keys costs no read within the floor
        assert ring.check(old) == "wrong"
    assert reads == [0.0, 1.5]
    now[0] = 1.5 + api_keys.CACHE_SECONDS
    assert ring.check(new) == "ok"
    assert reads == [0.0, 1.5, now[0]]
