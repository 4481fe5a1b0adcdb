"""Bad input on ``/api`` is a 4xx in Conductor's error shape, never a 5xx: every route of
``CONDUCTOR_ROUTES`` with hostile path values, query values and bodies, over HTTP."""

from __future__ import annotations

import itertools
import json
from typing import Any

import httpx
import pytest
from baton.routes import CONDUCTOR_ROUTES, Route

from tests.support.servers import LocalServer

pytestmark = [pytest.mark.e2e]

PATH_VALUES = [
    "x",
    "00000000-0000-0000-0000-000000000000",
    "00000000-0000-0000-0000-000000000000.7",
    "%00",
    "-1",
    "99999999999999999999999",
    "%E2%98%83",
    "a.b.c",
]
BODIES: list[bytes] = [
    b"",
    b"{}",
    b"[]",
    b"null",
    b"not json",
    b'"a string"',
    b"[1, 2]",
    b'{"name": 5, "tasks": "no", "taskId": 7, "status": "DONE"}',
    json.dumps({"name": "x", "tasks": [{"type": "SIMPLE"}]}).encode(),
    json.dumps({"name": "x", "tasks": [{"taskReferenceName": "a", "type": "SWITCH"}]}).encode(),
    json.dumps(
        {"name": "x", "tasks": [{"taskReferenceName": "a", "type": "FORK_JOIN", "forkTasks": 3}]}
    ).encode(),
    json.dumps({"taskId": "zzz", "status": "COMPLETED", "outputData": []}).encode(),
    json.dumps(
        {"taskId": "00000000-0000-0000-0000-000000000000.1", "status": "IN_PROGRESS"}
    ).encode(),
    json.dumps({"name": "nope", "version": -3, "input": [1], "workflowDef": {"tasks": 1}}).encode(),
    b'{"a": "\\u0000"}',
    b"[" * 5000 + b"]" * 5000,
]
QUERIES = [
    "",
    "?version=abc",
    "?count=0&workerid=w",
    "?count=999999",
    "?overwrite=maybe",
    "?includeTasks=perhaps",
    "?query=nonsense%3D1&size=-5",
    "?version=1",
]


def _fill(route: Route, value: str) -> str:
    path = route.path
    while "{" in path:
        start = path.index("{")
        path = path[:start] + value + path[path.index("}", start) + 1 :]
    return path


@pytest.mark.parametrize("route", CONDUCTOR_ROUTES, ids=lambda r: f"{r.method} {r.path}")
def test_no_input_gives_a_5xx(conductor_server: LocalServer, route: Route) -> None:
    key = conductor_server.api_key or ""
    with httpx.Client(base_url=conductor_server.base_url, timeout=30.0) as client:
        values = PATH_VALUES if "{" in route.path else [""]
        bodies = BODIES if route.method in ("POST", "PUT", "DELETE") else [b""]
        cases = list(itertools.product(values, QUERIES, bodies))
        # Every body with the first path value, every path value with every query.
        cases = [c for c in cases if c[0] == values[0] or c[2] == bodies[0]]
        for value, query, body in cases:
            r = client.request(
                route.method,
                _fill(route, value) + query,
                content=body,
                headers={"X-Authorization": key, "content-type": "application/json"},
            )
            what = f"{route.method} {_fill(route, value)}{query} {body[:60]!r}"
            assert r.status_code < 500, f"{what}: {r.status_code} {r.text[:300]}"
            if r.status_code >= 400:
                data: Any = r.json()
                assert isinstance(data.get("message"), str), what
                assert data["status"] == r.status_code, what


def test_an_unknown_path_or_method_under_api_answers_in_conductors_shape(
    conductor_server: LocalServer,
) -> None:
    base = conductor_server.base_url
    for method, path, status in (
        ("GET", "/api/no/such/thing", 404),
        ("DELETE", "/api/token", 405),
    ):
        key = {"x-api-key": conductor_server.api_key or ""}
        r = httpx.request(method, base + path, headers=key, timeout=10)
        assert r.status_code == status, r.text
        assert r.headers["content-type"].startswith("application/json")
        body = r.json()
        assert body["status"] == status and body["message"] and body["validationErrors"] == []
    # /v1 keeps problem+json.
    r = httpx.get(base + "/v1/no/such/thing", timeout=10)
    assert r.headers["content-type"] == "application/problem+json"
