"""The decider, pure: given a plan, an instance state and an event, the changes to write."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from baton.definitions import parse_definition
from baton.engine.decide import Decider, InstanceState, JobRef, NoReads
from baton.engine.plan import Plan
from baton.status import InstanceStatus, JobStatus, StepStatus

from tests.support.decisions import Run

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _job(step_id: str, *, attempt: int = 1, retries_remaining: int = 3) -> JobRef:
    return JobRef(
        uuid.uuid4(), step_id, uuid.uuid4(), JobStatus.LOCKED, "w", attempt, retries_remaining
    )


def _decider(definition: dict[str, Any]) -> Decider:
    plan = Plan(parse_definition(definition))
    state = InstanceState(uuid.uuid4(), "d", InstanceStatus.RUNNING, 1, {"x": 1}, {})
    return Decider(plan, state, NoReads(), NOW)


def test_start_schedules_the_first_step_with_resolved_input_and_task_policy() -> None:
    d = _decider(
        {
            "name": "d",
            "steps": [
                {
                    "id": "a",
                    "type": "SERVICE_TASK",
                    "jobType": "j",
                    "input": {"v": "${workflow.input.x}"},
                    "responseTimeoutSeconds": 7,
                    "retryCount": 2,
                }
            ],
        }
    )
    d.start()
    (job,) = d.changes.new_jobs
    assert (job.payload, job.lease_seconds, job.retries_remaining) == ({"v": 1}, 7, 2)
    assert [a.event for a in d.changes.audit] == ["INSTANCE_STARTED", "JOB_CREATED"]


def test_last_step_completion_completes_the_instance_with_output_parameters() -> None:
    run = Run(
        {
            "name": "d",
            "steps": [{"id": "u", "type": "USER_TASK"}],
            "outputParameters": {"y": "${u.output.y}"},
        }
    ).start()
    run.resume_waiting("u", {"y": 2})
    assert run.status == "COMPLETED" and run.state.output == {"y": 2}
    assert not run.last.cancel_open_work


def test_retryable_failure_with_retries_left_schedules_a_delayed_retry() -> None:
    d = _decider(
        {
            "name": "d",
            "steps": [{"id": "a", "type": "SERVICE_TASK", "jobType": "j", "retryDelaySeconds": 3}],
        }
    )
    d.job_failed(_job("a", retries_remaining=2), error="e", retryable=True)
    (retry,) = d.changes.retried_jobs
    assert retry.run_at == NOW + timedelta(seconds=3)
    assert d.instance.status == "RUNNING"


def test_non_retryable_failure_fails_the_instance_and_cancels_open_work() -> None:
    d = _decider({"name": "d", "steps": [{"id": "a", "type": "SERVICE_TASK", "jobType": "j"}]})
    d.job_failed(_job("a", retries_remaining=3), error="no", retryable=False)
    assert d.instance.status == "FAILED" and d.changes.cancel_open_work
    assert d.instance.reason == "step 'a' failed: no"


def test_cancel_ends_the_instance_and_cancels_its_open_work() -> None:
    d = _decider({"name": "d", "steps": [{"id": "a", "type": "SERVICE_TASK", "jobType": "j"}]})
    d.cancel("operator said so")
    assert d.instance.status == InstanceStatus.CANCELLED
    assert d.instance.reason == "operator said so"
    assert d.changes.cancel_open_work and d.changes.instance_changed
    assert [a.event for a in d.changes.audit] == ["INSTANCE_CANCELLED"]
    assert d.changes.counters == {"InstancesCancelled": 1}


def test_workflow_timeout_times_the_instance_out_by_default() -> None:
    d = _decider({"name": "d", "timeoutSeconds": 5, "steps": [{"id": "u", "type": "USER_TASK"}]})
    d.workflow_timed_out()
    assert d.instance.status == InstanceStatus.TIMED_OUT
    assert d.instance.reason == "the instance did not finish within 5s (timeoutSeconds)"
    assert d.changes.cancel_open_work


def test_workflow_timeout_with_alert_only_alerts_once_and_keeps_running() -> None:
    d = _decider(
        {
            "name": "d",
            "timeoutSeconds": 5,
            "timeoutPolicy": "ALERT_ONLY",
            "steps": [{"id": "u", "type": "USER_TASK"}],
        }
    )
    d.workflow_timed_out()
    assert d.instance.status == InstanceStatus.RUNNING
    assert d.instance.clear_timeout  # the sweeper will not find it again
    assert not d.changes.cancel_open_work
    assert [a.event for a in d.changes.audit] == ["INSTANCE_TIMEOUT_ALERT"]
    assert d.changes.counters == {"InstancesTimedOutAlert": 1}


def test_a_completed_user_task_resumes_the_flow_with_its_variables() -> None:
    run = Run(
        {
            "name": "d",
            "steps": [
                {"id": "approve", "type": "USER_TASK"},
                {
                    "id": "ship",
                    "type": "SERVICE_TASK",
                    "jobType": "s",
                    "input": {"by": "${approve.output.who}"},
                },
            ],
        }
    ).start()
    (waiting,) = run.open("approve")
    e = waiting.exec()
    run.decide(lambda d: d.resume_waiting(e, {"who": "ada"}, "USER_TASK_COMPLETED"))
    (update,) = run.last.step_updates.values()
    assert (update.id, update.status, update.output) == (
        waiting.id,
        StepStatus.COMPLETED,
        {"who": "ada"},
    )
    assert run.state.variables == {"who": "ada"}
    (job,) = run.last.new_jobs
    assert job.payload == {"by": "ada"}
    assert [a.event for a in run.last.audit] == ["USER_TASK_COMPLETED", "JOB_CREATED"]
    assert run.last.audit[0].detail == {"stepId": "approve", "stepExecutionId": str(waiting.id)}


def test_a_signal_payload_becomes_the_step_output_and_ends_the_instance() -> None:
    run = Run(
        {
            "name": "d",
            "steps": [{"id": "wait", "type": "SIGNAL"}],
            "outputParameters": {"got": "${wait.output}"},
        }
    ).start()
    run.resume_waiting("wait", {"ok": True})
    assert run.status == InstanceStatus.COMPLETED
    assert run.state.output == {"got": {"ok": True}}
    assert [a.event for a in run.last.audit] == ["SIGNAL_RECEIVED", "INSTANCE_COMPLETED"]


def test_a_worker_chosen_delay_replaces_the_retry_policy() -> None:
    d = _decider(
        {
            "name": "d",
            "steps": [{"id": "a", "type": "SERVICE_TASK", "jobType": "j", "retryDelaySeconds": 60}],
        }
    )
    due = d.job_failed(
        _job("a", retries_remaining=1), error="429", retryable=True, delay_override=2.5
    )
    assert due == NOW + timedelta(seconds=2.5)


def test_a_lease_that_lapses_with_no_retries_left_times_the_step_and_the_instance_out() -> None:
    d = _decider({"name": "d", "steps": [{"id": "a", "type": "SERVICE_TASK", "jobType": "j"}]})
    job = _job("a", attempt=4, retries_remaining=0)
    d.lease_exhausted(job, 30)
    assert d.changes.failed_jobs == [job]
    # As Conductor's task on its responseTimeoutSeconds, and its workflow once no retry is left.
    assert d.instance.status == InstanceStatus.TIMED_OUT
    assert d.instance.reason == (
        "step 'a' timed out: no result within the 30s lease (responseTimeoutSeconds) "
        "on any of 4 attempts"
    )
    (update,) = d.changes.step_updates.values()
    assert update.status == StepStatus.TIMED_OUT


def test_a_step_whose_resolved_input_is_too_large_fails_when_scheduled() -> None:
    plan = Plan(
        parse_definition(
            {
                "name": "d",
                "steps": [
                    {
                        "id": "a",
                        "type": "SERVICE_TASK",
                        "jobType": "j",
                        "input": {"x": "${workflow.input.blob}", "y": "${workflow.input.blob}"},
                    }
                ],
            }
        )
    )
    state = InstanceState(uuid.uuid4(), "d", InstanceStatus.RUNNING, 1, {"blob": "z" * 600}, {})
    d = Decider(plan, state, NoReads(), NOW, max_job_input_bytes=1000)
    d.start()
    assert d.changes.new_jobs == []
    (step,) = d.changes.new_steps.values()
    assert step.status == StepStatus.FAILED
    assert d.instance.status == InstanceStatus.FAILED
    assert "resolved input is 1215 bytes, above the limit of 1000 bytes" in (
        d.instance.reason or ""
    )
