"""Two (or fifty) writers on the same rows at the same moment: exactly one outcome lands, the
state is consistent, nothing is applied twice, and no deadlock ever happens."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psycopg
import pytest
from baton.engine.queue_ops import Queues
from baton.engine.service import Engine
from baton.errors import Conflict
from baton.store.db import Database

from tests.support.helpers import one_step

ROUNDS = 12


def _race(*actions: Callable[[], str]) -> list[str]:
    """Run the actions at the same moment on their own threads; each returns its outcome, and a
    Conflict (409) is the outcome "refused"."""
    barrier = threading.Barrier(len(actions))

    def run(action: Callable[[], str]) -> str:
        barrier.wait()
        try:
            return action()
        except Conflict:
            return "refused"

    with ThreadPoolExecutor(len(actions)) as pool:
        return list(pool.map(run, actions))


def _events(engine: Engine, instance_id: str) -> Counter[str]:
    return Counter(a["event"] for a in engine.audit_trail(instance_id))


def _expire_lease(database_url: str, job_id: str) -> None:
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(
            "UPDATE job SET lock_expires_at = now() - interval '1 second' WHERE id = %s",
            (job_id,),
        )


@pytest.mark.parametrize("steps", [1, 2])
def test_complete_racing_cancel(racing: Engine, steps: int) -> None:
    definition = one_step("flow")
    definition["steps"] += [
        {"id": f"more{i}", "type": "SERVICE_TASK", "jobType": "more"} for i in range(steps - 1)
    ]
    racing.register_definition(definition)
    for _ in range(ROUNDS):
        inst, _ = racing.start_instance(definition_name="flow")
        job = racing.poll("w", ["work"], 1)[0]
        done, cancelled = _race(
            lambda j=job: "done" if racing.complete_job(j["id"], "w", {"x": 1}, attempt=1) else "",
            lambda i=inst: racing.cancel_instance(i["id"])["status"],
        )
        final = racing.get_instance(inst["id"])
        events = _events(racing, inst["id"])
        if cancelled == "CANCELLED":
            assert final["status"] == "CANCELLED"
            # The complete either landed first (and the next step was cancelled) or was refused.
            assert events["JOB_COMPLETED"] == (1 if done == "done" else 0)
        else:  # one step: the complete finished the instance first, so the cancel is refused
            assert (steps, done, final["status"]) == (1, "done", "COMPLETED")
        assert events["INSTANCE_CANCELLED"] + events["INSTANCE_COMPLETED"] == 1
        # Nothing open is left behind, whoever won.
        assert all(s["status"] not in ("SCHEDULED", "IN_PROGRESS") for s in final["steps"])


def test_late_complete_racing_the_reclaim_of_its_lapsed_lease(
    racing: Engine, database_url: str
) -> None:
    racing.register_definition(one_step("flow", retryCount=5))
    for _ in range(ROUNDS):
        inst, _ = racing.start_instance(definition_name="flow")
        job = racing.poll("a", ["work"], 1)[0]
        _expire_lease(database_url, job["id"])
        late, reclaim = _race(
            lambda j=job: "applied" if racing.complete_job(j["id"], "a", {}, attempt=1) else "dup",
            lambda: str(len(racing.poll("b", ["work"], 1))),
        )
        # The lapsed attempt's result counts whoever won; b took the job or found it done.
        assert late == "applied" and reclaim in ("0", "1"), (late, reclaim)
        if reclaim == "1":  # b's attempt was superseded: its result is a repeat
            assert not racing.complete_job(job["id"], "b", {}, attempt=2)["applied"]
        final = racing.get_instance(inst["id"])
        assert final["status"] == "COMPLETED"
        assert _events(racing, inst["id"])["JOB_COMPLETED"] == 1


def _lapsed_and_reclaimed(racing: Engine, database_url: str, name: str) -> tuple[str, str]:
    """An instance whose job "a" claimed (attempt 1), let lapse, and "b" claimed again
    (attempt 2): (instance id, job id)."""
    inst, _ = racing.start_instance(definition_name=name)
    job = racing.poll("a", [name], 1)[0]
    _expire_lease(database_url, job["id"])
    again = racing.poll("b", [name], 1)[0]
    assert (again["id"], again["attempt"]) == (job["id"], 2)
    return inst["id"], job["id"]


def test_late_complete_racing_the_holder_s_complete(racing: Engine, database_url: str) -> None:
    racing.register_definition(one_step("holder-race", "holder-race", retryCount=5))
    winners: Counter[str] = Counter()
    for _ in range(ROUNDS):
        iid, jid = _lapsed_and_reclaimed(racing, database_url, "holder-race")
        late, holder = _race(
            lambda j=jid: str(racing.complete_job(j, "a", {"by": "a"}, attempt=1)["applied"]),
            lambda j=jid: str(racing.complete_job(j, "b", {"by": "b"}, attempt=2)["applied"]),
        )
        # Both were accepted; exactly one of them is the step's result.
        assert sorted([late, holder]) == ["False", "True"]
        winner = "a" if late == "True" else "b"
        winners[winner] += 1
        final = racing.get_instance(iid)
        assert final["status"] == "COMPLETED" and final["variables"] == {"by": winner}
        assert _events(racing, iid)["JOB_COMPLETED"] == 1
    assert sum(winners.values()) == ROUNDS


@pytest.mark.parametrize("retryable", [True, False])
def test_late_complete_racing_the_holder_s_fail(
    racing: Engine, database_url: str, retryable: bool
) -> None:
    name = f"fail-race-{retryable}".lower()
    racing.register_definition(one_step(name, name, retryCount=5, retryDelaySeconds=0))
    for _ in range(ROUNDS):
        iid, jid = _lapsed_and_reclaimed(racing, database_url, name)
        late, failed = _race(
            lambda j=jid: str(racing.complete_job(j, "a", {"by": "a"}, attempt=1)["applied"]),
            lambda j=jid: racing.fail_job(j, "b", "boom", retryable, attempt=2)["status"],
        )
        final = racing.get_instance(iid)
        events = _events(racing, iid)
        if late == "True":  # the late completion counts; a retry scheduled first is dropped
            assert final["status"] == "COMPLETED" and final["variables"] == {"by": "a"}
            assert failed in ("COMPLETED", "RETRY_SCHEDULED"), failed
            assert events["JOB_FAILED"] == (1 if failed == "RETRY_SCHEDULED" else 0)
        else:  # the failure settled the job first: the late completion came too late
            assert (late, failed, retryable) == ("refused", "FAILED", False)
            assert final["status"] == "FAILED" and events["JOB_FAILED"] == 1
        assert events["JOB_COMPLETED"] == (1 if late == "True" else 0)


def test_late_complete_racing_the_holder_s_heartbeat(racing: Engine, database_url: str) -> None:
    racing.register_definition(one_step("beat-race", "beat-race", retryCount=5))
    for _ in range(ROUNDS):
        iid, jid = _lapsed_and_reclaimed(racing, database_url, "beat-race")
        late, beat = _race(
            lambda j=jid: str(racing.complete_job(j, "a", {"by": "a"}, attempt=1)["applied"]),
            lambda j=jid: "extended" if racing.heartbeat(j, "b", attempt=2) else "",
        )
        assert late == "True" and beat in ("extended", "refused")
        # Whatever the order, the holder's next heartbeat is refused: it can stop.
        with pytest.raises(Conflict, match="COMPLETED"):
            racing.heartbeat(jid, "b", attempt=2)
        assert racing.get_instance(iid)["status"] == "COMPLETED"


def test_late_complete_racing_the_reaper(racing: Engine, database_url: str) -> None:
    racing.register_definition(one_step("reap-race", "reap-race", retryCount=5))
    for _ in range(ROUNDS):
        inst, _ = racing.start_instance(definition_name="reap-race")
        job = racing.poll("a", ["reap-race"], 1)[0]
        _expire_lease(database_url, job["id"])
        late, reaped = _race(
            lambda j=job: str(racing.complete_job(j["id"], "a", {}, attempt=1)["applied"]),
            lambda: str(racing.reap_expired_leases()),
        )
        assert late == "True" and reaped in ("0", "1")
        assert racing.get_instance(inst["id"])["status"] == "COMPLETED"
        assert racing.poll("b", ["reap-race"], 1) == []  # nothing left to run again
        events = _events(racing, inst["id"])
        assert events["JOB_COMPLETED"] == 1 and events["JOB_LEASE_EXPIRED"] == int(reaped)


def test_late_fail_racing_the_reclaim_of_its_lapsed_lease(
    racing: Engine, database_url: str
) -> None:
    for n, retryable in enumerate((True, False) * (ROUNDS // 2)):
        # A job type per round: a retry left over from one round is never the next one's job.
        job_type = f"work{n}"
        racing.register_definition(
            one_step(f"flow{n}", job_type, retryCount=5, retryDelaySeconds=0)
        )
        inst, _ = racing.start_instance(definition_name=f"flow{n}")
        job = racing.poll("a", [job_type], 1)[0]
        _expire_lease(database_url, job["id"])
        failed, reclaim = _race(
            lambda r=retryable, j=job: racing.fail_job(j["id"], "a", "boom", r, attempt=1)[
                "status"
            ],
            lambda t=job_type: str(len(racing.poll("b", [t], 1))),
        )
        final = racing.get_instance(inst["id"])
        events = _events(racing, inst["id"])
        if failed == "refused":  # b re-claimed first: its attempt is untouched
            assert reclaim == "1" and final["status"] == "RUNNING"
            assert events["JOB_FAILED"] == 0
        elif retryable:  # the fail landed first; b may then have claimed the retry at once
            assert failed == "RETRY_SCHEDULED" and events["JOB_FAILED"] == 1
            assert final["status"] == "RUNNING"
        else:
            assert (failed, reclaim, final["status"]) == ("FAILED", "0", "FAILED")
        if reclaim == "1":  # whatever b claimed, b still holds it: no fail was applied over it
            with psycopg.connect(database_url) as conn:
                row = conn.execute(
                    "SELECT status, worker_id FROM job WHERE id = %s", (job["id"],)
                ).fetchone()
            assert row == ("LOCKED", "b")


def test_heartbeat_after_the_lease_was_reclaimed_is_refused(
    racing: Engine, database_url: str
) -> None:
    racing.register_definition(one_step("flow", retryCount=5))
    racing.start_instance(definition_name="flow")
    job = racing.poll("a", ["work"], 1)[0]
    _expire_lease(database_url, job["id"])
    again = racing.poll("b", ["work"], 1)[0]
    expires = again["lockExpiresAt"]
    with pytest.raises(Conflict):
        racing.heartbeat(job["id"], "a", attempt=1)
    with pytest.raises(Conflict):
        racing.heartbeat(job["id"], "a")
    # b's lease is b's: a's heartbeat did not touch it, b's own extends it.
    assert racing.heartbeat(job["id"], "b", attempt=2)["lockExpiresAt"] >= expires


def test_fail_racing_cancel_retryable_or_not(racing: Engine) -> None:
    racing.register_definition(one_step("flow", retryCount=3, retryDelaySeconds=0))
    for retryable in (True, False) * (ROUNDS // 2):
        inst, _ = racing.start_instance(definition_name="flow")
        job = racing.poll("w", ["work"], 1)[0]
        failed, cancelled = _race(
            lambda r=retryable, j=job: racing.fail_job(j["id"], "w", "boom", r, attempt=1)[
                "status"
            ],
            lambda i=inst: racing.cancel_instance(i["id"])["status"],
        )
        final = racing.get_instance(inst["id"])
        events = _events(racing, inst["id"])
        if retryable:  # both can land: the retry is scheduled, then the cancel ends it all
            assert cancelled == "CANCELLED" and final["status"] == "CANCELLED"
            assert failed in ("RETRY_SCHEDULED", "refused")
        else:
            assert sorted([failed, cancelled]) in (["CANCELLED", "refused"], ["FAILED", "refused"])
            assert final["status"] == (failed if failed != "refused" else cancelled)
        assert events["INSTANCE_FAILED"] + events["INSTANCE_CANCELLED"] == 1
        assert events["JOB_FAILED"] <= 1 and events["JOB_CANCELLED"] <= 1


def test_fifty_completions_of_one_attempt_apply_once(racing: Engine) -> None:
    racing.register_definition(one_step("flow"))
    inst, _ = racing.start_instance(definition_name="flow")
    job = racing.poll("w", ["work"], 1)[0]
    outcomes = _race(
        *[
            lambda i=i: str(racing.complete_job(job["id"], "w", {"i": i}, attempt=1)["applied"])
            for i in range(50)
        ]
    )
    assert Counter(outcomes) == {"True": 1, "False": 49}
    final = racing.get_instance(inst["id"])
    assert final["status"] == "COMPLETED"
    assert _events(racing, inst["id"])["JOB_COMPLETED"] == 1


def test_ack_racing_the_lapse_of_its_claim(racing_queues: Queues, database_url: str) -> None:
    q = racing_queues
    for i in range(ROUNDS):
        q.push("race-q", f"t{i}")
        (task,) = q.dequeue("race-q", "a", visibility_timeout_secs=1, max_tasks=1)
        with psycopg.connect(database_url, autocommit=True) as conn:
            conn.execute(
                "UPDATE queue_task SET visibility_expires_at = now() - interval '1 second'"
                " WHERE id = %s",
                (task["id"],),
            )
        got: list[dict[str, Any]] = []
        acked, taken = _race(
            lambda t=task: str(q.ack("race-q", t["id"], t["receipt"])["applied"]),
            lambda got=got: str(len(got.__iadd__(q.dequeue("race-q", "b", max_tasks=1)))),
        )
        # The lapsed claim's ack and b's dequeue never both win.
        assert (acked, taken) in (("True", "0"), ("refused", "1")), (acked, taken)
        for t in got:  # b finishes what it took
            assert q.ack("race-q", t["id"], t["receipt"])["applied"]
    assert q.stats("race-q")["completed"] == ROUNDS


def test_a_reaper_and_a_poller_on_the_same_expired_leases(
    racing: Engine, database_url: str
) -> None:
    racing.register_definition(one_step("flow", retryCount=5))
    for _ in range(20):
        racing.start_instance(definition_name="flow")
    jobs = racing.poll("a", ["work"], 20)
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("UPDATE job SET lock_expires_at = now() - interval '1 second'")
    results: dict[str, Any] = {}

    def reap() -> str:
        results["reaped"] = racing.reap_expired_leases()
        return "ok"

    def poll() -> str:
        results["claimed"] = len(racing.poll("b", ["work"], 20))
        return "ok"

    assert _race(reap, poll) == ["ok", "ok"]
    # Each lapsed lease became exactly one new attempt, whoever took it.
    with psycopg.connect(database_url) as conn:
        attempts = conn.execute("SELECT attempt FROM job").fetchall()
    assert sorted(a[0] for a in attempts) == [2] * len(jobs)
    assert results["claimed"] + racing.reap_expired_leases() <= len(jobs)


def test_a_batch_racing_single_completes_and_cancels(racing: Engine) -> None:
    racing.register_definition(one_step("batch-race", "br"))
    for _ in range(4):
        _batch_round(racing)


def _batch_round(racing: Engine) -> None:
    from baton.engine.batch_ops import BatchResult

    for _ in range(30):
        racing.start_instance(definition_name="batch-race")
    jobs = racing.poll("w", ["br"], 30)
    assert len(jobs) == 30
    jobs.sort(key=lambda j: j["instanceId"])
    singles: dict[str, bool] = {}
    cancels: dict[str, str] = {}
    batch: list[dict[str, Any]] = []

    def complete_all() -> str:
        results = [BatchResult(j["id"], "w", 1, output={"by": "batch"}) for j in jobs]
        batch.extend(racing.complete_batch(results))
        return "batch"

    def complete_some() -> str:
        for j in jobs[:10]:
            done = racing.complete_job(j["id"], "w", {"by": "batch"}, attempt=1)
            singles[j["id"]] = done["applied"]
        return "singles"

    def cancel_some() -> str:
        for j in jobs[20:]:
            try:
                cancels[j["id"]] = racing.cancel_instance(j["instanceId"])["status"]
            except Conflict:
                cancels[j["id"]] = "refused"
        return "cancels"

    _race(complete_all, complete_some, cancel_some)
    answers = {a["jobId"]: a["outcome"] for a in batch}
    for j in jobs:
        events = _events(racing, j["instanceId"])
        final = racing.get_instance(j["instanceId"])["status"]
        # Exactly one ending, and a completion applied at most once, whoever won.
        assert events["INSTANCE_COMPLETED"] + events["INSTANCE_CANCELLED"] == 1
        assert events["JOB_COMPLETED"] <= 1
        if j["id"] in singles:
            # Batch and single sent the same result: exactly one of them applied it.
            assert [answers[j["id"]] == "APPLIED", singles[j["id"]]].count(True) == 1
            assert final == "COMPLETED"
        elif j["id"] in cancels and cancels[j["id"]] == "CANCELLED":
            assert final == "CANCELLED" and answers[j["id"]] == "CONFLICT"
        else:
            assert final == "COMPLETED" and answers[j["id"]] == "APPLIED"


def test_completions_on_kept_states_racing_another_process(
    racing: Engine, database_url: str
) -> None:
    """Jobs claimed here (their states kept: engine.claimed) are completed here while another
    process cancels half of their instances and completes the other half's jobs itself: nothing
    here tells this process, so only the fences stand between a kept state and a lost update.
    Each job ends once, each instance once, and nothing deadlocks."""
    other_db = Database.pooled(database_url, min_size=2, max_size=8)
    other = Engine(other_db)
    try:
        racing.register_definition(one_step("kept-race", "kept-race"))
        started = [
            racing.start_instance(definition_name="kept-race")[0]["id"] for _ in range(3 * ROUNDS)
        ]
        jobs = racing.poll("w", ["kept-race"], len(started))
        assert len(jobs) == len(started) and len(racing.claimed) == len(jobs)
        actions: list[Callable[[], str]] = []
        for k, job in enumerate(jobs):
            actions.append(
                lambda j=job: str(racing.complete_job(j["id"], "w", {"by": "here"})["applied"])
            )
            if k % 2:
                actions.append(lambda j=job: other.cancel_instance(j["instanceId"])["status"])
            else:
                actions.append(
                    lambda j=job: str(other.complete_job(j["id"], "w", {"by": "other"})["applied"])
                )
        outcomes = _race(*actions)
    finally:
        other_db.close()
    assert len(outcomes) == 2 * len(jobs)
    for iid in started:
        events = _events(racing, iid)
        final = racing.get_instance(iid)
        assert events["JOB_COMPLETED"] + events["JOB_CANCELLED"] <= 1
        assert events["INSTANCE_COMPLETED"] + events["INSTANCE_CANCELLED"] == 1
        if final["status"] == "COMPLETED":
            assert events["JOB_COMPLETED"] == 1
            assert final["variables"]["by"] in ("here", "other")
        else:
            assert final["status"] == "CANCELLED"


def test_batches_of_one_maps_items_from_two_processes(racing: Engine, database_url: str) -> None:
    """Two processes claim items of the same MAP instances and report them in batches: each
    batch decides an instance's items together, and the two race on the instances' versions.
    Every item is applied once, every MAP joins every output, nothing deadlocks."""
    from baton.engine.batch_ops import BatchResult

    other_db = Database.pooled(database_url, min_size=2, max_size=4)
    other = Engine(other_db)
    items = 40
    racing.register_definition(
        {
            "name": "map-race",
            "steps": [
                {
                    "id": "each",
                    "type": "MAP",
                    "items": "${workflow.input.items}",
                    "maxConcurrency": items,
                    "steps": [
                        {
                            "id": "one",
                            "type": "SERVICE_TASK",
                            "jobType": "map-race",
                            "input": {"n": "${map.item}"},
                        }
                    ],
                }
            ],
        }
    )
    started = [
        racing.start_instance(definition_name="map-race", input={"items": list(range(items))})[0]
        for _ in range(3)
    ]
    answers: list[str] = []

    def drain(engine: Engine, worker: str) -> str:
        while True:
            jobs = engine.poll(worker, ["map-race"], 16)
            if not jobs:
                return worker
            done = engine.complete_batch(
                [BatchResult(j["id"], worker, 1, output={"n": j["input"]["n"]}) for j in jobs]
            )
            answers.extend(a["outcome"] for a in done)

    try:
        _race(lambda: drain(racing, "a"), lambda: drain(other, "b"))
    finally:
        other_db.close()
    assert answers == ["APPLIED"] * (3 * items)
    for inst in started:
        final = racing.get_instance(inst["id"])
        assert final["status"] == "COMPLETED", final
        (each,) = [s for s in final["steps"] if s["stepId"] == "each"]
        assert [o["n"] for o in each["output"]] == list(range(items))
        events = _events(racing, inst["id"])
        assert events["JOB_COMPLETED"] == items and events["INSTANCE_COMPLETED"] == 1
