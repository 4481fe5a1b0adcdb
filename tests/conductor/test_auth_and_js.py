"""Tokens for /api (pure) and the javascript-comparison translator both ways."""

from __future__ import annotations

from baton.conductor import auth, js


def test_a_token_is_valid_for_its_key_until_it_expires() -> None:
    token = auth.issue("key-1", now=1000.0)
    assert auth.valid(token, "key-1", now=1000.0 + auth.TOKEN_TTL_SECONDS - 1)
    assert not auth.valid(token, "key-1", now=1000.0 + auth.TOKEN_TTL_SECONDS + 1)
    assert not auth.valid(token, "key-2", now=1000.0)
    assert auth.valid("key-1", "key-1", now=0)  # the key itself, for curl users
    for bad in ("", "bct1", "bct1.x.y", "bct1.99999999999.00", token + "0", token[:-1]):
        assert not auth.valid(bad, "key-1", now=1000.0)


def test_a_condition_reads_back_through_the_same_parameters() -> None:
    params: dict[str, object] = {"n": "${workflow.input.n}"}
    script = js.from_jsonata('workflow.input.n > 3 and prev.output.x = "a"', params)
    assert script == '$.n > 3 && $.p1 == "a"'
    assert params == {"n": "${workflow.input.n}", "p1": "${prev.output.x}"}
