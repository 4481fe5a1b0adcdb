"""Input expressions: ``${workflow.input.x}``, ``${workflow.variables.x}``, ``${step.output.x}``,
inside a MAP's steps ``${map.item[.x]}``, ``${map.index}`` (from 0) and, in a MAP with ``inputs``,
``${map.input[.x]}`` (the item's entry in them), and inside a DO_WHILE's
steps (and its ``while``) ``${<loopId>.iteration}``: the iteration running, from 1, and
``${<loopId>.output…}``: its output so far (each iteration's step outputs, built by the engine).

A step's latest execution is also described by ``${step.executionId}``, ``.jobId``, ``.attempt``,
``.status``, ``.startedAt``/``.completedAt`` (ISO) and ``.startTime``/``.endTime`` (epoch
milliseconds, as Conductor gives them); the instance's start by ``${workflow.createdAt}`` (ISO)
and ``${workflow.createTime}`` (epoch milliseconds). Paths take ``.key``, ``[0]`` and
``['key']`` / ``["key"]`` (a key holding any character but its quote), and may end with one of
the JSONPath functions Conductor's expressions take (Jayway's): ``.length()``/``.size()`` (of a
list or an object), ``.keys()``, and ``.sum()``, ``.min()``, ``.max()``, ``.avg()``,
``.stddev()`` over a list's numbers (a number with a fraction; null when there are none).
The rest of Jayway's JSONPath (``..key``, ``[*]``, ``[-1]``, slices, unions, filters) is read by
``baton.jsonpath`` from a path's first step that is not plain on (``Reference.query``).

A string that is exactly one expression resolves to the referenced value itself (an object, a list,
a number...); expressions inside longer text are interpolated as text (objects as JSON). ``$${``
escapes a literal ``${``. A path that leads nowhere resolves to ``null``, as in Conductor.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from baton.jsonpath import Query, QueryError, parse_query

_EXPR = re.compile(r"(?<!\$)\$\{([^}]*)\}")
# A key (a name, or digits: a PARALLEL's output is keyed by branch index).
_KEY = r"[A-Za-z0-9_][A-Za-z0-9_-]*"
# One step of a path after the first key: ``.key``, ``[0]``, ``['key']`` or ``["key"]``.
_STEP = re.compile(
    r"\.(?P<key>" + _KEY + r")"
    r"|\[(?P<index>\d+)\]"
    r"|\['(?P<single>[^']*)'\]"
    r"|\[\"(?P<double>[^\"]*)\"\]"
)
_FIRST = re.compile(_KEY)
# The functions Conductor's JSONPath (Jayway json-path 2.4) applies at a path's end; those taking
# no argument. What Jayway would fail on (an aggregate of no numbers) is null, as Conductor's
# ParametersUtils makes any failed read.
_FUNCTION = re.compile(r"\.(min|max|avg|stddev|sum|length|size|keys)\(\s*\)$")


def _numbers(value: Any) -> list[float]:
    if not isinstance(value, list):
        return []
    return [float(v) for v in value if isinstance(v, int | float) and not isinstance(v, bool)]


def _aggregate(fn: Callable[[list[float]], float]) -> Callable[[Any], Any]:
    return lambda value: fn(numbers) if (numbers := _numbers(value)) else None


def _stddev(numbers: list[float]) -> float:
    mean = sum(numbers) / len(numbers)
    return float(max(sum(n * n for n in numbers) / len(numbers) - mean * mean, 0.0) ** 0.5)


def _length(value: Any) -> Any:
    return len(value) if isinstance(value, list | dict) else None


# Jayway gives aggregates as doubles (3.0), lengths as integers, keys as the object's keys.
FUNCTIONS: dict[str, Callable[[Any], Any]] = {
    "min": _aggregate(min),
    "max": _aggregate(max),
    "sum": _aggregate(lambda n: float(sum(n))),
    "avg": _aggregate(lambda n: sum(n) / len(n)),
    "stddev": _aggregate(_stddev),
    "length": _length,
    "size": _length,
    "keys": lambda value: list(value) if isinstance(value, dict) else None,
}


def _each(function: str, matches: list[Any]) -> list[Any]:
    """A function after an indefinite path applies to each match, as Jayway's: ``length()``
    of what has none is null; any other function failing on one match fails the whole read,
    which is then ``[]`` (an indefinite path's failed read, with SUPPRESS_EXCEPTIONS)."""
    results = [FUNCTIONS[function](m) for m in matches]
    if function not in ("length", "size") and any(r is None for r in results):
        return []
    return results


_OPEN = re.compile(r"(?<!\$)\$\{")

WORKFLOW = "workflow"
WORKFLOW_FIELDS = (
    "input",
    "variables",
    "instanceId",
    "correlationId",
    "definitionName",
    "createdAt",
    "createTime",
)
MAP = "map"
MAP_FIELDS = ("item", "index", "input")
OUTPUT = "output"
ITERATION = "iteration"
# What a step reference may read besides its output: its latest execution's record.
STEP_FIELDS = (
    "executionId",
    "jobId",
    "attempt",
    "status",
    "startedAt",
    "completedAt",
    "startTime",
    "endTime",
)


class ExpressionError(ValueError):
    """An expression that cannot be parsed."""


@dataclass(frozen=True, slots=True)
class Reference:
    """A parsed expression: ``root`` is ``workflow`` or a step id; ``path`` the keys after it."""

    text: str
    root: str
    path: tuple[str | int, ...]
    # A JSONPath function at the path's end (``.length()``), applied to what the path reads.
    function: str | None = None
    # The rest of the path from its first step that is not plain (``..key``, ``[*]``, a filter…),
    # read as Jayway does (``baton.jsonpath``); None for a plain path, the common case.
    query: Query | None = None

    @property
    def step_id(self) -> str | None:
        """The step whose output this reads (None for workflow, map and iteration references)."""
        if self.root in (WORKFLOW, MAP) or self.path[:1] != (OUTPUT,):
            return None
        return self.root

    @property
    def record_of(self) -> str | None:
        """The step whose execution record this reads (``${<step>.status}`` and the like)."""
        if (
            self.root in (WORKFLOW, MAP)
            or len(self.path) != 1
            or self.path[0] not in STEP_FIELDS
            or self.query is not None
        ):
            return None
        return self.root

    @property
    def loop_id(self) -> str | None:
        """The DO_WHILE whose running iteration this reads (``${<loopId>.iteration}``)."""
        if self.root in (WORKFLOW, MAP) or self.path != (ITERATION,) or self.query is not None:
            return None
        return self.root


@functools.lru_cache(maxsize=4096)
def parse(text: str) -> Reference:
    """Parse the inside of ``${...}`` (cached: a definition's expressions are parsed at each
    resolution, and a Reference is immutable)."""
    body = text.strip()
    if not body:
        raise ExpressionError("empty expression")
    first = _FIRST.match(body)
    if not first:
        raise ExpressionError(f"bad path segment {body.split('.')[0]!r} in ${{{text}}}")
    path: list[str | int] = [first.group(0)]
    at = first.end()
    function = None
    query = None
    if (fn := _FUNCTION.search(body)) is not None and fn.start() >= at:
        function, body = fn.group(1), body[: fn.start()]
    while at < len(body):
        m = _STEP.match(body, at)
        if not m:
            try:
                query, at = parse_query(body, at, text)
            except QueryError as e:
                raise ExpressionError(str(e)) from None
            break
        index = m.group("index")
        if index is not None:
            path.append(int(index))
        else:
            key = m.group("key") or m.group("single") or m.group("double") or ""
            path.append(key)
        at = m.end()
    root = path[0]
    assert isinstance(root, str)
    rest = tuple(path[1:])
    if root == WORKFLOW:
        if not rest or rest[0] not in WORKFLOW_FIELDS:
            raise ExpressionError(
                f"${{{text}}}: after 'workflow' expected one of {', '.join(WORKFLOW_FIELDS)}"
            )
    elif root == MAP:
        if not rest or rest[0] not in MAP_FIELDS or (rest[0] == "index" and len(rest) > 1):
            raise ExpressionError(
                f"${{{text}}}: inside a MAP, read ${{map.item…}}, ${{map.index}} or ${{map.input…}}"
            )
    elif rest[:1] == (ITERATION,):
        if len(rest) > 1 or query is not None:
            raise ExpressionError(
                f"${{{text}}}: a loop's iteration is a number: '<loopId>.iteration'"
            )
    elif rest[:1] != (OUTPUT,) and not (
        len(rest) == 1 and rest[0] in STEP_FIELDS and query is None
    ):
        raise ExpressionError(
            f"${{{text}}}: a step reference reads '<stepId>.output[.path]', one of its "
            f"execution's {', '.join(STEP_FIELDS)} (or, inside a DO_WHILE, '<loopId>.iteration')"
        )
    if function is not None and (
        (root == MAP and rest[:1] == ("index",)) or rest[:1] == (ITERATION,)
    ):
        raise ExpressionError(f"${{{text}}}: .{function}() reads a list or an object")
    return Reference(text=text, root=root, path=rest, function=function, query=query)


def references(template: Any) -> Iterator[tuple[str, str]]:
    """Yield ``(json_path_suffix, expression_text)`` for every expression inside ``template``."""
    if isinstance(template, str):
        for m in _EXPR.finditer(template):
            yield "", m.group(1)
    elif isinstance(template, Mapping):
        for k, v in template.items():
            for sub, expr in references(v):
                yield f".{k}{sub}", expr
    elif isinstance(template, list):
        for i, v in enumerate(template):
            for sub, expr in references(v):
                yield f"[{i}]{sub}", expr


def unclosed(template: Any) -> Iterator[tuple[str, str]]:
    """Yield ``(json_path_suffix, text)`` for every string inside ``template`` holding a ``${``
    that no ``}`` closes (it would be taken as literal text, silently). ``text`` is the string
    from that ``${`` on, cut short."""
    if isinstance(template, str):
        for m in _OPEN.finditer(template):
            if template.find("}", m.end()) == -1:
                rest = template[m.start() :]
                yield "", rest if len(rest) <= 30 else rest[:27] + "..."
                return
    elif isinstance(template, Mapping):
        for k, v in template.items():
            for sub, text in unclosed(v):
                yield f".{k}{sub}", text
    elif isinstance(template, list):
        for i, v in enumerate(template):
            for sub, text in unclosed(v):
                yield f"[{i}]{sub}", text


def _walk(value: Any, path: tuple[str | int, ...]) -> Any:
    for step in path:
        # ``.1`` on a list reads its element 1, as ``[1]`` does
        key = (
            int(step)
            if isinstance(step, str) and step.isdigit() and isinstance(value, list)
            else step
        )
        if isinstance(key, int):
            if not isinstance(value, list) or key >= len(value):
                return None
            value = value[key]
        else:
            if not isinstance(value, Mapping):
                return None
            value = value.get(key)
        if value is None:
            return None
    return value


@dataclass(frozen=True, slots=True)
class Scope:
    """What expressions can see. ``step_output`` returns a step's latest output (or None);
    ``loops`` the running iteration of each DO_WHILE the point is inside, by loop id."""

    workflow: Mapping[str, Any]
    step_output: Callable[[str], Any]
    map: Mapping[str, Any] | None = None  # {"item": ..., "index": ...} inside a MAP's steps
    loops: Mapping[str, int] = field(default_factory=dict)
    # A step's latest execution record ({executionId, status, …}, STEP_FIELDS) or None.
    step_record: Callable[[str], Mapping[str, Any] | None] = lambda _step_id: None

    def lookup(self, ref: Reference) -> Any:
        value = self._read(ref)
        if ref.query is not None:
            value = ref.query.apply(value)
            if ref.function is not None and not ref.query.definite:
                return _each(ref.function, value)
        return value if ref.function is None else FUNCTIONS[ref.function](value)

    def _read(self, ref: Reference) -> Any:
        if ref.root == WORKFLOW:
            return _walk(self.workflow, ref.path)
        if ref.root == MAP:
            return None if self.map is None else _walk(self.map, ref.path)
        if ref.loop_id is not None:
            return self.loops.get(ref.loop_id)
        if ref.record_of is not None:
            return _walk(self.step_record(ref.record_of), ref.path)
        return _walk({OUTPUT: self.step_output(ref.root)}, ref.path)


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def resolve(template: Any, scope: Scope) -> Any:
    """Resolve every expression in ``template`` (dicts and lists recursively)."""
    if isinstance(template, str):
        if "${" not in template:
            return template
        whole = _EXPR.fullmatch(template)
        if whole:
            return scope.lookup(parse(whole.group(1)))
        # Only the template's own literal text is unescaped ($${ -> ${): a substituted value is
        # data and is kept exactly as it is, whatever it contains.
        out: list[str] = []
        last = 0
        for m in _EXPR.finditer(template):
            out.append(template[last : m.start()].replace("$${", "${"))
            out.append(_as_text(scope.lookup(parse(m.group(1)))))
            last = m.end()
        out.append(template[last:].replace("$${", "${"))
        return "".join(out)
    if isinstance(template, Mapping):
        return {k: resolve(v, scope) for k, v in template.items()}
    if isinstance(template, list):
        return [resolve(v, scope) for v in template]
    return template


def is_whole_expression(text: str) -> bool:
    """Is ``text`` exactly one ``${…}`` (which resolves to the value itself, not a string)?"""
    return _EXPR.fullmatch(text) is not None


def has_expressions(template: Any) -> bool:
    return next(references(template), None) is not None
