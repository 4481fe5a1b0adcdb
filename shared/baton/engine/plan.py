"""A definition compiled for execution: every step by id with its place in the tree, the lists of
each operator, compiled conditions, and which execution an expression reads.

Control flow is structured: a step lives in a list, the list belongs to an operator (or is the
root). After a step finishes, execution moves to the next step of its list; at the end of a list,
the operator decides what happens (the root list ending completes the instance).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

from baton.conditions import Condition, compile_condition
from baton.definitions import WorkflowDefinition
from baton.httpcall import MAX_CONNECT_MS, MAX_READ_MS
from baton.model import (
    DEFAULT_RESPONSE_TIMEOUT_SECONDS,
    DEFAULT_RETRY_COUNT,
    DEFAULT_RETRY_DELAY_SECONDS,
    DEFAULT_RETRY_LOGIC,
    RetryLogic,
    TimeoutPolicy,
)
from baton.steps import (
    DoWhileStep,
    EventStep,
    HttpCall,
    MapStep,
    ParallelStep,
    ServiceTaskStep,
    Step,
    SwitchStep,
)
from baton.structure import ROOT, ListRef, Point, Tree, loops_of


@dataclass(frozen=True, slots=True)
class Position:
    """Where a step sits: its list (a tuple of steps) and index there, and whose list it is."""

    steps: tuple[Step, ...]
    index: int
    list: ListRef  # container None: the root list


@dataclass(frozen=True, slots=True)
class TaskPolicy:
    """Effective retry/timeout settings of a SERVICE_TASK (step > task definition > default) or
    an HTTP step (step > default)."""

    retry_count: int
    retry_logic: RetryLogic
    retry_delay_seconds: int
    max_retry_delay_seconds: int | None
    backoff_scale_factor: int
    backoff_jitter_ms: int
    total_timeout_seconds: int
    lease_seconds: int
    timeout_seconds: int
    poll_timeout_seconds: int
    timeout_policy: TimeoutPolicy
    input_template: dict[str, Any]


# An HTTP step's lease unless it sets responseTimeoutSeconds: its longest call and a margin, so a
# system-tasks function that died mid-call has its job re-queued soon.
HTTP_LEASE_SECONDS = (MAX_CONNECT_MS + MAX_READ_MS) // 1000 + 30


def task_policy(step: ServiceTaskStep | HttpCall | EventStep) -> TaskPolicy:
    # An EVENT step has no task definition: its settings are its own.
    td = step.task_def if not isinstance(step, EventStep) else None
    lease_default = (
        DEFAULT_RESPONSE_TIMEOUT_SECONDS
        if isinstance(step, ServiceTaskStep)
        else HTTP_LEASE_SECONDS  # the engine's own jobs: a call, a publish
    )

    def pick(name: str, default: Any) -> Any:
        value = getattr(step, name)
        if value is None and td is not None:
            value = getattr(td, name)
        return default if value is None else value

    return TaskPolicy(
        retry_count=pick("retry_count", DEFAULT_RETRY_COUNT),
        retry_logic=RetryLogic(pick("retry_logic", DEFAULT_RETRY_LOGIC)),
        retry_delay_seconds=pick("retry_delay_seconds", DEFAULT_RETRY_DELAY_SECONDS),
        max_retry_delay_seconds=pick("max_retry_delay_seconds", None),
        backoff_scale_factor=pick("backoff_scale_factor", 1),
        backoff_jitter_ms=pick("backoff_jitter_ms", 0),
        total_timeout_seconds=pick("total_timeout_seconds", 0),
        lease_seconds=pick("response_timeout_seconds", lease_default),
        timeout_seconds=pick("timeout_seconds", 0),
        poll_timeout_seconds=pick("poll_timeout_seconds", 0),
        timeout_policy=TimeoutPolicy(pick("timeout_policy", TimeoutPolicy.TIME_OUT_WF)),
        input_template=dict(td.input_template or {}) if td is not None else {},
    )


def nested(step: Step) -> list[tuple[ListRef, tuple[Step, ...]]]:
    """An operator's nested lists, each with its ListRef (as ``baton.structure`` names them)."""
    if isinstance(step, ParallelStep):
        return [(ListRef(step.id, "branch", str(b)), tuple(s)) for b, s in enumerate(step.branches)]
    if isinstance(step, SwitchStep):
        out: list[tuple[ListRef, tuple[Step, ...]]] = []
        if isinstance(step.cases, dict):
            out += [(ListRef(step.id, "case", k), tuple(v)) for k, v in step.cases.items()]
        else:
            out += [
                (ListRef(step.id, "case", str(c)), tuple(v.steps)) for c, v in enumerate(step.cases)
            ]
        if step.default is not None:
            out.append((ListRef(step.id, "default", ""), tuple(step.default)))
        return out
    if isinstance(step, MapStep):
        return [(ListRef(step.id, "items", ""), tuple(step.steps))]
    if isinstance(step, DoWhileStep):
        return [(ListRef(step.id, "body", ""), tuple(step.steps))]
    return []


class Plan:
    """Immutable; built once per definition snapshot and cached by the process."""

    def __init__(self, definition: WorkflowDefinition) -> None:
        self.definition = definition
        self.root: tuple[Step, ...] = tuple(definition.steps)
        self._positions: dict[str, Position] = {}
        self._lists: dict[ListRef, tuple[Step, ...]] = {ROOT: self.root}
        self._index(self.root, ROOT)
        self._policies: dict[str, TaskPolicy] = {
            s.id: task_policy(s)
            for s in self.steps()
            if isinstance(s, ServiceTaskStep | HttpCall | EventStep)
        }
        self._conditions: dict[str, Condition] = {}
        self._depths: dict[tuple[str, str], int] = {}
        self._loops: dict[str, dict[str, int]] = {}
        # The steps whose failure their list goes past (``permissive``, not ``optional``): the
        # instance fails at its end if the latest execution of one of them failed.
        self.permissive: frozenset[str] = frozenset(
            # (An ``optional`` read when the step fails may leave it permissive.)
            s.id
            for s in self.steps()
            if s.permissive and s.optional is not True
        )

    def _index(self, steps: tuple[Step, ...], ref: ListRef) -> None:
        for i, step in enumerate(steps):
            self._positions[step.id] = Position(steps, i, ref)
            for sub_ref, sub_steps in nested(step):
                self._lists[sub_ref] = sub_steps
                self._index(sub_steps, sub_ref)

    @cached_property
    def tree(self) -> Tree:
        return Tree.of(self.definition.wire()["steps"])

    # --- navigation ----------------------------------------------------------------------------

    def steps(self) -> list[Step]:
        return [p.steps[p.index] for p in self._positions.values()]

    def step(self, step_id: str) -> Step:
        pos = self._positions[step_id]
        return pos.steps[pos.index]

    def has_step(self, step_id: str) -> bool:
        return step_id in self._positions

    def position(self, step_id: str) -> Position:
        return self._positions[step_id]

    def first(self) -> Step:
        return self.root[0]

    def next_after(self, step_id: str) -> Step | None:
        """The step that follows ``step_id`` in its own list, or None at the list's end."""
        pos = self._positions[step_id]
        nxt = pos.index + 1
        return pos.steps[nxt] if nxt < len(pos.steps) else None

    def list_of(self, ref: ListRef) -> tuple[Step, ...]:
        return self._lists[ref]

    def policy(self, step_id: str) -> TaskPolicy:
        return self._policies[step_id]

    def job_types(self) -> frozenset[str]:
        """The job types named in the definition (one given by an expression is known only when
        its step starts)."""
        return frozenset(
            s.job_type
            for s in self.steps()
            if isinstance(s, ServiceTaskStep) and not s.job_type.startswith("${")
        )

    def task_def_names(self) -> frozenset[str]:
        """The task definitions the steps take their settings from: a SERVICE_TASK's job type's,
        an HTTP step's name's (its id without one)."""
        http = (http_task_def_name(s.name, s.id) for s in self.steps() if isinstance(s, HttpCall))
        return self.job_types() | frozenset(http)

    # --- conditions and reads ------------------------------------------------------------------

    def condition(self, key: str, text: str) -> Condition:
        """The compiled condition ``text`` (a SWITCH case's, a DO_WHILE's ``while``), cached."""
        found = self._conditions.get(key)
        if found is None:
            found = compile_condition(text)
            self._conditions[key] = found
        return found

    def read_depth(self, point: str, step_id: str) -> int:
        """How many scope segments of the reading point's execution path locate the execution of
        ``step_id`` to read: the operators the two share (see ``baton.structure``).

        ``point`` is ``step:<id>`` (a step's own expressions), ``while:<id>`` (a DO_WHILE's
        condition, at the end of its body) or ``output`` (outputParameters)."""
        key = (point, step_id)
        depth = self._depths.get(key)
        if depth is None:
            x = self.tree.by_id.get(step_id)
            depth = 0 if x is None else max(0, self.tree.common_depth(x, self._point(point)) - 1)
            self._depths[key] = depth
        return depth

    def loops(self, point: str) -> dict[str, int]:
        """The DO_WHILE loops an expression at ``point`` is inside, by id, each with the index
        of the scope segment that holds its running iteration (``<execution>#k<iteration>``)."""
        found = self._loops.get(point)
        if found is None:
            found = loops_of(self._point(point).lists)
            self._loops[point] = found
        return found

    def _point(self, point: str) -> Point:
        kind, _, sid = point.partition(":")
        if kind == "output":
            return self.tree.end_of((ROOT,), len(self.root))
        node = self.tree.by_id[sid]
        if kind == "while":
            body = self._lists[ListRef(sid, "body")]
            return self.tree.end_of((*node.lists, ListRef(sid, "body")), len(body))
        return self.tree.at_step(node)


class PlanCache:
    """Compiled plans by snapshot id, for one database (ids are per database).

    Snapshots never change, so entries never go stale; any eviction is safe.
    """

    def __init__(self, max_size: int = 1024) -> None:
        self._plans: dict[int, Plan] = {}
        self._max = max_size

    def get(self, snapshot_id: int) -> Plan | None:
        return self._plans.get(snapshot_id)

    def compile(self, snapshot_id: int, body_json: str) -> Plan:
        plan = self._plans.get(snapshot_id)
        if plan is None:
            plan = Plan(WorkflowDefinition.model_validate_json(body_json))
            if len(self._plans) >= self._max:
                self._plans.pop(next(iter(self._plans)))
            self._plans[snapshot_id] = plan
        return plan


def job_types(definition: WorkflowDefinition) -> set[str]:
    """Every job type a definition's service tasks use, at any depth."""
    return set(Plan(definition).job_types())


def task_def_names(definition: WorkflowDefinition) -> set[str]:
    """The names of every task definition a definition's steps may take settings from."""
    return set(Plan(definition).task_def_names())


def http_task_def_name(name: str | None, step_id: str) -> str:
    """The task definition of an HTTP step: its name's, as Conductor's HTTP task (its id when it
    has no name: the Conductor translation leaves out a name equal to the reference)."""
    return name or step_id
