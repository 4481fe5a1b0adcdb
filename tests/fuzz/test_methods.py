"""Every path of the route table answers a method it does not declare with 405, an ``Allow``
header naming the declared methods, and a problem+json body; unknown paths are 404 problems.
Whatever the method: standard, WebDAV-ish, or made up."""

from __future__ import annotations

import re
from collections import defaultdict

import pytest
from baton.routes import ROUTES

from tests.support.servers import LocalServer

pytestmark = [pytest.mark.e2e, pytest.mark.fuzz]

METHODS = ("GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "CONNECT", "QUERY", "FOO")
SAMPLE_PARAMS = {
    "name": "fuzz-name",
    "version": "1",
    "id": "00000000-0000-4000-8000-000000000000",
    "stepId": "step",
    "taskId": "00000000-0000-4000-8000-000000000001",
}
DECLARED: dict[str, set[str]] = defaultdict(set)
for _route in ROUTES:
    DECLARED[_route.path].add(_route.method)

UNDECLARED = [
    (path, method)
    for path, declared in DECLARED.items()
    for method in METHODS
    if method not in declared
]
UNKNOWN_PATHS = (
    "/v1",
    "/v1/",
    "/v1/nope",
    "/v2/definitions",
    "/v1/definitions/",
    "/v1/definitions/x/y/z",
    "/v1/instances/00000000-0000-4000-8000-000000000000/nope",
    "/v1/%00",
)


def _fill(template: str) -> str:
    return re.sub(r"{(\w+)}", lambda m: SAMPLE_PARAMS[m.group(1)], template)


@pytest.mark.parametrize(
    ("template", "method"),
    [pytest.param(p, m, id=f"{m} {p}") for p, m in UNDECLARED],
)
def test_an_undeclared_method_is_a_405_naming_the_allowed_ones(
    fuzz_server: LocalServer, template: str, method: str
) -> None:
    path = _fill(template)
    r = fuzz_server.request(method, path)
    assert r.status_code == 405, f"{method} {path} -> {r.status_code} {r.text[:300]}"
    allowed = {m.strip() for m in r.headers.get("allow", "").split(",") if m.strip()}
    assert allowed == DECLARED[template], r.headers
    assert r.headers["content-type"] == "application/problem+json"
    assert r.json()["status"] == 405


@pytest.mark.parametrize("method", ["GET", "POST", "DELETE", "TRACE", "FOO"])
@pytest.mark.parametrize("path", UNKNOWN_PATHS)
def test_an_unknown_path_is_a_404_problem(fuzz_server: LocalServer, path: str, method: str) -> None:
    r = fuzz_server.request(method, path)
    assert r.status_code == 404, f"{method} {path} -> {r.status_code} {r.text[:300]}"
    assert r.headers["content-type"] == "application/problem+json"
    assert r.json()["status"] == 404
