"""The event-driven dispatch mode: outbox rows written with the transition that makes a job
claimable, one elected relay draining them to SQS FIFO (moto's), the claim by id."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psycopg
import pytest
from baton.engine.dispatch_ops import Dispatch
from baton.engine.service import Engine
from baton.engine.sqs import SqsPublisher
from baton.errors import JobNotClaimable, JobNotFound, JobThrottled
from baton.settings import EngineSettings
from baton.store.db import Database

from tests.support.helpers import one_step, wait_until
from tests.support.sqs import fifo_queue, moto_endpoint, receive_all, sqs_client

__all__ = ["moto_endpoint"]  # the fixture, used by name

OUTBOX = EngineSettings(dispatch_mode="outbox")


@pytest.fixture
def outbox_engine(db: Database) -> Engine:
    return Engine(db, OUTBOX)


@pytest.fixture
def queue(moto_endpoint: str) -> str:
    return fifo_queue(moto_endpoint)


@pytest.fixture
def publisher(moto_endpoint: str, queue: str) -> SqsPublisher:
    return SqsPublisher(queue, client=sqs_client(moto_endpoint))


def _outbox(database_url: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(database_url) as conn:
        return conn.execute(
            "SELECT job_id, attempt, relayed_at IS NOT NULL FROM dispatch_outbox ORDER BY id"
        ).fetchall()


def _job(database_url: str, instance_id: str) -> tuple[Any, ...]:
    with psycopg.connect(database_url) as conn:
        row = conn.execute(
            "SELECT id, status, attempt FROM job WHERE instance_id = %s ORDER BY created_at DESC",
            (instance_id,),
        ).fetchone()
    assert row is not None
    return tuple(row)


def _deadlocks(database_url: str) -> int:
    with psycopg.connect(database_url) as conn:
        row = conn.execute(
            "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()
    assert row is not None
    return int(row[0])


def _bodies(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [json.loads(m["Body"]) for m in messages]


def test_polling_mode_writes_no_outbox_rows(engine: Engine, database_url: str) -> None:
    engine.register_definition(one_step("flow"))
    engine.start_instance(definition_name="flow")
    assert _outbox(database_url) == []


def test_outbox_mode_job_creation_writes_its_row_in_the_same_transaction(
    outbox_engine: Engine, database_url: str
) -> None:
    outbox_engine.register_definition(one_step("flow"))
    iid = outbox_engine.start_instance(definition_name="flow")[0]["id"]
    job_id, status, _ = _job(database_url, iid)
    assert status == "UNLOCKED"
    assert _outbox(database_url) == [(job_id, 1, False)]


def test_relay_publishes_to_sqs_fifo_by_instance_and_claim_by_id_takes_the_lease(
    outbox_engine: Engine,
    publisher: SqsPublisher,
    moto_endpoint: str,
    queue: str,
    database_url: str,
) -> None:
    outbox_engine.register_definition(one_step("flow"))
    ids = [outbox_engine.start_instance(definition_name="flow")[0]["id"] for _ in range(12)]
    result = outbox_engine.relay_outbox(publisher)
    assert result["relayed"] == 12 and result["elected"] == 1 and result["depth"] == 0
    messages = receive_all(moto_endpoint, queue)
    bodies = _bodies(messages)
    assert sorted(b["instanceId"] for b in bodies) == sorted(ids)
    # FIFO group = instance id, deduplication id = job id + attempt.
    assert [m["Attributes"]["MessageGroupId"] for m in messages] == [
        b["instanceId"] for b in bodies
    ]
    assert [m["Attributes"]["MessageDeduplicationId"] for m in messages] == [
        f"{b['jobId']}-1" for b in bodies
    ]
    assert all(b["attempt"] == 1 and b["jobType"] == "work" for b in bodies)
    first = bodies[0]
    job = outbox_engine.claim_job(first["jobId"], "w1", attempt=first["attempt"])
    assert job["id"] == first["jobId"] and job["attempt"] == 1 and job["jobType"] == "work"
    assert job["stepId"] == "only" and "lockExpiresAt" in job and job["input"] == {}
    # A duplicate delivery takes nothing and says so; the job completes through the same API.
    with pytest.raises(JobNotClaimable):
        outbox_engine.claim_job(first["jobId"], "w2", attempt=1)
    assert outbox_engine.complete_job(job["id"], "w1", {"ok": True}, attempt=1)["applied"]
    with pytest.raises(JobNotClaimable):
        outbox_engine.claim_job(first["jobId"], "w2")
    with pytest.raises(JobNotFound):
        outbox_engine.claim_job(str(uuid.uuid4()), "w2")
    # Everything relayed is marked, and a second pass publishes nothing again.
    assert all(relayed for _, _, relayed in _outbox(database_url))
    assert outbox_engine.relay_outbox(publisher)["relayed"] == 0
    assert receive_all(moto_endpoint, queue) == []


def test_a_retry_is_published_only_once_due_with_its_next_attempt(
    outbox_engine: Engine,
    publisher: SqsPublisher,
    moto_endpoint: str,
    queue: str,
    database_url: str,
) -> None:
    outbox_engine.register_definition(
        one_step("flow", retryCount=1, retryLogic="FIXED", retryDelaySeconds=2)
    )
    outbox_engine.start_instance(definition_name="flow")
    outbox_engine.relay_outbox(publisher)
    (body,) = _bodies(receive_all(moto_endpoint, queue))
    outbox_engine.claim_job(body["jobId"], "w1", attempt=1)
    failed = outbox_engine.fail_job(body["jobId"], "w1", "boom", attempt=1)
    assert failed["status"] == "RETRY_SCHEDULED"
    # Not due yet: nothing is published, and the row waits (it is not lost either).
    assert outbox_engine.relay_outbox(publisher)["relayed"] == 0
    assert receive_all(moto_endpoint, queue, empty_rounds=1) == []
    assert _outbox(database_url)[-1] == (uuid.UUID(body["jobId"]), 2, False)
    # A stale delivery of attempt 1 (or an early claim) takes nothing.
    with pytest.raises(JobNotClaimable):
        outbox_engine.claim_job(body["jobId"], "w2", attempt=1)

    def published() -> list[dict[str, Any]]:
        outbox_engine.relay_outbox(publisher)
        return _bodies(receive_all(moto_endpoint, queue, empty_rounds=1))

    (again,) = wait_until(published, timeout=10, interval=0.2, what="the retry published")
    assert again == {**body, "attempt": 2}
    assert outbox_engine.claim_job(again["jobId"], "w2", attempt=2)["attempt"] == 2


def test_a_lease_the_reaper_takes_back_is_published_again(
    db: Database, publisher: SqsPublisher, moto_endpoint: str, queue: str, database_url: str
) -> None:
    engine = Engine(db, OUTBOX)
    engine.register_definition(one_step("flow", retryCount=2, responseTimeoutSeconds=1))
    engine.start_instance(definition_name="flow")
    engine.relay_outbox(publisher)
    (body,) = _bodies(receive_all(moto_endpoint, queue))
    engine.claim_job(body["jobId"], "crashing-worker", attempt=1)
    wait_until(engine.reap_expired_leases, timeout=10, interval=0.2, what="a reap")
    engine.relay_outbox(publisher)
    (again,) = _bodies(receive_all(moto_endpoint, queue))
    assert again["jobId"] == body["jobId"] and again["attempt"] == 2
    assert engine.claim_job(again["jobId"], "w2", attempt=2)["attempt"] == 2


def test_a_row_whose_job_moved_on_is_marked_without_being_published(
    outbox_engine: Engine, publisher: SqsPublisher, moto_endpoint: str, queue: str
) -> None:
    outbox_engine.register_definition(one_step("flow"))
    outbox_engine.start_instance(definition_name="flow")
    # A poll (an old-mode worker still running during a switch) claims it before the relay runs.
    assert len(outbox_engine.poll("poller", ["work"], 5)) == 1
    result = outbox_engine.relay_outbox(publisher)
    assert result["relayed"] == 0 and result["skipped"] == 1 and result["depth"] == 0
    assert receive_all(moto_endpoint, queue, empty_rounds=1) == []


def test_claim_by_id_respects_a_job_types_concurrency_limit(
    outbox_engine: Engine, database_url: str
) -> None:
    outbox_engine.put_task_def("capped", {"concurrentExecLimit": 1})
    outbox_engine.register_definition(one_step("flow", job_type="capped"))
    ids = [outbox_engine.start_instance(definition_name="flow")[0]["id"] for _ in range(2)]
    first, second = (_job(database_url, i)[0] for i in ids)
    assert outbox_engine.claim_job(str(first), "w1")["id"] == str(first)
    with pytest.raises(JobThrottled):
        outbox_engine.claim_job(str(second), "w2")
    outbox_engine.complete_job(str(first), "w1", {})
    assert outbox_engine.claim_job(str(second), "w2")["id"] == str(second)


class _CrashAfterPublishing:
    """Publishes for real, then dies before the relay can commit its marks."""

    def __init__(self, inner: SqsPublisher, crash_on_call: int) -> None:
        self.inner = inner
        self.crash_on_call = crash_on_call
        self.calls = 0

    def publish(self, dispatches: list[Dispatch]) -> set[int]:
        self.calls += 1
        accepted = self.inner.publish(dispatches)
        if self.calls == self.crash_on_call:
            raise RuntimeError("relay killed after publishing, before its commit")
        return accepted


def test_a_relay_crash_mid_drain_loses_no_job_and_duplicates_are_harmless(
    outbox_engine: Engine,
    publisher: SqsPublisher,
    moto_endpoint: str,
    queue: str,
    database_url: str,
) -> None:
    outbox_engine.register_definition(one_step("flow"))
    n = 45
    for _ in range(n):
        outbox_engine.start_instance(definition_name="flow")
    crashing = _CrashAfterPublishing(publisher, crash_on_call=2)
    with pytest.raises(RuntimeError):
        outbox_engine.relay_outbox(crashing, batch=10)
    # The first batch committed; the second was published but its marks rolled back.
    assert sum(1 for *_, relayed in _outbox(database_url) if relayed) == 10
    # The next relay (a new invocation) republishes the second batch with the same
    # deduplication ids: SQS drops them within its window.
    assert outbox_engine.relay_outbox(publisher, batch=10)["relayed"] == n - 10
    bodies = _bodies(receive_all(moto_endpoint, queue))
    assert len(bodies) == n and len({b["jobId"] for b in bodies}) == n
    # Past the window the broker would deliver the duplicate: a claim by id makes it harmless.
    claimed = [outbox_engine.claim_job(b["jobId"], "w", attempt=b["attempt"]) for b in bodies]
    assert len(claimed) == n
    for b in bodies[10:20]:
        with pytest.raises(JobNotClaimable):
            outbox_engine.claim_job(b["jobId"], "late-duplicate", attempt=b["attempt"])
    for j in claimed:
        assert outbox_engine.complete_job(j["id"], "w", {}, attempt=j["attempt"])["applied"]
    with psycopg.connect(database_url) as conn:
        statuses = Counter(
            dict(conn.execute("SELECT status, count(*) FROM job GROUP BY status").fetchall())
        )
    assert statuses == Counter({"COMPLETED": n})


class _SlowRecorder:
    """Records every publication and who made it; slow enough that relays overlap."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.published: list[tuple[int, str]] = []
        self.publishing = 0
        self.most_at_once = 0

    def publish(self, dispatches: list[Dispatch]) -> set[int]:
        who = threading.current_thread().name
        with self.lock:
            self.publishing += 1
            self.most_at_once = max(self.most_at_once, self.publishing)
        time.sleep(0.02)
        with self.lock:
            self.publishing -= 1
            self.published.extend((d.outbox_id, who) for d in dispatches)
        return {d.outbox_id for d in dispatches}


def test_two_relays_at_once_never_publish_a_row_twice(
    outbox_engine: Engine, database_url: str
) -> None:
    outbox_engine.register_definition(one_step("flow"))
    n = 300
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda _: outbox_engine.start_instance(definition_name="flow"), range(n)))
    deadlocks = _deadlocks(database_url)
    recorder = _SlowRecorder()
    start = threading.Barrier(2)

    def published() -> int:
        with recorder.lock:
            return len(recorder.published)

    def relay(_: int) -> list[dict[str, int]]:
        # Passes until every row is out (or a deadline): how many passes each relay gets
        # elected in is up to the scheduler (one ran 20 passes for 190 rows on a loaded CI).
        start.wait()
        results = []
        deadline = time.monotonic() + 60
        while published() < n and time.monotonic() < deadline:
            results.append(outbox_engine.relay_outbox(recorder, batch=10, max_batches=3))
        return results

    with ThreadPoolExecutor(2, thread_name_prefix="relay") as pool:
        per_relay = list(pool.map(relay, range(2)))
    ids = Counter(i for i, _ in recorder.published)
    assert len(ids) == n and max(ids.values()) == 1  # all published, none twice
    assert recorder.most_at_once == 1  # never two relays publishing at the same moment
    # They did run at once: some passes found the other relay holding the lock.
    assert any(r["elected"] == 0 for rs in per_relay for r in rs)
    assert sum(r["relayed"] for rs in per_relay for r in rs) == n
    assert all(relayed for *_, relayed in _outbox(database_url))
    assert _deadlocks(database_url) == deadlocks


def test_switching_modes_lets_jobs_finish_under_the_mode_they_were_created_in(
    db: Database, publisher: SqsPublisher, moto_endpoint: str, queue: str, database_url: str
) -> None:
    polling, outbox = Engine(db), Engine(db, OUTBOX)
    polling.register_definition(one_step("flow"))
    polling.start_instance(definition_name="flow")  # before the switch to outbox
    outbox.start_instance(definition_name="flow")  # after it
    # After switching (a restart with the new env var), the relay publishes only the job created
    # in outbox mode, and polls still serve the old one (the poll's claim is the same in both
    # modes: it serves whatever is claimable).
    assert outbox.relay_outbox(publisher)["relayed"] == 1
    (body,) = _bodies(receive_all(moto_endpoint, queue))
    assert outbox.claim_job(body["jobId"], "sqs-worker")["id"] == body["jobId"]
    old = outbox.poll("poller", ["work"], 5)
    assert len(old) == 1 and old[0]["id"] != body["jobId"]
    # And back: rows written before switching back to polling are still drained by the relay.
    outbox.start_instance(definition_name="flow")
    assert polling.relay_outbox(publisher)["relayed"] == 1
    assert len(receive_all(moto_endpoint, queue)) == 1


def test_a_fan_out_and_a_postponed_job_write_their_rows_due_when_claimable(
    outbox_engine: Engine, database_url: str
) -> None:
    outbox_engine.register_definition(
        {
            "name": "fan",
            "steps": [
                {
                    "id": "p",
                    "type": "PARALLEL",
                    "branches": [
                        [{"id": f"b{k}", "type": "SERVICE_TASK", "jobType": "work"}]
                        for k in range(3)
                    ],
                }
            ],
        }
    )
    outbox_engine.start_instance(definition_name="fan")
    rows = _outbox(database_url)
    assert len(rows) == 3 and len({job for job, *_ in rows}) == 3  # one insert, three rows
    job = outbox_engine.claim_job(str(rows[0][0]), "w")
    assert outbox_engine.postpone_job(job["id"], "w", 30)
    with psycopg.connect(database_url) as conn:
        due = conn.execute(
            "SELECT o.due_at = j.run_at AND o.due_at > now() + interval '20 seconds'"
            "  FROM dispatch_outbox o JOIN job j ON j.id = o.job_id"
            " WHERE o.job_id = %s ORDER BY o.id DESC LIMIT 1",
            (job["id"],),
        ).fetchone()
    assert due == (True,)  # same attempt, due later: the relay holds it until then


def test_the_local_runtime_makes_its_queue_and_republishes_rows_its_broker_forgot(
    outbox_engine: Engine, publisher: SqsPublisher, moto_endpoint: str, database_url: str
) -> None:
    from baton.local.s3 import DISPATCH_QUEUE_NAME, local_dispatch_queue

    outbox_engine.register_definition(one_step("flow"))
    for _ in range(2):
        outbox_engine.start_instance(definition_name="flow")
    outbox_engine.relay_outbox(publisher)
    (claimed, waiting) = [job for job, *_ in _outbox(database_url)]
    outbox_engine.claim_job(str(claimed), "w")
    # A restart of `baton dev`: moto's queue is new and empty; the row of the job that still
    # waits is pending again, the claimed job's is not.
    url = local_dispatch_queue(moto_endpoint, database_url)
    assert url.endswith("/" + DISPATCH_QUEUE_NAME)
    assert _outbox(database_url) == [(claimed, 1, True), (waiting, 1, False)]


def test_relay_reports_depth_and_lag_only_when_asked(
    db: Database, publisher: SqsPublisher, database_url: str
) -> None:
    from baton.metrics import CountingMetrics

    metrics = CountingMetrics()
    engine = Engine(db, OUTBOX, metrics)
    engine.register_definition(
        one_step("flow", retryCount=1, retryLogic="FIXED", retryDelaySeconds=600)
    )
    engine.start_instance(definition_name="flow")
    quiet = engine.relay_outbox(publisher, report=False)
    assert quiet["relayed"] == 1 and quiet["depth"] == -1
    assert "OutboxDepth" not in metrics.totals and "RelayLag" not in metrics.totals
    assert metrics.totals["OutboxRelayed"] == 1
    # A retry due in 10 minutes is not depth (nothing is late), and the lag is zero.
    (job,) = engine.poll("w", ["work"], 1)
    engine.fail_job(job["id"], "w", "boom")
    loud = engine.relay_outbox(publisher)
    assert loud["relayed"] == 0 and loud["depth"] == 0
    assert metrics.totals["OutboxDepth"] == 0 and metrics.totals["RelayLag"] == 0
    assert len(_outbox(database_url)) == 2  # the retry's row waits, unrelayed


class _Refusing:
    def publish(self, dispatches: list[Dispatch]) -> set[int]:
        return set()  # the broker accepted nothing (throttled, say)


def test_rows_the_broker_refused_stay_pending_and_show_as_depth_and_lag(db: Database) -> None:
    from baton.metrics import CountingMetrics

    metrics = CountingMetrics()
    engine = Engine(db, OUTBOX, metrics)
    engine.register_definition(one_step("flow"))
    for _ in range(3):
        engine.start_instance(definition_name="flow")
    result = wait_until(
        lambda: (
            (r := engine.relay_outbox(_Refusing()))["depth"] == 3
            and metrics.totals["RelayLag"] > 0
            and r
        ),
        timeout=5,
        what="a measurable lag",
    )
    assert result["relayed"] == 0 and result["elected"] == 1
