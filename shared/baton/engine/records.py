"""What a decision reads and writes, as plain records: the instance and step executions as the
decider sees them, the rows it writes (:class:`Changes`, sent by the writer in one statement),
the :class:`Reader` it reads through, and scopes, the place of a step execution in the tree.

Every step execution sits in a *scope*: the path of (operator execution, key) pairs from the root
(``''`` at the root, ``'<id>#b1/'`` in branch 1 of a PARALLEL, ``k3`` in a DO_WHILE's third
iteration, ``i7`` in a MAP's item 7, ``c<n>`` in a SWITCH case). No engine logic lives here: the
decider and the operators both build on it.
"""

from __future__ import annotations

import functools
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from baton.engine.plan import Plan
from baton.settings import PayloadLimit, PayloadLimits
from baton.status import InstanceStatus, JobStatus, StepStatus


@dataclass(slots=True)
class InstanceState:
    """The instance row as the decider sees it (mutable within one decision)."""

    id: uuid.UUID
    definition_name: str
    status: InstanceStatus
    version: int
    input: dict[str, Any]
    variables: dict[str, Any]
    correlation_id: str | None = None
    output: Any = None
    reason: str | None = None
    clear_timeout: bool = False
    reset_timeout: int | None = None  # a retry: timeoutSeconds counts from now (0: none)
    queue_task_id: uuid.UUID | None = None  # set when a queue trigger started the instance
    parent_instance_id: uuid.UUID | None = None
    parent_step_execution_id: uuid.UUID | None = None
    step_count: int = 0
    depth: int = 0
    created_at: datetime | None = None  # None: started by this decision (its ``now``)


# Exec, JobRef and AuditEvent are made several times per result (a batch's MAP item makes five)
# and never changed once made (a new state is a new Exec: ``with_state``), but are not frozen: a
# frozen dataclass's __init__ sets each field through object.__setattr__ (Exec's nine cost
# 1.9 µs so, 0.45 µs plainly), which was a tenth of a batched MAP item's decision.


@dataclass(slots=True)
class Exec:
    """A step execution as the decider sees it (never changed once made)."""

    id: uuid.UUID
    step_id: str
    scope: str
    status: StepStatus
    attempt: int = 1
    state: dict[str, Any] | None = None
    input: Any = None
    child_instance_id: uuid.UUID | None = None
    output: Any = None

    def with_state(self, state: dict[str, Any] | None) -> Exec:
        """This execution with other bookkeeping (``dataclasses.replace``, without its cost: a
        MAP's execution takes a new state for each item that ends)."""
        return Exec(
            self.id,
            self.step_id,
            self.scope,
            self.status,
            self.attempt,
            state,
            self.input,
            self.child_instance_id,
            self.output,
        )


@dataclass(slots=True)
class NewStep:
    id: uuid.UUID
    step_id: str
    step_type: str
    status: StepStatus
    input: Any
    scope: str = ""
    error: str | None = None
    output: Any = None
    attempt: int = 1
    state: dict[str, Any] | None = None
    wake_at: datetime | None = None
    child_instance_id: uuid.UUID | None = None
    branch: int | None = None
    item_index: int | None = None
    iteration: int | None = None

    @property
    def parent_id(self) -> uuid.UUID | None:
        return parent_of(self.scope)


@dataclass(slots=True)
class StepUpdate:
    """Changes to an existing step execution; None leaves a column as it is (``wake_at`` is set
    when ``set_wake``)."""

    id: uuid.UUID
    status: StepStatus
    output: Any = None
    error: str | None = None
    attempt: int | None = None
    state: dict[str, Any] | None = None
    child_instance_id: uuid.UUID | None = None
    wake_at: datetime | None = None
    set_wake: bool = False
    scope: str = ""


@dataclass(slots=True)
class NewJob:
    id: uuid.UUID
    step_execution_id: uuid.UUID
    job_type: str
    lease_seconds: int
    retries_remaining: int
    payload: Any
    payload_json: str
    poll_timeout_seconds: int  # 0: none; the database computes the due times
    timeout_seconds: int = 0
    scope: str = ""
    status: JobStatus = JobStatus.UNLOCKED
    start_delay_seconds: int = 0  # claimable this long after it is created
    total_timeout_seconds: int = 0  # the step's budget over all attempts (0: none)


@dataclass(slots=True)
class JobRef:
    """The job a worker reported on, as the decision read it (never changed once made). Its
    writes are guarded by (status, worker, attempt): they apply only if nothing moved the job
    since the read."""

    id: uuid.UUID
    step_id: str
    step_execution_id: uuid.UUID
    status: JobStatus
    worker_id: str | None
    attempt: int
    retries_remaining: int
    scope: str = ""


@dataclass(frozen=True, slots=True)
class JobRetry:
    job: JobRef
    run_at: datetime


@dataclass(slots=True)
class AuditEvent:
    event: str
    job_id: uuid.UUID | None = None
    detail: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class NewEvent:
    """A row of ``instance_event``: for another instance (a child ended, cancel), or for this
    one later (a continuation waiting for a paused instance to resume)."""

    instance_id: uuid.UUID
    kind: str  # CHILD_ENDED | CANCEL | CONTINUE | FAILURE_WORKFLOW
    step_execution_id: uuid.UUID | None
    payload: Mapping[str, Any] | None = None


@dataclass(slots=True)
class ChildStart:
    """A new instance started by this decision (a sub-workflow, a failure workflow): its row and
    its first decision, written in the same statement."""

    state: InstanceState
    changes: Changes
    insert: dict[str, Any]


@dataclass(slots=True)
class Changes:
    """Everything one decision writes, sent by the writer in one statement."""

    new_steps: dict[uuid.UUID, NewStep] = field(default_factory=dict)
    step_updates: dict[uuid.UUID, StepUpdate] = field(default_factory=dict)
    new_jobs: list[NewJob] = field(default_factory=list)
    completed_jobs: list[JobRef] = field(default_factory=list)
    failed_jobs: list[JobRef] = field(default_factory=list)
    timed_out_jobs: list[JobRef] = field(default_factory=list)
    cancelled_jobs: list[JobRef] = field(default_factory=list)
    retried_jobs: list[JobRetry] = field(default_factory=list)
    alerted_jobs: list[JobRef] = field(default_factory=list)  # timed out, kept running
    # Scopes whose open steps and jobs (and child instances) are cancelled; "" is everything.
    cancel_scopes: list[str] = field(default_factory=list)
    events: list[NewEvent] = field(default_factory=list)
    consumed_events: list[int] = field(default_factory=list)
    children: list[ChildStart] = field(default_factory=list)
    audit: list[AuditEvent] = field(default_factory=list)
    instance_changed: bool = False
    counters: dict[str, int] = field(default_factory=dict)
    # Metrics that also have a series by dimension (the sink records the total too).
    dimensioned: list[tuple[str, int, dict[str, str]]] = field(default_factory=list)

    @property
    def cancel_open_work(self) -> bool:
        return "" in self.cancel_scopes

    def count(self, name: str, n: int = 1, **dimensions: str) -> None:
        """Add ``n`` to metric ``name`` (and to its series by ``dimensions``, if any)."""
        if dimensions:
            self.dimensioned.append((name, n, dimensions))
        else:
            self.counters[name] = self.counters.get(name, 0) + n

    def written_jobs(self) -> list[uuid.UUID]:
        """The jobs this decision writes itself (so cancelling open work leaves them be)."""
        jobs = [
            *self.completed_jobs,
            *self.failed_jobs,
            *self.timed_out_jobs,
            *self.cancelled_jobs,
            *self.alerted_jobs,
        ]
        return [j.id for j in jobs] + [r.job.id for r in self.retried_jobs]


@dataclass(frozen=True, slots=True)
class ChildPlan:
    """A definition a decision starts an instance of: its snapshot and compiled plan."""

    snapshot_id: int
    plan: Plan
    name: str
    version: int | None


class Reader(Protocol):
    """Read-only lookups a decision may make (inside its transaction)."""

    def output(self, step_id: str, scope_prefix: str) -> Any:
        """The latest completed output of ``step_id`` among executions whose scope starts with
        ``scope_prefix`` (None when there is none)."""

    def execution(self, exec_id: uuid.UUID) -> Exec | None:
        """One step execution (an operator's, to continue it)."""

    def record(self, step_id: str, scope_prefix: str) -> dict[str, Any] | None:
        """The latest execution of ``step_id`` (any status) among executions whose scope starts
        with ``scope_prefix``: ``id``, ``status``, ``attempt``, ``started_at``,
        ``completed_at``, ``job_id`` (its latest job's, if any); None when there is none."""

    def last_outputs(self, parent_id: uuid.UUID, step_ids: Sequence[str]) -> list[dict[str, Any]]:
        """Completed executions of ``step_ids`` directly inside operator execution ``parent_id``
        (``step_id``, ``branch``, ``item_index``, ``output``), for a join."""

    def outputs_within(self, prefix: str, step_ids: Sequence[str]) -> list[dict[str, Any]]:
        """The latest completed output of any of ``step_ids`` in each list under ``prefix`` (an
        operator execution's ``<scope><id>#``), at any depth: ``list`` (its key) and ``output``."""

    def latest_of(self, step_ids: Sequence[str]) -> list[dict[str, Any]]:
        """The latest execution of each of ``step_ids`` in each scope, oldest first: ``id``,
        ``step_id``, ``scope``, ``status``, ``attempt``, ``error``, ``job_id`` (its latest
        job's, if any), ``job_error`` (what the worker said failing that job's attempt) and
        ``job_terminal`` (whether it said not to retry)."""

    def open_steps(self) -> list[dict[str, Any]]:
        """The instance's executions that are SCHEDULED or IN_PROGRESS: ``id``, ``scope``."""

    def outputs_by_list(
        self, prefix: str, step_ids: Sequence[str], after: tuple[str, str] | None = None
    ) -> list[dict[str, Any]]:
        """The latest completed output of each of ``step_ids`` in each list under ``prefix`` (an
        operator execution's ``<scope><id>#``), at any depth: ``list``, ``step_id``, ``output``.
        ``after`` (a step id and a scope): only the executions created after the latest
        execution of that step in that scope are wanted (rows from before it may come too)."""

    def child_plan(
        self,
        name: str | None,
        version: int | None,
        inline: dict[str, Any] | None,
        *,
        from_conductor: bool = False,
    ) -> ChildPlan | None:
        """The snapshot of a definition to start as a child (None: no such definition);
        ``from_conductor``: an inline one translated from a Conductor WorkflowDef when the
        child starts, snapshotted as a definition registered on ``/api`` is."""


class NoReads:
    """For decisions that read nothing (a start: nothing has run yet)."""

    def output(self, step_id: str, scope_prefix: str) -> Any:
        return None

    def execution(self, exec_id: uuid.UUID) -> Exec | None:
        return None

    def record(self, step_id: str, scope_prefix: str) -> dict[str, Any] | None:
        return None

    def last_outputs(self, parent_id: uuid.UUID, step_ids: Sequence[str]) -> list[dict[str, Any]]:
        return []

    def outputs_within(self, prefix: str, step_ids: Sequence[str]) -> list[dict[str, Any]]:
        return []

    def latest_of(self, step_ids: Sequence[str]) -> list[dict[str, Any]]:
        return []

    def open_steps(self) -> list[dict[str, Any]]:
        return []

    def outputs_by_list(
        self, prefix: str, step_ids: Sequence[str], after: tuple[str, str] | None = None
    ) -> list[dict[str, Any]]:
        return []

    def child_plan(
        self,
        name: str | None,
        version: int | None,
        inline: dict[str, Any] | None,
        *,
        from_conductor: bool = False,
    ) -> ChildPlan | None:
        return None


# --- scopes ---------------------------------------------------------------------------------


def child_scope(parent: Exec | NewStep, key: str) -> str:
    """The scope of a list inside operator execution ``parent`` (``key``: b1, i7, k3, c<name>)."""
    return f"{parent.scope}{_text(parent.id)}#{key}/"


def segments(scope: str) -> list[str]:
    return [s for s in scope.split("/") if s]


def parent_of(scope: str) -> uuid.UUID | None:
    """The operator execution owning ``scope`` (None at the root)."""
    last = _last(scope)
    return None if last is None else _uuid(last[0])


# An operator execution's id as its scopes spell it (every item of a MAP names its MAP's): parsed
# and spelled once, not once per item (uuid.UUID's parsing and str() are Python code).
_uuid = functools.lru_cache(maxsize=4096)(uuid.UUID)
_text = functools.lru_cache(maxsize=4096)(str)


def key_of(scope: str) -> str:
    last = _last(scope)
    return "" if last is None else last[1]


@functools.lru_cache(maxsize=4096)
def _last(scope: str) -> tuple[str, str] | None:
    """(execution id, key) of ``scope``'s last segment (None at the root): asked for twice when
    a list ends (its owner, its key), so split once."""
    parts = segments(scope)
    if not parts:
        return None
    execution, key = parts[-1].split("#", 1)
    return execution, key


def truncate(scope: str, depth: int) -> str:
    """The first ``depth`` segments of ``scope`` (the scope of an enclosing list)."""
    parts = segments(scope)[:depth]
    return "".join(f"{p}/" for p in parts)


def in_map_item(scope: str) -> bool:
    """Whether ``scope`` lies in a MAP's item: one of its segments' keys starts with ``i``."""
    return _MAP_ITEM.search(scope) is not None


# A segment (an execution id, up to its first '#') whose key starts with "i".
_MAP_ITEM = re.compile(r"(?:^|/)[^/#]*#i")


class InputNotObject(Exception):
    """A step's input (one ``${…}`` expression) resolved to something other than an object."""


class OverLimit(Exception):
    """An engine-built value above its kind's hard limit; ``str()`` says its size and the
    limit ("is N bytes, above the ... hard limit of M bytes")."""


def limit_of_kind(limits: PayloadLimits, kind: str) -> PayloadLimit:
    """The limit of a payload kind; an instance's output has the step output's."""
    return {
        "WORKFLOW_INPUT": limits.workflow_input,
        "STEP_INPUT": limits.step_input,
        "STEP_OUTPUT": limits.step_output,
        "WORKFLOW_OUTPUT": limits.step_output,
    }[kind]
