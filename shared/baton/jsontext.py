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
import re
from collections.abc import Callable
from typing import Any

import orjson

# A run of 19 digits: the shortest integer orjson might not hold exactly (2**63 has 19).
_LONG_DIGITS = re.compile(rb"\d{19}")


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """JSON text (as jsonb comes back from PostgreSQL) to Python values."""
    raw = data.encode() if isinstance(data, str) else data
    # orjson reads bytes, bytearray and memoryview as they come (psycopg's buffers: no copy);
    # a text too short for 19 digits needs no search.
    if len(raw) < 19 or _LONG_DIGITS.search(raw) is None:
        return orjson.loads(raw)
    return json.loads(bytes(raw))


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


def dumps_with(default: Callable[[Any], Any]) -> Callable[[Any], bytes]:
    """``dumps`` that turns what JSON has no type for through ``default`` (as ``json``'s own
    ``default=``); orjson writes UUIDs and datetimes natively, in the same ISO forms."""

    def dump(value: Any) -> bytes:
        try:
            return orjson.dumps(value, default=default)
        except TypeError:
            return json.dumps(value, separators=(",", ":"), default=default).encode()

    return dump
