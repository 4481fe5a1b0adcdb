"""Batch completion on PostgreSQL: every outcome in one call, the same fencing, audit rows and
idempotency as single completes, and one transaction for the results it can group."""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

import psycopg
import pytest
from baton.engine import writer
from baton.engine.batch_ops import BatchResult, Failure
from baton.engine.service import Engine
from baton.metrics import CountingMetrics
from baton.store import instance_sql, job_sql
from baton.store.db import Database

from tests.support.helpers import one_step


def _events(engine: Engine, instance_id: str) -> Counter[str]:
    return Counter(a["event"] for a in engine.audit_trail(instance_id))


def _xact_commits(database_url: str) -> int:
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        row = conn.execute(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()
    assert row is not None
    return int(row[0])


def test_a_batch_with_every_outcome_answers_each_item_and_spares_its_neighbours(
    engine: Engine,
) -> None:
    engine.register_definition(one_step("batch-flow", "bw", retryCount=2, retryDelaySeconds=0))
    started = [engine.start_instance(definition_name="batch-flow")[0]["id"] for _ in range(5)]
    jobs = engine.poll("w1", ["bw"], 5)
    assert len(jobs) == 5
    a, b, c, d, e = jobs
    engine.complete_job(c["id"], "w1", {"early": True}, attempt=1)  # its repeat: DUPLICATE
    answers = engine.complete_batch(
        [
            BatchResult(a["id"], "w1", 1, output={"a": 1}),
            BatchResult(b["id"], "w1", 1, failure=Failure("flaky", retryable=True)),
            BatchResult(c["id"], "w1", 1, output={"early": True}),
            BatchResult(d["id"], "intruder", 1, output={"d": 1}),  # not the lease holder
            BatchResult(str(uuid.uuid4()), "w1", 1, output={}),
            BatchResult("not-a-uuid", "w1", 1, output={}),
            BatchResult(e["id"], "w1", 1, failure=Failure("fatal", retryable=False)),
        ]
    )
    outcomes = [(x["outcome"], x.get("status")) for x in answers]
    assert outcomes == [
        ("APPLIED", "COMPLETED"),
        ("APPLIED", "RETRY_SCHEDULED"),
        ("DUPLICATE", "COMPLETED"),
        ("CONFLICT", None),
        ("NOT_FOUND", None),
        ("NOT_FOUND", None),
        ("APPLIED", "FAILED"),
    ]
    assert "another worker holds the lease" in answers[3]["error"]
    assert answers[1]["nextAttemptAt"]
    by_id = {j["id"]: j["instanceId"] for j in jobs}
    assert engine.get_instance(by_id[a["id"]])["status"] == "COMPLETED"
    assert engine.get_instance(by_id[a["id"]])["variables"] == {"a": 1}
    assert engine.get_instance(by_id[b["id"]])["status"] == "RUNNING"
    assert engine.get_instance(by_id[d["id"]])["status"] == "RUNNING"  # untouched
    assert engine.get_instance(by_id[e["id"]])["status"] == "FAILED"
    # The same audit rows as single completes, and a repeat of the whole batch changes nothing.
    assert _events(engine, by_id[a["id"]])["JOB_COMPLETED"] == 1
    again = engine.complete_batch([BatchResult(a["id"], "w1", 1, output={"a": 1})])
    assert again[0]["outcome"] == "DUPLICATE"
    assert _events(engine, by_id[a["id"]])["JOB_COMPLETED"] == 1
    assert len(started) == 5


def _version(database_url: str, instance_id: str) -> int:
    with psycopg.connect(database_url, autocommit=True) as conn:
        row = conn.execute("SELECT version FROM instance WHERE id = %s", (instance_id,)).fetchone()
    assert row is not None
    return int(row[0])


def test_results_for_one_instance_in_one_batch_are_applied_in_turn(
    engine: Engine, database_url: str
) -> None:
    engine.register_definition(
        {
            "name": "batch-map",
            "steps": [
                {
                    "id": "each",
                    "type": "MAP",
                    "items": "${workflow.input.items}",
                    "maxConcurrency": 10,
                    "steps": [{"id": "one", "type": "SERVICE_TASK", "jobType": "bm"}],
                }
            ],
        }
    )
    inst, _ = engine.start_instance(definition_name="batch-map", input={"items": list(range(6))})
    jobs = engine.poll("w", ["bm"], 10)
    assert len(jobs) == 6
    version = _version(database_url, inst["id"])
    answers = engine.complete_batch(
        [BatchResult(j["id"], "w", 1, output={"n": k}) for k, j in enumerate(jobs)]
    )
    assert [x["outcome"] for x in answers] == ["APPLIED"] * 6
    # Decided in turn on one state and written as one decision: one version bump (the single
    # path's six decisions made six).
    assert _version(database_url, inst["id"]) == version + 1
    done = engine.get_instance(inst["id"])
    assert done["status"] == "COMPLETED"
    (each,) = [s for s in done["steps"] if s["stepId"] == "each"]
    assert sorted(o["n"] for o in each["output"]) == list(range(6))


def test_a_batch_of_one_step_workflows_commits_once(engine: Engine, database_url: str) -> None:
    engine.register_definition(one_step("batch-once", "bo"))
    for _ in range(40):
        engine.start_instance(definition_name="batch-once")
    jobs = engine.poll("w", ["bo"], 40)
    results = [BatchResult(j["id"], "w", 1, output={"ok": True}) for j in jobs]
    before = _xact_commits(database_url)
    answers = engine.complete_batch(results)
    commits = _xact_commits(database_url) - before
    assert [x["outcome"] for x in answers] == ["APPLIED"] * 40
    # The read and the write: far fewer transactions than the 80 of single completes (the
    # counter also sees this test's own statistics reads).
    assert commits <= 6, commits
    finished: list[dict[str, Any]] = [engine.get_instance(j["instanceId"]) for j in jobs]
    assert {i["status"] for i in finished} == {"COMPLETED"}


def test_a_batch_counts_what_it_did_once_per_counter(db: Database) -> None:
    """The batch's decisions are counted together: one data point per counter, with the
    batch's total (a metric call per result and counter cost the local server a lot)."""
    calls: list[tuple[str, float]] = []

    class Recording(CountingMetrics):
        def add(self, name: str, value: float, *args: Any, **kwargs: Any) -> None:
            calls.append((name, value))
            super().add(name, value, *args, **kwargs)

    metrics = Recording()
    engine = Engine(db, metrics=metrics)
    engine.register_definition(one_step("counted", "cnt"))
    for _ in range(5):
        engine.start_instance(definition_name="counted")
    jobs = engine.poll("w", ["cnt"], 5)
    calls.clear()
    engine.complete_batch([BatchResult(j["id"], "w", j["attempt"], output={}) for j in jobs])
    assert metrics.totals["JobsCompleted"] == 5
    assert [c for c in calls if c[0] == "JobsCompleted"] == [("JobsCompleted", 5)]


def test_a_raced_pass_is_run_again_and_keeps_the_connections_prepared_statements(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = Database.single(database_url, prepare=True)
    engine = Engine(db)
    engine.register_definition(one_step("raced-pass", "rp"))

    def drain(n: int) -> list[dict[str, Any]]:
        for _ in range(n):
            engine.start_instance(definition_name="raced-pass")
        jobs = engine.poll("w", ["rp"], n)
        return engine.complete_batch([BatchResult(j["id"], "w", 1, output={}) for j in jobs])

    def prepared() -> int:
        row = db.autocommit(
            lambda conn: conn.execute("SELECT count(*) AS n FROM pg_prepared_statements").fetchone()
        )
        assert row is not None
        return int(row["n"])

    for _ in range(6):  # psycopg prepares a statement at its sixth run
        drain(2)
    warm = prepared()
    assert warm >= 3
    # Another process moves one of the batch's instances between the pass's read and its write.
    real = writer.write_many
    raced: list[str] = []

    def write_racing(conn: Any, decisions: Any, **kw: Any) -> None:
        if not raced:
            # One-step completions come as rows already (engine.one_step), the rest as decisions.
            victim = decisions[0][0].id if decisions else kw["settled"][0].instance_id
            with psycopg.connect(database_url, autocommit=True) as other:
                other.execute("UPDATE instance SET version = version + 1 WHERE id = %s", (victim,))
            raced.append(str(victim))
        real(conn, decisions, **kw)

    monkeypatch.setattr(writer, "write_many", write_racing)
    answers = drain(3)
    assert raced and [a["outcome"] for a in answers] == ["APPLIED"] * 3
    # The refused pass was rolled back whole at its pipeline's end (nothing of it written: every
    # job completed once), run again on fresh reads, and the connection kept its statements.
    assert _events(engine, raced[0])["JOB_COMPLETED"] == 1
    assert engine.get_instance(raced[0])["status"] == "COMPLETED"
    assert prepared() >= warm
    db.close()


def test_the_batch_read_sends_an_instance_and_a_map_once_and_gives_them_to_each_job(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A MAP's items share their instance and their MAP's execution: each comes on one row of
    the batch's read (every row of the instance gets the instance's columns), and the decision
    does not read the MAP's execution again."""
    engine.register_definition(
        {
            "name": "read-once",
            "steps": [
                {
                    "id": "each",
                    "type": "MAP",
                    "items": "${workflow.input.items}",
                    "steps": [{"id": "one", "type": "SERVICE_TASK", "jobType": "ro"}],
                }
            ],
        }
    )
    engine.register_definition(one_step("read-once-single", "ro"))
    fan, _ = engine.start_instance(definition_name="read-once", input={"items": [1, 2, 3]})
    solo, _ = engine.start_instance(definition_name="read-once-single", input={"solo": True})
    jobs = engine.poll("w", ["ro"], 10)
    assert len(jobs) == 4
    ids = [uuid.UUID(j["id"]) for j in jobs]
    raw = engine.db.autocommit(
        lambda c: c.execute(job_sql.READ_JOBS_WITH_INSTANCES, {"job_ids": ids}).fetchall()
    )
    assert sorted(r["input"] is not None for r in raw) == [False, False, True, True]
    assert sorted(r["version"] is not None for r in raw) == [False, False, True, True]
    rows = engine.db.autocommit(lambda c: job_sql.read_jobs_with_instances(c, ids))
    given = {fan["id"]: {"items": [1, 2, 3]}, solo["id"]: {"solo": True}}
    assert sorted(str(r["job_id"]) for r in rows) == sorted(j["id"] for j in jobs)
    for r in rows:
        assert r["input"] == given[str(r["id"])]
        assert r["variables"] == {}
        assert r["version"] == _version_of(engine, str(r["id"]))
    (owner,) = [r["owner"] for r in rows if r["owner"] is not None]
    (each,) = [s for s in engine.get_instance(fan["id"])["steps"] if s["stepId"] == "each"]
    assert owner["id"] == uuid.UUID(each["id"])
    assert (owner["step_id"], owner["status"], owner["input"]) == ("each", "IN_PROGRESS", [1, 2, 3])
    assert owner["state"] == {"total": 3, "next": 3, "ended": 0}
    # The MAP's items decided without reading its execution again.
    monkeypatch.setattr(instance_sql, "EXECUTION", "SELECT 1/0")
    answers = engine.complete_batch([BatchResult(j["id"], "w", 1, output={}) for j in jobs])
    assert [a["outcome"] for a in answers] == ["APPLIED"] * 4
    assert engine.get_instance(fan["id"])["status"] == "COMPLETED"


def _version_of(engine: Engine, instance_id: str) -> int:
    row = engine.db.autocommit(
        lambda c: c.execute("SELECT version FROM instance WHERE id = %s", (instance_id,)).fetchone()
    )
    assert row is not None
    return int(row["version"])


def test_ids_sent_as_one_uuid_array_text_read_back_as_themselves(engine: Engine) -> None:
    def read_back(ids: list[uuid.UUID]) -> list[Any]:
        text = job_sql.uuid_array(ids)
        rows = engine.db.autocommit(
            lambda c: c.execute("SELECT unnest(%(ids)s::uuid[]) AS id", {"ids": text}).fetchall()
        )
        return [r["id"] for r in rows]

    for ids in ([], [uuid.uuid4()], [uuid.uuid4() for _ in range(40)]):
        assert read_back(ids) == ids


def test_ids_in_text_sent_as_one_uuid_array_and_anything_else_refused(engine: Engine) -> None:
    ids = [uuid.uuid4() for _ in range(40)]
    text = job_sql.uuid_text_array([str(i) for i in ids[:20]] + [str(i).upper() for i in ids[20:]])
    rows = engine.db.autocommit(
        lambda c: c.execute("SELECT unnest(%(ids)s::uuid[]) AS id", {"ids": text}).fetchall()
    )
    assert [r["id"] for r in rows] == ids
    assert job_sql.uuid_text_array([]) == "{}"
    for bad in (
        "x",
        "",
        f"{ids[0]},{ids[1]}",
        "{" + str(ids[0]) + "}",
        str(ids[0]) + "\n",
        ids[0].hex,
    ):
        with pytest.raises(ValueError, match="not a UUID"):
            job_sql.uuid_text_array([str(ids[1]), bad])
