"""What a handler may return: a mapping of variables (or None) that encodes as strict JSON and
that Baton can store. A result that breaks these rules is a bug in the handler; retrying it
cannot help, so the runner fails the job at once, saying where the problem is.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def result_problem(result: object, handler_name: str) -> str | None:
    """Why the runner cannot complete a job with ``result``, or None when it can."""
    if result is None:
        return None
    if not isinstance(result, Mapping):
        return (
            f"handler {handler_name} returned {type(result).__name__}; "
            "return a dict of variables, or None"
        )
    problem = json_problem(result if isinstance(result, dict) else dict(result))
    return None if problem is None else f"the handler's result cannot be sent: {problem}"


def json_problem(value: Any) -> str | None:
    """Why ``value`` cannot be sent as strict JSON and stored by Baton, or None.

    Strict JSON has no NaN or Infinity, and only dicts, lists, strings, numbers, booleans and
    null; PostgreSQL (jsonb and text alike) cannot store the NUL character, so neither can Baton.
    """
    try:
        text = json.dumps(value, allow_nan=False, ensure_ascii=False)
        text.encode("utf-8")
    except (TypeError, ValueError, RecursionError):
        pass  # find out where, below
    else:
        if "\\u0000" not in text:  # json.dumps escapes NUL this way; anything else is fine
            return None
    try:
        return _find(value, "$", set()) or None
    except RecursionError:
        return "it is nested too deeply to encode"


def _find(value: Any, path: str, ancestors: set[int]) -> str | None:
    if value is None or isinstance(value, bool | int):
        return None
    if isinstance(value, float):
        if math.isnan(value):
            return f"{path} is NaN, which is not JSON"
        if math.isinf(value):
            return f"{path} is {'-' if value < 0 else ''}Infinity, which is not JSON"
        return None
    if isinstance(value, str):
        return _text_problem(value, path)
    if isinstance(value, dict | list | tuple):
        if id(value) in ancestors:
            return f"{path} contains itself (a circular reference), which is not JSON"
        ancestors.add(id(value))
        try:
            if isinstance(value, dict):
                return _find_in_object(value, path, ancestors)
            for index, item in enumerate(value):
                problem = _find(item, f"{path}[{index}]", ancestors)
                if problem:
                    return problem
            return None
        finally:
            ancestors.discard(id(value))
    name = type(value).__name__
    return f"{path} is {'an' if name[0] in 'aeiouAEIOU' else 'a'} {name}, which is not JSON"


def _find_in_object(value: dict[Any, Any], path: str, ancestors: set[int]) -> str | None:
    for key, item in value.items():
        if not isinstance(key, str | int | float | bool) and key is not None:
            return f"{path} has a key of type {type(key).__name__}, which is not JSON"
        if isinstance(key, str):
            problem = _text_problem(key, f"a key of {path}")
            if problem:
                return problem
        problem = _find(item, _member(path, str(key)), ancestors)
        if problem:
            return problem
    return None


def _text_problem(text: str, where: str) -> str | None:
    if "\x00" in text:
        return f"{where} contains a NUL character (\\u0000), which Baton cannot store"
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return f"{where} contains a lone surrogate, which is not UTF-8"
    return None


def _member(path: str, key: str) -> str:
    return f"{path}.{key}" if _IDENTIFIER.match(key) else f"{path}[{json.dumps(key)}]"


__all__ = ["json_problem", "result_problem"]
