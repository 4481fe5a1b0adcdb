"""Drive the pure decider through a run, decision by decision, without a database.

``Run`` keeps the step executions and jobs the decisions wrote (applying each decision's
``Changes`` the way the writer's statement does) and answers the decider's reads from them, so a
unit test can say "start, complete this job, fire that timer" and look at what came of it. It is
a reader for the decider's unit tests only; every engine test with a store runs on PostgreSQL.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from baton.definitions import parse_definition
from baton.engine.decide import (
    Changes,
    ChildPlan,
    Decider,
    Exec,
    InstanceState,
    JobRef,
)
from baton.engine.operators.sub_workflow import FAILURE_WORKFLOW_EVENT, start_failure_workflow
from baton.engine.plan import Plan
from baton.payload_ref import REF_KEY, is_payload_ref, payload_ref
from baton.settings import PayloadLimit, PayloadLimits
from baton.status import InstanceStatus, JobStatus, StepStatus

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def small_limits(soft: int, hard: int) -> PayloadLimits:
    """The same soft and hard limit for every kind (tests offload at a few hundred bytes)."""
    one = PayloadLimit(soft, hard)
    return PayloadLimits(one, one, one)


OPEN = (StepStatus.SCHEDULED, StepStatus.IN_PROGRESS)


@dataclass
class Row:
    """A step execution as the writer would leave it."""

    id: uuid.UUID
    step_id: str
    step_type: str
    scope: str
    status: StepStatus
    seq: int
    input: Any = None
    output: Any = None
    error: str | None = None
    attempt: int = 1
    state: dict[str, Any] | None = None
    wake_at: datetime | None = None
    child_instance_id: uuid.UUID | None = None
    branch: int | None = None
    item_index: int | None = None
    iteration: int | None = None
    parent_id: uuid.UUID | None = None

    def exec(self) -> Exec:
        return Exec(
            self.id,
            self.step_id,
            self.scope,
            self.status,
            self.attempt,
            self.state,
            self.input,
            self.child_instance_id,
            self.output,
        )


@dataclass
class Job:
    id: uuid.UUID
    step_execution_id: uuid.UUID
    job_type: str
    status: JobStatus
    retries_remaining: int
    payload: Any
    attempt: int = 1


@dataclass
class Run:
    """One instance, in memory. ``children`` are the definitions a SUB_WORKFLOW may start."""

    definition: dict[str, Any]
    input: dict[str, Any] = field(default_factory=dict)
    children: dict[str, dict[str, Any]] = field(default_factory=dict)
    max_step_executions: int = 100_000
    now: datetime = NOW
    # With limits, the decider offloads to ``bucket`` (an in-memory stand-in for S3).
    payload_limits: PayloadLimits | None = None

    def __post_init__(self) -> None:
        self.plan = Plan(parse_definition(self.definition))
        self.state = InstanceState(
            uuid.uuid4(), self.plan.definition.name, InstanceStatus.RUNNING, 1, self.input, {}
        )
        self.rows: dict[uuid.UUID, Row] = {}
        self.jobs: dict[uuid.UUID, Job] = {}
        self.last: Changes = Changes()
        self.started_children: list[Any] = []
        self.events: list[Any] = []
        self.bucket: dict[str, str] = {}
        self._seq = 0

    def _offload(self, text: str, kind: str) -> dict[str, Any]:
        path = f"payloads/{kind.lower()}/{len(self.bucket)}"
        self.bucket[path] = text
        return payload_ref(path, len(text))

    def _unref(self, value: Any) -> Any:
        return json.loads(self.bucket[value[REF_KEY]]) if is_payload_ref(value) else value

    # --- decisions ------------------------------------------------------------------------

    def decide(self, event: Callable[[Decider], Any]) -> Any:
        offloads = self.payload_limits is not None
        d = Decider(
            self.plan,
            self.state,
            self,
            self.now,
            max_step_executions=self.max_step_executions,
            unref=self._unref if offloads else None,
            offload=self._offload if offloads else None,
            payload_limits=self.payload_limits,
        )
        result = event(d)
        self.apply(d.changes)
        self.last = d.changes
        return result

    def start(self) -> Run:
        self.decide(lambda d: d.start())
        return self

    def complete(self, step_id: str, output: Any = None, *, index: int = 0) -> None:
        """Complete the ``index``-th open job of ``step_id`` (by creation)."""
        job = self.open_jobs(step_id)[index]
        ref = self.ref(job)
        self.decide(lambda d: d.job_completed(ref, {} if output is None else output))

    def fail(self, step_id: str, error: str = "boom", *, retryable: bool = False) -> None:
        job = self.open_jobs(step_id)[0]
        ref = self.ref(job)
        self.decide(lambda d: d.job_failed(ref, error=error, retryable=retryable))

    def resume_waiting(self, step_id: str, output: Any, *, index: int = 0) -> None:
        e = self.open(step_id)[index].exec()
        self.decide(lambda d: d.resume_waiting(e, output, "SIGNAL_RECEIVED"))

    def fire_timer(self, step_id: str) -> None:
        e = self.open(step_id)[0].exec()
        self.decide(lambda d: d.timer_fired(e))

    def child_ended(self, step_id: str, status: str, output: Any = None) -> None:
        e = self.open(step_id)[0].exec()
        self.decide(lambda d: d.child_ended(e, status, output, None, 0))

    def deliver_failure_workflow(self, view: dict[str, Any] | None = None) -> None:
        """Start the failure workflow the instance's end asked for (its ``FAILURE_WORKFLOW``
        event), as the engine does once that decision has committed (``Duties.deliver_events``),
        telling it of ``view`` (Conductor's view of the instance: the engine's ``failed_view``)."""
        (event,) = [e for e in self.events if e.kind == FAILURE_WORKFLOW_EVENT]
        self.events.remove(event)
        output = self.state.output
        self.decide(lambda d: start_failure_workflow(d, dict(event.payload), output, view))

    def retry(self) -> None:
        latest: dict[str, dict[str, Exec]] = {}
        for row in sorted(self.rows.values(), key=lambda r: r.seq):
            latest.setdefault(row.scope, {})[row.step_id] = row.exec()
        self.decide(lambda d: d.retry(latest))

    # --- applying what a decision wrote ------------------------------------------------------

    def apply(self, changes: Changes) -> None:
        written_steps = set(changes.step_updates) | set(changes.new_steps)
        written_jobs = set(changes.written_jobs())
        self.state.step_count += len(changes.new_steps)
        for s in changes.new_steps.values():
            self._seq += 1
            self.rows[s.id] = Row(
                s.id,
                s.step_id,
                s.step_type,
                s.scope,
                s.status,
                self._seq,
                s.input,
                s.output,
                s.error,
                s.attempt,
                s.state,
                s.wake_at,
                s.child_instance_id,
                s.branch,
                s.item_index,
                s.iteration,
                s.parent_id,
            )
        for j in changes.new_jobs:
            self.jobs[j.id] = Job(
                j.id, j.step_execution_id, j.job_type, j.status, j.retries_remaining, j.payload
            )
        for ref in changes.completed_jobs:
            self.jobs[ref.id].status = JobStatus.COMPLETED
        for ref in changes.failed_jobs:
            self.jobs[ref.id].status = JobStatus.FAILED
        for ref in changes.timed_out_jobs:
            self.jobs[ref.id].status = JobStatus.TIMED_OUT
        for ref in changes.cancelled_jobs:
            self.jobs[ref.id].status = JobStatus.CANCELLED
        for retry in changes.retried_jobs:
            job = self.jobs[retry.job.id]
            job.status, job.attempt = JobStatus.UNLOCKED, job.attempt + 1
            job.retries_remaining -= 1
        for prefix in changes.cancel_scopes:
            for job in self.jobs.values():
                row = self.rows[job.step_execution_id]
                if (
                    job.status in (JobStatus.UNLOCKED, JobStatus.LOCKED)
                    and row.scope.startswith(prefix)
                    and job.id not in written_jobs
                ):
                    job.status = JobStatus.CANCELLED
        for u in changes.step_updates.values():
            row = self.rows[u.id]
            row.status = u.status
            for name in ("output", "attempt", "state", "child_instance_id"):
                value = getattr(u, name)
                if value is not None:
                    setattr(row, name, value)
            if u.error is not None:
                row.error = u.error or None
            if u.set_wake:
                row.wake_at = u.wake_at
        for prefix in changes.cancel_scopes:
            for row in self.rows.values():
                if (
                    row.status in OPEN
                    and row.scope.startswith(prefix)
                    and row.id not in written_steps
                ):
                    row.status = StepStatus.CANCELLED
        self.started_children.extend(changes.children)
        self.events.extend(changes.events)

    # --- the decider's reads (``baton.engine.decide.Reader``) -------------------------------

    def output(self, step_id: str, scope_prefix: str) -> Any:
        done = [
            r
            for r in self.rows.values()
            if r.step_id == step_id
            and r.status == StepStatus.COMPLETED
            and r.scope.startswith(scope_prefix)
        ]
        return max(done, key=lambda r: r.seq).output if done else None

    def execution(self, exec_id: uuid.UUID) -> Exec | None:
        row = self.rows.get(exec_id)
        return None if row is None else row.exec()

    def last_outputs(self, parent_id: uuid.UUID, step_ids: Sequence[str]) -> list[dict[str, Any]]:
        out: dict[tuple[str, int | None, int | None], Row] = {}
        for r in sorted(self.rows.values(), key=lambda r: r.seq):
            if (
                r.parent_id == parent_id
                and r.step_id in step_ids
                and r.status == StepStatus.COMPLETED
            ):
                out[(r.step_id, r.branch, r.item_index)] = r
        return [
            {
                "step_id": r.step_id,
                "branch": r.branch,
                "item_index": r.item_index,
                "output": r.output,
            }
            for r in out.values()
        ]

    def outputs_by_list(
        self, prefix: str, step_ids: Sequence[str], after: tuple[str, str] | None = None
    ) -> list[dict[str, Any]]:
        """As instance_sql.LAST_OUTPUTS_BY_LIST: the latest completed output of each of
        ``step_ids`` in each list under ``prefix`` (all of them: ``after`` only allows fewer)."""
        out: dict[tuple[str, str], Row] = {}
        for r in sorted(self.rows.values(), key=lambda r: r.seq):
            if (
                r.step_id in step_ids
                and r.status == StepStatus.COMPLETED
                and r.scope.startswith(prefix)
            ):
                out[(r.scope[len(prefix) :].split("/", 1)[0], r.step_id)] = r
        return [{"list": lst, "step_id": sid, "output": r.output} for (lst, sid), r in out.items()]

    def child_plan(
        self,
        name: str | None,
        version: int | None,
        inline: dict[str, Any] | None,
        *,
        from_conductor: bool = False,
    ) -> ChildPlan | None:
        body = inline if inline is not None else self.children.get(name or "")
        if body is None:
            return None
        return ChildPlan(0, Plan(parse_definition(body)), body["name"], 1)

    # --- looking at the run ----------------------------------------------------------------------

    def executions(self, step_id: str | None = None) -> list[Row]:
        rows = sorted(self.rows.values(), key=lambda r: r.seq)
        return [r for r in rows if step_id is None or r.step_id == step_id]

    def open(self, step_id: str) -> list[Row]:
        return [r for r in self.executions(step_id) if r.status in OPEN]

    def open_jobs(self, step_id: str | None = None) -> list[Job]:
        jobs = [
            j
            for j in self.jobs.values()
            if j.status in (JobStatus.UNLOCKED, JobStatus.LOCKED)
            and (step_id is None or self.rows[j.step_execution_id].step_id == step_id)
        ]
        return sorted(jobs, key=lambda j: self.rows[j.step_execution_id].seq)

    def ref(self, job: Job) -> JobRef:
        row = self.rows[job.step_execution_id]
        return JobRef(
            job.id,
            row.step_id,
            row.id,
            JobStatus.LOCKED,
            "w",
            job.attempt,
            job.retries_remaining,
            row.scope,
        )

    @property
    def status(self) -> InstanceStatus:
        return self.state.status

    def jobs_of(self, step_id: str) -> list[JobStatus]:
        jobs = [j for j in self.jobs.values() if self.rows[j.step_execution_id].step_id == step_id]
        return [j.status for j in sorted(jobs, key=lambda j: self.rows[j.step_execution_id].seq)]

    def statuses(self, step_id: str) -> list[str]:
        return [str(r.status) for r in self.executions(step_id)]
