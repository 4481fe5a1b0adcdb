"""pydantic's validation errors told in Baton's words: where (a JSON path such as
``steps[2].retryCount``) and a plain sentence naming the field, what it must be and what it was.

pydantic's own messages ("Input should be a valid integer") speak of Python, not of the API;
each error type our request and definition models can raise has a sentence here, and anything
else falls back to pydantic's message, so a new type never loses the problem.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from baton.errors import Problem

# The tags of a discriminated union (step types) appear in pydantic's locations; they are not keys
# of the JSON document, so they are left out of paths (and said in words where it helps).
Loc = tuple[int | str, ...]
NO_DOCUMENT: Any = object()
Sentence = Callable[[str, Any, Mapping[str, Any]], str]


def problems(
    err: ValidationError,
    *,
    tags: Sequence[str] = (),
    pattern_rules: Mapping[str, str] | None = None,
    document: Any = NO_DOCUMENT,
) -> list[Problem]:
    """Every error of ``err`` as a :class:`Problem`. ``tags``: discriminator values that may
    appear in locations (left out of paths); ``pattern_rules``: a regex -> the rule in words;
    ``document``: the JSON that was validated, which tells the keys of the document from the
    labels pydantic puts in a location for each member of a union it tried."""
    rules = pattern_rules or {}
    errors = [
        {**e, "loc": _document_loc(tuple(e["loc"]), document, missing=e["type"] == "missing")}
        for e in err.errors(include_url=False)
    ]
    return [_problem(e, tags, rules) for e in _best_members(errors)]


def _is_label(part: int | str) -> bool:
    """Is ``part`` a union member's label (``list[SwitchCase]``, ``function-after[...]``)?"""
    return isinstance(part, str) and "[" in part


def _document_loc(loc: Loc, document: Any, *, missing: bool = False) -> Loc:
    """``loc`` with pydantic's union labels marked: each is replaced by a :class:`_Member` (the
    label and where it was), so that paths leave it out and :func:`_best_members` can pick. With
    the ``document``, a part is a label when it is no key of the object it stands in (exact);
    without, when it looks like one (``name[...]``). ``missing``: the error says its last part is
    absent, so that part is a key the document lacks, not a label."""
    out: list[int | str] = []
    node = document
    for i, part in enumerate(loc):
        if missing and i == len(loc) - 1:
            out.append(part)
            break
        if document is NO_DOCUMENT:
            label = _is_label(part)
        elif isinstance(part, int):
            label = not isinstance(node, list)
            node = node[part] if not label and part < len(node) else node
        else:
            label = not (isinstance(node, Mapping) and part in node)
            node = node[part] if not label else node
        out.append(_Member(str(part), tuple(out)) if label else part)
    return tuple(out)


class _Member(str):
    """A union member's label in a location (not a key of the document)."""

    at: Loc

    def __new__(cls, label: str, at: Loc) -> _Member:
        made = super().__new__(cls, label)
        made.at = at
        return made


_TYPE_ONLY = frozenset(
    {
        "list_type",
        "dict_type",
        "model_type",
        "model_attributes_type",
        "string_type",
        "int_type",
        "bool_type",
        "float_type",
        "none_required",
        "is_instance_of",
    }
)


def _best_members(errors: list[Any]) -> list[Any]:
    """Of the errors of one union, those of the members the value could be: a member that only
    says "not my type" at its root is dropped when another member of that union got further
    (``cases`` given as an object with a wrong case: that case's error, not "must be a
    list")."""
    deeper: set[tuple[Loc, str]] = set()
    for e in errors:
        loc = e["loc"]
        for i, part in enumerate(loc):
            if isinstance(part, _Member) and not (e["type"] in _TYPE_ONLY and i == len(loc) - 1):
                deeper.add((part.at, str(part)))

    def wrong_type_only(e: Any) -> bool:
        loc = e["loc"]
        if not loc or not isinstance(loc[-1], _Member) or e["type"] not in _TYPE_ONLY:
            return False
        at = loc[-1].at
        return any(other_at == at and label != loc[-1] for other_at, label in deeper)

    kept = [e for e in errors if not wrong_type_only(e)]
    return kept or errors


def _problem(e: Any, tags: Sequence[str], rules: Mapping[str, str]) -> Problem:
    # The step type nearest the field (a SERVICE_TASK inside a SWITCH's case is the former).
    tag = next((str(p) for p in reversed(e["loc"]) if isinstance(p, str) and p in tags), None)
    loc: Loc = tuple(p for p in e["loc"] if not isinstance(p, _Member))
    kind = e["type"]
    ctx: Mapping[str, Any] = e.get("ctx") or {}
    keys = tuple(p for p in loc if p not in tags or not isinstance(p, str))
    if kind in ("union_tag_invalid", "union_tag_not_found"):
        keys = (*keys, _unquote(str(ctx.get("discriminator", "type"))))
    path = json_path(keys)
    field = _field(keys)
    value = e.get("input")
    if kind == "string_pattern_mismatch":
        rule = rules.get(str(ctx.get("pattern")))
        if rule is not None:
            return Problem(path, f"{field} {_show(value)} is not valid: {rule}")
    if kind == "missing" and tag is not None:
        return Problem(path, f"{field} is required for a {tag} step")
    if kind == "union_tag_not_found" and tags:
        return Problem(path, f"{field} is required: one of {', '.join(tags)}")
    sentence = _SENTENCES.get(kind)
    if sentence is None:  # a type no model of ours raises today: pydantic's words, not nothing
        return Problem(path, f"{field}: {e['msg'][:1].lower()}{e['msg'][1:]}")
    return Problem(path, sentence(field, value, ctx))


def json_path(loc: Loc) -> str:
    """``('steps', 2, 'retryCount')`` -> ``steps[2].retryCount``; the whole document is ``$``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "$"


def _field(keys: Loc) -> str:
    """How a sentence names the field: its key with any indexes after it (``jobTypes[2]``)."""
    tail = ""
    for part in reversed(keys):
        if isinstance(part, int):
            tail = f"[{part}]{tail}"
        else:
            return f"{part}{tail}"
    return f"the value{tail}" if tail else "the request body"


def _unquote(text: str) -> str:
    return text.strip("'\"")


def _choices(expected: Any) -> str:
    """pydantic's ``"'A', 'B' or 'C'"`` as ``A, B, C``."""
    found = re.findall(r"'([^']*)'", str(expected))
    return ", ".join(found) if found else str(expected)


def _number(value: Any) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return str(value)


def _show(value: Any) -> str:
    """A value as JSON, cut short."""
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _what(value: Any) -> str:
    """The JSON kind of a value that had the wrong one, with the value where it is short."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f"the text {_show(value)}"
    if isinstance(value, int | float):
        return _show(value)
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list | tuple):
        return "a list"
    return _show(value)


def _must_be(what: str) -> Sentence:
    return lambda field, value, ctx: f"{field} must be {what}, not {_what(value)}"


def _too_short_text(field: str, value: Any, ctx: Mapping[str, Any]) -> str:
    least = int(ctx.get("min_length", 1))
    if least <= 1:
        return f"{field} must not be empty"
    return f"{field} must be at least {least} characters long"


def _too_long_text(field: str, value: Any, ctx: Mapping[str, Any]) -> str:
    has = f" (it has {len(value)})" if isinstance(value, str) else ""
    return f"{field} must be at most {ctx.get('max_length')} characters long{has}"


def _too_few(field: str, value: Any, ctx: Mapping[str, Any]) -> str:
    least = int(ctx.get("min_length", 1))
    if least <= 1:
        return f"{field} must not be empty"
    return f"{field} needs at least {least} items (it has {ctx.get('actual_length')})"


def _too_many(field: str, value: Any, ctx: Mapping[str, Any]) -> str:
    return (
        f"{field} may have at most {ctx.get('max_length')} items "
        f"(it has {ctx.get('actual_length')})"
    )


def _bound(words: str, key: str) -> Sentence:
    return lambda field, value, ctx: (
        f"{field} must be {words} {_number(ctx.get(key))}, not {_number(value)}"
    )


def _choice(field: str, value: Any, ctx: Mapping[str, Any]) -> str:
    return f"{field} must be one of {_choices(ctx.get('expected'))}, not {_show(value)}"


def _tag_invalid(field: str, value: Any, ctx: Mapping[str, Any]) -> str:
    return (
        f"{field} must be one of {_choices(ctx.get('expected_tags'))}, not {_show(ctx.get('tag'))}"
    )


def _pattern(field: str, value: Any, ctx: Mapping[str, Any]) -> str:
    return f"{field} {_show(value)} does not match the pattern {ctx.get('pattern')}"


_SENTENCES: dict[str, Sentence] = {
    "missing": lambda field, value, ctx: f"{field} is required",
    "extra_forbidden": lambda field, value, ctx: (
        f"{field} is not a field Baton knows here; check its spelling"
    ),
    "int_type": _must_be("a whole number"),
    "int_from_float": _must_be("a whole number"),
    "int_parsing": _must_be("a whole number"),
    "string_type": _must_be("text (a JSON string)"),
    "bool_type": _must_be("true or false"),
    "bool_parsing": _must_be("true or false"),
    "float_type": _must_be("a number"),
    "float_parsing": _must_be("a number"),
    "finite_number": _must_be("a finite number"),
    "list_type": _must_be("a list (a JSON array)"),
    "tuple_type": _must_be("a list (a JSON array)"),
    "dict_type": _must_be("an object"),
    "model_type": _must_be("an object"),
    "model_attributes_type": _must_be("an object"),
    "datetime_type": _must_be("a date and time (RFC 3339)"),
    "datetime_parsing": _must_be("a date and time (RFC 3339)"),
    "string_too_short": _too_short_text,
    "string_too_long": _too_long_text,
    "too_short": _too_few,
    "too_long": _too_many,
    "string_pattern_mismatch": _pattern,
    "enum": _choice,
    "literal_error": _choice,
    "greater_than_equal": _bound("at least", "ge"),
    "greater_than": _bound("more than", "gt"),
    "less_than_equal": _bound("at most", "le"),
    "less_than": _bound("less than", "lt"),
    "union_tag_invalid": _tag_invalid,
    "union_tag_not_found": lambda field, value, ctx: f"{field} is required",
}
