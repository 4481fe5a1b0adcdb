"""What a handler may return: the checks that run before a result is sent, and where they say
the problem is."""

from __future__ import annotations

from typing import Any

import pytest
from baton_worker._results import json_problem, result_problem


@pytest.mark.parametrize(
    "value",
    [
        {},
        {"a": [1, 2.5, None, True, "é", {"b": []}], "n": -0.0},
        {"escaped": "\\u0000 is only text here"},
        {1: "int keys become strings", None: "so does None"},
    ],
)
def test_json_baton_can_store_has_no_problem(value: Any) -> None:
    assert json_problem(value) is None


def test_a_circular_reference_is_named_where_it_closes() -> None:
    value: dict[str, Any] = {"items": []}
    value["items"].append(value)
    assert json_problem(value) == (
        "$.items[0] contains itself (a circular reference), which is not JSON"
    )


def test_a_value_shared_twice_is_not_a_cycle() -> None:
    shared = {"x": 1}
    assert json_problem({"a": shared, "b": [shared, shared]}) is None


def test_keys_that_are_not_identifiers_are_quoted() -> None:
    assert json_problem({"odd key": {"x-y": float("nan")}}) == (
        '$["odd key"]["x-y"] is NaN, which is not JSON'
    )


def test_text_problems_in_keys_and_values() -> None:
    assert json_problem({"k\x00": 1}) == (
        "a key of $ contains a NUL character (\\u0000), which Baton cannot store"
    )
    assert json_problem(["\ud800"]) == "$[0] contains a lone surrogate, which is not UTF-8"


def test_nesting_too_deep_to_encode_says_so() -> None:
    deep: list[Any] = []
    for _ in range(100_000):
        deep = [deep]
    assert json_problem(deep) == "it is nested too deeply to encode"


def test_result_must_be_a_mapping_or_none() -> None:
    assert result_problem(None, "h") is None
    assert result_problem({"a": 1}, "h") is None
    assert result_problem((("a", 1),), "h") == (
        "handler h returned tuple; return a dict of variables, or None"
    )
    assert result_problem({"x": {1, 2}}, "h") == (
        "the handler's result cannot be sent: $.x is a set, which is not JSON"
    )
