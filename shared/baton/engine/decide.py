"""The decider: given an instance's state and an event, what changes.

Pure logic over in-memory state: it records the rows to write in :class:`Changes` and the writer
sends them in one statement. Its only I/O is through a :class:`Reader`: read-only lookups (an
earlier step's output, an operator's execution, a child definition) inside the decision's
transaction.

The decider is in three layers, each a module: what a decision holds and reads
(``engine.decision_state``), how work moves (``engine.decision_flow``: scheduling, completing,
failing, cancelling, each step type's part done by its operator in ``engine.operators``), and,
here, the events that start a decision (a job's result, a timer, a child's end, an instance
operation). The records it reads and writes are in ``engine.records``, re-exported here.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from baton.engine.decision_flow import MERGED_OUTPUTS, OPEN_STEP, DecisionFlow
from baton.engine.decision_state import MAX_STEP_EXECUTIONS
from baton.engine.operators import sub_workflow
from baton.engine.records import (
    AuditEvent,
    Changes,
    ChildPlan,
    ChildStart,
    Exec,
    InputNotObject,
    InstanceState,
    JobRef,
    JobRetry,
    NewEvent,
    NewJob,
    NewStep,
    NoReads,
    OverLimit,
    Reader,
    StepUpdate,
    child_scope,
    in_map_item,
    key_of,
    limit_of_kind,
    parent_of,
    segments,
    truncate,
)
from baton.engine.reopen import reopen_instance, rewind
from baton.engine.retry import retry_delay_seconds
from baton.model import TimeoutPolicy
from baton.status import InstanceStatus, JobStatus, StepStatus

__all__ = [
    "MAX_STEP_EXECUTIONS",
    "MERGED_OUTPUTS",
    "OPEN_STEP",
    "AuditEvent",
    "Changes",
    "ChildPlan",
    "ChildStart",
    "Decider",
    "Exec",
    "InputNotObject",
    "InstanceState",
    "JobRef",
    "JobRetry",
    "NewEvent",
    "NewJob",
    "NewStep",
    "NoReads",
    "OverLimit",
    "Reader",
    "StepUpdate",
    "child_scope",
    "in_map_item",
    "key_of",
    "limit_of_kind",
    "parent_of",
    "segments",
    "truncate",
]


class Decider(DecisionFlow):
    """One decision on one instance. Call an event method, then read ``changes``.

    Several events may be applied in turn (a batch's results for one instance), each seeing the
    state the ones before left; the caller keeps out an event whose work an earlier one ended
    (``closed``) and one that ends work after others started some (``cancel_scopes`` grew),
    since what a cancellation ends is found in the tables, not in this decision's new rows.
    A new instance's first decision is ``start()`` (in ``DecisionFlow``)."""

    # --- events -----------------------------------------------------------------------------

    def job_completed(
        self, job: JobRef, output: Any, *, late: tuple[int, str] | None = None
    ) -> None:
        """A worker completed its attempt of ``job`` with ``output``. ``late``: (attempt, worker)
        of an earlier attempt whose lease lapsed, whose result completes the job in place of
        the current attempt's (``job`` as read, which guards the write)."""
        self.changes.completed_jobs.append(job)
        detail: dict[str, Any] = {"attempt": job.attempt, "workerId": job.worker_id}
        if late is not None:
            detail = {
                "attempt": late[0],
                "workerId": late[1],
                "late": True,
                "supersededAttempt": job.attempt,
                "supersededWorkerId": job.worker_id,
            }
        self.changes.audit.append(AuditEvent("JOB_COMPLETED", job.id, detail))
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
        output: Any = None,
    ) -> datetime | None:
        """A worker reported a failure: schedule a retry (returns when it is due) or fail the
        step (returns None), keeping ``output`` (what the worker gave with it) as the failed
        step's."""
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
        spent = self._budget_spent(job) if retryable and job.retries_remaining > 0 else None
        if retryable and job.retries_remaining > 0 and spent is None:
            return self._retry(job, error, delay_override)
        tries = f"{job.attempt} attempt{'s' if job.attempt != 1 else ''}"
        why = error if not retryable else f"{error} (retries exhausted after {tries})"
        if spent is not None:
            why = f"{error} ({spent})"
        self._fail_job(job, why, JobStatus.FAILED, StepStatus.FAILED, output=output)
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
            f"timed out: no result within the {lease_seconds}s lease (responseTimeoutSeconds) "
            f"on {'its one attempt' if job.attempt == 1 else f'any of {job.attempt} attempts'}"
        )
        # The step times out, as Conductor's task does on its responseTimeoutSeconds.
        self._fail_job(job, why, JobStatus.FAILED, StepStatus.TIMED_OUT)
        self.run()

    def job_timed_out(self, job: JobRef, *, waiting: bool, budget: bool = False) -> datetime | None:
        """``job``'s attempt outlived ``timeoutSeconds`` (running) or ``pollTimeoutSeconds``
        (``waiting``: not claimed yet), or (``budget``) its step outlived its
        ``totalTimeoutSeconds``; the step's ``timeoutPolicy`` decides. Returns the next
        attempt's due time when one is scheduled."""
        policy = self.plan.policy(job.step_id)
        if budget:
            # Its step's budget over all attempts came first (totalTimeoutSeconds, Conductor's
            # checkTotalTimeout), the attempt running, waiting to be claimed or waiting for its
            # retry: no retry follows.
            field_name, seconds = "totalTimeoutSeconds", policy.total_timeout_seconds
            what = "waiting" if waiting else "running"
            why = (
                f"attempt {job.attempt} was still {what} {seconds}s after the step was first "
                f"scheduled ({field_name})"
            )
        else:
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
        retrying = policy.timeout_policy == TimeoutPolicy.RETRY and job.retries_remaining > 0
        spent = self._budget_spent(job) if retrying and not budget else None
        if retrying and not budget and spent is None:
            return self._retry(job, why, None)
        self.changes.count("JobsTimedOut")
        if budget:
            # Its timeoutPolicy (RETRY or TIME_OUT_WF) times the step out for good, and with it
            # the instance unless the step is optional: Conductor's retry guard ends such a
            # workflow TIMED_OUT.
            self._fail_job(job, f"timed out: {why}", JobStatus.TIMED_OUT, StepStatus.TIMED_OUT)
        elif spent is not None:
            self._fail_job(
                job, f"timed out: {why} ({spent})", JobStatus.TIMED_OUT, StepStatus.TIMED_OUT
            )
        elif policy.timeout_policy == TimeoutPolicy.RETRY:
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

    def resume_waiting(self, e: Exec, output: Any, event: str, failure: str | None = None) -> None:
        """A waiting step (USER_TASK, SIGNAL, TIMER, SUB_WORKFLOW) was completed through the
        API with ``output``, or failed with ``failure`` as its reason (the output kept as the
        step's)."""
        where: dict[str, Any] = {"stepId": e.step_id, "stepExecutionId": str(e.id)}
        if failure is not None:
            where["reason"] = failure
        self.changes.audit.append(AuditEvent(event, None, where))
        if failure is None:
            self.complete(e, output)
        else:
            self.fail(e, failure, output=output)
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
        self.changes.consumed_events.append(event_id)
        sub_workflow.child_ended(self, e, status, output, reason)
        self.run()

    def continue_after(
        self, e: Exec, output: Any, event_id: int, failure: str | None = None
    ) -> None:
        """A continuation that waited for the instance to resume (``failure``: the one a
        permissive last step left its list)."""
        self.changes.consumed_events.append(event_id)
        if failure is not None:
            self._list_failures[e.scope] = failure
        self.advance(e, output)
        self.run()

    def cancel(self, reason: str) -> None:
        """The instance is cancelled: its open steps, jobs and child instances with it."""
        self.finish(InstanceStatus.CANCELLED, reason, cancel=True)

    def retry(self, latest: Mapping[str, Mapping[str, Exec]]) -> None:
        """A FAILED, TIMED_OUT or CANCELLED instance runs again from what did not complete;
        ``latest`` is, by scope, the latest execution of each step there (see
        ``engine.reopen``)."""
        self._running_again(AuditEvent("INSTANCE_RETRIED"))
        reopen_instance(self, latest)
        self.run()

    def rerun_from(
        self,
        latest: Mapping[str, Mapping[str, Exec]],
        target: Exec | None,
        *,
        wait: bool = False,
        detail: dict[str, Any] | None = None,
        waits: frozenset[uuid.UUID] = frozenset(),
    ) -> None:
        """An ended instance runs again from ``target`` (see ``engine.reopen.rewind``)."""
        self._running_again(AuditEvent("INSTANCE_RERUN", None, detail))
        rewind(self, latest, target, wait=wait, waits=waits)
        self.run()

    def _running_again(self, event: AuditEvent) -> None:
        """The instance runs again (a retry or a rerun): RUNNING, its reason, output and
        timeout reset."""
        inst = self.instance
        inst.status = InstanceStatus.RUNNING
        inst.reason = None
        inst.output = None
        inst.reset_timeout = self.plan.definition.timeout_seconds
        self.changes.instance_changed = True
        self.changes.audit.append(event)
        self.changes.count("InstancesRetried")

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

    # --- job mechanics --------------------------------------------------------------------------

    def _job_exec(self, job: JobRef) -> Exec:
        return Exec(
            job.step_execution_id, job.step_id, job.scope, StepStatus.IN_PROGRESS, job.attempt
        )

    def _budget_spent(self, job: JobRef) -> str | None:
        """Why ``job``'s step may not run or be retried any more for its
        ``totalTimeoutSeconds`` (a budget over all its attempts, from its first scheduling, as
        Conductor's ``firstScheduledTime``), or None."""
        total = self.plan.policy(job.step_id).total_timeout_seconds
        if not total:
            return None
        record = self.reader.record(job.step_id, job.scope)
        began = record.get("created_at") if record else None
        if not isinstance(began, datetime):
            return None
        elapsed = (self.now - began).total_seconds()
        if elapsed < total:
            return None
        return (
            f"no retry: {int(elapsed)}s since it was first scheduled, past its "
            f"totalTimeoutSeconds of {total}"
        )

    def _retry(self, job: JobRef, error: str, delay_override: float | None) -> datetime:
        policy = self.plan.policy(job.step_id)
        delay: float = retry_delay_seconds(
            policy.retry_logic,
            policy.retry_delay_seconds,
            job.attempt,  # attempt 1 failed: the first retry
            policy.max_retry_delay_seconds,
            policy.backoff_scale_factor,
        )
        if delay_override is not None:  # the worker asked for its own delay
            delay = delay_override
        elif policy.backoff_jitter_ms:
            # Conductor's backoffJitterMs: up to that much more, at random, so that the retries
            # of many tasks that failed together do not all fall due at once.
            delay += random.randint(0, policy.backoff_jitter_ms) / 1000
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
        output: Any = None,
    ) -> None:
        if job_status == JobStatus.TIMED_OUT:
            self.changes.timed_out_jobs.append(job)
        else:
            self.changes.failed_jobs.append(job)
            self.changes.count("JobsFailed")
        self.failed_job = (job.step_execution_id, job.id, job.attempt)
        self.fail(self._job_exec(job), why, step_status, instance_status, output=output)
