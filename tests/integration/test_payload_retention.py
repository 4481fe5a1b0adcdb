"""Payload retention on PostgreSQL and moto's S3: the objects of an instance are tagged for the
bucket's lifecycle rule once it ended (their age restarted), never while it, or a relative
sharing them, still runs; a retried instance gets them back; a deleted one takes them along."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import boto3
import pytest
from baton.engine.payloads import RETENTION_ENDED, RETENTION_TAG, PayloadReader, PayloadStore
from baton.engine.service import Engine
from baton.errors import Unavailable
from baton.settings import EngineSettings, PayloadLimits
from baton.store.db import Database

from tests.support.helpers import service_step
from tests.support.sqs import moto_endpoint

__all__ = ["moto_endpoint"]  # the fixture, used by name

BIG = "x" * 300_000  # above the 256 KB soft limit: offloaded


@pytest.fixture
def s3(moto_endpoint: str) -> Any:
    return boto3.client(
        "s3",
        endpoint_url=moto_endpoint,
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )


@pytest.fixture
def store(s3: Any, moto_endpoint: str) -> PayloadStore:
    bucket = f"payloads-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=bucket)
    return PayloadStore(bucket, PayloadLimits(), client=s3)


@pytest.fixture
def engine(db: Database, store: PayloadStore, s3: Any) -> Iterator[Engine]:
    assert store.bucket is not None
    yield Engine(
        db,
        EngineSettings(),
        payloads=PayloadReader(store.bucket, client=s3),
        offload=store.put_json,
        payload_objects=store,
    )


def _tags(s3: Any, bucket: str | None, path: str) -> dict[str, str]:
    got = s3.get_object_tagging(Bucket=bucket, Key=path)["TagSet"]
    return {t["Key"]: t["Value"] for t in got}


def _modified(s3: Any, bucket: str | None, path: str) -> datetime:
    return s3.head_object(Bucket=bucket, Key=path)["LastModified"]  # type: ignore[no-any-return]


def _input_path(engine: Engine, instance_id: str) -> str:
    """The object key of an instance's offloaded input."""
    paths = engine.db.autocommit(
        lambda c: c.execute(
            "SELECT input ->> '$payload' AS p FROM instance WHERE id = %s", (instance_id,)
        ).fetchone()
    )
    assert paths is not None and paths["p"], "the input was not offloaded"
    return str(paths["p"])


def _upload(store: PayloadStore, value: Any, kind: str = "WORKFLOW_INPUT") -> dict[str, Any]:
    """A payload as a client hands it over: uploaded, then passed by its reference."""
    return store.put_json(json.dumps(value), kind)


def _finish(engine: Engine, job_type: str, output: dict[str, Any] | None = None) -> None:
    for job in engine.poll("w", [job_type], 10):
        engine.complete_job(job["id"], "w", output or {}, attempt=job["attempt"])


def test_an_ended_instances_objects_are_tagged_with_their_age_restarted(
    engine: Engine, store: PayloadStore, s3: Any
) -> None:
    engine.register_definition(
        {
            "name": "big",
            "steps": [service_step("a", "ret-a")],
            "outputParameters": {"o": "${a.output}"},
        }
    )
    given = _upload(store, {"blob": BIG})
    ended = engine.start_instance(definition_name="big", input=given)[0]["id"]
    running = engine.start_instance(definition_name="big", input=_upload(store, {"b": BIG}))
    job = next(j for j in engine.poll("w", ["ret-a"], 10) if j["instanceId"] == ended)
    output = _upload(store, {"out": BIG}, "STEP_OUTPUT")
    engine.complete_job(job["id"], "w", output, attempt=job["attempt"])
    assert engine.get_instance(ended)["status"] == "COMPLETED"
    paths = [given["$payload"], output["$payload"]]
    before = {p: _modified(s3, store.bucket, p) for p in paths}

    retired = engine.retire_payloads(lag_seconds=0.0001)

    assert retired >= len(paths)  # and the instance output, if the engine offloaded it
    for p in paths:
        assert _tags(s3, store.bucket, p) == {RETENTION_TAG: RETENTION_ENDED}
        assert _modified(s3, store.bucket, p) >= before[p]
        assert len(s3.get_object(Bucket=store.bucket, Key=p)["Body"].read()) > 0
    # The running instance's input is untouched, and a second walk finds nothing new.
    assert _tags(s3, store.bucket, _input_path(engine, running[0]["id"])) == {}
    assert engine.retire_payloads(lag_seconds=0.0001) == 0


def test_the_walk_waits_for_the_lag_and_skips_instances_without_payloads(
    engine: Engine, store: PayloadStore, s3: Any
) -> None:
    engine.register_definition({"name": "small", "steps": [service_step("a", "ret-s")]})
    for _ in range(3):
        engine.start_instance(definition_name="small", input={"n": 1})
    _finish(engine, "ret-s")
    assert engine.retire_payloads() == 0  # ended less than a minute ago: not yet walked
    assert engine.retire_payloads(lag_seconds=0.0001) == 0  # walked: nothing to tag
    assert s3.list_objects_v2(Bucket=store.bucket).get("KeyCount", 0) == 0


def test_an_upload_two_instances_were_started_with_is_kept_until_both_ended(
    engine: Engine, store: PayloadStore, s3: Any
) -> None:
    engine.register_definition({"name": "twice", "steps": [service_step("a", "ret-t")]})
    shared = _upload(store, {"same": "input"})
    first = engine.start_instance(definition_name="twice", input=shared)[0]["id"]
    second = engine.start_instance(definition_name="twice", input=shared)[0]["id"]
    jobs = {j["instanceId"]: j for j in engine.poll("w", ["ret-t"], 10)}
    engine.complete_job(jobs[first]["id"], "w", {}, attempt=1)
    engine.retire_payloads(lag_seconds=0.0001)
    assert _tags(s3, store.bucket, shared["$payload"]) == {}  # the second still runs on it
    engine.complete_job(jobs[second]["id"], "w", {}, attempt=1)
    engine.retire_payloads(lag_seconds=0.0001)
    assert _tags(s3, store.bucket, shared["$payload"]) == {RETENTION_TAG: RETENTION_ENDED}


def test_a_retried_instance_gets_its_objects_back(
    engine: Engine, store: PayloadStore, s3: Any
) -> None:
    engine.register_definition({"name": "flaky", "steps": [service_step("a", "ret-f")]})
    iid = engine.start_instance(definition_name="flaky", input=_upload(store, {"b": 1}))[0]["id"]
    path = _input_path(engine, iid)
    job = engine.poll("w", ["ret-f"], 1)[0]
    engine.fail_job(job["id"], "w", "broken", False, attempt=job["attempt"])
    assert engine.get_instance(iid)["status"] == "FAILED"
    engine.retire_payloads(lag_seconds=0.0001)
    assert _tags(s3, store.bucket, path) == {RETENTION_TAG: RETENTION_ENDED}

    engine.retry_instance(iid)

    assert engine.get_instance(iid)["status"] == "RUNNING"
    assert _tags(s3, store.bucket, path) == {}
    assert json.loads(s3.get_object(Bucket=store.bucket, Key=path)["Body"].read()) == {"b": 1}


def test_deleting_an_ended_instance_deletes_its_objects(
    engine: Engine, store: PayloadStore, s3: Any
) -> None:
    engine.register_definition({"name": "gone", "steps": [service_step("a", "ret-d")]})
    iid = engine.start_instance(definition_name="gone", input=_upload(store, {"b": 1}))[0]["id"]
    keep = engine.start_instance(definition_name="gone", input=_upload(store, {"b": 2}))[0]["id"]
    path, kept = _input_path(engine, iid), _input_path(engine, keep)
    job = next(j for j in engine.poll("w", ["ret-d"], 10) if j["instanceId"] == iid)
    engine.complete_job(job["id"], "w", {}, attempt=job["attempt"])

    engine.delete_instance(iid)

    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=store.bucket).get("Contents", [])]
    assert path not in keys
    assert kept in keys


class _FailingObjects:
    def __init__(self, store: PayloadStore) -> None:
        self.store = store
        self.fail = True

    def retire(self, paths: Any) -> int:
        if self.fail:
            raise Unavailable("payload storage: throttled")
        return self.store.retire(paths)

    def revive(self, paths: Any) -> None:
        self.store.revive(paths)

    def delete(self, paths: Any) -> None:
        self.store.delete(paths)


def test_an_s3_failure_leaves_the_walk_where_it_was(
    db: Database, store: PayloadStore, s3: Any
) -> None:
    objects = _FailingObjects(store)
    engine = Engine(db, offload=store.put_json, payload_objects=objects)
    engine.register_definition({"name": "f", "steps": [service_step("a", "ret-e")]})
    iid = engine.start_instance(definition_name="f", input=_upload(store, {"b": 1}))[0]["id"]
    _finish(engine, "ret-e")
    with pytest.raises(Unavailable):
        engine.retire_payloads(lag_seconds=0.0001)
    objects.fail = False
    assert engine.retire_payloads(lag_seconds=0.0001) == 1
    assert _tags(s3, store.bucket, _input_path(engine, iid)) == {RETENTION_TAG: RETENTION_ENDED}


def test_two_sweepers_at_once_walk_each_instance_once(
    db: Database, store: PayloadStore, s3: Any
) -> None:
    calls: list[list[str]] = []
    lock = threading.Lock()

    class Counting(_FailingObjects):
        def retire(self, paths: Any) -> int:
            with lock:
                calls.append(list(paths))
            return self.store.retire(paths)

    objects = Counting(store)
    engine = Engine(db, offload=store.put_json, payload_objects=objects)
    engine.register_definition({"name": "many", "steps": [service_step("a", "ret-m")]})
    for n in range(12):
        engine.start_instance(definition_name="many", input=_upload(store, {"n": n}))
    _finish(engine, "ret-m")
    _finish(engine, "ret-m")
    barrier = threading.Barrier(2)
    done: list[int] = []

    def sweeper() -> None:
        barrier.wait()
        while (n := engine.retire_payloads(limit=3, lag_seconds=0.0001)) > 0:
            done.append(n)

    threads = [threading.Thread(target=sweeper) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    # Walk what a sweeper skipped while the other held the mark.
    while engine.retire_payloads(limit=3, lag_seconds=0.0001) > 0:
        pass
    tagged = [p for batch in calls for p in batch]
    assert len(tagged) == len(set(tagged)) == 12


def test_a_batch_item_whose_offloaded_output_is_not_json_spares_its_neighbours(
    engine: Engine, store: PayloadStore, s3: Any
) -> None:
    """The decision reads the output (outputParameters) and finds no JSON: that item is
    INVALID, the other result of the batch is applied."""
    from baton.engine.batch_ops import BatchResult

    engine.register_definition(
        {
            "name": "reads-output",
            "steps": [service_step("a", "ro")],
            "outputParameters": {"x": "${a.output.x}"},
        }
    )
    good = engine.start_instance(definition_name="reads-output")[0]["id"]
    bad = engine.start_instance(definition_name="reads-output")[0]["id"]
    jobs = {j["instanceId"]: j for j in engine.poll("w", ["ro"], 2)}
    ref = store.put_json(json.dumps({"x": 1}), "STEP_OUTPUT")
    s3.put_object(Bucket=store.bucket, Key=ref["$payload"], Body=b"not json {")
    answers = engine.complete_batch(
        [
            BatchResult(jobs[bad]["id"], "w", 1, output=ref),
            BatchResult(jobs[good]["id"], "w", 1, output={"x": 2}),
        ]
    )
    assert [a["outcome"] for a in answers] == ["INVALID", "APPLIED"]
    assert "JSON" in answers[0]["error"]
    assert engine.get_instance(good)["status"] == "COMPLETED"
    assert engine.get_instance(bad)["status"] == "RUNNING"


def test_a_failure_workflow_reads_an_offloaded_input_of_the_failed_instance(
    engine: Engine, store: PayloadStore
) -> None:
    undo = service_step("undo", "fw-undo")
    undo["input"] = {
        "order": "${workflow.input.orderId}",
        "again": "${workflow.input.failedWorkflow.input.orderId}",
    }
    engine.register_definition({"name": "fw-cleanup", "steps": [undo]})
    engine.register_definition(
        {"name": "fw-big", "failureWorkflow": "fw-cleanup", "steps": [service_step("a", "fw-a")]}
    )
    given = _upload(store, {"orderId": "o-1", "b": BIG})
    engine.start_instance(definition_name="fw-big", input=given)
    (job,) = engine.poll("w", ["fw-a"], 1)
    engine.fail_job(job["id"], "w", "declined", retryable=False)
    (undo_job,) = engine.poll("w", ["fw-undo"], 1)
    # Its input (the failed one twice over) is offloaded in turn; its step reads it back.
    assert undo_job["input"] == {"order": "o-1", "again": "o-1"}
