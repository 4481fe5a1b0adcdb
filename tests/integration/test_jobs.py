"""Jobs: the claim under concurrency, leases, idempotent completion, retries."""

from __future__ import annotations

import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

import psycopg
import pytest
from baton.engine.batch_ops import BatchResult
from baton.engine.service import Engine
from baton.errors import AttemptNotCurrent, Conflict, JobNotFound, LeaseNotHeld, ValidationFailed
from baton.settings import EngineSettings
from baton.store.db import Database

from tests.support.helpers import one_step, wait_until


def _start_many(engine: Engine, n: int, name: str = "flow") -> list[str]:
    with ThreadPoolExecutor(4) as pool:
        return list(
            pool.map(lambda _: engine.start_instance(definition_name=name)[0]["id"], range(n))
        )


def _statuses(database_url: str) -> Counter[str]:
    with psycopg.connect(database_url) as conn:
        return Counter(
            dict(conn.execute("SELECT status, count(*) FROM instance GROUP BY status").fetchall())
        )


def test_concurrent_workers_drain_thousands_without_double_claims_or_losses(
    engine: Engine, database_url: str
) -> None:
    n_instances, n_workers = 2000, 8
    engine.register_definition(one_step("flow"))
    _start_many(engine, n_instances)
    claims: list[tuple[str, str, float, float]] = []
    lock = threading.Lock()

    def worker(k: int) -> int:
        wid = f"w{k}"
        done = 0
        empty = 0
        while empty < 3:
            jobs = engine.poll(wid, ["work"], 16)
            if not jobs:
                empty += 1
                continue
            empty = 0
            now = time.time()
            with lock:
                claims.extend(
                    (j["id"], wid, now, datetime.fromisoformat(j["lockExpiresAt"]).timestamp())
                    for j in jobs
                )
            for j in jobs:
                assert engine.complete_job(j["id"], wid, {"by": wid})["applied"]
                done += 1
        return done

    with ThreadPoolExecutor(n_workers) as pool:
        completed = sum(pool.map(worker, range(n_workers)))

    by_job = Counter(c[0] for c in claims)
    assert len(by_job) == n_instances  # none lost
    assert max(by_job.values()) == 1  # none claimed twice (leases are 30 s, all live)
    assert completed == n_instances
    assert _statuses(database_url) == Counter({"COMPLETED": n_instances})
    with psycopg.connect(database_url) as conn:
        per_job = conn.execute(
            "SELECT count(*) FROM audit_log WHERE event = 'JOB_COMPLETED' GROUP BY job_id"
            " HAVING count(*) <> 1"
        ).fetchall()
        open_jobs = conn.execute("SELECT count(*) FROM job WHERE status <> 'COMPLETED'").fetchone()
    assert per_job == [] and open_jobs == (0,)


def test_claim_is_oldest_first_and_respects_max_jobs_and_types(engine: Engine) -> None:
    engine.register_definition(one_step("a", "type-a"))
    engine.register_definition(one_step("b", "type-b"))
    a_ids = [engine.start_instance(definition_name="a")[0]["id"] for _ in range(3)]
    engine.start_instance(definition_name="b")
    jobs = engine.poll("w", ["type-a"], 2)
    assert [j["instanceId"] for j in jobs] == a_ids[:2]
    assert {j["jobType"] for j in jobs} == {"type-a"}
    both = engine.poll("w", ["type-a", "type-b"], 10)
    assert sorted(j["jobType"] for j in both) == ["type-a", "type-b"]
    assert engine.poll("w", ["type-a", "type-b"], 10) == []


def test_poll_caps_the_batch_by_bytes(db: Database) -> None:
    engine = Engine(db, EngineSettings(max_poll_response_bytes=50_000))
    engine.register_definition(
        {
            "name": "big",
            "steps": [
                {
                    "id": "s",
                    "type": "SERVICE_TASK",
                    "jobType": "big",
                    "input": {"blob": "${workflow.input.blob}"},
                }
            ],
        }
    )
    for _ in range(5):
        engine.start_instance(definition_name="big", input={"blob": "x" * 20_000})
    assert len(engine.poll("w", ["big"], 10)) == 2
    assert len(engine.poll("w", ["big"], 10)) == 2
    assert len(engine.poll("w", ["big"], 10)) == 1


@pytest.mark.parametrize("numbered", [True, False], ids=["with-attempt", "worker-id-only"])
def test_an_expired_lease_is_a_new_attempt_and_the_old_one_s_late_completion_counts_once(
    engine: Engine, numbered: bool
) -> None:
    engine.register_definition(one_step("flow", responseTimeoutSeconds=1, retryCount=3))
    inst, _ = engine.start_instance(definition_name="flow")
    first = engine.poll("slow", ["work"], 1)[0]
    assert engine.poll("fast", ["work"], 1) == []  # the lease is live
    second = wait_until(lambda: engine.poll("fast", ["work"], 1), timeout=5, what="reclaim")[0]
    assert second["id"] == first["id"]
    # The lapsed lease counted as an attempt, against the retries.
    assert (first["attempt"], second["attempt"]) == (1, 2)
    assert second["retriesRemaining"] == first["retriesRemaining"] - 1
    # A stranger cannot complete while "fast" holds the lease.
    with pytest.raises(LeaseNotHeld):
        engine.complete_job(first["id"], "stranger", {})
    # The lapsed attempt's late result is applied: its work was done, so it counts...
    late = engine.complete_job(first["id"], "slow", {"by": "slow"}, attempt=1 if numbered else None)
    assert late["applied"] is True
    # ...once: re-sent, it is a repeat; the superseded holder's results are repeats too, and
    # its heartbeat is refused, so it can stop.
    assert not engine.complete_job(first["id"], "slow", {"by": "x"}, attempt=1)["applied"]
    assert not engine.complete_job(first["id"], "slow", {"by": "x"})["applied"]
    with pytest.raises(LeaseNotHeld, match="COMPLETED"):
        engine.heartbeat(first["id"], "fast", attempt=2)
    assert not engine.complete_job(first["id"], "fast", {"by": "fast"}, attempt=2)["applied"]
    failed = engine.fail_job(first["id"], "fast", "gave up", attempt=2)
    assert failed == {"jobId": first["id"], "status": "COMPLETED", "applied": False}
    final = engine.get_instance(inst["id"])
    assert final["status"] == "COMPLETED" and final["variables"] == {"by": "slow"}
    trail = engine.audit_trail(inst["id"])
    events = [a["event"] for a in trail]
    assert events.count("JOB_COMPLETED") == 1 and events.count("JOB_FAILED") == 0
    assert events.count("JOB_LEASE_EXPIRED") == 1 and events.count("JOB_DISPATCHED") == 2
    (completed,) = [a for a in trail if a["event"] == "JOB_COMPLETED"]
    assert completed["detail"] == {
        "attempt": 1,
        "workerId": "slow",
        "late": True,
        "supersededAttempt": 2,
        "supersededWorkerId": "fast",
    }
    (said,) = [e for e in engine.history(inst["id"])["events"] if e["type"] == "JOB_COMPLETED"]
    assert (said["attempt"], said["workerId"]) == (1, "slow")
    assert "late result" in said["message"] and "attempt 2 (held by fast)" in said["message"]


def test_racing_completions_of_one_job_apply_once(engine: Engine) -> None:
    engine.register_definition(one_step("flow"))
    for _ in range(5):
        inst, _ = engine.start_instance(definition_name="flow")
        job = engine.poll("a", ["work"], 1)[0]
        barrier = threading.Barrier(2)

        def complete(job_id: str = job["id"], barrier: threading.Barrier = barrier) -> bool:
            barrier.wait()
            return bool(engine.complete_job(job_id, "a", {"w": 1}, attempt=1)["applied"])

        with ThreadPoolExecutor(2) as pool:
            applied = list(pool.map(lambda _: complete(), range(2)))
        assert sorted(applied) == [False, True]
        events = [a["event"] for a in engine.audit_trail(inst["id"])]
        assert events.count("JOB_COMPLETED") == 1 and events.count("INSTANCE_COMPLETED") == 1


def test_double_complete_applies_once(engine: Engine, database_url: str) -> None:
    engine.register_definition(
        {
            "name": "two",
            "steps": [
                {"id": "s", "type": "SERVICE_TASK", "jobType": "work"},
                {"id": "u", "type": "USER_TASK"},
            ],
        }
    )
    inst, _ = engine.start_instance(definition_name="two")
    job = engine.poll("w", ["work"], 1)[0]
    assert engine.complete_job(job["id"], "w", {"n": 1})["applied"] is True
    assert engine.complete_job(job["id"], "w", {"n": 2})["applied"] is False
    got = engine.get_instance(inst["id"])
    assert got["variables"] == {"n": 1}
    assert [s["stepId"] for s in got["steps"]] == ["s", "u"]  # next step scheduled once
    assert got["version"] == 2


def test_completion_by_a_worker_that_never_held_the_job_is_a_conflict(engine: Engine) -> None:
    engine.register_definition(one_step("flow"))
    engine.start_instance(definition_name="flow")
    job = engine.poll("owner", ["work"], 1)[0]
    with pytest.raises(LeaseNotHeld):
        engine.complete_job(job["id"], "intruder", {})
    with pytest.raises(LeaseNotHeld):
        engine.fail_job(job["id"], "intruder", "x", retryable=False)
    with pytest.raises(JobNotFound):
        engine.complete_job("00000000-0000-0000-0000-000000000001", "owner", {})
    with pytest.raises(ValidationFailed):
        engine.complete_job("not-a-uuid", "owner", {})


def test_unclaimed_job_cannot_be_completed(engine: Engine) -> None:
    engine.register_definition(one_step("flow"))
    inst, _ = engine.start_instance(definition_name="flow")
    job_id = engine.get_instance(inst["id"])["steps"][0]["jobId"]
    with pytest.raises(LeaseNotHeld, match="not claimed"):
        engine.complete_job(job_id, "w", {})


def test_heartbeat_extends_the_lease_only_for_the_holder(engine: Engine) -> None:
    engine.register_definition(one_step("flow", responseTimeoutSeconds=2))
    engine.start_instance(definition_name="flow")
    job = engine.poll("w", ["work"], 1)[0]
    before = datetime.fromisoformat(job["lockExpiresAt"])
    time.sleep(0.05)  # let the clock move so the extension is observable
    after = datetime.fromisoformat(engine.heartbeat(job["id"], "w")["lockExpiresAt"])
    assert after > before
    with pytest.raises(LeaseNotHeld):
        engine.heartbeat(job["id"], "other")
    engine.complete_job(job["id"], "w", {})
    with pytest.raises(LeaseNotHeld, match="COMPLETED"):
        engine.heartbeat(job["id"], "w")


def test_heartbeats_keep_a_long_job_from_being_reclaimed(engine: Engine) -> None:
    engine.register_definition(one_step("flow", responseTimeoutSeconds=1))
    engine.start_instance(definition_name="flow")
    job = engine.poll("w", ["work"], 1)[0]
    deadline = time.monotonic() + 2.5
    while time.monotonic() < deadline:
        engine.heartbeat(job["id"], "w")
        assert engine.poll("thief", ["work"], 1) == []
        time.sleep(0.2)
    assert engine.complete_job(job["id"], "w", {})["applied"]


def test_reaper_turns_an_expired_lease_into_the_next_attempt_in_its_place_in_line(
    engine: Engine, database_url: str
) -> None:
    engine.register_definition(one_step("flow", responseTimeoutSeconds=1))
    inst, _ = engine.start_instance(definition_name="flow")
    job = engine.poll("w", ["work"], 1)[0]
    engine.start_instance(definition_name="flow")  # a younger job, due after the first
    with psycopg.connect(database_url) as conn:
        due_before = conn.execute("SELECT run_at FROM job WHERE id = %s", (job["id"],)).fetchone()
    assert engine.reap_expired_leases() == 0
    assert wait_until(engine.reap_expired_leases, timeout=5, what="lease expiry") == 1
    got = engine.get_instance(inst["id"])
    assert (got["steps"][0]["status"], got["steps"][0]["attempt"]) == ("SCHEDULED", 2)
    assert "JOB_LEASE_EXPIRED" in [a["event"] for a in engine.audit_trail(inst["id"])]
    with psycopg.connect(database_url) as conn:
        due_after = conn.execute("SELECT run_at FROM job WHERE id = %s", (job["id"],)).fetchone()
    assert due_after == due_before  # it keeps its place in line...
    again = engine.poll("w2", ["work"], 1)[0]
    assert (again["id"], again["attempt"]) == (job["id"], 2)  # ...ahead of the younger job
    # The lapsed attempt's late result counts; the new attempt's is then a repeat.
    assert engine.complete_job(job["id"], "w", {"by": "w"}, attempt=1)["applied"]
    assert not engine.complete_job(job["id"], "w2", {"by": "w2"}, attempt=2)["applied"]
    assert engine.get_instance(inst["id"])["variables"] == {"by": "w"}


def test_a_late_completion_of_a_job_the_reaper_requeued_needs_no_new_claim(
    engine: Engine,
) -> None:
    engine.register_definition(one_step("flow", responseTimeoutSeconds=1, retryCount=2))
    inst, _ = engine.start_instance(definition_name="flow")
    job = engine.poll("w", ["work"], 1)[0]
    wait_until(engine.reap_expired_leases, timeout=5, what="lease expiry")
    assert engine.get_instance(inst["id"])["steps"][0]["status"] == "SCHEDULED"
    assert engine.complete_job(job["id"], "w", {"done": True}, attempt=1)["applied"]
    final = engine.get_instance(inst["id"])
    assert final["status"] == "COMPLETED" and final["variables"] == {"done": True}
    assert engine.poll("w2", ["work"], 1) == []  # the re-queued attempt is never delivered


def test_late_results_that_are_still_refused(engine: Engine) -> None:
    """A late failure; a completion of an attempt its own failure ended; any result once the
    job was cancelled or its retries ran out."""
    engine.register_definition(one_step("flow", responseTimeoutSeconds=1, retryCount=2))
    inst, _ = engine.start_instance(definition_name="flow")
    first = engine.poll("a", ["work"], 1)[0]
    second = wait_until(lambda: engine.poll("b", ["work"], 1), timeout=5, what="reclaim")[0]
    with pytest.raises(AttemptNotCurrent, match="its lease lapsed"):
        engine.fail_job(first["id"], "a", "late failure", attempt=1)
    assert engine.fail_job(second["id"], "b", "flaky", attempt=2)["status"] == "RETRY_SCHEDULED"
    with pytest.raises(AttemptNotCurrent, match="a failure ended it"):
        engine.complete_job(second["id"], "b", {}, attempt=2)
    engine.cancel_instance(inst["id"])
    with pytest.raises(Conflict, match="CANCELLED"):
        engine.complete_job(first["id"], "a", {}, attempt=1)
    assert engine.get_instance(inst["id"])["status"] == "CANCELLED"
    events = [a["event"] for a in engine.audit_trail(inst["id"])]
    assert events.count("JOB_COMPLETED") == 0 and events.count("JOB_FAILED") == 1


def test_a_job_whose_every_worker_goes_silent_times_out_when_its_retries_run_out(
    engine: Engine,
) -> None:
    engine.register_definition(one_step("flow", responseTimeoutSeconds=1, retryCount=1))
    inst, _ = engine.start_instance(definition_name="flow")
    job = engine.poll("w1", ["work"], 1)[0]
    assert job["attempt"] == 1
    assert wait_until(lambda: engine.poll("w2", ["work"], 1), timeout=5)[0]["attempt"] == 2
    wait_until(engine.reap_expired_leases, timeout=5, what="the last lease to lapse")
    final = engine.get_instance(inst["id"])
    assert (final["status"], final["steps"][0]["status"]) == ("TIMED_OUT", "TIMED_OUT")
    assert "no result within the 1s lease" in final["reason"] and "2 attempts" in final["reason"]
    assert engine.poll("w3", ["work"], 1) == []  # never delivered again
    # The job is settled: a late completion of either attempt comes too late.
    for worker, attempt in (("w1", 1), ("w2", 2)):
        with pytest.raises(Conflict, match="FAILED"):
            engine.complete_job(job["id"], worker, {}, attempt=attempt)


def _due_times(database_url: str, instance_id: str) -> list[Any]:
    with psycopg.connect(database_url) as conn:
        return [
            r[0]
            for r in conn.execute(
                "SELECT detail->>'delaySeconds' FROM audit_log"
                " WHERE instance_id = %s AND event = 'JOB_RETRY_SCHEDULED' ORDER BY id",
                (instance_id,),
            ).fetchall()
        ]


def test_retry_is_claimable_only_after_its_delay(engine: Engine) -> None:
    engine.register_definition(one_step("flow", retryCount=2, retryDelaySeconds=1))
    inst, _ = engine.start_instance(definition_name="flow")
    job = engine.poll("w", ["work"], 1)[0]
    failed_at = time.monotonic()
    result = engine.fail_job(job["id"], "w", "flaky", retryable=True)
    assert result["status"] == "RETRY_SCHEDULED"
    assert engine.poll("w", ["work"], 1) == []
    again = wait_until(lambda: engine.poll("w", ["work"], 1), timeout=5)[0]
    assert time.monotonic() - failed_at >= 0.9
    assert again["attempt"] == 2 and again["retriesRemaining"] == 1
    assert engine.get_instance(inst["id"])["steps"][0]["attempt"] == 2


def test_a_worker_may_choose_the_delay_of_its_retry(engine: Engine) -> None:
    engine.register_definition(one_step("flow", retryCount=2, retryDelaySeconds=3600))
    engine.start_instance(definition_name="flow")
    job = engine.poll("w", ["work"], 1)[0]
    result = engine.fail_job(job["id"], "w", "rate limited", next_retry_delay_seconds=0)
    assert result["status"] == "RETRY_SCHEDULED"
    # Due at once instead of in an hour: the next poll gets attempt 2.
    again = engine.poll("w", ["work"], 1)
    assert [j["attempt"] for j in again] == [2]


@pytest.mark.parametrize("logic", ["FIXED", "LINEAR_BACKOFF", "EXPONENTIAL_BACKOFF"])
def test_zero_delay_retries_are_claimable_at_once(engine: Engine, logic: str) -> None:
    engine.register_definition(
        one_step("flow", retryCount=3, retryDelaySeconds=0, retryLogic=logic)
    )
    inst, _ = engine.start_instance(definition_name="flow")
    attempts = []
    for _ in range(3):
        (job,) = engine.poll("w", ["work"], 1)  # no wait: each retry is due at once
        attempts.append(job["attempt"])
        engine.fail_job(job["id"], "w", "x", retryable=True, attempt=job["attempt"])
    (last,) = engine.poll("w", ["work"], 1)
    assert [*attempts, last["attempt"]] == [1, 2, 3, 4]
    assert last["retriesRemaining"] == 0
    assert engine.get_instance(inst["id"])["steps"][0]["attempt"] == 4


def test_backoff_delays_follow_the_retry_logic(engine: Engine, database_url: str) -> None:
    engine.register_definition(
        one_step("flow", retryCount=3, retryDelaySeconds=10, retryLogic="EXPONENTIAL_BACKOFF")
    )
    inst, _ = engine.start_instance(definition_name="flow")
    with psycopg.connect(database_url, autocommit=True) as conn:
        for _ in range(3):
            job = engine.poll("w", ["work"], 1)[0]
            engine.fail_job(job["id"], "w", "x", retryable=True)
            # Make the retry due now instead of waiting for the backoff.
            conn.execute("UPDATE job SET run_at = now() WHERE id = %s", (job["id"],))
    assert _due_times(database_url, inst["id"]) == ["10", "20", "40"]


def test_non_retryable_failure_skips_remaining_retries(engine: Engine) -> None:
    engine.register_definition(one_step("flow", retryCount=5))
    inst, _ = engine.start_instance(definition_name="flow")
    job = engine.poll("w", ["work"], 1)[0]
    assert engine.fail_job(job["id"], "w", "card declined", retryable=False)["status"] == "FAILED"
    got = engine.get_instance(inst["id"])
    assert got["status"] == "FAILED"
    assert got["reason"] == "step 'only' failed: card declined"
    assert engine.fail_job(job["id"], "w", "again", retryable=False)["applied"] is False
    with pytest.raises(Conflict):
        engine.complete_job(job["id"], "w", {})


def test_exhausted_retries_fail_the_instance_with_the_reason(engine: Engine) -> None:
    engine.register_definition(one_step("flow", retryCount=1, retryDelaySeconds=0))
    inst, _ = engine.start_instance(definition_name="flow")
    for _ in range(2):
        job = engine.poll("w", ["work"], 1)[0]
        engine.fail_job(job["id"], "w", "timeout talking to bank", retryable=True)
    got = engine.get_instance(inst["id"])
    assert got["status"] == "FAILED"
    assert "retries exhausted after 2 attempts" in got["reason"]
    assert got["steps"][0]["status"] == "FAILED"
    assert engine.poll("w", ["work"], 1) == []


def test_workflow_timeout_is_enforced_by_the_sweeper(engine: Engine) -> None:
    engine.register_definition({**one_step("flow"), "timeoutSeconds": 1})
    inst, _ = engine.start_instance(definition_name="flow")
    assert engine.sweep() == {
        "instancesTimedOut": 0,
        "jobTimeouts": 0,
        "timersFired": 0,
        "eventsDelivered": 0,
        "payloadsRetired": 0,
        "instancesArchived": 0,
    }
    wait_until(lambda: engine.sweep()["instancesTimedOut"], timeout=5)
    got = engine.get_instance(inst["id"])
    assert got["status"] == "TIMED_OUT"
    assert got["reason"] == "the instance did not finish within 1s (timeoutSeconds)"
    assert engine.poll("w", ["work"], 1) == []


@pytest.mark.parametrize("number", [float("nan"), float("inf"), -float("inf")])
def test_nan_and_infinities_are_refused_where_library_callers_pass_values(
    engine: Engine, number: float
) -> None:
    """The API refuses them at its edge; the engine's own JSON would have stored null instead,
    changing the value without a word. Nothing is started or completed."""
    engine.register_definition(one_step("flow"))
    with pytest.raises(ValidationFailed) as refused:
        engine.start_instance(definition_name="flow", input={"x": [1, number]})
    assert [p.path for p in refused.value.problems] == ["instance input"]
    engine.start_instance(definition_name="flow")
    job = engine.poll("w", ["work"], 1)[0]
    with pytest.raises(ValidationFailed):
        engine.complete_job(job["id"], "w", {"score": number})
    [answer] = engine.complete_batch([BatchResult(job["id"], "w", 1, output={"score": number})])
    assert answer["outcome"] == "INVALID"
    assert "NaN or an infinity" in answer["error"]
    assert engine.complete_job(job["id"], "w", {"score": 1.5})["status"] == "COMPLETED"


def test_a_batch_measures_each_output_when_together_they_might_be_too_large(
    engine: Engine,
) -> None:
    """complete_batch measures a batch's outputs together first; when that cannot vouch for
    each, each is measured alone: one too large and one with NaN are INVALID, and outputs that
    are large only together (each a fifth of the limit) are applied."""
    engine.register_definition(one_step("sizes"))
    for _ in range(6):
        engine.start_instance(definition_name="sizes")
    jobs = engine.poll("w", ["work"], 6)
    assert len(jobs) == 6
    limit = engine.settings.max_payload_bytes
    fifth = {"blob": "y" * (limit // 5)}
    outputs: list[dict[str, Any]] = [
        fifth,
        {"blob": "y" * (limit + 1)},
        fifth,
        {"score": float("nan")},
        fifth,
        {"small": 1},
    ]
    answers = engine.complete_batch(
        [
            BatchResult(j["id"], "w", j["attempt"], output=o)
            for j, o in zip(jobs, outputs, strict=True)
        ]
    )
    assert [a["outcome"] for a in answers] == [
        "APPLIED",
        "INVALID",
        "APPLIED",
        "INVALID",
        "APPLIED",
        "APPLIED",
    ]
    assert "NaN or an infinity" in answers[3]["error"]
    assert [engine.get_instance(j["instanceId"])["status"] for j in jobs] == [
        "COMPLETED",
        "RUNNING",
        "COMPLETED",
        "RUNNING",
        "COMPLETED",
        "COMPLETED",
    ]
