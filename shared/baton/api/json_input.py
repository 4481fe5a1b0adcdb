"""Reading JSON from the outside world strictly, so bad input is refused where it enters.

Python's ``json`` accepts more than RFC 8259 JSON: ``NaN``, ``Infinity`` and ``-Infinity``, numbers
beyond a double (``1e400`` becomes infinity), and escapes of lone UTF-16 surrogates (``"\\ud835"``)
that no UTF-8 text can hold. PostgreSQL cannot store NUL characters in text or jsonb. Each of these
is refused here with a 400 (not JSON) or a 422 (JSON that Baton cannot keep) that says where.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import orjson

from baton.api.json_locate import Where, locate
from baton.errors import MalformedRequest, Problem, ValidationFailed

_SURROGATE = re.compile(r"[\ud800-\udfff]")
_BAD_TEXT = re.compile(r"[\x00\ud800-\udfff]")  # what check_string refuses
_MAX_DEPTH = 200  # far deeper than any real document; bounds the recursive checks below


def parse_json_body(raw: str | None) -> Any:
    """The request body as JSON; an empty body is an empty object."""
    if raw is None or not raw.strip():
        return {}
    return parse_json(raw, "request body")


def check_json_body(raw: str | None) -> Any:
    """The body checked as :func:`parse_json_body` checks it (the same refusals, word for word),
    for a caller that reads the values from the text itself (a model validated from JSON): the
    value returned may be inexact (orjson reads an integer past 64 bits as a float). orjson
    refuses everything strict parsing refuses, several times faster; what it refuses (and a
    lone surrogate, which it refuses where ``json`` parses it for :func:`check_text` to name)
    goes through :func:`parse_json` for its refusal."""
    if raw is None or not raw.strip():
        return {}
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return parse_json(raw, "request body")
    check_text(value, "$", strings=_may_hold_bad_text(raw))
    return value


def parse_json(raw: str, what: str, *, strings: bool = True) -> Any:
    """Strict JSON: finite numbers only, no lone surrogates, no NUL characters. ``strings=False``
    leaves the strings unchecked (only the nesting is), for a caller that checks parts of the
    value on its own (a batch's items, each refused alone)."""
    try:
        value = json.loads(raw, parse_constant=_constant, parse_float=_finite_float)
    except _NotJson as e:
        raise _not_json(what, str(e), locate(raw)) from None
    except json.JSONDecodeError as e:
        raise _not_json(what, e.msg, locate(raw, e.pos)) from None
    except (RecursionError, ValueError) as e:
        raise MalformedRequest(f"{what} is not valid JSON: {e}") from None
    # A NUL or a lone surrogate reaches a parsed string only through a \u escape (JSON refuses
    # raw control characters in strings), or as itself in the text: without either in the text,
    # no string needs looking at, only the nesting.
    check_text(value, "$", strings=strings and _may_hold_bad_text(raw))
    return value


def _not_json(what: str, why: str, where: Where | None) -> MalformedRequest:
    """The refusal, saying where: ``request body is not valid JSON at line 3, column 8
    (items[2]): NaN is not a JSON number ...``, with the path in ``errors``."""
    if where is None:
        return MalformedRequest(f"{what} is not valid JSON: {why}")
    message = f"{why} (line {where.line}, column {where.column})"
    return MalformedRequest(
        f"{what} is not valid JSON at {where} ({where.path}): {why}",
        [Problem(where.path, message)],
    )


def _may_hold_bad_text(raw: str) -> bool:
    """Whether a string parsed from ``raw`` may hold what :func:`check_string` refuses: the text
    has a ``\\u`` escape, a NUL, or (only possible outside ASCII) a surrogate itself."""
    return "\\u" in raw or "\x00" in raw or (not raw.isascii() and bool(_SURROGATE.search(raw)))


_SURROGATE_REASON = "contains a lone UTF-16 surrogate escape, which is not valid Unicode text"


class LoneSurrogate(MalformedRequest):
    """A key or string holding a lone UTF-16 surrogate (400: not Unicode text); ``path`` and
    ``reason`` name it for a caller that refuses only the part holding it (a batch's item)."""

    def __init__(self, path: str, what: str) -> None:
        self.path = path
        self.reason = f"this {what} {_SURROGATE_REASON}"
        super().__init__(f"the {what} at {path} {_SURROGATE_REASON}")


class _NotJson(ValueError):
    pass


def _constant(name: str) -> Any:
    raise _NotJson(f"{name} is not a JSON number (send a finite number, or null)")


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise _NotJson(f"the number {text} is beyond the range of a double")
    return value


def check_text(value: Any, path: str, depth: int = 0, *, strings: bool = True) -> None:
    """Refuse NUL characters (422) and lone surrogates (400) in every key and string, and
    nesting deeper than ``_MAX_DEPTH``. ``strings=False``: the caller knows no string can hold
    either (see :func:`parse_json`), so only the nesting is checked."""
    if not _clean(value, depth, strings):
        _check(value, path, depth)  # the same checks again, naming where; raises


def _clean(value: Any, depth: int, strings: bool) -> bool:
    """Whether ``value`` passes :func:`_check`, without building a path for every key (most
    bodies pass): one pass over the containers, and over the strings only when ``strings``."""
    level: list[Any] = [value]
    while level:
        if depth > _MAX_DEPTH:
            return False
        below: list[Any] = []
        for item in level:
            if isinstance(item, dict):
                if strings and any(_BAD_TEXT.search(key) for key in item):
                    return False
                below.extend(item.values())
            elif isinstance(item, list):
                below.extend(item)
            elif strings and isinstance(item, str) and _BAD_TEXT.search(item):
                return False
        level = below
        depth += 1
    return True


def _check(value: Any, path: str, depth: int) -> None:
    if depth > _MAX_DEPTH:
        raise ValidationFailed([Problem(path, f"nested deeper than {_MAX_DEPTH} levels")])
    if isinstance(value, str):
        check_string(value, path)
    elif isinstance(value, dict):
        for key, item in value.items():
            sub = _join(path, key)
            check_string(key, sub, key=True)
            _check(item, sub, depth + 1)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _check(item, f"{path}[{i}]", depth + 1)


def is_clean(text: str) -> bool:
    """Whether ``text`` passes :func:`check_string` (no NUL, no lone surrogate)."""
    return _BAD_TEXT.search(text) is None


def check_string(text: str, path: str, *, key: bool = False) -> None:
    """One string (a key, a value, a query or path parameter)."""
    what = "key" if key else "string"
    if "\x00" in text:
        raise ValidationFailed(
            [
                Problem(
                    path, f"this {what} contains a NUL character (U+0000), which Baton cannot store"
                )
            ]
        )
    if _SURROGATE.search(text):
        raise LoneSurrogate(path, what)


def _join(path: str, key: str) -> str:
    safe = key if key.isidentifier() else json.dumps(key, ensure_ascii=True)
    if path == "$":
        return safe if key.isidentifier() else f"$[{safe}]"
    return f"{path}.{safe}" if key.isidentifier() else f"{path}[{safe}]"
