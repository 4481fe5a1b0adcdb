"""The shape of a definition's step tree: which list each step sits in, and which earlier steps an
expression evaluated at a given point may read.

Works on the raw JSON (tolerant of junk, so validation can report structural and semantic problems
together) and on a parsed definition alike (``WorkflowDefinition.wire()``).

A *list* is the root list or one of an operator's nested lists: a PARALLEL branch, a SWITCH case
(or its default), a MAP's or a DO_WHILE's steps. A step X is visible at a point P when, in the
deepest list holding both, X's branch of the tree comes strictly before P's, and X is not inside a
MAP that P is outside of (which of its items would it be?). So a step in one branch is not
visible to a sibling branch but is after the join; a DO_WHILE body step is visible after the loop
(its last iteration's output); a SWITCH case's step is visible after the SWITCH (null if another
case ran). At run time the same "deepest common list" picks which execution of X to read: the
latest one inside the execution of that list P is in.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

MAX_DEPTH = 32
MAX_STEPS = 1_000

_OUTPUT_REF = re.compile(r"(?:`([^`]+)`|\b([A-Za-z_][A-Za-z0-9_]*))\s*\.\s*output\b")
# ``<loopId>.iteration`` at the start of a path (not a field named iteration further along).
_ITERATION_REF = re.compile(
    r"(?:`([^`]+)`|(?<![\w.$`])([A-Za-z_][A-Za-z0-9_]*))\s*\.\s*iteration\b"
)


@dataclass(frozen=True, slots=True)
class ListRef:
    """One step list: the root (container None) or a container's ``kind``/``label`` list."""

    container: str | None
    kind: str  # root | branch | case | default | body | items
    label: str = ""


ROOT = ListRef(None, "root")


@dataclass(frozen=True, slots=True)
class Node:
    """A step where it sits: ``lists`` from the root down to its own list, its index there."""

    step: dict[str, Any]
    path: str
    lists: tuple[ListRef, ...]
    index: int

    @property
    def id(self) -> Any:
        return self.step.get("id")

    @property
    def type(self) -> str | None:
        """The step's type when it is a string (the schema reports any other value)."""
        kind = self.step.get("type")
        return kind if isinstance(kind, str) else None

    @property
    def depth(self) -> int:
        """How many operators it is nested in (0 at the root)."""
        return len(self.lists) - 1


@dataclass(frozen=True, slots=True)
class Point:
    """Where an expression is evaluated: in ``lists``, just before position ``index``."""

    lists: tuple[ListRef, ...]
    index: int


def _field(step: dict[str, Any], camel: str) -> Any:
    snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in camel)
    return step.get(camel, step.get(snake))


def nested_lists(step: dict[str, Any], path: str) -> Iterator[tuple[ListRef, str, Any]]:
    """The nested step lists of an operator, each with its ListRef and JSON path."""
    sid, kind = step.get("id"), step.get("type")
    sid = sid if isinstance(sid, str) else f"?{path}"
    if kind == "PARALLEL":
        branches = step.get("branches")
        if isinstance(branches, list):
            for b, branch in enumerate(branches):
                yield ListRef(sid, "branch", str(b)), f"{path}.branches[{b}]", branch
    elif kind == "SWITCH":
        cases = step.get("cases")
        if isinstance(cases, dict):
            for name, steps in cases.items():
                yield ListRef(sid, "case", str(name)), f"{path}.cases.{name}", steps
        elif isinstance(cases, list):
            for c, case in enumerate(cases):
                if isinstance(case, dict):
                    label = str(c)
                    yield ListRef(sid, "case", label), f"{path}.cases[{c}].steps", case.get("steps")
        if step.get("default") is not None:
            yield ListRef(sid, "default", ""), f"{path}.default", step.get("default")
    elif kind == "MAP":
        yield ListRef(sid, "items", ""), f"{path}.steps", step.get("steps")
    elif kind == "DO_WHILE":
        yield ListRef(sid, "body", ""), f"{path}.steps", step.get("steps")


def walk(steps: Any, path: str = "steps", lists: tuple[ListRef, ...] = (ROOT,)) -> Iterator[Node]:
    """Every step dict of the tree in document order (an operator before its nested steps)."""
    if not isinstance(steps, list) or len(lists) > MAX_DEPTH + 2:
        return
    for i, step in enumerate(steps):
        if not isinstance(step, dict):
            continue
        here = f"{path}[{i}]"
        yield Node(step, here, lists, i)
        for ref, sub_path, sub_steps in nested_lists(step, here):
            yield from walk(sub_steps, sub_path, (*lists, ref))


@dataclass(slots=True)
class Tree:
    """Every step of a definition by id, for visibility questions."""

    nodes: list[Node]
    by_id: dict[str, Node] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for node in self.nodes:
            if isinstance(node.id, str) and node.id not in self.by_id:
                self.by_id[node.id] = node

    @classmethod
    def of(cls, root_steps: Any) -> Tree:
        return cls(list(walk(root_steps)))

    def at_step(self, node: Node) -> Point:
        """Where a step's own expressions (input, items, on, variables...) are evaluated."""
        return Point(node.lists, node.index)

    def end_of(self, lists: tuple[ListRef, ...], length: int) -> Point:
        """After the last step of a list (a DO_WHILE's ``while``, outputParameters)."""
        return Point(lists, length)

    def common_depth(self, x: Node, at: Point) -> int:
        """How many lists, from the root, X's and the point's chains share."""
        k = 0
        while k < min(len(x.lists), len(at.lists)) and x.lists[k] == at.lists[k]:
            k += 1
        return k

    def visibility(self, x_id: str, at: Point) -> tuple[bool, str, int]:
        """Is step ``x_id`` readable at ``at``? (visible, why not, shared list depth)."""
        x = self.by_id.get(x_id)
        if x is None:
            return False, "unknown step", 0
        k = self.common_depth(x, at)
        ix = self._index_in(x, k)
        ip = at.index if len(at.lists) == k else self._container_index(at.lists[k])
        if ix is None or ip is None:
            return False, "unknown step", k
        if ix == ip and len(x.lists) == k and len(at.lists) > k:
            return False, CONTAINS, k
        if ix > ip or (ix == ip and len(x.lists) == k):
            return False, "it has not run yet at this point", k
        if ix == ip:
            return False, "it is in another branch, case or item of the same step", k
        if any(ref.kind == "items" for ref in x.lists[k:]):
            return False, "it is inside a MAP (read the MAP's output instead)", k
        return True, "", k

    def _index_in(self, x: Node, k: int) -> int | None:
        return x.index if len(x.lists) == k else self._container_index(x.lists[k])

    def _container_index(self, ref: ListRef) -> int | None:
        node = self.by_id.get(ref.container) if ref.container is not None else None
        return None if node is None else node.index

    def list_of(self, node: Node) -> tuple[ListRef, ...]:
        return node.lists


CONTAINS = "this point is inside it: it has no output until it ends"


def loops_of(lists: tuple[ListRef, ...]) -> dict[str, int]:
    """The DO_WHILE loops whose body a point in ``lists`` is inside, each with the index of its
    body's segment in the point's scope (where ``k<iteration>`` is written)."""
    return {
        ref.container: depth - 1
        for depth, ref in enumerate(lists)
        if ref.kind == "body" and ref.container is not None
    }


def in_map(lists: tuple[ListRef, ...]) -> bool:
    """Is a point inside some MAP's steps (where ``${map.item}`` means something)?"""
    return any(ref.kind == "items" for ref in lists)


def condition_references(text: str) -> list[str]:
    """The step ids a JSONata condition reads as ``<stepId>.output`` (or ```id`.output``)."""
    return [a or b for a, b in _OUTPUT_REF.findall(text) if (a or b) not in ("workflow", "map")]


def iteration_references(text: str) -> list[str]:
    """The loop ids a JSONata condition reads as ``<loopId>.iteration``."""
    return [a or b for a, b in _ITERATION_REF.findall(text) if (a or b) not in ("workflow", "map")]
