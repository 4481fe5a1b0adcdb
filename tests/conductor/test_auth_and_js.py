"""Tokens for /api (pure) and the javascript-comparison translator both ways."""

from __future__ import annotations

import pytest
from baton.conductor import auth, js


def test_a_token_is_valid_for_its_key_until_it_expires() -> None:
    token = auth.issue("key-1", now=1000.0)
    assert auth.valid(token, "key-1", now=1000.0 + auth.TOKEN_TTL_SECONDS - 1)
    assert not auth.valid(token, "key-1", now=1000.0 + auth.TOKEN_TTL_SECONDS + 1)
    assert not auth.valid(token, "key-2", now=1000.0)
    assert auth.valid("key-1", "key-1", now=0)  # the key itself, for curl users
    for bad in ("", "bct1", "bct1.x.y", "bct1.99999999999.00", token + "0", token[:-1]):
        assert not auth.valid(bad, "key-1", now=1000.0)


PARAMS = {"n": "${workflow.input.n}", "who": "${prev.output.name}", "limit": 3}


def _resolve(keys: list[str]) -> str:
    source = PARAMS[keys[0]]
    if isinstance(source, str):
        return source[2:-1] + "".join(f".{k}" for k in keys[1:])
    return str(source)


@pytest.mark.parametrize(
    ("script", "jsonata"),
    [
        ("$.n > 3", "workflow.input.n > 3"),
        ("$.n === $.limit", "workflow.input.n = 3"),
        ("$.who != 'ada' || $.n <= 1", 'prev.output.name != "ada" or workflow.input.n <= 1'),
        ("!($.n > 3)", "$not(workflow.input.n > 3)"),
        ("$['who'] == \"x\"", 'prev.output.name = "x"'),
        ("if ($.n > 3) { true; } else { false; }", "workflow.input.n > 3"),
        ("if ($.n > 3) { return true; } else { return false; }", "workflow.input.n > 3"),
    ],
)
def test_simple_comparisons_translate(script: str, jsonata: str) -> None:
    assert js.to_jsonata(script, _resolve) == jsonata


@pytest.mark.parametrize(
    "script",
    ["", "$.n + 1 > 3", "function f() {}", "$.n.map(x => x)", "!$.n", "$", "$.n > 3; $.x = 1"],
)
def test_anything_else_is_refused(script: str) -> None:
    with pytest.raises(ValueError):
        js.to_jsonata(script, _resolve)


def test_a_condition_reads_back_through_the_same_parameters() -> None:
    params: dict[str, object] = {"n": "${workflow.input.n}"}
    script = js.from_jsonata('workflow.input.n > 3 and prev.output.x = "a"', params)
    assert script == '$.n > 3 && $.p1 == "a"'
    assert params == {"n": "${workflow.input.n}", "p1": "${prev.output.x}"}
