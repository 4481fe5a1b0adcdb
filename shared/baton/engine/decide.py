"""The decider: given an instance's state and an event, what changes.

Pure logic over in-memory state: it records the rows to write in :class:`Changes` and the writer
sends them in one statement. Its only I/O is through a :class:`Reader`: read-only lookups (an
earlier step's output, an operator's execution, a child definition) inside the decision's
transaction.

Execution is a tree. Every step execution sits in a *scope*: the path of (operator execution, key)
pairs from the root (``''`` at the root, ``'<id>#b1/'`` in branch 1 of a PARALLEL...). When a step
finishes, the next step of its list runs in the same scope; at the end of a list the operator
owning the scope decides (each operator is a module of ``engine.operators``, registered by type).
Work is a queue, not recursion, so a long chain of instant steps cannot exhaust the stack.

One statement cannot update a row twice, nor update a row it inserts: every write to a step
execution in one decision is folded into one insert or one update here.
"""

from __future__ import annotations

import json
import uuid
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Protocol

from baton import expressions
from baton.engine.plan import Plan
from baton.engine.retry import retry_delay_seconds
from baton.model import TimeoutPolicy
from baton.payload_ref import is_payload_ref
from baton.settings import PayloadLimit, PayloadLimits
from baton.status import InstanceStatus, JobStatus, StepStatus
from baton.steps import Step

MAX_STEP_EXECUTIONS = 100_000
OPEN_STEP = (StepStatus.SCHEDULED, StepStatus.IN_PROGRESS)
# Step types whose object output is merged into the instance's variables: what work returns.
MERGED_OUTPUTS = frozenset({"SERVICE_TASK", "USER_TASK", "SIGNAL", "SUB_WORKFLOW"})


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


@dataclass(frozen=True, slots=True)
class Exec:
    """A step execution as the decider sees it."""

    id: uuid.UUID
    step_id: str
    scope: str
    status: StepStatus
    attempt: int = 1
    state: dict[str, Any] | None = None
    input: Any = None
    child_instance_id: uuid.UUID | None = None
    output: Any = None


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


@dataclass(frozen=True, slots=True)
class JobRef:
    """The job a worker reported on, as the decision read it. Its writes are guarded by
    (status, worker, attempt): they apply only if nothing moved the job since the read."""

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


@dataclass(frozen=True, slots=True)
class AuditEvent:
    event: str
    job_id: uuid.UUID | None = None
    detail: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class NewEvent:
    """A row of ``instance_event``: for another instance (a child ended, cancel), or for this
    one later (a continuation waiting for a paused instance to resume)."""

    instance_id: uuid.UUID
    kind: str  # CHILD_ENDED | CANCEL | CONTINUE
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


def _same(value: Any) -> Any:
    return value


class Reader(Protocol):
    """Read-only lookups a decision may make (inside its transaction)."""

    def output(self, step_id: str, scope_prefix: str) -> Any:
        """The latest completed output of ``step_id`` among executions whose scope starts with
        ``scope_prefix`` (None when there is none)."""

    def execution(self, exec_id: uuid.UUID) -> Exec | None:
        """One step execution (an operator's, to continue it)."""

    def last_outputs(self, parent_id: uuid.UUID, step_ids: Sequence[str]) -> list[dict[str, Any]]:
        """Completed executions of ``step_ids`` directly inside operator execution ``parent_id``
        (``step_id``, ``branch``, ``item_index``, ``output``), for a join."""

    def child_plan(
        self, name: str | None, version: int | None, inline: dict[str, Any] | None
    ) -> ChildPlan | None:
        """The snapshot of a definition to start as a child (None: no such definition)."""


class NoReads:
    """For decisions that read nothing (a start: nothing has run yet)."""

    def output(self, step_id: str, scope_prefix: str) -> Any:
        return None

    def execution(self, exec_id: uuid.UUID) -> Exec | None:
        return None

    def last_outputs(self, parent_id: uuid.UUID, step_ids: Sequence[str]) -> list[dict[str, Any]]:
        return []

    def child_plan(
        self, name: str | None, version: int | None, inline: dict[str, Any] | None
    ) -> ChildPlan | None:
        return None


# --- scopes ---------------------------------------------------------------------------------


def child_scope(parent: Exec | NewStep, key: str) -> str:
    """The scope of a list inside operator execution ``parent`` (``key``: b1, i7, k3, c<name>)."""
    return f"{parent.scope}{parent.id}#{key}/"


def segments(scope: str) -> list[str]:
    return [s for s in scope.split("/") if s]


def parent_of(scope: str) -> uuid.UUID | None:
    """The operator execution owning ``scope`` (None at the root)."""
    parts = segments(scope)
    return uuid.UUID(parts[-1].split("#", 1)[0]) if parts else None


def key_of(scope: str) -> str:
    parts = segments(scope)
    return parts[-1].split("#", 1)[1] if parts else ""


def truncate(scope: str, depth: int) -> str:
    """The first ``depth`` segments of ``scope`` (the scope of an enclosing list)."""
    parts = segments(scope)[:depth]
    return "".join(f"{p}/" for p in parts)


def in_map_item(scope: str) -> bool:
    return any(p.split("#", 1)[1].startswith("i") for p in segments(scope))


class Decider:
    """One decision on one instance. Call an event method, then read ``changes``.

    Several events may be applied in turn (a batch's results for one instance), each seeing the
    state the ones before left; the caller keeps out an event whose work an earlier one ended
    (``closed``) and one that ends work after others started some (``cancel_scopes`` grew),
    since what a cancellation ends is found in the tables, not in this decision's new rows."""

    def __init__(
        self,
        plan: Plan,
        instance: InstanceState,
        reader: Reader,
        now: datetime,
        *,
        max_job_input_bytes: int = 2_000_000,
        max_step_executions: int = MAX_STEP_EXECUTIONS,
        unref: Callable[[Any], Any] | None = None,
        offload: Callable[[str, str], Any] | None = None,
        payload_limits: PayloadLimits | None = None,
    ) -> None:
        self.plan = plan
        # Stores a value's JSON in the payload bucket under a kind (STEP_INPUT, ...) and returns
        # its reference (None: no bucket, values stay inline); with the soft/hard limits.
        self.offload = offload
        self.payload_limits = payload_limits
        # Turns an offloaded payload's reference into its content (the engine's reader of the
        # payload bucket); the decider stays pure: it only calls what it was given.
        self.unref: Callable[[Any], Any] = unref or _same
        self.instance = instance
        self.reader = reader
        self.now = now
        self.max_job_input_bytes = max_job_input_bytes
        self.max_step_executions = max_step_executions
        self.changes = Changes()
        self._work: deque[Callable[[], None]] = deque()
        self._outputs: dict[tuple[str, str], Any] = {}
        self._done_here: list[tuple[str, str, Any]] = []  # (step_id, scope, output) this decision
        self._execs: dict[uuid.UUID, Exec] = {}

    # --- events -----------------------------------------------------------------------------

    def start(self) -> None:
        """A new instance: its first step."""
        self.changes.audit.append(AuditEvent("INSTANCE_STARTED"))
        self.changes.count("InstancesStarted")
        self.later(lambda: self.schedule(self.plan.first(), ""))
        self.run()

    def job_completed(self, job: JobRef, output: Any) -> None:
        """A worker completed its attempt of ``job`` with ``output``."""
        self.changes.completed_jobs.append(job)
        self.changes.audit.append(
            AuditEvent("JOB_COMPLETED", job.id, {"attempt": job.attempt, "workerId": job.worker_id})
        )
        self.changes.count("JobsCompleted")
        self.complete(self._job_exec(job), output)
        self.run()

    def job_failed(
        self,
        job: JobRef,
        *,
        error: str,
        retryable: bool,
        delay_override: float | None = None,
    ) -> datetime | None:
        """A worker reported a failure: schedule a retry (returns when it is due) or fail the
        step (returns None)."""
        self.changes.audit.append(
            AuditEvent(
                "JOB_FAILED",
                job.id,
                {
                    "error": error,
                    "retryable": retryable,
                    "attempt": job.attempt,
                    "workerId": job.worker_id,
                },
            )
        )
        if retryable and job.retries_remaining > 0:
            return self._retry(job, error, delay_override)
        why = (
            error if not retryable else f"{error} (retries exhausted after {job.attempt} attempts)"
        )
        self._fail_job(job, why, JobStatus.FAILED, StepStatus.FAILED)
        self.run()
        return None

    def lease_exhausted(self, job: JobRef, lease_seconds: int) -> None:
        """``job``'s lease lapsed with no retries left: every attempt's worker went silent."""
        self.changes.audit.append(
            AuditEvent(
                "JOB_LEASE_EXPIRED", job.id, {"workerId": job.worker_id, "attempt": job.attempt}
            )
        )
        why = (
            f"no result within the {lease_seconds}s lease (responseTimeoutSeconds) "
            f"on any of {job.attempt} attempts"
        )
        self._fail_job(job, why, JobStatus.FAILED, StepStatus.FAILED)
        self.run()

    def job_timed_out(self, job: JobRef, *, waiting: bool) -> datetime | None:
        """``job``'s attempt outlived ``timeoutSeconds`` (running) or ``pollTimeoutSeconds``
        (``waiting``: never claimed); the step's ``timeoutPolicy`` decides. Returns the next
        attempt's due time when one is scheduled."""
        policy = self.plan.policy(job.step_id)
        field_name = "pollTimeoutSeconds" if waiting else "timeoutSeconds"
        seconds = policy.poll_timeout_seconds if waiting else policy.timeout_seconds
        what = "was not claimed within" if waiting else "did not finish within"
        why = f"attempt {job.attempt} {what} {seconds}s ({field_name})"
        detail = {"attempt": job.attempt, "timeout": field_name, "seconds": seconds}
        self.changes.count(
            "TaskPollTimedOut" if waiting else "TaskTimedOut", Policy=policy.timeout_policy
        )
        if policy.timeout_policy == TimeoutPolicy.ALERT_ONLY:
            # Alert once: the deadline is cleared, and the attempt keeps running (or waiting).
            self.changes.alerted_jobs.append(job)
            self.changes.audit.append(AuditEvent("JOB_TIMEOUT_ALERT", job.id, detail))
            return None
        self.changes.audit.append(AuditEvent("JOB_TIMED_OUT", job.id, detail))
        if policy.timeout_policy == TimeoutPolicy.RETRY and job.retries_remaining > 0:
            return self._retry(job, why, None)
        self.changes.count("JobsTimedOut")
        if policy.timeout_policy == TimeoutPolicy.RETRY:
            self._fail_job(
                job, f"timed out on every attempt: {why}", JobStatus.TIMED_OUT, StepStatus.TIMED_OUT
            )
        else:
            self._fail_job(
                job,
                f"timed out: {why}",
                JobStatus.TIMED_OUT,
                StepStatus.TIMED_OUT,
                instance_status=InstanceStatus.TIMED_OUT,
            )
        self.run()
        return None

    def resume_waiting(self, e: Exec, output: Any, event: str) -> None:
        """A waiting step (USER_TASK, SIGNAL) was completed through the API with ``output``."""
        where = {"stepId": e.step_id, "stepExecutionId": str(e.id)}
        self.changes.audit.append(AuditEvent(event, None, where))
        self.complete(e, output)
        self.run()

    def timer_fired(self, e: Exec) -> None:
        """A TIMER's due time came."""
        where = {"stepId": e.step_id, "stepExecutionId": str(e.id)}
        self.changes.audit.append(AuditEvent("TIMER_FIRED", None, where))
        self.complete(e, {"firedAt": self.now.isoformat()})
        self.run()

    def child_ended(
        self, e: Exec, status: str, output: Any, reason: str | None, event_id: int
    ) -> None:
        """The child instance of SUB_WORKFLOW execution ``e`` ended."""
        from baton.engine.operators.sub_workflow import child_ended

        self.changes.consumed_events.append(event_id)
        child_ended(self, e, status, output, reason)
        self.run()

    def continue_after(self, e: Exec, output: Any, event_id: int) -> None:
        """A continuation that waited for the instance to resume."""
        self.changes.consumed_events.append(event_id)
        self.advance(e, output)
        self.run()

    def cancel(self, reason: str) -> None:
        """The instance is cancelled: its open steps, jobs and child instances with it."""
        self.finish(InstanceStatus.CANCELLED, reason, cancel=True)

    def retry(self, lasts: Mapping[str, Exec]) -> None:
        """A FAILED or TIMED_OUT instance runs again from what failed, keeping what completed;
        ``lasts`` is the last execution of every list, by scope (see ``engine.reopen``)."""
        from baton.engine.reopen import reopen_instance

        inst = self.instance
        inst.status = InstanceStatus.RUNNING
        inst.reason = None
        inst.output = None
        inst.reset_timeout = self.plan.definition.timeout_seconds
        self.changes.instance_changed = True
        self.changes.audit.append(AuditEvent("INSTANCE_RETRIED"))
        self.changes.count("InstancesRetried")
        reopen_instance(self, lasts)
        self.run()

    def pause(self) -> None:
        """No new work until resumed; work in flight finishes, its continuation waits."""
        self.instance.status = InstanceStatus.PAUSED
        self.changes.instance_changed = True
        self.changes.audit.append(AuditEvent("INSTANCE_PAUSED"))

    def resume(self) -> None:
        """Work again; the continuations that waited are run by the caller, one by one."""
        self.instance.status = InstanceStatus.RUNNING
        self.changes.instance_changed = True
        self.changes.audit.append(AuditEvent("INSTANCE_RESUMED"))

    def workflow_timed_out(self) -> None:
        """The instance's own ``timeoutSeconds`` passed; its ``timeoutPolicy`` says what to do."""
        definition = self.plan.definition
        if definition.timeout_policy == "ALERT_ONLY":
            # Alert once: the timeout is cleared, so the sweeper does not find it again.
            self.changes.audit.append(AuditEvent("INSTANCE_TIMEOUT_ALERT"))
            self.changes.instance_changed = True
            self.changes.count("InstancesTimedOutAlert")
            self.instance.clear_timeout = True
            return
        self.finish(
            InstanceStatus.TIMED_OUT,
            f"the instance did not finish within {definition.timeout_seconds}s (timeoutSeconds)",
            cancel=True,
        )

    # --- mechanics: scheduling, completing, failing ---------------------------------------------

    def later(self, work: Callable[[], None]) -> None:
        self._work.append(work)

    def run(self) -> None:
        while self._work:
            self._work.popleft()()

    @property
    def active(self) -> bool:
        return self.instance.status in (InstanceStatus.RUNNING, InstanceStatus.PAUSED)

    def closed(self, scope: str) -> bool:
        """Whether ``scope`` lies in work this decision cancelled (under an operator that failed
        or an instance that ended): nothing more starts, ends or fails there."""
        return not self.active or any(scope.startswith(p) for p in self.changes.cancel_scopes)

    def schedule(self, step: Step, scope: str) -> None:
        """Start an execution of ``step`` in ``scope`` (its operator module decides how)."""
        if self.closed(scope):
            return
        from baton.engine.operators import OPERATORS

        created = self.instance.step_count + len(self.changes.new_steps)
        if created >= self.max_step_executions:
            self.fail_scope(
                scope,
                f"the instance reached {self.max_step_executions} step executions "
                f"(scheduling step {step.id!r})",
            )
            return
        OPERATORS[step.type].schedule(self, step, scope)

    def add_step(
        self, step: Step, status: StepStatus, step_input: Any, scope: str, **columns: Any
    ) -> NewStep:
        """A new step execution row; its place in its operator (branch, item, iteration) is read
        off its scope."""
        key = key_of(scope)
        if key[:1] == "b":
            columns.setdefault("branch", int(key[1:]))
        elif key[:1] == "i":
            columns.setdefault("item_index", int(key[1:]))
        elif key[:1] == "k":
            columns.setdefault("iteration", int(key[1:]))
        new = NewStep(uuid.uuid4(), step.id, step.type, status, step_input, scope, **columns)
        self.changes.new_steps[new.id] = new
        if status == StepStatus.COMPLETED:
            self._done_here.append((step.id, scope, columns.get("output")))
        return new

    def update_step(self, exec_id: uuid.UUID, status: StepStatus, **columns: Any) -> None:
        """Change a step execution: folded into its insert when this decision created it, else
        into this decision's one update of it."""
        new = self.changes.new_steps.get(exec_id)
        if new is not None:
            new.status = status
            for name, value in columns.items():
                if name == "set_wake":
                    continue
                if value is not None or name == "wake_at":
                    setattr(new, name, value)
            return
        current = self.changes.step_updates.get(exec_id)
        scope = columns.pop("scope", current.scope if current else "")
        if current is None:
            self.changes.step_updates[exec_id] = StepUpdate(exec_id, status, scope=scope, **columns)
            return
        merged = {k: v for k, v in columns.items() if v is not None}
        self.changes.step_updates[exec_id] = replace(current, status=status, **merged)

    def complete(self, e: Exec, output: Any) -> None:
        """Step execution ``e`` finished with ``output``: record it and move on."""
        if self.plan.step(e.step_id).type not in MERGED_OUTPUTS:
            # An operator's output is built by the engine (a MAP's collected outputs can be
            # large): above the soft limit it is stored like a worker's.
            try:
                output = self.stored(output, "STEP_OUTPUT")
            except OverLimit as big:
                self.fail(e, f"its output {big}")
                return
        self.update_step(e.id, StepStatus.COMPLETED, output=output, scope=e.scope)
        self._done_here.append((e.step_id, e.scope, output))
        if (
            isinstance(output, dict)
            and output
            and self.plan.step(e.step_id).type in MERGED_OUTPUTS
            and not in_map_item(e.scope)
            # An offloaded output stays the step's own: its reference is no variable.
            and not is_payload_ref(output)
        ):
            # A task's object output is merged into the instance's variables (but not inside a
            # MAP, whose items' outputs are collected as the MAP's output instead; an operator's
            # output only gathers its lists' outputs, already merged).
            self.instance.variables = {**self.instance.variables, **output}
        self.changes.instance_changed = True
        self.advance(e, output)

    def advance(self, e: Exec | NewStep, output: Any) -> None:
        """After ``e`` finished: the next step of its list, or the end of the list."""
        if self.closed(e.scope):
            return
        if self.instance.status == InstanceStatus.PAUSED:
            # The continuation waits for resume.
            self.changes.events.append(
                NewEvent(
                    self.instance.id, "CONTINUE", e.id, {"stepId": e.step_id, "output": output}
                )
            )
            return
        nxt = self.plan.next_after(e.step_id)
        scope = e.scope
        if nxt is not None:
            self.later(lambda: self.schedule(nxt, scope))
        else:
            self.later(lambda: self.list_ended(scope, output))

    def list_ended(self, scope: str, output: Any) -> None:
        """The list of ``scope`` ran to its end with ``output`` (its last step's)."""
        if self.closed(scope):
            return
        if scope == "":
            self.complete_instance()
            return
        from baton.engine.operators import OPERATORS

        owner = self.operator_execution(scope)
        OPERATORS[self.plan.step(owner.step_id).type].list_ended(self, owner, key_of(scope), output)

    def fail(
        self,
        e: Exec | NewStep,
        why: str,
        status: StepStatus = StepStatus.FAILED,
        instance_status: InstanceStatus = InstanceStatus.FAILED,
    ) -> None:
        """Step execution ``e`` failed; its operator (or, at the root, the instance) decides."""
        self.update_step(e.id, status, error=why, scope=e.scope)
        self.changes.instance_changed = True
        said = why if status == StepStatus.TIMED_OUT else f"failed: {why}"  # "timed out: ..."
        self.fail_scope(e.scope, f"step {e.step_id!r} {said}", instance_status)

    def fail_scope(
        self, scope: str, reason: str, instance_status: InstanceStatus = InstanceStatus.FAILED
    ) -> None:
        """Something in ``scope`` failed with ``reason``: tell the operator owning the scope."""
        if self.closed(scope):
            return
        if scope == "":
            self.finish(instance_status, reason, cancel=True)
            return
        from baton.engine.operators import OPERATORS

        owner = self.operator_execution(scope)
        OPERATORS[self.plan.step(owner.step_id).type].child_failed(
            self, owner, key_of(scope), reason, instance_status
        )

    def fail_operator(
        self, owner: Exec, reason: str, instance_status: InstanceStatus = InstanceStatus.FAILED
    ) -> None:
        """An operator execution fails: its open work is cancelled, and the failure moves up."""
        self.cancel_within(owner)
        self.update_step(owner.id, StepStatus.FAILED, error=reason, scope=owner.scope)
        self.changes.instance_changed = True
        self.fail_scope(owner.scope, reason, instance_status)

    def cancel_within(self, owner: Exec | NewStep) -> None:
        """Cancel the open work inside operator execution ``owner`` (not ``owner`` itself)."""
        self._cancel_scope(f"{owner.scope}{owner.id}#")

    def _cancel_scope(self, prefix: str) -> None:
        self.changes.cancel_scopes.append(prefix)
        # What this decision itself opened or reopened in that scope is cancelled here: the
        # statement's cancelling updates cannot see its own inserts.
        cancelled_steps: set[uuid.UUID] = set()
        for new in self.changes.new_steps.values():
            if new.scope.startswith(prefix) and new.status in OPEN_STEP:
                new.status = StepStatus.CANCELLED
                cancelled_steps.add(new.id)
        for update in list(self.changes.step_updates.values()):
            if update.scope.startswith(prefix) and update.status in OPEN_STEP:
                update.status = StepStatus.CANCELLED
        for job in self.changes.new_jobs:
            if job.step_execution_id in cancelled_steps:
                job.status = JobStatus.CANCELLED
        for child in self.changes.children:
            if child.state.parent_step_execution_id in cancelled_steps:
                self.changes.events.append(
                    NewEvent(child.state.id, "CANCEL", None, {"reason": "its parent step ended"})
                )
        for retry in list(self.changes.retried_jobs):
            if retry.job.scope.startswith(prefix):
                self.changes.retried_jobs.remove(retry)
                self.changes.cancelled_jobs.append(retry.job)

    def done_here(self) -> list[tuple[str, str, Any]]:
        """(step id, scope, output) of every execution completed in this decision so far."""
        return list(self._done_here)

    def operator_execution(self, scope: str) -> Exec:
        """The operator execution that owns ``scope`` (from this decision, or read)."""
        exec_id = parent_of(scope)
        assert exec_id is not None
        return self.execution(exec_id)

    def execution(self, exec_id: uuid.UUID) -> Exec:
        found = self._execs.get(exec_id)
        if found is not None:
            return found
        new = self.changes.new_steps.get(exec_id)
        if new is not None:
            return Exec(
                new.id,
                new.step_id,
                new.scope,
                new.status,
                new.attempt,
                new.state,
                new.input,
                new.child_instance_id,
                new.output,
            )
        read = self.reader.execution(exec_id)
        assert read is not None, f"step execution {exec_id} is referenced but missing"
        self._execs[exec_id] = read
        return read

    def reopen(self, e: Exec, state: dict[str, Any] | None) -> Exec:
        """An operator execution that failed or was cancelled runs again (an instance retry),
        with its bookkeeping recomputed as ``state``."""
        opened = replace(e, status=StepStatus.IN_PROGRESS, state=state)
        self._execs[e.id] = opened
        self.update_step(e.id, StepStatus.IN_PROGRESS, state=state, error="", scope=e.scope)
        return opened

    def set_state(self, owner: Exec, state: dict[str, Any]) -> Exec:
        """Record an operator execution's new bookkeeping (kept for the rest of the decision)."""
        updated = replace(owner, state=state)
        self._execs[owner.id] = updated
        self.update_step(owner.id, owner.status, state=state, scope=owner.scope)
        return updated

    def complete_instance(self) -> None:
        params = self.plan.definition.output_parameters
        output = (
            self.resolve(params, "output", "")
            if params is not None
            else dict(self.instance.variables)
        )
        try:
            self.instance.output = self.stored(output, "WORKFLOW_OUTPUT")
        except OverLimit as big:
            self.finish(InstanceStatus.FAILED, f"its output {big}")
            return
        self.finish(InstanceStatus.COMPLETED, None)

    def finish(self, status: InstanceStatus, reason: str | None, *, cancel: bool = False) -> None:
        """The instance ends with ``status``; ``cancel`` ends its open work (and children)."""
        if not self.active:
            return
        inst = self.instance
        inst.status = status
        inst.reason = reason
        self.changes.instance_changed = True
        if cancel:
            self._cancel_scope("")
        detail = {"reason": reason} if reason else None
        self.changes.audit.append(AuditEvent(f"INSTANCE_{status}", None, detail))
        metric = {
            InstanceStatus.COMPLETED: "InstancesCompleted",
            InstanceStatus.CANCELLED: "InstancesCancelled",
        }
        self.changes.count(metric.get(status, "InstancesFailed"))
        if inst.parent_instance_id is not None:
            self.changes.events.append(
                NewEvent(
                    inst.parent_instance_id,
                    "CHILD_ENDED",
                    inst.parent_step_execution_id,
                    {
                        "childId": str(inst.id),
                        "status": status,
                        "output": inst.output,
                        "reason": reason,
                    },
                )
            )
        failure = self.plan.definition.failure_workflow
        if failure and status in (InstanceStatus.FAILED, InstanceStatus.TIMED_OUT):
            from baton.engine.operators.sub_workflow import start_failure_workflow

            start_failure_workflow(self, failure)

    # --- job mechanics --------------------------------------------------------------------------

    def _job_exec(self, job: JobRef) -> Exec:
        return Exec(
            job.step_execution_id, job.step_id, job.scope, StepStatus.IN_PROGRESS, job.attempt
        )

    def _retry(self, job: JobRef, error: str, delay_override: float | None) -> datetime:
        policy = self.plan.policy(job.step_id)
        delay: float = retry_delay_seconds(
            policy.retry_logic,
            policy.retry_delay_seconds,
            job.attempt,  # attempt 1 failed: the first retry
            policy.max_retry_delay_seconds,
        )
        if delay_override is not None:  # the worker asked for its own delay
            delay = delay_override
        run_at = self.now + timedelta(seconds=delay)
        self.changes.instance_changed = True
        self.changes.retried_jobs.append(JobRetry(job, run_at))
        self.update_step(
            job.step_execution_id,
            StepStatus.SCHEDULED,
            error=error,
            attempt=job.attempt + 1,
            scope=job.scope,
        )
        self.changes.audit.append(
            AuditEvent(
                "JOB_RETRY_SCHEDULED",
                job.id,
                {"attempt": job.attempt + 1, "delaySeconds": delay, "runAt": run_at.isoformat()},
            )
        )
        self.changes.count("JobsRetried")
        return run_at

    def _fail_job(
        self,
        job: JobRef,
        why: str,
        job_status: JobStatus,
        step_status: StepStatus,
        *,
        instance_status: InstanceStatus = InstanceStatus.FAILED,
    ) -> None:
        if job_status == JobStatus.TIMED_OUT:
            self.changes.timed_out_jobs.append(job)
        else:
            self.changes.failed_jobs.append(job)
            self.changes.count("JobsFailed")
        self.fail(self._job_exec(job), why, step_status, instance_status)

    # --- expressions ------------------------------------------------------------------------------

    def resolve_input(self, step: Step, scope: str) -> Any:
        """``step``'s input resolved where it is scheduled: an object (an input given as one
        ``${…}`` expression must give one), else :class:`InputNotObject`."""
        value = self.resolve(step.input, f"step:{step.id}", scope)
        if isinstance(value, dict):
            return value
        kind = "null" if value is None else type(value).__name__
        raise InputNotObject(f"its input resolved to {kind}, not an object")

    def resolve(self, template: Any, point: str, scope: str) -> Any:
        """Resolve ``template`` evaluated at ``point`` (see ``Plan.read_depth``) in ``scope``."""
        return expressions.resolve(template, self.expression_scope(point, scope))

    def expression_scope(self, point: str, scope: str) -> expressions.Scope:
        inst = self.instance
        workflow = {
            "input": self.unref(inst.input),
            "variables": inst.variables,
            "instanceId": str(inst.id),
            "correlationId": inst.correlation_id,
            "definitionName": inst.definition_name,
        }
        return expressions.Scope(
            workflow=workflow,
            step_output=lambda step_id: self.read(step_id, point, scope),
            map=self.map_context(scope),
            loops=self.loop_iterations(point, scope),
        )

    def context(self, point: str, scope: str, step_ids: Sequence[str]) -> dict[str, Any]:
        """The JSONata context of a condition: workflow, map, the steps it reads and the running
        iteration of each loop it is inside (``<loopId>.iteration``)."""
        s = self.expression_scope(point, scope)
        out: dict[str, Any] = {"workflow": dict(s.workflow)}
        if s.map is not None:
            out["map"] = dict(s.map)
        for lid, k in s.loops.items():
            out[lid] = {"iteration": k}
        for sid in step_ids:
            out.setdefault(sid, {})["output"] = self.read(sid, point, scope)
        return out

    def loop_iterations(self, point: str, scope: str) -> dict[str, int]:
        """The running iteration (from 1) of each DO_WHILE ``point`` is inside, by loop id: read
        off ``scope``, whose segment for a loop's body is ``<execution>#k<iteration>``."""
        loops = self.plan.loops(point)
        if not loops:
            return {}
        parts = segments(scope)
        return {lid: int(parts[i].split("#k", 1)[1]) for lid, i in loops.items()}

    def read(self, step_id: str, point: str, scope: str) -> Any:
        """The output of the execution of ``step_id`` that an expression at ``point`` in
        ``scope`` reads: the latest one inside the list the two share."""
        prefix = truncate(scope, self.plan.read_depth(point, step_id))
        for sid, done_scope, output in reversed(self._done_here):
            if sid == step_id and done_scope.startswith(prefix):
                return self.unref(output)
        key = (step_id, prefix)
        if key not in self._outputs:
            self._outputs[key] = self.unref(self.reader.output(step_id, prefix))
        return self._outputs[key]

    def map_context(self, scope: str) -> dict[str, Any] | None:
        """``{item, index}`` of the innermost MAP item ``scope`` is in (None outside MAPs)."""
        for part in reversed(segments(scope)):
            exec_id, key = part.split("#", 1)
            if key.startswith("i"):
                index = int(key[1:])
                items = self.unref(self.execution(uuid.UUID(exec_id)).input)
                item = items[index] if isinstance(items, list) and index < len(items) else None
                return {"item": item, "index": index}
        return None

    def payload_json(self, value: Any) -> str:
        return json.dumps(value, separators=(",", ":"))

    # --- payloads ---------------------------------------------------------------------------------

    def stored(self, value: Any, kind: str) -> Any:
        """``value`` as the engine keeps it: itself up to ``kind``'s soft limit, above it a
        reference to its JSON in the payload bucket; :class:`OverLimit` above the hard limit.
        Without a payload bucket, and for a value that is already a reference, itself."""
        if self.offload is None or self.payload_limits is None or is_payload_ref(value):
            return value
        if value is None or isinstance(value, (bool, int, float)):
            return value
        limit = limit_of_kind(self.payload_limits, kind)
        text = self.payload_json(value)
        size = len(text)  # ASCII (json.dumps escapes the rest): characters are bytes
        if size <= limit.soft_bytes:
            return value
        if size > limit.hard_bytes:
            self.changes.count("PayloadRefused", Kind=kind)
            raise OverLimit(
                f"is {size} bytes, above the {kind.lower().replace('_', ' ')} hard limit of "
                f"{limit.hard_bytes} bytes"
            )
        return self.offload(text, kind)

    def unref_all(self, values: dict[int, Any]) -> dict[int, Any]:
        """``values`` with each offloaded element read back (a join builds one value of them)."""
        return {k: self.unref(v) for k, v in values.items()}


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
