"""The decider: given an instance's state and an event, what changes.

Pure logic over in-memory state: it records the rows to write in :class:`Changes` and the store
writes them in the same transaction that locked the instance. Nothing here does I/O except through
``step_output``, the read-only lookup of earlier step outputs for expressions.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from baton import expressions
from baton.definitions import ServiceTaskStep, SignalStep, Step, TimeoutPolicy, UserTaskStep
from baton.engine.plan import Plan
from baton.engine.retry import retry_delay_seconds
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
    queue_task_id: uuid.UUID | None = None  # set when a queue trigger started the instance


@dataclass(frozen=True, slots=True)
class NewStep:
    id: uuid.UUID
    step_id: str
    step_type: str
    status: StepStatus
    input: Any
    error: str | None = None


@dataclass(frozen=True, slots=True)
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


@dataclass(frozen=True, slots=True)
class StepUpdate:
    id: uuid.UUID
    status: StepStatus
    output: Any = None
    error: str | None = None
    attempt: int | None = None


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


@dataclass(frozen=True, slots=True)
class JobRetry:
    job: JobRef
    run_at: datetime


@dataclass(frozen=True, slots=True)
class AuditEvent:
    event: str
    job_id: uuid.UUID | None = None
    detail: Mapping[str, Any] | None = None


@dataclass(slots=True)
class Changes:
    """Everything one decision writes, flushed by the store in one round trip."""

    new_steps: list[NewStep] = field(default_factory=list)
    new_jobs: list[NewJob] = field(default_factory=list)
    step_updates: list[StepUpdate] = field(default_factory=list)
    completed_jobs: list[JobRef] = field(default_factory=list)
    failed_jobs: list[JobRef] = field(default_factory=list)
    timed_out_jobs: list[JobRef] = field(default_factory=list)
    retried_jobs: list[JobRetry] = field(default_factory=list)
    alerted_jobs: list[JobRef] = field(default_factory=list)  # timed out, kept running
    cancel_open_work: bool = False  # instance ended: cancel its open steps and jobs
    audit: list[AuditEvent] = field(default_factory=list)
    instance_changed: bool = False
    counters: dict[str, int] = field(default_factory=dict)
    # Metrics that also have a series by dimension (the sink records the total too).
    dimensioned: list[tuple[str, int, dict[str, str]]] = field(default_factory=list)

    def count(self, name: str, n: int = 1, **dimensions: str) -> None:
        """Add ``n`` to metric ``name`` (and to its series by ``dimensions``, if any)."""
        if dimensions:
            self.dimensioned.append((name, n, dimensions))
        else:
            self.counters[name] = self.counters.get(name, 0) + n

    def written_jobs(self) -> list[uuid.UUID]:
        """The jobs this decision writes itself (so cancelling open work leaves them be)."""
        jobs = [*self.completed_jobs, *self.failed_jobs, *self.timed_out_jobs, *self.alerted_jobs]
        return [j.id for j in jobs] + [r.job.id for r in self.retried_jobs]


StepOutputLookup = Callable[[str], Any]


class Decider:
    """One decision on one instance. Call one event method, then read ``changes``."""

    def __init__(
        self,
        plan: Plan,
        instance: InstanceState,
        step_output: StepOutputLookup,
        now: datetime,
        *,
        max_job_input_bytes: int = 2_000_000,
    ) -> None:
        self.plan = plan
        self.instance = instance
        self.now = now
        self.max_job_input_bytes = max_job_input_bytes
        self.changes = Changes()
        self._outputs: dict[str, Any] = {}
        self._lookup = step_output

    # --- events -----------------------------------------------------------------------------

    def start(self) -> None:
        self.changes.audit.append(AuditEvent("INSTANCE_STARTED"))
        self.changes.count("InstancesStarted")
        self._schedule(self.plan.first())

    def step_completed(self, step_id: str, step_execution_id: uuid.UUID, output: Any) -> None:
        """A step finished successfully with ``output`` (a dict merges into variables)."""
        self.changes.step_updates.append(
            StepUpdate(step_execution_id, StepStatus.COMPLETED, output)
        )
        self._outputs[step_id] = output
        if isinstance(output, dict) and output:
            self.instance.variables = {**self.instance.variables, **output}
        self.changes.instance_changed = True
        self._advance_after(step_id)

    def job_completed(self, job: JobRef, output: Any) -> None:
        """A worker completed its attempt of ``job`` with ``output``."""
        self.changes.completed_jobs.append(job)
        self.changes.audit.append(AuditEvent("JOB_COMPLETED", job.id, {"attempt": job.attempt}))
        self.changes.count("JobsCompleted")
        self.step_completed(job.step_id, job.step_execution_id, output)

    def job_failed(
        self,
        job: JobRef,
        *,
        error: str,
        retryable: bool,
        delay_override: float | None = None,
    ) -> datetime | None:
        """A worker reported a failure: schedule a retry (returns when it is due) or fail the
        step, and with it the instance (returns None)."""
        self.changes.audit.append(
            AuditEvent(
                "JOB_FAILED",
                job.id,
                {"error": error, "retryable": retryable, "attempt": job.attempt},
            )
        )
        if retryable and job.retries_remaining > 0:
            return self._retry(job, error, delay_override)
        why = (
            error if not retryable else f"{error} (retries exhausted after {job.attempt} attempts)"
        )
        self._fail_job(job, why)
        return None

    def lease_exhausted(self, job: JobRef, lease_seconds: int) -> None:
        """``job``'s lease lapsed with no retries left: every attempt's worker went silent."""
        self.changes.audit.append(
            AuditEvent(
                "JOB_LEASE_EXPIRED",
                job.id,
                {"workerId": job.worker_id, "attempt": job.attempt},
            )
        )
        self._fail_job(
            job,
            f"no result within the {lease_seconds}s lease (responseTimeoutSeconds) "
            f"on any of {job.attempt} attempts",
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
        self.changes.step_updates.append(
            StepUpdate(
                job.step_execution_id, StepStatus.SCHEDULED, error=error, attempt=job.attempt + 1
            )
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

    def _fail_job(self, job: JobRef, why: str) -> None:
        self.changes.failed_jobs.append(job)
        self.changes.count("JobsFailed")
        self.changes.step_updates.append(
            StepUpdate(job.step_execution_id, StepStatus.FAILED, error=why)
        )
        self._finish(InstanceStatus.FAILED, f"step {job.step_id!r} failed: {why}")

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
        self.changes.timed_out_jobs.append(job)
        self.changes.count("JobsTimedOut")
        self.changes.step_updates.append(
            StepUpdate(job.step_execution_id, StepStatus.TIMED_OUT, error=why)
        )
        if policy.timeout_policy == TimeoutPolicy.RETRY:
            reason = f"step {job.step_id!r} timed out on every attempt: {why}"
            self._finish(InstanceStatus.FAILED, reason)
        else:
            self._finish(InstanceStatus.TIMED_OUT, f"step {job.step_id!r} timed out: {why}")
        return None

    def resume_waiting(
        self, step_id: str, step_execution_id: uuid.UUID, output: Any, event: str
    ) -> None:
        """A waiting step (USER_TASK, SIGNAL) was completed through the API with ``output``."""
        self.changes.audit.append(AuditEvent(event, None, {"stepId": step_id}))
        self.step_completed(step_id, step_execution_id, output)

    def cancel(self, reason: str) -> None:
        """The instance is cancelled: its open steps and jobs are cancelled with it."""
        self._finish(InstanceStatus.CANCELLED, reason)

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
        self._finish(
            InstanceStatus.TIMED_OUT, f"workflow timed out after {definition.timeout_seconds}s"
        )

    # --- mechanics ---------------------------------------------------------------------------

    def _advance_after(self, step_id: str) -> None:
        nxt = self.plan.next_after(step_id)
        if nxt is not None:
            self._schedule(nxt)
            return
        container = self.plan.container_of(step_id)
        if container is None:
            self._complete_instance()
        # Container step types (SWITCH, PARALLEL...) resolve their end-of-list here.

    def _schedule(self, step: Step) -> None:
        scheduler = _SCHEDULERS[step.type]
        scheduler(self, step)

    def _scope(self) -> expressions.Scope:
        inst = self.instance
        workflow = {
            "input": inst.input,
            "variables": inst.variables,
            "instanceId": str(inst.id),
            "correlationId": inst.correlation_id,
            "definitionName": inst.definition_name,
        }
        return expressions.Scope(workflow=workflow, step_output=self._step_output)

    def _step_output(self, step_id: str) -> Any:
        if step_id not in self._outputs:
            self._outputs[step_id] = self._lookup(step_id)
        return self._outputs[step_id]

    def resolve(self, template: Any) -> Any:
        return expressions.resolve(template, self._scope())

    def add_step(
        self, step: Step, status: StepStatus, step_input: Any, error: str | None = None
    ) -> uuid.UUID:
        sid = uuid.uuid4()
        self.changes.new_steps.append(NewStep(sid, step.id, step.type, status, step_input, error))
        return sid

    def fail_step_at_schedule(self, step: Step, step_input: Any, why: str) -> None:
        """A step that cannot even be scheduled fails at once, and the instance with it."""
        self.add_step(step, StepStatus.FAILED, step_input, error=why)
        self._finish(InstanceStatus.FAILED, f"step {step.id!r} failed: {why}")

    def _complete_instance(self) -> None:
        params = self.plan.definition.output_parameters
        output = self.resolve(params) if params is not None else dict(self.instance.variables)
        self.instance.output = output
        self._finish(InstanceStatus.COMPLETED, None)

    def _finish(self, status: InstanceStatus, reason: str | None) -> None:
        inst = self.instance
        inst.status = status
        inst.reason = reason
        self.changes.instance_changed = True
        self.changes.cancel_open_work = status != InstanceStatus.COMPLETED
        detail = {"reason": reason} if reason else None
        self.changes.audit.append(AuditEvent(f"INSTANCE_{status}", None, detail))
        metric = {
            InstanceStatus.COMPLETED: "InstancesCompleted",
            InstanceStatus.CANCELLED: "InstancesCancelled",
        }
        self.changes.count(metric.get(status, "InstancesFailed"))


# --- step types: each knows how to schedule itself; adding a type is a local change ----------


def _schedule_service_task(d: Decider, step: Step) -> None:
    assert isinstance(step, ServiceTaskStep)
    policy = d.plan.policy(step.id)
    # The task definition's inputTemplate supplies defaults under the step's own input (the step
    # wins; nested objects are merged key by key, as Conductor does).
    step_input = merged(d.resolve(policy.input_template), d.resolve(step.input))
    payload_json = json.dumps(step_input, separators=(",", ":"))
    if len(payload_json) > d.max_job_input_bytes:
        # Refused when scheduled: a job poll could never hand it out under Lambda's 6 MB.
        why = (
            f"its resolved input is {len(payload_json)} bytes, above the limit of "
            f"{d.max_job_input_bytes} bytes"
        )
        d.fail_step_at_schedule(step, step_input, why)
        return
    sid = d.add_step(step, StepStatus.SCHEDULED, step_input)
    job_id = uuid.uuid4()
    d.changes.new_jobs.append(
        NewJob(
            id=job_id,
            step_execution_id=sid,
            job_type=step.job_type,
            lease_seconds=policy.lease_seconds,
            retries_remaining=policy.retry_count,
            payload=step_input,
            payload_json=payload_json,
            poll_timeout_seconds=policy.poll_timeout_seconds,
            timeout_seconds=policy.timeout_seconds,
        )
    )
    d.changes.audit.append(AuditEvent("JOB_CREATED", job_id, {"stepId": step.id}))


def _schedule_waiting_step(d: Decider, step: Step) -> None:
    assert isinstance(step, UserTaskStep | SignalStep)
    d.add_step(step, StepStatus.IN_PROGRESS, d.resolve(step.input))


_SCHEDULERS: dict[str, Callable[[Decider, Step], None]] = {
    "SERVICE_TASK": _schedule_service_task,
    "USER_TASK": _schedule_waiting_step,
    "SIGNAL": _schedule_waiting_step,
}


def merged(defaults: Any, values: Any) -> Any:
    """``values`` over ``defaults``: objects merged key by key, anything else replaced."""
    if isinstance(defaults, dict) and isinstance(values, dict):
        out = dict(defaults)
        for key, value in values.items():
            out[key] = merged(defaults[key], value) if key in defaults else value
        return out
    return values
