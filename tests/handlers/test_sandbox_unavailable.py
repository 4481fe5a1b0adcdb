"""A script sandbox that cannot serve at definition registration is the engine's trouble: 503
with Retry-After on ``/v1`` and ``/api`` (Conductor's error body, retryable), never a 4xx that
blames the definition; a real syntax error still is the definition's (422 / 400)."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest
from baton import scripting
from baton.scripting import Sandbox, SandboxUnavailable, ScriptFailed

from tests.support.lambda_events import FakeContext, api_event, load_function

KEY = "test-conductor-key"


@pytest.fixture
def broken_sandbox(monkeypatch: pytest.MonkeyPatch) -> Sandbox:
    """A fresh pool whose child processes cannot be started (no interpreter where it looks)."""
    pool = Sandbox()
    monkeypatch.setattr(scripting, "default_sandbox", lambda: pool)
    monkeypatch.setattr(sys, "executable", "/nonexistent/python3")
    return pool


def test_a_pool_that_cannot_start_a_child_is_unavailable_not_a_script_failure(
    broken_sandbox: Sandbox,
) -> None:
    with pytest.raises(SandboxUnavailable) as raised:
        broken_sandbox.check("javascript", "$.a + 1")
    assert "could not be started" in str(raised.value)
    assert not isinstance(raised.value, ScriptFailed)
    with pytest.raises(SandboxUnavailable):
        broken_sandbox.javascript("1", {})


WORKFLOW: dict[str, Any] = {
    "name": "sandbox_down",
    "steps": [{"id": "s", "type": "SCRIPT", "script": "$.a + 1"}],
}


def test_v1_registration_answers_503_with_retry_after(invoke: Any, broken_sandbox: Sandbox) -> None:
    status, headers, body = invoke("definitions", "POST", "/v1/definitions", body=WORKFLOW)
    assert status == 503, body
    assert headers["retry-after"] == "5"
    assert "sandbox is unavailable" in body["detail"]


def test_v1_registration_still_refuses_a_real_syntax_error(invoke: Any) -> None:
    bad = {**WORKFLOW, "steps": [{"id": "s", "type": "SCRIPT", "script": "$.a +"}]}
    status, _, body = invoke("definitions", "POST", "/v1/definitions", body=bad)
    assert status == 422
    assert "does not parse" in str(body)


def _conductor(monkeypatch: pytest.MonkeyPatch, body: Any) -> tuple[int, dict[str, str], Any]:
    from baton_lambda import runtime

    monkeypatch.setenv("BATON_API_KEY", KEY)
    runtime.reset()
    event = api_event("POST", "/api/metadata/workflow", body=body)
    event["headers"] = {**(event.get("headers") or {}), "x-api-key": KEY}
    event["multiValueHeaders"] = {k: [v] for k, v in event["headers"].items()}
    response = load_function("conductor").handler(event, FakeContext())
    headers = {k.lower(): v for k, v in (response.get("headers") or {}).items()}
    for k, values in (response.get("multiValueHeaders") or {}).items():
        headers.setdefault(k.lower(), values[0])
    return (
        response["statusCode"],
        headers,
        json.loads(response["body"]) if response.get("body") else None,
    )


INLINE: dict[str, Any] = {
    "name": "sandbox_down_c",
    "version": 1,
    "tasks": [
        {
            "name": "inline",
            "taskReferenceName": "i",
            "type": "INLINE",
            "inputParameters": {"evaluatorType": "graaljs", "expression": "$.a + 1", "a": 1},
        }
    ],
}


def test_api_registration_answers_503_with_retry_after(
    lambda_env: None, broken_sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    status, headers, body = _conductor(monkeypatch, INLINE)
    assert status == 503, body
    assert headers["retry-after"] == "5"
    assert body["retryable"] is True
    assert "sandbox is unavailable" in body["message"]


def test_api_registration_still_refuses_a_real_syntax_error(
    lambda_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    task = {
        **INLINE["tasks"][0],
        "inputParameters": {"evaluatorType": "graaljs", "expression": "$.a +"},
    }
    status, _, body = _conductor(monkeypatch, {**INLINE, "tasks": [task]})
    assert status == 400, body
    assert "does not parse" in body["message"]
