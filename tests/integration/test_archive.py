"""Retention and archive on PostgreSQL and moto's S3: a terminal instance past its retention is
written to S3 as one gzip JSON document (payloads moved under the archive), its rows deleted,
and it still reads back (view, steps, history, search) with ``archived: true``; changing it is
a 409, deleting it removes its objects and index row."""

from __future__ import annotations

import json
from typing import Any

import pytest
from baton.conductor import views as cviews
from baton.engine.archive_store import FORMAT
from baton.engine.core import ArchivedInstance
from baton.engine.service import Engine
from baton.errors import InstanceNotFound, ValidationFailed
from baton.metrics import CountingMetrics
from baton.store.db import Database

from tests.support.archive import (
    RETENTION,
    age,
    archiving_engine,
    count,
    document,
    keys,
    new_bucket,
    s3_client,
)
from tests.support.helpers import service_step
from tests.support.sqs import moto_endpoint

__all__ = ["moto_endpoint"]  # the fixture, used by name

BIG = "x" * 300_000  # above the 256 KB soft limit: offloaded


@pytest.fixture
def s3(moto_endpoint: str) -> Any:
    return s3_client(moto_endpoint)


@pytest.fixture
def bucket(s3: Any) -> str:
    return new_bucket(s3)


@pytest.fixture
def engine(db: Database, s3: Any, bucket: str) -> Engine:
    eng = archiving_engine(db, s3, bucket)
    eng.metrics = CountingMetrics()
    return eng


def _run_to_end(engine: Engine, name: str, job_type: str, input: Any, output: Any) -> str:
    iid = engine.start_instance(definition_name=name, input=input, correlation_id="c-7")[0]["id"]
    job = next(j for j in engine.poll("w", [job_type], 10) if j["instanceId"] == iid)
    engine.complete_job(job["id"], "w", output, attempt=job["attempt"])
    return str(iid)


def _all_pages(read: Any, key: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    token = None
    while True:
        page = read(limit=2, page_token=token)
        items.extend(page[key])
        token = page.get("nextPageToken")
        if not token:
            return items


def test_an_instance_past_its_retention_is_archived_and_reads_back(
    engine: Engine, db: Database, s3: Any, bucket: str
) -> None:
    engine.register_definition(
        {
            "name": "arch",
            "steps": [
                {"id": "set", "type": "SET_VARIABLE", "variables": {"k": 1}},
                service_step("work", "arch-w"),
                {"id": "after", "type": "SET_VARIABLE", "variables": {"k": 2}},
            ],
            "outputParameters": {"o": "${work.output}"},
        }
    )
    given = engine.offload(json.dumps({"blob": BIG}), "WORKFLOW_INPUT")  # type: ignore[misc]
    output = engine.offload(json.dumps({"out": BIG}), "STEP_OUTPUT")  # type: ignore[misc]
    iid = _run_to_end(engine, "arch", "arch-w", given, output)
    running = engine.start_instance(definition_name="arch", input={"n": 1})[0]["id"]
    age(db, RETENTION + 60)
    before = engine.get_instance(iid)
    history = _all_pages(lambda **k: engine.history(iid, **k), "events")
    steps = _all_pages(lambda **k: engine.list_steps(iid, **k), "steps")
    assert before["status"] == "COMPLETED" and len(history) > 3
    audit_before = engine.audit_trail(iid)

    assert engine.archive_expired() == 1

    # The rows are gone, the index row is there, the document is where the layout says.
    assert count(db, "SELECT count(*) FROM instance WHERE id = %(i)s", {"i": iid}) == 0
    for table in ("step_execution", "job", "audit_log"):
        n = count(db, f"SELECT count(*) FROM {table} WHERE instance_id = %(i)s", {"i": iid})
        assert n == 0, table
    day = before["completedAt"][:10].replace("-", "/")
    key = f"archive/{day}/arch/{iid}.json.gz"
    assert key in keys(s3, bucket, "archive/")
    doc = document(s3, bucket, key)
    assert doc["format"] == FORMAT and doc["id"] == iid and doc["status"] == "COMPLETED"
    assert [e["seq"] for e in doc["history"]] == [e["seq"] for e in history]
    assert len(doc["jobs"]) == 1 and doc["jobs"][0]["job_type"] == "arch-w"
    # Payloads moved under the archive, the references point there, the originals are gone.
    moved = doc["payloads"]
    assert set(moved) >= {given["$payload"], output["$payload"]}
    assert all(k.startswith(f"archive/payloads/{iid}/") for k in moved.values())
    left = keys(s3, bucket, "payloads/")
    assert given["$payload"] not in left and output["$payload"] not in left
    assert doc["instance"]["input"]["$payload"] == moved[given["$payload"]]

    # Reading is transparent.
    got = engine.get_instance(iid)
    assert got.pop("archived") is True
    assert got.pop("archivedAt") >= got["completedAt"]
    assert got == _rewritten(before, moved)
    assert engine.payloads is not None and engine.payloads(got["input"]) == {"blob": BIG}
    assert _all_pages(lambda **k: engine.history(iid, **k), "events") == history
    assert _all_pages(lambda **k: engine.list_steps(iid, **k), "steps") == _rewritten(steps, moved)
    assert "steps" not in engine.get_instance(iid, include_steps=False)
    # Conductor's view of it (GET /api/workflow/{id}) is the same as before.
    assert engine.audit_trail(iid) == audit_before
    assert cviews.workflow(got, engine.audit_trail(iid)) == cviews.workflow(
        _rewritten(before, moved), audit_before
    )
    # The running one stays, and a second pass finds nothing.
    assert engine.get_instance(running)["status"] == "RUNNING"
    assert engine.archive_expired() == 0
    assert engine.metrics.totals["InstancesArchived"] == 1  # type: ignore[attr-defined]
    assert engine.metrics.totals["ArchivedBytes"] == len(  # type: ignore[attr-defined]
        s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    )


def test_conductors_read_of_an_archived_run_is_the_one_before(engine: Engine, db: Database) -> None:
    """What Conductor's surface reads besides the steps (the forks for its JOIN tasks, a fork
    that failed at its join, a keepLastN loop's trimmed iterations) is worked out from the rows'
    state, which the document does not hold: the archiver stores it (``conductor``), and the
    read of the archived run is the read before."""
    engine.register_definition(
        {
            "name": "arch_forks",
            "steps": [
                {
                    "id": "loop",
                    "type": "DO_WHILE",
                    "while": "loop.iteration < 4",
                    "maxIterations": 10,
                    "keepLastIterations": 2,
                    "steps": [{"id": "seen", "type": "SCRIPT", "script": "1"}],
                },
                {
                    "id": "fan",
                    "type": "PARALLEL",
                    "branches": [
                        [{"id": "a", "type": "SCRIPT", "script": "2"}],
                        [service_step("p", "arch-p", permissive=True, retryCount=0)],
                    ],
                },
            ],
        }
    )
    iid = str(engine.start_instance(definition_name="arch_forks")[0]["id"])
    (job,) = engine.poll("w", ["arch-p"], 1)
    engine.fail_job(job["id"], "w", "no stock", retryable=False, attempt=job["attempt"])
    age(db, RETENTION + 60)
    before = engine.get_instance(iid, conductor_view=True)
    assert before["status"] == "FAILED"
    (fan,) = [s for s in before["steps"] if s["stepId"] == "fan"]
    assert before["failedAtJoin"] == [fan["id"]]  # every branch ended, then it failed
    assert sorted(before["forks"]) == ["fan"]
    kept = [s["iteration"] for s in before["steps"] if s["stepId"] == "seen"]
    assert kept == [3, 4]  # of four iterations, the last two
    everything = engine.get_instance(iid)
    assert len(everything["steps"]) == len(before["steps"]) + 2
    audit = engine.audit_trail(iid)

    assert engine.archive_expired() == 1

    after = engine.get_instance(iid, conductor_view=True)
    assert after.pop("archived") is True and after.pop("archivedAt")
    assert after == before
    assert cviews.workflow(after, engine.audit_trail(iid)) == cviews.workflow(before, audit)
    joins = [t for t in cviews.tasks_of(after, audit) if t["taskType"] == "JOIN"]
    assert [(j["status"], j["reasonForIncompletion"]) for j in joins] == [("FAILED", "no stock")]
    # Baton's own read of it keeps every step, as before.
    plain = engine.get_instance(iid)
    assert len(plain["steps"]) == len(everything["steps"]) and "forks" not in plain


def _rewritten(value: Any, moved: dict[str, str]) -> Any:
    from baton.engine.archive_store import rewrite_refs

    return rewrite_refs(value, moved)


def test_the_archive_search_finds_by_definition_and_end_time(engine: Engine, db: Database) -> None:
    engine.register_definition({"name": "s-a", "steps": [service_step("w", "s-a")]})
    engine.register_definition({"name": "s-b", "steps": [service_step("w", "s-b")]})
    a = [_run_to_end(engine, "s-a", "s-a", {}, {}) for _ in range(3)]
    b = _run_to_end(engine, "s-b", "s-b", {}, {})
    age(db, RETENTION + 60)
    assert engine.archive_expired() == 4

    found = _all_pages(
        lambda **k: engine.search_instances(archived=True, definition_name="s-a", **k),
        "instances",
    )
    assert sorted(i["id"] for i in found) == sorted(a)
    assert all(i["archived"] and i["status"] == "COMPLETED" for i in found)
    assert found[0]["correlationId"] == "c-7"
    ended = engine.get_instance(b)["completedAt"]
    only_b = engine.search_instances(archived=True, ended_from=ended, definition_name="s-b")
    assert [i["id"] for i in only_b["instances"]] == [b]
    before_b = engine.search_instances(archived=True, ended_to=ended, definition_name="s-b")
    assert before_b["instances"] == []
    # Without archived=true the database is searched: they are no longer there.
    assert engine.search_instances(definition_name="s-a")["instances"] == []
    with pytest.raises(ValidationFailed):
        engine.search_instances(ended_from=ended)
    with pytest.raises(ValidationFailed):
        engine.search_instances(archived=True, created_after=ended)


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"archived": True, "ended_from": "2026-02-01T00:00:00Z", "ended_to": "2026-01-01"}, "to"),
        ({"archived": True, "ended_from": "2026-01-01T00:00:00Z", "ended_to": "2026-01-01"}, "to"),
        (
            {"created_after": "2026-02-01T00:00:00+01:00", "created_before": "2026-01-31"},
            "createdBefore",
        ),
    ],
)
def test_an_empty_or_inverted_search_window_is_refused(
    engine: Engine, query: dict[str, Any], field: str
) -> None:
    with pytest.raises(ValidationFailed) as refused:
        engine.search_instances(**query)
    assert [p.path for p in refused.value.problems] == [field]
    assert "must be later than" in refused.value.problems[0].message


def test_an_archived_run_cannot_be_changed_and_deleting_it_removes_its_objects(
    engine: Engine, db: Database, s3: Any, bucket: str
) -> None:
    engine.register_definition({"name": "fixed", "steps": [service_step("w", "fixed")]})
    given = engine.offload(json.dumps({"b": BIG}), "WORKFLOW_INPUT")  # type: ignore[misc]
    iid = engine.start_instance(definition_name="fixed", input=given)[0]["id"]
    job = engine.poll("w", ["fixed"], 1)[0]
    engine.fail_job(job["id"], "w", "broken", False, attempt=job["attempt"])
    age(db, RETENTION + 60)
    assert engine.archive_expired() == 1

    for act in (
        engine.retry_instance,
        engine.restart_instance,
        engine.cancel_instance,
        engine.pause_instance,
        engine.resume_instance,
    ):
        with pytest.raises(ArchivedInstance, match="is archived"):
            act(iid)
    assert len(keys(s3, bucket, "archive/")) >= 2  # the document and the offloaded input

    deleted = engine.delete_instance(iid)

    assert deleted["archived"] is True and deleted["status"] == "FAILED"
    assert keys(s3, bucket, "archive/") == []
    assert count(db, "SELECT count(*) FROM archived_instance") == 0
    with pytest.raises(InstanceNotFound):
        engine.get_instance(iid)
    with pytest.raises(InstanceNotFound):
        engine.history(iid)


def test_a_definitions_retention_overrides_the_default(db: Database, s3: Any, bucket: str) -> None:
    engine = archiving_engine(db, s3, bucket, retention_seconds=0)  # off by default
    engine.register_definition(
        {"name": "short", "retentionSeconds": 60, "steps": [service_step("w", "short")]}
    )
    engine.register_definition(
        {"name": "never", "retentionSeconds": 0, "steps": [service_step("w", "never")]}
    )
    engine.register_definition({"name": "plain", "steps": [service_step("w", "plain")]})
    short = _run_to_end(engine, "short", "short", {}, {})
    _run_to_end(engine, "never", "never", {}, {})
    _run_to_end(engine, "plain", "plain", {}, {})
    assert engine.archive_expired() == 0  # ended a moment ago
    age(db, 120)

    assert engine.archive_expired() == 1
    assert engine.get_instance(short)["archived"] is True
    # With a default, "plain" follows it and "never" never goes.
    on = archiving_engine(db, s3, bucket, retention_seconds=60)
    assert on.archive_expired() == 1
    assert count(db, "SELECT count(*) FROM instance WHERE definition_name = 'never'") == 1


def test_a_sub_workflow_child_follows_its_parent(engine: Engine, db: Database) -> None:
    engine.register_definition(
        {"name": "kid", "steps": [{"id": "mark", "type": "SET_VARIABLE", "variables": {"x": 1}}]}
    )
    engine.register_definition(
        {"name": "parent", "steps": [{"id": "c", "type": "SUB_WORKFLOW", "definitionName": "kid"}]}
    )
    parent = engine.start_instance(definition_name="parent")[0]
    child = parent["steps"][0]["childInstanceId"]
    age(db, RETENTION + 60)

    # One instance per batch: the child (which ended first) waits for its parent to go.
    assert engine.archive_expired(batch=1, max_batches=1) == 1
    assert engine.get_instance(parent["id"])["archived"] is True
    assert "archived" not in engine.get_instance(child)
    assert engine.archive_expired() == 1
    assert engine.get_instance(child)["archived"] is True


def test_nothing_is_archived_without_a_retention_or_a_bucket(db: Database) -> None:
    engine = Engine(db)
    engine.register_definition({"name": "n", "steps": [service_step("w", "n")]})
    _run_to_end(engine, "n", "n", {}, {})
    age(db, 10**7)
    assert engine.archive_expired() == 0
    assert engine.sweep()["instancesArchived"] == 0


def test_a_run_retried_between_write_and_delete_stays_and_its_document_goes(
    engine: Engine, db: Database, s3: Any, bucket: str
) -> None:
    engine.register_definition({"name": "again", "steps": [service_step("w", "again")]})
    iid = engine.start_instance(definition_name="again")[0]["id"]
    job = engine.poll("w", ["again"], 1)[0]
    engine.fail_job(job["id"], "w", "broken", False, attempt=job["attempt"])
    age(db, RETENTION + 60)
    written: list[list[str]] = []

    def retry_meanwhile(step: str) -> None:
        written.append(keys(s3, bucket, "archive/"))
        engine.retry_instance(iid)  # reopened after its document was written

    engine.archive_fault = retry_meanwhile

    assert engine.archive_expired() == 0

    assert len(written[0]) == 1  # the document was written ...
    assert keys(s3, bucket, "archive/") == []  # ... and deleted: it is stale
    assert engine.get_instance(iid)["status"] == "RUNNING"
    assert count(db, "SELECT count(*) FROM archived_instance") == 0
    assert count(db, "SELECT count(*) FROM archive_claim") == 0
