"""Errors that say what to do, over HTTP against ``baton dev``: malformed JSON names its line,
column and path (``/api`` in ``tests/conductor/test_unserved_routes.py``); a body over the inline
cap says how to send it instead."""

from __future__ import annotations

import pytest

from tests.support.helpers import unique
from tests.support.servers import CheckedServer

pytestmark = [pytest.mark.e2e]

JSON = {"content-type": "application/json"}
NAN_BODY = '{\n  "definitionName": "x",\n  "input": {"items": [1, 2, NaN]}\n}'


@pytest.mark.parametrize(
    ("body", "where", "path", "why"),
    [
        (NAN_BODY, "line 3, column 29", "input.items[2]", "NaN is not a JSON number"),
        ('{"input": {"n": 1e400}}', "line 1, column 17", "input.n", "beyond the range of a double"),
        ('{"definitionName": "x",\n "input": {"a": 1,}}', "line 2, column 19", "input", "Expect"),
    ],
)
def test_malformed_json_on_v1_is_a_400_problem_naming_line_column_and_path(
    baton_server: CheckedServer, body: str, where: str, path: str, why: str
) -> None:
    r = baton_server.request("POST", "/v1/instances", content=body, headers=JSON)
    assert r.status_code == 400, r.text
    assert r.headers["content-type"] == "application/problem+json"
    problem = r.json()
    assert f"request body is not valid JSON at {where} ({path}): " in problem["detail"]
    assert why in problem["detail"]
    [item] = problem["errors"]
    assert item["path"] == path
    assert item["message"].endswith(f"({where})")


def test_an_inline_start_over_the_cap_says_how_to_send_it(baton_server: CheckedServer) -> None:
    name = unique("big-input")
    baton_server.register_one_step(name)
    big = {"blob": "x" * 3_000_000}
    r = baton_server.request("POST", "/v1/instances", json={"definitionName": name, "input": big})
    assert r.status_code == 413, r.text
    detail = r.json()["detail"]
    assert "exceeds the inline limit of 2000000 bytes" in detail
    assert "POST /v1/payloads" in detail and "inputPayloadPath" in detail
    assert "baton instances start --input @file" in detail
