"""Where a JSON text goes wrong: the line, the column and the JSON path of the value there.

Only called once a text was refused (see ``json_input``), so it may take its time: it walks the
text token by token, keeping the path of the value being read, up to the offset of a syntax
error, or up to the first thing strict JSON has no number for (``NaN``, ``Infinity``, a number
beyond a double), which ``json.loads`` does not place.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from json.decoder import scanstring  # type: ignore[attr-defined]  # public, untyped in typeshed
from json.scanner import NUMBER_RE

_WHITESPACE = " \t\n\r"
_LITERALS = ("true", "false", "null")
_NOT_NUMBERS = ("NaN", "Infinity", "-Infinity")


@dataclass(frozen=True, slots=True)
class Where:
    """A place in a JSON text: 1-based line and column, and the path of the value there."""

    line: int
    column: int
    path: str

    def __str__(self) -> str:
        return f"line {self.line}, column {self.column}"


@dataclass(slots=True)
class _Frame:
    """An open container: an object (``key`` being read, ``after_colon``) or an array
    (``index`` of the element being read)."""

    is_object: bool
    key: str | None = None
    after_colon: bool = False
    index: int = 0
    member_read: bool = False  # the member's value is complete: a place after it is the container's


def _path(stack: list[_Frame]) -> str:
    path = "$"
    for frame in stack:
        if frame.member_read:
            break  # only the innermost frame can be between members
        if not frame.is_object:
            path = f"{path}[{frame.index}]"
        elif frame.key is not None:
            path = _join(path, frame.key)
    return path


def _join(path: str, key: str) -> str:
    if key.isidentifier():
        return key if path == "$" else f"{path}.{key}"
    quoted = json.dumps(key, ensure_ascii=True)
    return f"{path}[{quoted}]"


def _value_read(stack: list[_Frame]) -> None:
    if stack:
        stack[-1].member_read = True


def _where(raw: str, offset: int, stack: list[_Frame]) -> Where:
    line = raw.count("\n", 0, offset) + 1
    column = offset - (raw.rfind("\n", 0, offset) + 1) + 1
    return Where(line, column, _path(stack))


def locate(raw: str, offset: int | None = None) -> Where | None:
    """Where ``raw`` goes wrong: at ``offset`` (a syntax error's position), or, without one, at
    the first ``NaN``, ``Infinity`` or number beyond a double. None if neither is found."""
    stack: list[_Frame] = []
    i, n = 0, len(raw)
    while i < n:
        if offset is not None and i >= offset:
            break
        c = raw[i]
        if c in _WHITESPACE:
            i += 1
        elif c in "{[":
            stack.append(_Frame(is_object=c == "{"))
            i += 1
        elif c in "}]":
            if stack:
                stack.pop()
            _value_read(stack)
            i += 1
        elif c == ",":
            if stack and stack[-1].is_object:
                stack[-1].key, stack[-1].after_colon = None, False
            elif stack:
                stack[-1].index += 1
            if stack:
                stack[-1].member_read = False
            i += 1
        elif c == ":":
            if stack and stack[-1].is_object:
                stack[-1].after_colon = True
            i += 1
        elif c == '"':
            try:
                text, i = scanstring(raw, i + 1)
            except ValueError:
                break  # the error is in this string: say where it starts
            top = stack[-1] if stack else None
            if top is not None and top.is_object and not top.after_colon:
                top.key = text
            else:
                _value_read(stack)
        elif offset is None and raw.startswith(_NOT_NUMBERS, i):
            return _where(raw, i, stack)
        else:
            number = NUMBER_RE.match(raw, i)
            if number is not None:
                _, fraction, exponent = number.groups()
                beyond = (fraction or exponent) and math.isinf(float(number.group()))
                if offset is None and beyond:
                    return _where(raw, i, stack)
                i = number.end()
                _value_read(stack)
            elif raw.startswith(_LITERALS, i):
                i += 4 if raw[i] in "tn" else 5
                _value_read(stack)
            else:
                break
    if offset is None:
        return None
    return _where(raw, min(offset, n), stack)
