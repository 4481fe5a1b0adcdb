"""The JSONPath part of a ``${…}`` path, as Jayway json-path 2.4 (what Conductor's
``ParametersUtils`` reads with, ``SUPPRESS_EXCEPTIONS`` on) reads it.

``baton.expressions`` walks a path's plain prefix (``.key``, ``[0]``, ``['key']``) itself, the
common case; from the first step that is not plain on, the rest of the path is a :class:`Query`:
recursive descent ``..key`` / ``..*`` / ``..[…]``, wildcards ``.*`` / ``[*]``, negative indexes
``[-1]``, index unions ``[0,2]``, slices ``[1:3]`` / ``[:2]`` / ``[-2:]``, key unions
``['a','b']`` and filters ``[?(@.price > 10)]``.

As Jayway: a *definite* query (no descent, wildcard, slice, filter or index union) gives the value
it reaches, or None when it reaches nothing; any other gives the list of what it matched, in
document order, ``[]`` when nothing matched. A key union at the path's end gives one object of the
keys present (Jayway merges them). Filters take ``@`` paths, literals (numbers, quoted text,
``true``, ``false``, ``null``, lists), ``==`` ``!=`` ``<`` ``<=`` ``>`` ``>=`` ``in`` ``nin``
``subsetof`` ``anyof`` ``noneof`` ``size`` ``empty``, ``&&``, ``||``, ``!`` and parentheses; a
lone ``@.x`` tests that ``x`` exists. Regular expressions (``=~``) are refused (no regex runs on
a definition's say), as are ``$`` paths inside a filter.

Bounded: a query is at most 1,000 characters and nests filters at most 8 deep; descent walks
iteratively and no deeper than 256 levels.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

MAX_QUERY_CHARS = 1_000
MAX_FILTER_DEPTH = 8
MAX_DESCENT_DEPTH = 256


class QueryError(ValueError):
    """A JSONPath query that cannot be parsed."""


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*|\d+")
_INT = re.compile(r"\s*(-?\d+)\s*")
_QUOTED = re.compile(r"\s*(?:'([^']*)'|\"([^\"]*)\")\s*")
_SLICE = re.compile(r"\[\s*(-?\d+)?\s*:\s*(-?\d+)?\s*\]")

# A step: (kind, argument). kinds: key, keys, index, indexes, slice, wild, descend, filter.
Step = tuple[str, Any]


@dataclass(frozen=True, slots=True)
class Query:
    steps: tuple[Step, ...]
    definite: bool

    def apply(self, value: Any) -> Any:
        matches = list(_run(self.steps, [value]))
        if self.definite:
            return matches[0] if matches else None
        return matches


_MISSING = object()


def _select(step: Step, node: Any) -> Iterator[Any]:
    kind, arg = step
    if kind == "key":
        if isinstance(node, Mapping) and arg in node:
            yield node[arg]
        elif isinstance(node, list) and arg.isdigit() and int(arg) < len(node):
            yield node[int(arg)]
    elif kind == "keys":  # a union in the path's middle: each key present
        if isinstance(node, Mapping):
            yield from (node[k] for k in arg if k in node)
    elif kind == "merge":  # a union at the path's end: one object of the keys present
        if isinstance(node, Mapping):
            yield {k: node[k] for k in arg if k in node}
    elif kind in {"index", "indexes"}:
        if isinstance(node, list):
            for i in arg if kind == "indexes" else (arg,):
                if -len(node) <= i < len(node):
                    yield node[i]
    elif kind == "slice":
        if isinstance(node, list):
            yield from node[arg[0] : arg[1]]
    elif kind == "wild":
        if isinstance(node, Mapping):
            yield from node.values()
        elif isinstance(node, list):
            yield from node
    elif kind == "filter":
        if isinstance(node, list):
            yield from (item for item in node if _truthy(arg, item))
        elif isinstance(node, Mapping) and _truthy(arg, node):
            yield node
    elif kind == "descend":
        if arg[0] == "key":  # ..key, the common descent: no generator per node
            key = arg[1]
            for inner in _descendants(node):
                if isinstance(inner, Mapping) and key in inner:
                    yield inner[key]
            return
        for inner in _descendants(node):
            yield from _select(arg, inner)


def _descendants(node: Any) -> Iterator[Any]:
    """The node and everything under it, in document order (pre-order), iteratively."""
    stack: list[tuple[Any, int]] = [(node, 0)]
    while stack:
        current, depth = stack.pop()
        yield current
        if depth >= MAX_DESCENT_DEPTH:
            continue
        children = (
            current.values()
            if isinstance(current, Mapping)
            else current
            if isinstance(current, list)
            else ()
        )
        stack.extend((c, depth + 1) for c in reversed(list(children)))


def _run(steps: tuple[Step, ...], nodes: list[Any]) -> Iterator[Any]:
    for step in steps:
        nodes = [out for node in nodes for out in _select(step, node)]
    yield from nodes


# --- parsing -------------------------------------------------------------------------------------


def parse_query(text: str, at: int, whole: str, depth: int = 0) -> tuple[Query, int]:
    """Parse steps of ``text`` from ``at`` until its end (or, inside a filter, until a step
    cannot start). Returns the query and where it stopped."""
    if len(text) - at > MAX_QUERY_CHARS:
        raise QueryError(f"${{{whole}}}: a JSONPath is at most {MAX_QUERY_CHARS} characters")
    steps: list[Step] = []
    while at < len(text):
        if text.startswith("..", at):
            at += 2
            if text.startswith("*", at):
                inner: Step = ("wild", None)
                at += 1
            elif text.startswith("[", at):
                inner, at = _bracket(text, at, whole, depth)
            elif m := _NAME.match(text, at):
                inner, at = ("key", m.group(0)), m.end()
            else:
                raise QueryError(f"${{{whole}}}: '..' is followed by a key, * or [...]")
            steps.append(("descend", inner))
        elif text.startswith(".", at):
            at += 1
            if text.startswith("*", at):
                steps.append(("wild", None))
                at += 1
            elif m := _NAME.match(text, at):
                steps.append(("key", m.group(0)))
                at = m.end()
            else:
                raise QueryError(f"${{{whole}}}: bad path segment {text[at:]!r}")
        elif text.startswith("[", at):
            step, at = _bracket(text, at, whole, depth)
            steps.append(step)
        elif depth > 0:
            break
        else:
            raise QueryError(f"${{{whole}}}: bad path segment {text[at:]!r}")
    if steps and steps[-1][0] == "keys":
        steps[-1] = ("merge", steps[-1][1])
    definite = all(kind in ("key", "index", "merge") for kind, _ in steps)
    return Query(tuple(steps), definite), at


def _bracket(text: str, at: int, whole: str, depth: int) -> tuple[Step, int]:
    if text.startswith("[*]", at):
        return ("wild", None), at + 3
    if text.startswith("[?(", at):
        if depth >= MAX_FILTER_DEPTH:
            raise QueryError(f"${{{whole}}}: filters nest at most {MAX_FILTER_DEPTH} deep")
        parser = _FilterParser(text, at + 3, whole, depth + 1)
        expr = parser.parse_or()
        parser.skip()
        if not text.startswith(")]", parser.at):
            rest = text[parser.at :]
            raise QueryError(f"${{{whole}}}: a filter [?(…)] is not closed at {rest!r}")
        return ("filter", expr), parser.at + 2
    if m := _SLICE.match(text, at):
        start, end = (int(g) if g is not None else None for g in m.groups())
        return ("slice", (start, end)), m.end()
    end = text.find("]", at)
    if end == -1:
        raise QueryError(f"${{{whole}}}: '[' is not closed")
    parts = _split(text[at + 1 : end])
    if all(_INT.fullmatch(p) for p in parts):
        ints = tuple(int(p) for p in parts)
        return (("index", ints[0]) if len(ints) == 1 else ("indexes", ints)), end + 1
    keys = []
    for p in parts:
        q = _QUOTED.fullmatch(p)
        if q is None:
            raise QueryError(f"${{{whole}}}: bad bracket {text[at : end + 1]!r}")
        keys.append(q.group(1) if q.group(1) is not None else q.group(2))
    return (("key", keys[0]) if len(keys) == 1 else ("keys", tuple(keys))), end + 1


def _split(inside: str) -> list[str]:
    """Split a bracket's inside on the commas outside quotes."""
    parts: list[str] = []
    current: list[str] = []
    quote = ""
    for ch in inside:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == ",":
            parts.append("".join(current))
            current = []
            continue
        current.append(ch)
    parts.append("".join(current))
    return parts


# --- filters -------------------------------------------------------------------------------------

_OPS = ("==", "!=", "<=", ">=", "<", ">", "=~")
_WORD_OPS = ("subsetof", "anyof", "noneof", "nin", "in", "size", "empty")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")


@dataclass(frozen=True, slots=True)
class _Path:
    query: Query


class _FilterParser:
    def __init__(self, text: str, at: int, whole: str, depth: int) -> None:
        self.text, self.at, self.whole, self.depth = text, at, whole, depth

    def error(self, what: str) -> QueryError:
        return QueryError(f"${{{self.whole}}}: in a filter, {what} at {self.text[self.at :]!r}")

    def skip(self) -> None:
        while self.at < len(self.text) and self.text[self.at] == " ":
            self.at += 1

    def eat(self, token: str) -> bool:
        self.skip()
        if self.text.startswith(token, self.at):
            self.at += len(token)
            return True
        return False

    def parse_or(self) -> Any:
        node = self.parse_and()
        while self.eat("||"):
            node = ("or", node, self.parse_and())
        return node

    def parse_and(self) -> Any:
        node = self.parse_not()
        while self.eat("&&"):
            node = ("and", node, self.parse_not())
        return node

    def parse_not(self) -> Any:
        if self.eat("!"):
            return ("not", self.parse_not())
        if self.eat("("):
            node = self.parse_or()
            if not self.eat(")"):
                raise self.error("')' expected")
            return node
        left = self.operand()
        self.skip()
        for op in _OPS:
            if self.text.startswith(op, self.at):
                break
        else:
            op = next((w for w in _WORD_OPS if re.match(rf"{w}\b", self.text[self.at :])), "")
        if not op:
            if not isinstance(left, _Path):
                raise self.error("a comparison expected")
            return ("exists", left)
        if op == "=~":
            raise self.error("regular expressions (=~) are not supported")
        self.at += len(op)
        return ("cmp", op, left, self.operand())

    def operand(self) -> Any:
        self.skip()
        text, at = self.text, self.at
        if text.startswith("@", at):
            query, self.at = parse_query(text, at + 1, self.whole, self.depth)
            return _Path(query)
        if text.startswith("$", at):
            raise self.error("only @ paths are supported")
        return self.literal()

    def literal(self) -> Any:
        self.skip()
        text, at = self.text, self.at
        if q := _QUOTED.match(text, at):
            self.at = q.end()
            return q.group(1) if q.group(1) is not None else q.group(2)
        if n := _NUMBER.match(text, at):
            self.at = n.end()
            return float(n.group(0)) if set(n.group(0)) & set(".eE") else int(n.group(0))
        for word, value in (("true", True), ("false", False), ("null", None)):
            if text.startswith(word, at):
                self.at = at + len(word)
                return value
        if text.startswith("[", at):
            self.at += 1
            items: list[Any] = []
            if self.eat("]"):
                return items
            while True:
                items.append(self.literal())
                if self.eat("]"):
                    return items
                if not self.eat(","):
                    raise self.error("',' or ']' expected")
        raise self.error("a value expected")


def _value(operand: Any, item: Any) -> Any:
    if not isinstance(operand, _Path):
        return operand
    if operand.query.definite:
        matches = list(_run(operand.query.steps, [item]))
        return matches[0] if matches else _MISSING
    return operand.query.apply(item)


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    return None


def _equal(a: Any, b: Any) -> bool:
    if a is _MISSING or b is _MISSING:
        return False
    na, nb = _number(a), _number(b)
    # Jayway compares a number with text holding a number (10 == '10')
    if (na is not None and isinstance(b, str)) or (nb is not None and isinstance(a, str)):
        try:
            return float(a) == float(b)
        except ValueError:
            return False
    if na is not None and nb is not None:
        return na == nb
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return bool(a == b)


def _order(op: str, a: Any, b: Any) -> bool:
    na, nb = _number(a), _number(b)
    if na is not None and nb is not None:
        x, y = na, nb
    elif isinstance(a, str) and isinstance(b, str):
        x, y = a, b  # type: ignore[assignment]
    else:
        return False
    return {"<": x < y, "<=": x <= y, ">": x > y, ">=": x >= y}[op]


def _compare(op: str, a: Any, b: Any) -> bool:
    if op == "==":
        return _equal(a, b)
    if op == "!=":
        return not _equal(a, b)
    if op in ("<", "<=", ">", ">="):
        return _order(op, a, b)
    if op in ("in", "nin"):
        found = isinstance(b, list) and any(_equal(a, x) for x in b)
        return found if op == "in" else isinstance(b, list) and not found
    if op == "size":
        return isinstance(a, str | list) and _number(b) is not None and len(a) == b
    if op == "empty":
        return isinstance(a, str | list) and isinstance(b, bool) and (len(a) == 0) is b
    if not (isinstance(a, list) and isinstance(b, list)):
        return False
    if op == "subsetof":
        return all(any(_equal(x, y) for y in b) for x in a)
    if op == "anyof":
        return any(any(_equal(x, y) for y in b) for x in a)
    return not any(any(_equal(x, y) for y in b) for x in a)  # noneof


def _truthy(expr: Any, item: Any) -> bool:
    kind = expr[0]
    if kind == "or":
        return _truthy(expr[1], item) or _truthy(expr[2], item)
    if kind == "and":
        return _truthy(expr[1], item) and _truthy(expr[2], item)
    if kind == "not":
        return not _truthy(expr[1], item)
    if kind == "exists":
        found = _value(expr[1], item)
        return found is not _MISSING and found != []
    _, op, left, right = expr
    return _compare(op, _value(left, item), _value(right, item))
