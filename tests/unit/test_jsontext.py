"""baton.jsontext: orjson's speed with the standard library's values."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime

import pytest
from baton import jsontext
from hypothesis import given
from hypothesis import strategies as st

BIG = 123456789012345678901234567890


@pytest.mark.parametrize(
    "text",
    [
        b'{"a": 123456789012345678901234567890}',
        b'{"a": -9223372036854775809}',
        b'{"a": 18446744073709551616}',
        b'[9223372036854775807, 1.5, -0.0, 1e5, "x\\u00e9"]',
        b'{"a": 3.14159265358979323846264338327950288}',
        b'{"k": "1234567890123456789012"}',
    ],
)
def test_loads_gives_what_json_gives(text: bytes) -> None:
    assert jsontext.loads(text) == json.loads(text)
    assert jsontext.loads(memoryview(text)) == json.loads(text)
    assert jsontext.loads(text.decode()) == json.loads(text)


def test_integers_past_64_bits_round_trip_exactly() -> None:
    value = {"big": BIG, "neg": -(2**70), "list": [2**64, 1]}
    assert jsontext.loads(jsontext.dumps(value)) == value
    assert type(jsontext.loads(jsontext.dumps(value))["big"]) is int


def test_what_orjson_refuses_is_written_by_json() -> None:
    assert json.loads(jsontext.dumps({1: "non-string key"})) == {"1": "non-string key"}
    assert jsontext.dumps({"s": "\ud800"}) == b'{"s":"\\ud800"}'  # jsonb refuses it, as before


def test_dumps_with_default_writes_uuids_and_datetimes() -> None:
    u = uuid.uuid4()
    at = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    dump = jsontext.dumps_with(str)
    for n in (1, BIG):  # orjson, then (an integer it refuses) the standard library
        (row,) = json.loads(dump([{"id": u, "at": at, "n": n}]))
        assert (row["id"], datetime.fromisoformat(row["at"]), row["n"]) == (str(u), at, n)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=st.characters(blacklist_categories=("Cs",))),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


@given(json_values)
def test_any_json_value_round_trips_as_json_would(value: object) -> None:
    text = jsontext.dumps(value)
    assert jsontext.loads(text) == json.loads(json.dumps(value))


any_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()  # NaN and the infinities too
    | st.text(alphabet=st.characters(blacklist_categories=("Cs",))),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.text(max_size=8) | st.integers(), children, max_size=4)
    ),
    max_leaves=20,
)


@given(any_values, st.integers(min_value=0, max_value=400))
def test_surely_within_never_passes_what_json_dumps_would_refuse(value: object, limit: int) -> None:
    if jsontext.surely_within(value, limit):
        assert len(json.dumps(value, separators=(",", ":"), allow_nan=False)) <= limit


@pytest.mark.parametrize(
    "value",
    [
        {"x": float("nan")},
        [float("inf")],
        {"x": "\x7f" * 10},  # orjson: 10 bytes; json.dumps: 60 characters
        {"x": "é" * 10},
        {1: "a non-string key"},
        {"x": BIG},
        {"x": datetime(2026, 1, 1, tzinfo=UTC)},  # json.dumps refuses it: so must the check
    ],
)
def test_surely_within_leaves_to_json_dumps_what_it_cannot_tell(value: object) -> None:
    size = len(jsontext.dumps(value))
    assert not jsontext.surely_within(value, size * 5)


def test_surely_within_passes_a_small_plain_value() -> None:
    assert jsontext.surely_within({"ok": True, "n": [1, 2.5, "text"]}, 1000)


@given(st.lists(st.sampled_from([b"0", b"7", b"9", b"1" * 9, b"-", b".", b"e", b" ", b"\xc3\xa9"])))
def test_the_long_digit_search_finds_what_the_regular_expression_finds(parts: list[bytes]) -> None:
    """``loads`` looks for a run of 19 ASCII digits (an integer orjson may not hold) by
    translating digits to zeros: it must find one exactly where ``\\d{19}`` would."""
    import re

    raw = b"".join(parts)
    found = jsontext._DIGIT_RUN in raw.translate(jsontext._DIGITS_AS_ZEROS)
    assert found == (re.search(rb"\d{19}", raw) is not None)
