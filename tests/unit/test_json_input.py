"""The strict JSON reader's checks: the quick pass (no paths, strings only when the text may hold a
NUL or a lone surrogate) must refuse exactly what the walk that names the place refuses."""

from __future__ import annotations

import json
from typing import Any

import pytest
from baton.api import json_input
from baton.api.json_input import parse_json
from baton.errors import MalformedRequest, ValidationFailed
from hypothesis import given, settings
from hypothesis import strategies as st

# Text with the characters the store refuses mixed in among ordinary ones.
_text = st.text(
    alphabet=st.sampled_from(["a", "é", "\x00", "\ud835", "\udc00", "\\", "u", "😀"]),
    max_size=6,
)
_values = st.recursive(
    st.none() | st.booleans() | st.integers() | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=12,
)


def _outcome(check: Any) -> tuple[str, str]:
    try:
        check()
    except ValidationFailed as e:
        return ("422", repr(e.problems))
    except MalformedRequest as e:
        return ("400", str(e))
    return ("ok", "")


def _as_client_sends(value: Any, *, ascii_only: bool) -> str:
    """JSON text as a client writes it: escapes (ensure_ascii) or the characters themselves."""
    return json.dumps(value, ensure_ascii=ascii_only)


@settings(max_examples=400, deadline=None)
@given(value=_values, ascii_only=st.booleans())
def test_quick_pass_refuses_exactly_what_the_naming_walk_refuses(
    value: Any, ascii_only: bool
) -> None:
    try:
        text = _as_client_sends(value, ascii_only=ascii_only)
    except UnicodeEncodeError:  # pragma: no cover - json.dumps writes lone surrogates as is
        return
    parsed = json.loads(text)
    assert _outcome(lambda: parse_json(text, "body")) == _outcome(
        lambda: json_input._check(parsed, "$", 0)
    )


def _nested(levels: int, leaf: str) -> str:
    return '{"a":' * levels + leaf + "}" * levels


@pytest.mark.parametrize("leaf", ["1", '"x"', "[]", "null"])
def test_nesting_is_limited_for_every_kind_of_leaf(leaf: str) -> None:
    parse_json(_nested(200, leaf), "body")  # the leaf at depth 200: kept
    with pytest.raises(ValidationFailed) as refused:
        parse_json(_nested(201, leaf), "body")
    [problem] = refused.value.problems
    assert problem.path == ".".join(["a"] * 201)
    assert problem.message == "nested deeper than 200 levels"


def test_a_lone_surrogate_sent_as_itself_is_refused_with_its_place() -> None:
    with pytest.raises(MalformedRequest, match=r"the string at a\.é contains a lone UTF-16"):
        parse_json('{"a": {"é": "x\ud835"}}', "body")


def test_an_escaped_nul_deep_in_a_large_body_is_named() -> None:
    body = {f"k{i}": {"v": [i, "text"]} for i in range(2000)}
    body["k1999"]["v"][1] = "te\x00xt"
    with pytest.raises(ValidationFailed) as refused:
        parse_json(json.dumps(body), "body")
    assert [p.path for p in refused.value.problems] == ["k1999.v[1]"]


def test_a_backslash_u_that_is_no_escape_is_plain_text() -> None:
    assert parse_json('{"k": "\\\\u0000"}', "body") == {"k": "\\u0000"}


# --- where malformed JSON goes wrong ------------------------------------------------------------

BODY_WITH_NAN = '{\n  "definitionName": "x",\n  "input": {"items": [1, 2, NaN]}\n}'


@pytest.mark.parametrize(
    ("text", "line", "column", "path", "why"),
    [
        (BODY_WITH_NAN, 3, 29, "input.items[2]", "NaN is not a JSON number"),
        ('{"a":\n [1, 1e400]}', 2, 6, "a[1]", "the number 1e400 is beyond the range of a double"),
        ("[1,\n  -Infinity]", 2, 3, "$[1]", "-Infinity is not a JSON number"),
        ('{"a": "NaN", "b": Infinity}', 1, 19, "b", "Infinity is not a JSON number"),
        ('{"a": {"b c": [1, 2,, 3]}}', 1, 21, 'a["b c"][2]', "Expecting value"),
        ('{"a": 1,,}', 1, 9, "$", "Expecting property name enclosed in double quotes"),
        ('{"a": {"b": 1}\n', 2, 1, "$", "Expecting ',' delimiter"),
        ('{"s": "bad \\q"}', 1, 12, "s", "Invalid \\escape"),
        ('{"a": 1} x', 1, 10, "$", "Extra data"),
        ("[1 2]", 1, 4, "$", "Expecting ',' delimiter"),
    ],
)
def test_malformed_json_names_its_line_column_and_path(
    text: str, line: int, column: int, path: str, why: str
) -> None:
    with pytest.raises(MalformedRequest) as refused:
        parse_json(text, "request body")
    e = refused.value
    assert e.detail.startswith(f"request body is not valid JSON at line {line}, column {column}")
    assert f"({path}): {why}" in e.detail
    [problem] = e.problems
    assert problem.path == path
    assert problem.message.startswith(why)
    assert problem.message.endswith(f"(line {line}, column {column})")


def test_a_number_in_range_near_a_bad_one_is_not_blamed() -> None:
    with pytest.raises(MalformedRequest) as refused:
        parse_json('{"big": 1.7976931348623157e308, "n": -0.5e-400, "bad": 1e309}', "body")
    assert refused.value.problems[0].path == "bad"


_TOKENS = ["{", "}", "[", "]", ",", ":", '"', " ", "\n", "\\", "a", "é", "NaN", "Infinity"]
_TOKENS += ["-Infinity", "1", "-0.5", "1e400", "2E-999", "true", "false", "null", '"k"', "\\u"]


@settings(max_examples=500, deadline=None)
@given(tokens=st.lists(st.sampled_from(_TOKENS), max_size=30))
def test_any_text_is_parsed_or_refused_with_a_place_never_a_crash(tokens: list[str]) -> None:
    text = "".join(tokens)
    try:
        parse_json(text, "body")
    except MalformedRequest as e:
        if e.problems:  # a lone surrogate is refused by its own rule; the rest say where
            [problem] = e.problems
            assert "(line " in problem.message, problem
            assert problem.path, problem
    except ValidationFailed:
        pass


def _refusal(check: Any) -> tuple[str, str, str] | None:
    try:
        check()
    except ValidationFailed as e:
        return ("422", type(e).__name__, repr(e.problems))
    except MalformedRequest as e:
        return ("400", type(e).__name__, f"{e.detail} {e.problems!r}")
    return None


@settings(max_examples=500, deadline=None)
@given(
    tokens=st.lists(
        st.sampled_from([*_TOKENS, "\\u0000", "\\ud835", "\x00", "\ud835"]), max_size=30
    )
)
def test_the_quick_body_check_refuses_what_the_parse_refuses_word_for_word(
    tokens: list[str],
) -> None:
    """``check_json_body`` (orjson first) for a body whose values pydantic reads from the text."""
    text = "".join(tokens)
    assert _refusal(lambda: json_input.check_json_body(text)) == _refusal(
        lambda: json_input.parse_json_body(text)
    )


@settings(max_examples=300, deadline=None)
@given(value=_values, ascii_only=st.booleans(), depth=st.sampled_from([0, 199, 200, 1100]))
def test_the_quick_body_check_agrees_on_values_and_nesting(
    value: Any, ascii_only: bool, depth: int
) -> None:
    try:
        text = '{"a":' * depth + _as_client_sends(value, ascii_only=ascii_only) + "}" * depth
    except UnicodeEncodeError:  # pragma: no cover - json.dumps writes lone surrogates as is
        return
    assert _refusal(lambda: json_input.check_json_body(text)) == _refusal(
        lambda: json_input.parse_json_body(text)
    )
