"""Feed real-shaped API Gateway events (tests/events/) straight to each function's handler."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.lambda_events import FakeContext, Invoke, api_event, load_function
from tests.support.proto_contract import RESPONSES, error_message, parse


@pytest.fixture
def lambda_env(database_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    from baton_lambda import runtime

    monkeypatch.setenv("DATABASE_URL", database_url)
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "BatonTest")
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    runtime.reset()
    yield
    runtime.reset()


@pytest.fixture
def invoke(lambda_env: None) -> Invoke:
    def call(
        function: str, method: str, resource: str, **kw: Any
    ) -> tuple[int, dict[str, str], Any]:
        module = load_function(function)
        response = module.handler(api_event(method, resource, **kw), FakeContext())
        headers = {k.lower(): v for k, v in (response.get("headers") or {}).items()}
        for k, values in (response.get("multiValueHeaders") or {}).items():
            headers.setdefault(k.lower(), values[0])
        body = json.loads(response["body"]) if response.get("body") else None
        # Every response must parse into its proto message, unknown fields refused.
        status = response["statusCode"]
        if status >= 400:
            parse(error_message((method, resource), status), body)
        elif (method, resource) in RESPONSES:
            parse(RESPONSES[(method, resource)], body)
        return status, headers, body

    return call
