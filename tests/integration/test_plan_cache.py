"""Every prepared statement a connection runs keeps one plan, with a long history in the tables.

PostgreSQL plans the first five runs of a prepared statement for their parameters, then keeps a
generic plan unless it is estimated costlier than those. A statement whose generic plan loses
that comparison is planned anew at every run, for good: with ``= ANY($1)`` over a short list
of ids (a generic plan counts ten), the batch read of 1-5 jobs was planned at every batch once
20,000 workflows had finished (300-365 µs of server time per run at 200,000, 70-125 µs on its
generic plan). This runs the engine's common paths on a connection that prepares, with that
history, and asks the server which statements it planned more than five times.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from baton.engine.batch_ops import BatchResult
from baton.engine.schedule_firing import ScheduleDuty
from baton.engine.service import Engine
from baton.engine.sqs import SqsPublisher
from baton.engine.start_batch import StartItem
from baton.settings import EngineSettings
from baton.store import job_sql
from baton.store.db import Database

from tests.support.archive import archiving_engine, new_bucket, s3_client
from tests.support.sqs import fifo_queue, moto_endpoint, sqs_client

__all__ = ["moto_endpoint"]  # the fixture, used by name

HISTORY = 20_000
ROUNDS = 8
TYPES = ["one", "item", "branch", "count"]

# Planned for each run on purpose: its filters are ``(%(x)s IS NULL OR col = %(x)s)``, which
# only a plan made for the values given folds into the right index.
PLANNED_EACH_RUN = ("IS NULL OR i.status = ",)


def _task(step_id: str, job_type: str) -> dict[str, Any]:
    return {"id": step_id, "type": "SERVICE_TASK", "jobType": job_type}


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    """An engine on one connection that prepares statements as the local server's pool does
    (the hot ones at their first run, the others at their sixth), over ``HISTORY`` finished
    one-step workflows (with their steps, jobs and audit rows)."""
    with psycopg.connect(database_url) as conn:
        if conn.info.server_version < 140000:
            pytest.skip("pg_prepared_statements counts plans from PostgreSQL 14")
    engine = Engine(Database.single(database_url, prepare=True))
    engine.register_definition({"name": "one", "steps": [_task("work", "one")]})
    items = {"id": "each", "type": "MAP", "items": "${workflow.input.items}"}
    engine.register_definition(
        {"name": "map", "steps": [{**items, "steps": [_task("item", "item")]}]}
    )
    branches = [[_task("a", "branch")], [_task("b", "branch"), _task("c", "branch")]]
    engine.register_definition(
        {
            "name": "fan",
            "steps": [
                {"id": "fan", "type": "PARALLEL", "branches": branches},
                _task("after", "one"),
            ],
        }
    )
    loop = {"id": "loop", "type": "DO_WHILE", "while": "count.output.n < 3", "maxIterations": 10}
    engine.register_definition(
        {"name": "loop", "steps": [{**loop, "steps": [_task("count", "count")]}]}
    )
    engine.start_instance(definition_name="one")
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(
            """
            WITH i AS (
                INSERT INTO instance (id, definition_name, definition_version, snapshot_id,
                                      status, input, variables, output, completed_at,
                                      step_count)
                SELECT gen_random_uuid(), x.definition_name, x.definition_version, x.snapshot_id,
                       'COMPLETED', '{}', '{}', '{}', now() - make_interval(secs => g), 1
                  FROM (SELECT * FROM instance LIMIT 1) x, generate_series(1, %(n)s) g
                RETURNING id
            ), s AS (
                INSERT INTO step_execution (id, instance_id, step_id, step_type, status,
                                            completed_at)
                SELECT gen_random_uuid(), id, 'work', 'SERVICE_TASK', 'COMPLETED', now() FROM i
                RETURNING id, instance_id
            ), a AS (
                INSERT INTO audit_log (instance_id, event)
                SELECT instance_id, 'INSTANCE_COMPLETED' FROM s
            )
            INSERT INTO job (id, instance_id, step_execution_id, job_type, status,
                             lease_seconds, retries_remaining, payload, completed_at)
            SELECT gen_random_uuid(), instance_id, id, 'one', 'COMPLETED', 300, 3, '{}', now()
              FROM s
            """,
            {"n": HISTORY},
        )
        conn.execute("VACUUM ANALYZE")
    yield engine
    engine.db.close()


def _round(engine: Engine, n: int) -> None:
    """Start one instance of each definition and drain them: completions one by one and in
    batches, a failure retried, a heartbeat, Conductor's lease and references; batch starts
    with idempotency keys, and reads."""
    one = [engine.start_instance(definition_name="one")[0]["id"] for _ in range(3)]
    engine.start_instance(definition_name="map", input={"items": list(range(6))})
    fan = engine.start_instance(definition_name="fan")[0]["id"]
    loop = engine.start_instance(definition_name="loop")[0]["id"]
    counted = 0
    for _ in range(30):
        jobs = engine.poll("w", TYPES, 8)
        if not jobs:
            break
        ids = [j["id"] for j in jobs]
        engine.lease_for_conductor(ids[:3], "w")
        engine.task_references(ids[:3])
        engine.heartbeat(ids[0], "w")
        if jobs[0]["attempt"] == 1 and len(jobs) > 2:
            engine.fail_job(ids[0], "w", "again", True, next_retry_delay_seconds=0)
            jobs = jobs[1:]
        half = len(jobs) // 2
        for j in jobs[:half]:
            counted += 1
            engine.complete_job(j["id"], "w", {"n": counted})
        counted += 1
        engine.complete_batch(
            [BatchResult(j["id"], "w", j["attempt"], output={"n": counted}) for j in jobs[half:]]
        )
    # A batch start, then the same keys again with one more, twice: its read-back and its
    # look-up of keys used before.
    keys = [f"round-{n}-{k}" for k in range(3)]
    engine.start_instances([StartItem(definition_name="one", idempotency_key=k) for k in keys[:2]])
    for _ in range(2):
        engine.start_instances([StartItem(definition_name="one", idempotency_key=k) for k in keys])
    for iid in [*one, fan, loop]:
        assert engine.get_instance(iid)["status"] == "COMPLETED", (n, iid)
    engine.history(one[0])


def _replanned(rows: list[dict[str, Any]]) -> list[tuple[int, str]]:
    """The statements of ``pg_prepared_statements`` rows planned more than five times (the
    first five plans are always custom), but those planned for each run on purpose."""
    return [
        (r["custom_plans"], " ".join(r["statement"].split())[:100])
        for r in rows
        if r["custom_plans"] > 5 and not any(p in r["statement"] for p in PLANNED_EACH_RUN)
    ]


def test_no_statement_is_planned_anew_at_every_run(engine: Engine) -> None:
    for n in range(ROUNDS):
        _round(engine, n)
    rows = engine.db.autocommit(
        lambda c: c.execute(
            "SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements"
        ).fetchall()
    )
    runs = {r["statement"]: r["generic_plans"] + r["custom_plans"] for r in rows}
    # The workload ran what it is here for: the batch read (a MAP's items have no kept state).
    read = [s for s in runs if "row_number() OVER (PARTITION BY j.instance_id)" in s]
    assert read and runs[read[0]] > 10, runs
    assert not _replanned(rows), _replanned(rows)


def test_the_periodic_duties_keep_their_plans(engine: Engine) -> None:
    """The sweeper's, the schedules' and the reaper's statements, run every second in
    production, over the same history (after two rounds of work)."""
    for n in range(2):
        _round(engine, n)
    for _ in range(20):  # psycopg prepares at the 6th run, and the first 5 plans are custom
        engine.sweep()
        ScheduleDuty(engine).tick()
        engine.reap_expired_leases()
    rows = engine.db.autocommit(
        lambda c: c.execute(
            "SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements"
        ).fetchall()
    )
    reaper = [r for r in rows if "job_lease_expiry_by_type" in r["statement"]]
    assert reaper and reaper[0]["generic_plans"] >= 5, reaper  # the duties ran prepared
    assert not _replanned(rows), _replanned(rows)


def test_the_archiver_and_the_outbox_relay_keep_their_plans(
    engine: Engine, moto_endpoint: str
) -> None:
    """The archiver's and the outbox relay's statements, each run every second in production
    (each with its own engine on the same preparing connection: the archiver with a bucket and
    an hour's retention, which most of the history is past; the relay in outbox mode). The
    archiver's eleven statements were planned anew at every run: their lists of ids with
    ``= ANY($1)`` (a batch of a few instances, as once the backlog is archived) and the claim's
    ``LIMIT $n``."""
    s3 = s3_client(moto_endpoint)
    archiver = archiving_engine(engine.db, s3, new_bucket(s3))
    outbox = Engine(engine.db, EngineSettings(dispatch_mode="outbox"))
    publisher = SqsPublisher(fifo_queue(moto_endpoint), client=sqs_client(moto_endpoint))
    archived = relayed = 0
    for _ in range(20):  # psycopg prepares at the 6th run, and the first 5 plans are custom
        for _ in range(3):
            outbox.start_instance(definition_name="one")
        relayed += outbox.relay_outbox(publisher)["relayed"]
        archived += archiver.archive_expired(batch=5, max_batches=1)
    assert (archived, relayed) == (100, 60)
    rows = engine.db.autocommit(
        lambda c: c.execute(
            "SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements"
        ).fetchall()
    )
    for part in ("dispatch_outbox", "archive_claim"):  # each ran prepared
        assert any(part in r["statement"] and r["generic_plans"] >= 5 for r in rows), part
    assert not _replanned(rows), _replanned(rows)


@pytest.mark.parametrize("size", [1, 3, 32])
def test_the_batch_read_keeps_its_generic_plan_for_any_batch_size(
    engine: Engine, size: int
) -> None:
    jobs: list[dict[str, Any]] = []
    while len(jobs) < size:
        engine.start_instance(definition_name="one")
        jobs += engine.poll("w", ["one"], size - len(jobs))
    ids = [uuid.UUID(j["id"]) for j in jobs]

    def read(conn: Any) -> dict[str, Any]:
        for _ in range(20):  # psycopg prepares at the 6th run
            assert len(job_sql.read_jobs_with_instances(conn, ids)) == size
        row: dict[str, Any] = conn.execute(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements"
            " WHERE statement LIKE '%%PARTITION BY j.instance_id%%'"
        ).fetchone()
        return row

    plans = engine.db.autocommit(read)
    assert plans["generic_plans"] >= 6 and plans["custom_plans"] <= 5, plans
