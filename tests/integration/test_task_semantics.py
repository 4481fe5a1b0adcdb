"""Every task-definition field does what reference 002 says, on real PostgreSQL, with short
timeouts and waits on conditions with deadlines."""

from __future__ import annotations

import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psycopg
import pytest
from baton.engine.service import Engine
from baton.errors import AttemptNotCurrent, Conflict, ValidationFailed
from baton.metrics import CountingMetrics
from baton.store import job_sql

from tests.support.helpers import one_step, wait_until


def _events(engine: Engine, instance_id: str) -> list[str]:
    return [a["event"] for a in engine.audit_trail(instance_id)]


def _swept(engine: Engine) -> int:
    return engine.sweep()["jobTimeouts"]


# --- timeoutSeconds, and its policies -----------------------------------------------------------


def test_retry_policy_times_out_the_attempt_and_starts_a_new_one(engine: Engine) -> None:
    engine.put_task_def(
        "slow",
        {
            "timeoutSeconds": 1,
            "responseTimeoutSeconds": 1,
            "timeoutPolicy": "RETRY",
            "retryCount": 1,
            "retryDelaySeconds": 0,
        },
    )
    engine.register_definition(one_step("flow", "slow"))
    inst, _ = engine.start_instance(definition_name="flow")
    first = engine.poll("w", ["slow"], 1)[0]
    engine.heartbeat(first["id"], "w", attempt=1)  # heartbeats do not stretch timeoutSeconds
    wait_until(lambda: _swept(engine), timeout=5, what="the attempt to time out")
    with pytest.raises(AttemptNotCurrent):  # the timed-out attempt's result is refused
        engine.complete_job(first["id"], "w", {}, attempt=1)
    second = wait_until(lambda: engine.poll("w", ["slow"], 1), timeout=5)[0]
    assert second["attempt"] == 2 and second["retriesRemaining"] == 0
    wait_until(lambda: _swept(engine), timeout=5, what="the last attempt to time out")
    final = engine.get_instance(inst["id"])
    assert final["status"] == "TIMED_OUT"  # as Conductor's workflow, its task out of retries
    assert final["reason"] == (
        "step 'only' timed out on every attempt: attempt 2 did not finish within 1s "
        "(timeoutSeconds)"
    )
    assert final["steps"][0]["status"] == "TIMED_OUT"
    assert _events(engine, inst["id"]).count("JOB_TIMED_OUT") == 2


def test_time_out_wf_times_the_instance_out_and_cancels_its_open_work(engine: Engine) -> None:
    engine.register_definition(
        one_step(
            "flow", "slow", timeoutSeconds=1, responseTimeoutSeconds=1, timeoutPolicy="TIME_OUT_WF"
        )
    )
    inst, _ = engine.start_instance(definition_name="flow")
    job = engine.poll("w", ["slow"], 1)[0]
    wait_until(lambda: _swept(engine), timeout=5)
    final = engine.get_instance(inst["id"])
    assert final["status"] == "TIMED_OUT"
    assert (
        final["reason"]
        == "step 'only' timed out: attempt 1 did not finish within 1s (timeoutSeconds)"
    )
    assert final["steps"][0]["status"] == "TIMED_OUT"
    with pytest.raises(Conflict):
        engine.complete_job(job["id"], "w", {}, attempt=1)
    assert engine.poll("w", ["slow"], 1) == []


def _optional_that_times_out(**policy: Any) -> dict[str, Any]:
    """An optional step whose job times out after 1 s under ``policy``, then a next step."""
    only = {"optional": True, "timeoutSeconds": 1, "responseTimeoutSeconds": 1, **policy}
    steps = [
        {"id": "only", "type": "SERVICE_TASK", "jobType": "slow", **only},
        {"id": "after", "type": "SERVICE_TASK", "jobType": "next"},
    ]
    return {"name": "flow", "steps": steps}


def test_time_out_wf_times_the_instance_out_even_from_an_optional_step(engine: Engine) -> None:
    """Conductor's decider terminates the workflow for a TIME_OUT_WF timeout before it looks at
    ``optional``; an optional step's list goes on after any other failure (below)."""
    engine.register_definition(_optional_that_times_out(timeoutPolicy="TIME_OUT_WF"))
    inst, _ = engine.start_instance(definition_name="flow")
    engine.poll("w", ["slow"], 1)
    wait_until(lambda: _swept(engine), timeout=5)
    final = engine.get_instance(inst["id"])
    assert final["status"] == "TIMED_OUT", final
    assert final["steps"][0]["status"] == "TIMED_OUT"
    assert engine.poll("w", ["next"], 1) == []
    assert "OPTIONAL_STEP_FAILED" not in _events(engine, inst["id"])


def test_an_optional_step_timed_out_on_every_retry_lets_its_list_go_on(engine: Engine) -> None:
    engine.register_definition(_optional_that_times_out(timeoutPolicy="RETRY", retryCount=0))
    inst, _ = engine.start_instance(definition_name="flow")
    engine.poll("w", ["slow"], 1)
    wait_until(lambda: _swept(engine), timeout=5)
    after = wait_until(lambda: engine.poll("w", ["next"], 1), timeout=5)[0]
    engine.complete_job(after["id"], "w", {})
    final = engine.get_instance(inst["id"])
    assert final["status"] == "COMPLETED", final
    assert final["steps"][0]["status"] == "COMPLETED"
    assert "timed out" in final["steps"][0]["error"]
    assert "OPTIONAL_STEP_FAILED" in _events(engine, inst["id"])


def test_alert_only_alerts_once_and_the_step_keeps_running(engine: Engine) -> None:
    metrics = CountingMetrics()
    engine.metrics = metrics
    engine.register_definition(
        one_step(
            "flow", "slow", timeoutSeconds=1, responseTimeoutSeconds=1, timeoutPolicy="ALERT_ONLY"
        )
    )
    inst, _ = engine.start_instance(definition_name="flow")
    job = engine.poll("w", ["slow"], 1)[0]
    wait_until(lambda: _swept(engine), timeout=5)
    for _ in range(3):
        engine.heartbeat(job["id"], "w", attempt=1)
        assert _swept(engine) == 0  # alerted once only
    assert engine.get_instance(inst["id"])["status"] == "RUNNING"
    assert engine.complete_job(job["id"], "w", {"late": True}, attempt=1)["applied"]
    assert engine.get_instance(inst["id"])["status"] == "COMPLETED"
    assert _events(engine, inst["id"]).count("JOB_TIMEOUT_ALERT") == 1
    assert metrics.totals["TaskTimedOut[Policy=ALERT_ONLY]"] == 1


# --- totalTimeoutSeconds: the step's budget over all its attempts ------------------------------


def test_total_timeout_times_out_a_running_attempt_with_no_deadline_of_its_own(
    engine: Engine,
) -> None:
    """Conductor's checkTotalTimeout: an attempt still running when its step's budget since it
    was first scheduled is spent times out, and no retry follows whatever retries are left."""
    engine.register_definition(
        one_step("flow", "slow", totalTimeoutSeconds=1, retryCount=5, timeoutPolicy="RETRY")
    )
    inst, _ = engine.start_instance(definition_name="flow")
    job = engine.poll("w", ["slow"], 1)[0]
    engine.heartbeat(job["id"], "w", attempt=1)  # a live lease does not hold it off
    wait_until(lambda: _swept(engine), timeout=5, what="the budget to time the attempt out")
    final = engine.get_instance(inst["id"])
    assert final["status"] == "TIMED_OUT", final
    assert final["reason"] == (
        "step 'only' timed out: attempt 1 was still running 1s after the step was first "
        "scheduled (totalTimeoutSeconds)"
    )
    assert _events(engine, inst["id"]).count("JOB_RETRY_SCHEDULED") == 0
    with pytest.raises(Conflict):
        engine.complete_job(job["id"], "w", {}, attempt=1)


def test_total_timeout_times_out_a_retry_waiting_out_its_delay(engine: Engine) -> None:
    engine.register_definition(
        one_step("flow", "flaky", totalTimeoutSeconds=1, retryCount=3, retryDelaySeconds=30)
    )
    inst, _ = engine.start_instance(definition_name="flow")
    job = engine.poll("w", ["flaky"], 1)[0]
    engine.fail_job(job["id"], "w", "boom", attempt=1)  # its retry is due in 30 s
    wait_until(lambda: _swept(engine), timeout=5, what="the budget to pass")
    final = engine.get_instance(inst["id"])
    assert final["status"] == "TIMED_OUT", final
    assert "attempt 2 was still waiting 1s after" in (final["reason"] or "")
    assert engine.poll("w", ["flaky"], 1) == []


def test_total_timeout_alert_only_alerts_once_and_the_attempt_runs_on(engine: Engine) -> None:
    engine.register_definition(
        one_step("flow", "slow", totalTimeoutSeconds=1, timeoutPolicy="ALERT_ONLY")
    )
    inst, _ = engine.start_instance(definition_name="flow")
    job = engine.poll("w", ["slow"], 1)[0]
    wait_until(lambda: _swept(engine), timeout=5)
    assert _swept(engine) == 0  # alerted once
    assert engine.complete_job(job["id"], "w", {}, attempt=1)["applied"]
    assert engine.get_instance(inst["id"])["status"] == "COMPLETED"
    (alert,) = [a for a in engine.audit_trail(inst["id"]) if a["event"] == "JOB_TIMEOUT_ALERT"]
    assert alert["detail"]["timeout"] == "totalTimeoutSeconds"


# --- pollTimeoutSeconds -------------------------------------------------------------------------


@pytest.mark.parametrize("policy", ["RETRY", "TIME_OUT_WF"])
def test_a_job_never_claimed_within_its_poll_timeout_times_out(engine: Engine, policy: str) -> None:
    metrics = CountingMetrics()
    engine.metrics = metrics
    engine.register_definition(
        one_step(
            "flow",
            "nobody",
            pollTimeoutSeconds=1,
            timeoutPolicy=policy,
            retryCount=1,
            retryDelaySeconds=0,
        )
    )
    inst, _ = engine.start_instance(definition_name="flow")
    wait_until(lambda: _swept(engine), timeout=5, what="the poll timeout")
    got = engine.get_instance(inst["id"])
    assert metrics.totals[f"TaskPollTimedOut[Policy={policy}]"] == 1
    if policy == "RETRY":  # a new attempt waits for a worker, with a poll deadline of its own
        assert got["status"] == "RUNNING" and got["steps"][0]["attempt"] == 2
        assert engine.poll("w", ["nobody"], 1)[0]["attempt"] == 2
    else:
        assert got["status"] == "TIMED_OUT"
        assert "was not claimed within 1s (pollTimeoutSeconds)" in got["reason"]


# --- races ----------------------------------------------------------------------------------------


def test_a_timeout_racing_a_complete_lands_exactly_one_of_them(
    engine: Engine, database_url: str
) -> None:
    engine.register_definition(
        one_step(
            "flow",
            "racy",
            timeoutSeconds=30,
            responseTimeoutSeconds=30,
            timeoutPolicy="TIME_OUT_WF",
        )
    )
    for _ in range(10):
        inst, _ = engine.start_instance(definition_name="flow")
        job = engine.poll("w", ["racy"], 1)[0]
        with psycopg.connect(database_url, autocommit=True) as conn:
            conn.execute("UPDATE job SET deadline_at = now() WHERE id = %s", (job["id"],))
        barrier = threading.Barrier(2, timeout=30)

        def complete(j: dict[str, Any] = job, b: threading.Barrier = barrier) -> str:
            b.wait()
            try:
                return "completed" if engine.complete_job(j["id"], "w", {}, attempt=1) else ""
            except Conflict:
                return "refused"

        def sweep(b: threading.Barrier = barrier) -> str:
            b.wait()
            return "timed out" if _swept(engine) else "nothing due"

        with ThreadPoolExecutor(2) as pool:
            futures = [pool.submit(complete), pool.submit(sweep)]
            outcome = sorted(f.result() for f in futures)
        final = engine.get_instance(inst["id"])["status"]
        assert (outcome, final) in (
            (["completed", "nothing due"], "COMPLETED"),
            (["refused", "timed out"], "TIMED_OUT"),
        ), (outcome, final)


def test_two_sweepers_at_once_act_once_on_each_job(engine: Engine, database_url: str) -> None:
    engine.register_definition(
        one_step(
            "flow",
            "many",
            timeoutSeconds=30,
            responseTimeoutSeconds=30,
            timeoutPolicy="RETRY",
            retryCount=5,
            retryDelaySeconds=60,
        )
    )
    ids = [engine.start_instance(definition_name="flow")[0]["id"] for _ in range(40)]
    assert len(engine.poll("w", ["many"], 40)) == 40
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("UPDATE job SET deadline_at = now() - interval '1 second'")
    barrier = threading.Barrier(2, timeout=30)

    def sweeper() -> int:
        barrier.wait()
        return _swept(engine)

    with ThreadPoolExecutor(2) as pool:
        done = [f.result() for f in [pool.submit(sweeper), pool.submit(sweeper)]]
    done.append(_swept(engine))  # whatever a skipped lock left for the next pass
    assert sum(done) == 40
    for iid in ids:
        assert _events(engine, iid).count("JOB_TIMED_OUT") == 1
        assert engine.get_instance(iid)["steps"][0]["attempt"] == 2


# --- validation and the task-definition API -----------------------------------------------------


def test_timeouts_are_validated_as_conductor_does_every_problem_at_once(engine: Engine) -> None:
    with pytest.raises(ValidationFailed) as bad:
        engine.put_task_def(
            "t",
            {
                "timeoutSeconds": 10,
                "responseTimeoutSeconds": 20,
                "retryDelaySeconds": 9,
                "maxRetryDelaySeconds": 5,
                "rateLimitPerFrequency": 3,
                "timeoutPolicy": "NEVER",
            },
        )
    paths = sorted(p.path for p in bad.value.problems)
    # A cap below the delay is no problem: it caps every retry, as Conductor's does.
    assert paths == ["rateLimitPerFrequency", "responseTimeoutSeconds", "timeoutPolicy"]
    with pytest.raises(ValidationFailed) as lease:  # the default 3600 s lease > 10 s
        engine.put_task_def("t", {"timeoutSeconds": 10})
    assert [p.message for p in lease.value.problems] == [
        "responseTimeoutSeconds (3600) must not exceed timeoutSeconds (10): a lease longer than "
        "the attempt may run is never reached"
    ]
    with pytest.raises(ValidationFailed) as step:
        engine.register_definition(
            one_step("f", timeoutSeconds=5, responseTimeoutSeconds=6, retryCount=True)
        )
    assert sorted(p.path for p in step.value.problems) == [
        "steps[0].responseTimeoutSeconds",
        "steps[0].retryCount",
    ]
    # One attempt may not outlast the budget over all of them (Conductor's
    # TaskTimeoutConstraint); a budget without an attempt timeout, or equal to it, is fine.
    with pytest.raises(ValidationFailed) as budget:
        engine.put_task_def(
            "t", {"timeoutSeconds": 60, "responseTimeoutSeconds": 5, "totalTimeoutSeconds": 30}
        )
    assert [(p.path, p.message) for p in budget.value.problems] == [
        (
            "timeoutSeconds",
            "timeoutSeconds (60) must not exceed totalTimeoutSeconds (30): one attempt may not "
            "outlast the budget over all attempts",
        )
    ]
    engine.put_task_def("t", {"totalTimeoutSeconds": 30})
    engine.put_task_def(
        "t", {"timeoutSeconds": 30, "responseTimeoutSeconds": 5, "totalTimeoutSeconds": 30}
    )


def test_a_task_definition_shows_and_enforces_reference_002_defaults(engine: Engine) -> None:
    created, new = engine.put_task_def("charge", {"description": "cards"})
    assert new
    assert {
        k: created[k]
        for k in (
            "retryCount",
            "retryLogic",
            "retryDelaySeconds",
            "responseTimeoutSeconds",
            "timeoutSeconds",
            "pollTimeoutSeconds",
            "timeoutPolicy",
        )
    } == {
        "retryCount": 3,
        "retryLogic": "FIXED",
        "retryDelaySeconds": 60,
        "responseTimeoutSeconds": 3600,
        "timeoutSeconds": 0,
        "pollTimeoutSeconds": 0,
        "timeoutPolicy": "TIME_OUT_WF",
    }
    engine.register_definition(one_step("flow", "charge"))
    engine.start_instance(definition_name="flow")
    job = engine.poll("w", ["charge"], 1)[0]
    assert job["retriesRemaining"] == 3
    leased = engine.fail_job(job["id"], "w", "x", attempt=1)
    assert leased["status"] == "RETRY_SCHEDULED"
    assert engine.poll("w", ["charge"], 1) == []  # 60 s away


def test_task_definitions_list_page_by_page_and_delete(engine: Engine) -> None:
    for n in range(5):
        engine.put_task_def(f"t{n}", {})
    first = engine.list_task_defs(limit=3)
    second = engine.list_task_defs(limit=3, page_token=first["nextPageToken"])
    assert [t["name"] for t in first["taskDefs"] + second["taskDefs"]] == [
        f"t{n}" for n in range(5)
    ]
    assert "nextPageToken" not in second
    engine.register_definition(one_step("flow", "t0", input={}))
    engine.put_task_def("t0", {"retryCount": 7})
    running, _ = engine.start_instance(definition_name="flow")
    assert engine.delete_task_def("t0")["retryCount"] == 7
    with pytest.raises(Exception, match="not found"):
        engine.delete_task_def("t0")
    # The running instance keeps the task definition it started with.
    assert engine.poll("w", ["t0"], 1)[0]["retriesRemaining"] == 7
    assert engine.get_instance(running["id"])["status"] == "RUNNING"


def test_input_template_supplies_defaults_under_the_step_input_merged_key_by_key(
    engine: Engine,
) -> None:
    engine.put_task_def(
        "call",
        {
            "inputTemplate": {
                "url": "https://default",
                "headers": {"accept": "json", "x-user": "${workflow.input.user}"},
                "retries": 2,
            }
        },
    )
    engine.register_definition(
        one_step("flow", "call", input={"headers": {"accept": "xml"}, "retries": None})
    )
    engine.start_instance(definition_name="flow", input={"user": "ada"})
    job = engine.poll("w", ["call"], 1)[0]
    assert job["input"] == {
        "url": "https://default",
        "headers": {"accept": "xml", "x-user": "ada"},
        "retries": None,
    }


# --- concurrentExecLimit and rateLimitPerFrequency --------------------------------------------


def test_concurrent_exec_limit_holds_across_eight_pollers(
    engine: Engine, database_url: str
) -> None:
    engine.put_task_def("capped", {"concurrentExecLimit": 3, "responseTimeoutSeconds": 60})
    engine.register_definition(one_step("flow", "capped"))
    for _ in range(60):
        engine.start_instance(definition_name="flow")
    stop = threading.Event()
    samples: list[int] = []

    def sample() -> None:
        with psycopg.connect(database_url, autocommit=True) as conn:
            while not stop.is_set():
                row = conn.execute(
                    "SELECT count(*) FROM job WHERE job_type = 'capped' AND status = 'LOCKED'"
                ).fetchone()
                samples.append(int(row[0]) if row else 0)

    def poller(k: int) -> int:
        done = 0
        deadline = time.monotonic() + 60
        while done < 60 and time.monotonic() < deadline:
            jobs = engine.poll(f"w{k}", ["capped"], 5)
            if not jobs:
                if (
                    engine.search_instances(definition_name="flow", status="RUNNING", limit=1)[
                        "instances"
                    ]
                    == []
                ):
                    return done
                continue
            time.sleep(0.005)
            for j in jobs:
                engine.complete_job(j["id"], f"w{k}", {}, attempt=j["attempt"])
                done += 1
        return done

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        with ThreadPoolExecutor(8) as pool:
            total = sum(pool.map(poller, range(8)))
    finally:
        stop.set()
        sampler.join()
    assert total == 60
    assert len(samples) > 50 and max(samples) <= 3, Counter(samples)
    assert max(samples) == 3  # and the limit was used, not just respected


def test_rate_limit_per_frequency_caps_claims_per_clock_window(
    engine: Engine, database_url: str
) -> None:
    engine.put_task_def("metered", {"rateLimitPerFrequency": 5, "rateLimitFrequencyInSeconds": 2})
    engine.register_definition(one_step("flow", "metered"))
    for _ in range(60):
        engine.start_instance(definition_name="flow")
    deadline = time.monotonic() + 10

    def poller(k: int) -> None:
        while time.monotonic() < deadline:
            for j in engine.poll(f"w{k}", ["metered"], 3):
                engine.complete_job(j["id"], f"w{k}", {}, attempt=j["attempt"])
            time.sleep(0.01)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(poller, range(8)))
    with psycopg.connect(database_url) as conn:
        windows = conn.execute(
            "SELECT floor(extract(epoch FROM at) / 2)::bigint AS w, count(*) FROM audit_log"
            " WHERE event = 'JOB_DISPATCHED' GROUP BY w ORDER BY w"
        ).fetchall()
    # Every clock window from the first dispatch's to the last's (a run of 10 s spans five or
    # six, more if a poll in flight at the deadline was slow: the count is not fixed).
    counts = dict(windows)
    per_window = [counts.get(w, 0) for w in range(windows[0][0], windows[-1][0] + 1)]
    assert max(per_window) <= 5, per_window  # never more than the limit in a window
    inner = per_window[1:-1]  # the first and the last are cut by the run's start and end
    assert len(inner) >= 3 and sum(inner) >= 5 * len(inner) - 5, per_window  # and it was used


def test_claims_granted_in_one_rate_window_and_made_in_the_next_count_in_the_next(
    engine: Engine, database_url: str
) -> None:
    """A claim reads its rate window when it is granted, and writes its jobs a moment later (on
    a loaded machine, past a window's end): the jobs count in the window their dispatch is
    stamped in, so no window holds more dispatches than the limit by the audit log's clock."""
    engine.put_task_def("metered", {"rateLimitPerFrequency": 5, "rateLimitFrequencyInSeconds": 2})
    engine.register_definition(one_step("flow", "metered"))
    for _ in range(12):
        engine.start_instance(definition_name="flow")
    params = {
        "worker_id": "w",
        "job_types": ["metered"],
        "max_jobs": 5,
        "max_bytes": 1 << 20,
    }
    window = "floor(extract(epoch FROM clock_timestamp()) / 2)::bigint"
    with psycopg.connect(database_url) as conn:  # one transaction, as the engine's claim
        conn.execute(job_sql.LOCK_LIMITS, params)
        (grant,) = conn.execute(job_sql.GRANT, params).fetchall()
        assert grant[1] == 5
        granted_in = conn.execute(f"SELECT {window}").fetchone()
        assert granted_in is not None
        # The grant's window ends before the claim writes its jobs.
        wait_until(
            lambda: conn.execute(f"SELECT {window}").fetchone() != granted_in,
            timeout=5,
            interval=0.02,
        )
        claimed = conn.execute(job_sql.claim_limited_sql(1), params).fetchall()
        assert len(claimed) == 5
    with psycopg.connect(database_url) as conn:
        stamped = conn.execute(
            "SELECT DISTINCT floor(extract(epoch FROM at) / 2)::bigint FROM audit_log"
            " WHERE event = 'JOB_DISPATCHED'"
        ).fetchall()
        limit = conn.execute(
            "SELECT window_id, window_claims FROM job_type_limit WHERE job_type = 'metered'"
        ).fetchone()
    assert len(stamped) == 1 and stamped[0][0] == granted_in[0] + 1
    assert limit == (granted_in[0] + 1, 5)  # counted where stamped: the new window is full
    before = time.time()
    more = engine.poll("w", ["metered"], 5)
    if int(time.time() // 2) == granted_in[0] + 1 == int(before // 2):
        assert more == []  # still that window: nothing more


def test_a_task_definition_read_back_can_be_put_again_as_it_is(engine: Engine) -> None:
    shown, _ = engine.put_task_def("round-trip", {"retryCount": 5})
    again, created = engine.put_task_def("round-trip", shown)  # createdAt/updatedAt included
    assert not created and again["retryCount"] == 5
