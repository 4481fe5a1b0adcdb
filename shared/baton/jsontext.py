"""Fast JSON for the engine's hot path (rows to and from PostgreSQL), exact where it matters.

orjson parses and serialises in C, several times faster than the standard library: on the
batched completion path it took a fifth off the client's CPU per job (JSON is three parses and
two serialisations of each job's rows). It differs from ``json`` in three ways, each handled so
the values Baton stores and returns are the ones ``json`` would give:

* **Integers beyond 64 bits.** orjson *parses* them as floats, losing digits, and refuses to
  *write* them. PostgreSQL's jsonb keeps any number exactly, so a text holding a run of 19 or
  more digits (every integer past 2**63 has one) is parsed by ``json`` instead; a value orjson
  refuses to write (such an integer, a non-string key, a lone surrogate) is written by ``json``.
* **NaN and infinities** are written as ``null`` by orjson, as ``NaN`` by ``json`` (which jsonb
  refuses). Neither enters through the API (``api.json_input`` refuses them at the edge).
* Output is compact UTF-8 bytes (``json`` escapes non-ASCII by default); jsonb stores the same
  value either way. The fallback writes as psycopg did (ASCII, escapes), so a lone surrogate is
  still refused by PostgreSQL, not by the encoder.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import orjson

# A run of 19 digits: the shortest integer orjson might not hold exactly (2**63 has 19). Found
# by mapping every ASCII digit to "0" and anything else to a space (``bytes.translate``), then
# searching for 19 zeros (a C substring search): about 1 ns a byte, where the regular expression
# ``\d{19}`` took 12 (a claim's 30 kB of JSON: 340 µs).
_DIGIT_RUN = b"0" * 19
_DIGITS_AS_ZEROS = bytes(0x30 if 0x30 <= b <= 0x39 else 0x20 for b in range(256))


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """JSON text (as jsonb comes back from PostgreSQL) to Python values."""
    raw = data.encode() if isinstance(data, str) else data
    # orjson reads bytes, bytearray and memoryview as they come (psycopg's buffers: no copy);
    # a text too short for 19 digits needs no search.
    if len(raw) < 19 or _DIGIT_RUN not in _bytes(raw).translate(_DIGITS_AS_ZEROS):
        return orjson.loads(raw)
    return json.loads(bytes(raw))


def _bytes(raw: bytes | bytearray | memoryview) -> bytes | bytearray:
    return raw if isinstance(raw, bytes | bytearray) else bytes(raw)


def dumps(value: Any) -> bytes:
    """Python values to compact JSON (UTF-8 bytes)."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return json.dumps(value, separators=(",", ":")).encode()


def dumps_sorted_line(value: Any) -> bytes:
    """``value`` as one line of compact JSON with its keys sorted, ending in a newline (UTF-8
    bytes): the same value always gives the same bytes (the archive's documents)."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS | orjson.OPT_APPEND_NEWLINE)
    except TypeError:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True)
        return text.encode() + b"\n"


# What json.dumps (ASCII, ``\\uXXXX`` escapes) may write for one byte of orjson's UTF-8: six
# characters for DEL (which orjson leaves as it is), at most three per byte of any other
# character; numbers and the rest alike or a character longer ("1e+16" for "1e16").
_ASCII_GROWTH = 6
# Python types orjson writes and json.dumps refuses: left to json.dumps (its TypeError).
_AS_JSON_DOES = (
    orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_SUBCLASS
)


def surely_within(value: Any, limit: int) -> bool:
    """Would ``json.dumps(value, separators=(",", ":"), allow_nan=False)`` certainly succeed
    with at most ``limit`` characters? Answered by orjson (several times faster) when its text
    alone says so: short enough that no escaping could take it past ``limit``, and without a
    ``null`` (where orjson writes NaN and the infinities, which json.dumps refuses). False
    means "measure it with json.dumps"."""
    try:
        text = orjson.dumps(value, option=_AS_JSON_DOES)
    except TypeError:
        return False
    return len(text) * _ASCII_GROWTH <= limit and b"null" not in text


def dumps_with(default: Callable[[Any], Any]) -> Callable[[Any], bytes]:
    """``dumps`` that turns what JSON has no type for through ``default`` (as ``json``'s own
    ``default=``); orjson writes UUIDs and datetimes natively, in the same ISO forms."""

    def dump(value: Any) -> bytes:
        try:
            return orjson.dumps(value, default=default)
        except TypeError:
            return json.dumps(value, separators=(",", ":"), default=default).encode()

    return dump
