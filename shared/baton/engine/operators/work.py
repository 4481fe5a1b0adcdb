"""Steps without nested lists: SERVICE_TASK (a job for workers), USER_TASK and SIGNAL (completed
through the API), TIMER (a durable wait), SET_VARIABLE, TERMINATE, NOOP and EXCLUSIVE_JOIN (done
at once)."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from baton import expressions
from baton.definitions import RESERVED_JOB_TYPE_PREFIX
from baton.durations import duration_seconds, parse_timestamp
from baton.engine import permissive
from baton.engine.records import AuditEvent, InputNotObject, NewJob, OverLimit
from baton.model import JOB_TYPE_PATTERN
from baton.status import InstanceStatus, StepStatus
from baton.steps import (
    ExclusiveJoinStep,
    ServiceTaskStep,
    SetVariableStep,
    TerminateStep,
    TimerStep,
)

if TYPE_CHECKING:
    from baton.engine.operators.protocol import Decision
    from baton.engine.records import Exec
    from baton.steps import Step


def open_with_input(
    d: Decision, step: Step, scope: str, kind: str = "STEP_INPUT"
) -> tuple[Exec, Any] | None:
    """A new execution of ``step``, IN_PROGRESS with its resolved input (kept in S3 as ``kind``
    above the soft limit), and that input; None when the input cannot be had (over its hard
    limit, or not an object): the execution is then failed with the reason, without input."""
    try:
        step_input = d.stored(d.resolve_input(step, scope), kind)
    except OverLimit as big:
        d.fail(d.add_step(step, StepStatus.IN_PROGRESS, None, scope), f"its input {big}")
        return None
    except InputNotObject as e:
        d.fail(d.add_step(step, StepStatus.IN_PROGRESS, None, scope), str(e))
        return None
    new = d.add_step(step, StepStatus.IN_PROGRESS, step_input, scope)
    return d.execution(new.id), step_input


class Leaf:
    """A step type without nested lists."""

    def list_ended(self, d: Decision, owner: Exec, key: str, output: Any) -> None:
        raise AssertionError(f"{owner.step_id} has no nested lists")

    def child_failed(
        self, d: Decision, owner: Exec, key: str, reason: str, instance_status: InstanceStatus
    ) -> None:
        raise AssertionError(f"{owner.step_id} has no nested lists")

    def reopen(
        self, d: Decision, owner: Exec, lists: dict[str, Exec], rerun: Callable[[Exec], None]
    ) -> None:
        raise AssertionError(f"{owner.step_id} has no nested lists")


def merged(defaults: Any, values: Any) -> Any:
    """``values`` over ``defaults``: objects merged key by key, anything else replaced."""
    if isinstance(defaults, dict) and isinstance(values, dict):
        out = dict(defaults)
        for key, value in values.items():
            out[key] = merged(defaults[key], value) if key in defaults else value
        return out
    return values


_JOB_TYPE = re.compile(JOB_TYPE_PATTERN)


class ServiceTask(Leaf):
    def job_type(self, d: Decision, step: Step, scope: str) -> str:
        """The step's job type; one given as a ``${…}`` expression (Conductor's DYNAMIC) is
        resolved now: ValueError when it gives no job type a worker may poll."""
        assert isinstance(step, ServiceTaskStep)
        if not step.job_type.startswith("${"):
            return step.job_type
        value = d.resolve(step.job_type, f"step:{step.id}", scope)
        if not isinstance(value, str) or not _JOB_TYPE.fullmatch(value):
            raise ValueError(f"jobType {step.job_type} gave {value!r}, not a job type")
        if value.lower().startswith(RESERVED_JOB_TYPE_PREFIX):
            raise ValueError(f"jobType {step.job_type} gave {value!r}, a job type of the engine")
        return value

    def own_input(self, d: Decision, step: Step, scope: str, record: dict[str, Any]) -> Any:
        """The step's resolved input (InputNotObject when it is not an object); ``record``: the
        execution being scheduled, which the input may read (``${<step>.jobId}``…)."""
        return d.resolve_input(step, scope, record)

    def shown_input(self, step_input: Any) -> Any:
        """The input as the step execution stores and shows it (the job keeps ``step_input``
        itself, which is what its worker gets); ``step_input`` unless a type hides some of it."""
        return step_input

    def schedule(self, d: Decision, step: Step, scope: str) -> None:
        policy = d.plan.policy(step.id)
        point = f"step:{step.id}"
        # The task definition's inputTemplate supplies defaults under the step's own input (the
        # step wins; nested objects are merged key by key, as Conductor does).
        # Its ids are chosen first: its input may read its own (Conductor's CPEWF_TASK_ID).
        exec_id, job_id = uuid.uuid4(), uuid.uuid4()
        record = {
            "executionId": str(exec_id),
            "jobId": str(job_id),
            "attempt": 1,
            "status": str(StepStatus.SCHEDULED),
        }
        try:
            own = self.own_input(d, step, scope, record)
            job_type = self.job_type(d, step, scope)
        except (InputNotObject, ValueError) as e:
            d.fail(d.add_step(step, StepStatus.SCHEDULED, None, scope), str(e))
            return
        step_input = merged(d.resolve(policy.input_template, point, scope), own)
        shown = self.shown_input(step_input)
        try:
            # Above the soft limit the input lives in S3; the job carries its reference.
            hidden = shown is not step_input
            step_input = d.stored(step_input, "STEP_INPUT")
            shown = d.stored(shown, "STEP_INPUT") if hidden else step_input
        except OverLimit as big:
            d.fail(d.add_step(step, StepStatus.SCHEDULED, None, scope), f"its resolved input {big}")
            return
        payload_json = d.payload_json(step_input)
        if len(payload_json) > d.max_job_input_bytes:
            # Refused when scheduled: a job poll could never hand it out under Lambda's 6 MB.
            new = d.add_step(step, StepStatus.SCHEDULED, shown, scope)
            d.fail(
                new,
                f"its resolved input is {len(payload_json)} bytes, above the limit of "
                f"{d.max_job_input_bytes} bytes",
            )
            return
        new = d.add_step(step, StepStatus.SCHEDULED, shown, scope, exec_id=exec_id)
        d.changes.new_jobs.append(
            NewJob(
                id=job_id,
                step_execution_id=new.id,
                job_type=job_type,
                lease_seconds=policy.lease_seconds,
                retries_remaining=policy.retry_count,
                payload=step_input,
                payload_json=payload_json,
                poll_timeout_seconds=policy.poll_timeout_seconds,
                timeout_seconds=policy.timeout_seconds,
                total_timeout_seconds=policy.total_timeout_seconds,
                scope=scope,
                start_delay_seconds=(
                    step.start_delay_seconds or 0 if isinstance(step, ServiceTaskStep) else 0
                ),
            )
        )
        d.changes.audit.append(AuditEvent("JOB_CREATED", job_id, {"stepId": step.id}))


class Waiting(Leaf):
    """USER_TASK and SIGNAL: wait in IN_PROGRESS until completed through the API."""

    def schedule(self, d: Decision, step: Step, scope: str) -> None:
        open_with_input(d, step, scope)


class Timer(Leaf):
    """A row with a due time (``wake_at``), fired by the sweeper; one already due fires now."""

    def schedule(self, d: Decision, step: Step, scope: str) -> None:
        assert isinstance(step, TimerStep)
        point = f"step:{step.id}"
        try:
            step_input = d.resolve_input(step, scope)
        except InputNotObject as e:
            d.fail(d.add_step(step, StepStatus.SCHEDULED, None, scope), str(e))
            return
        try:
            if step.duration is not None:
                wake = d.now + timedelta(seconds=duration_seconds(step.duration))
            else:
                until = d.resolve(step.until, point, scope)
                if not isinstance(until, str):
                    raise ValueError(f"until resolved to {until!r}, not a timestamp")
                wake = parse_timestamp(until)
        except (ValueError, expressions.ExpressionError) as e:
            d.fail(d.add_step(step, StepStatus.SCHEDULED, step_input, scope), str(e))
            return
        due = wake.isoformat().replace("+00:00", "Z")
        new = d.add_step(
            step, StepStatus.IN_PROGRESS, step_input, scope, wake_at=wake, state={"wakeAt": due}
        )
        if wake <= d.now:
            d.complete(d.execution(new.id), {"firedAt": d.now.isoformat()})


class SetVariable(Leaf):
    def schedule(self, d: Decision, step: Step, scope: str) -> None:
        assert isinstance(step, SetVariableStep)
        values = d.resolve(step.variables, f"step:{step.id}", scope)
        d.instance.variables = {**d.instance.variables, **values}
        new = d.add_step(step, StepStatus.IN_PROGRESS, values, scope)
        d.complete(d.execution(new.id), values)


class Noop(Leaf):
    """NOOP: completes at once; its input is resolved and kept (as Conductor shows it), its
    output is empty."""

    def schedule(self, d: Decision, step: Step, scope: str) -> None:
        opened = open_with_input(d, step, scope)
        if opened is None:
            return
        d.complete(opened[0], {})


class ExclusiveJoin(Leaf):
    """EXCLUSIVE_JOIN: the output of the first of ``joinOn`` (else of ``defaultJoinOn``) that
    ran, read as ``${<id>.status}``/``${<id>.output}`` at this step (the latest execution in the
    list the two share: inside a loop, this iteration's)."""

    def schedule(self, d: Decision, step: Step, scope: str) -> None:
        assert isinstance(step, ExclusiveJoinStep)
        opened = open_with_input(d, step, scope)
        if opened is None:
            return
        own = opened[0]
        point = f"step:{step.id}"
        for ids in (step.join_on, step.default_join_on or []):
            for sid in ids:
                status = d.resolve(f"${{{sid}.status}}", point, scope)
                if status is None or status == StepStatus.SKIPPED:
                    continue  # not run: a case not taken
                if status != StepStatus.COMPLETED:
                    d.fail(own, f"the joined step {sid!r} is {status}")
                    return
                d.complete(own, d.resolve(f"${{{sid}.output}}", point, scope))
                return
        said = ", ".join(step.join_on)
        if step.default_join_on:
            said += f"; defaultJoinOn {', '.join(step.default_join_on)}"
        d.fail(own, f"none of the steps it joins on ran (joinOn {said})")


class Terminate(Leaf):
    def schedule(self, d: Decision, step: Step, scope: str) -> None:
        assert isinstance(step, TerminateStep)
        point = f"step:{step.id}"
        output = d.resolve(step.output, point, scope)
        reason = d.resolve(step.reason, point, scope)
        new = d.add_step(step, StepStatus.COMPLETED, {"status": step.status}, scope, output=output)
        d.changes.audit.append(AuditEvent("TERMINATED", None, {"stepId": new.step_id}))
        d.instance.output = output if output is not None else dict(d.instance.variables)
        status = InstanceStatus(step.status)
        said = None if reason is None else str(reason)
        # As Conductor's decider: a permissive step whose latest execution failed fails the
        # instance however it ends.
        failed = permissive.failures(d) if d.plan.permissive else None
        if failed is not None:
            status, said = InstanceStatus.FAILED, failed
        # Ended CANCELLED by a step (not by a caller): its failure workflow runs, as Conductor
        # runs it for a TERMINATE task's TERMINATED.
        d.finish(status, said, cancel=True, failure_workflow=status == InstanceStatus.CANCELLED)
