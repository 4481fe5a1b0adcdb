from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from baton.definitions import RetryLogic, parse_definition
from baton.engine.decide import Decider, InstanceState
from baton.engine.plan import Plan
from baton.engine.retry import retry_delay_seconds
from baton.engine.verdicts import completion_verdict, failure_verdict
from baton.errors import Conflict, LeaseNotHeld
from hypothesis import given
from hypothesis import strategies as st

NOW = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("logic", "delays"),
    [
        (RetryLogic.FIXED, [5, 5, 5, 5]),
        (RetryLogic.LINEAR_BACKOFF, [5, 10, 15, 20]),
        (RetryLogic.EXPONENTIAL_BACKOFF, [5, 10, 20, 40]),
    ],
)
def test_retry_delays_follow_the_logic(logic: RetryLogic, delays: list[int]) -> None:
    assert [retry_delay_seconds(logic, 5, n) for n in range(1, 5)] == delays


@given(base=st.integers(0, 10_000), n=st.integers(1, 10_000), cap=st.integers(1, 100_000))
def test_backoff_never_exceeds_its_cap(base: int, n: int, cap: int) -> None:
    for logic in RetryLogic:
        assert 0 <= retry_delay_seconds(logic, base, n, cap) <= cap


def _decider(definition: dict[str, object]) -> Decider:
    plan = Plan(parse_definition(definition))
    state = InstanceState(uuid.uuid4(), "d", "RUNNING", 1, {"x": 1}, {})
    return Decider(plan, state, lambda _sid: None, NOW)


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
    d = _decider(
        {
            "name": "d",
            "steps": [{"id": "u", "type": "USER_TASK"}],
            "outputParameters": {"y": "${u.output.y}"},
        }
    )
    d.step_completed("u", uuid.uuid4(), {"y": 2})
    assert d.instance.status == "COMPLETED" and d.instance.output == {"y": 2}
    assert not d.changes.cancel_open_work


def test_retryable_failure_with_retries_left_schedules_a_delayed_retry() -> None:
    d = _decider(
        {
            "name": "d",
            "steps": [{"id": "a", "type": "SERVICE_TASK", "jobType": "j", "retryDelaySeconds": 3}],
        }
    )
    d.job_failed(
        uuid.uuid4(), "a", uuid.uuid4(), attempt=1, retries_remaining=2, error="e", retryable=True
    )
    (retry,) = d.changes.retried_jobs
    assert retry.run_at == NOW + timedelta(seconds=3)
    assert d.instance.status == "RUNNING"


def test_non_retryable_failure_fails_the_instance_and_cancels_open_work() -> None:
    d = _decider({"name": "d", "steps": [{"id": "a", "type": "SERVICE_TASK", "jobType": "j"}]})
    d.job_failed(
        uuid.uuid4(), "a", uuid.uuid4(), attempt=1, retries_remaining=3, error="no", retryable=False
    )
    assert d.instance.status == "FAILED" and d.changes.cancel_open_work
    assert d.instance.reason == "step 'a' failed: no"


def _row(status: str, worker: str | None, previous: list[str]) -> dict[str, object]:
    return {
        "job_id": "j",
        "job_status": status,
        "worker_id": worker,
        "previous_worker_ids": previous,
    }


def test_completion_verdicts() -> None:
    assert completion_verdict(_row("LOCKED", "a", []), "a") == "apply"
    assert completion_verdict(_row("LOCKED", "b", ["a"]), "a") == "apply"  # late, re-claimed
    assert completion_verdict(_row("COMPLETED", "b", ["a"]), "z") == "duplicate"
    with pytest.raises(LeaseNotHeld):
        completion_verdict(_row("LOCKED", "b", []), "z")
    with pytest.raises(LeaseNotHeld):
        completion_verdict(_row("UNLOCKED", None, []), "z")
    with pytest.raises(Conflict):
        completion_verdict(_row("CANCELLED", "a", []), "a")


def test_failure_verdicts() -> None:
    assert failure_verdict(_row("LOCKED", "a", []), "a") == "apply"
    assert failure_verdict(_row("FAILED", "a", []), "a") == "duplicate"
    with pytest.raises(LeaseNotHeld):
        failure_verdict(_row("LOCKED", "b", ["a"]), "a")  # a lost its lease: its failure is stale
    with pytest.raises(Conflict):
        failure_verdict(_row("COMPLETED", "a", []), "a")
