"""Deleting a definition version and a finished instance, on real Postgres."""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
import pytest
from baton.definitions import WorkflowDefinition
from baton.engine.queue_ops import Queues
from baton.engine.queue_triggers import QueueTriggers
from baton.engine.service import Engine
from baton.errors import Conflict, DefinitionNotFound, InstanceNotFound

from tests.support.helpers import one_step


def _count(database_url: str, sql: str, *args: Any) -> int:
    with psycopg.connect(database_url) as conn:
        row = conn.execute(sql, args).fetchone()
    assert row is not None
    return int(row[0])


# --- definition versions -----------------------------------------------------------------------


def test_a_deleted_version_is_gone_and_the_previous_one_is_latest(engine: Engine) -> None:
    engine.register_definition(one_step("flow", "a"))
    engine.register_definition(one_step("flow", "b"))
    deleted = engine.delete_definition("flow", 2)
    assert deleted["name"] == "flow" and deleted["version"] == 2
    assert deleted["steps"][0]["jobType"] == "b"
    with pytest.raises(DefinitionNotFound):
        engine.get_definition("flow", 2)
    assert engine.get_definition("flow")["version"] == 1
    with pytest.raises(DefinitionNotFound):
        engine.delete_definition("flow", 2)  # deleting what does not exist is a 404
    with pytest.raises(DefinitionNotFound):
        engine.delete_definition("no-such-flow", 1)


def test_an_instance_of_a_deleted_version_keeps_its_snapshot_and_finishes(engine: Engine) -> None:
    engine.register_definition(one_step("keep", "keep-job"))
    started, _ = engine.start_instance(definition_name="keep", input={"n": 1})
    engine.delete_definition("keep", 1)
    (job,) = engine.poll("w", ["keep-job"], 1)
    engine.complete_job(job["id"], "w", {"done": True})
    finished = engine.get_instance(started["id"])
    assert finished["status"] == "COMPLETED"
    assert finished["definitionVersion"] == 1
    with pytest.raises(DefinitionNotFound):
        engine.start_instance(definition_name="keep")


def _triggered(name: str, queue: str) -> dict[str, Any]:
    return {
        **one_step(name, f"{name}-job", retryCount=0),
        "trigger": {"type": "queue", "queueName": queue, "maxConcurrency": 10},
    }


def test_deleting_the_triggered_latest_version_stops_its_trigger(
    engine: Engine, database_url: str
) -> None:
    queues = Queues(engine)
    triggers = QueueTriggers(queues)
    engine.register_definition(one_step("consumer", "consumer-job"))  # v1: no trigger
    engine.register_definition(_triggered("consumer", "inbox"))  # v2: the trigger
    first = queues.push("inbox", "one")["id"]
    assert triggers.dispatch("inbox", nudged=True) == 1
    engine.delete_definition("consumer", 2)

    queues.push("inbox", "two")
    assert triggers.dispatch("inbox", nudged=True) == 0
    assert triggers.dispatch(nudged=True) == 0
    assert queues.stats("inbox")["pending"] == 1
    # The instance v2 started runs on its snapshot, and its end still settles its task.
    (job,) = engine.poll("w", ["consumer-job"], 1)
    engine.complete_job(job["id"], "w", {})
    assert engine.get_instance(job["instanceId"])["status"] == "COMPLETED"
    settled = "SELECT count(*) FROM queue_task WHERE id = %s AND status = 'completed'"
    assert _count(database_url, settled, first) == 1


def test_a_dispatch_racing_the_delete_of_its_version_claims_nothing(engine: Engine) -> None:
    queues = Queues(engine)
    triggers = QueueTriggers(queues)
    raw = _triggered("racy", "racy-q")
    engine.register_definition(raw)
    definition = WorkflowDefinition.model_validate(raw)
    queues.push("racy-q", "t")
    # The dispatcher read the triggers (version 1), then the version was deleted.
    engine.delete_definition("racy", 1)
    assert triggers._dispatch_one("racy", 1, definition, nudged=True) == 0
    assert queues.stats("racy-q")["pending"] == 1  # the claim was rolled back


# --- instances ---------------------------------------------------------------------------------


def test_a_finished_instance_is_deleted_with_its_steps_jobs_and_history(
    engine: Engine, database_url: str
) -> None:
    engine.register_definition(one_step("gone", "gone-job"))
    doomed, _ = engine.start_instance(definition_name="gone")
    kept, _ = engine.start_instance(definition_name="gone")
    with pytest.raises(Conflict, match="RUNNING"):
        engine.delete_instance(doomed["id"])
    engine.cancel_instance(doomed["id"])

    deleted = engine.delete_instance(doomed["id"])
    assert deleted == {
        "id": doomed["id"],
        "definitionName": "gone",
        "definitionVersion": 1,
        "status": "CANCELLED",
        "stepExecutions": 1,
        "jobs": 1,
        "historyEvents": deleted["historyEvents"],
    }
    assert deleted["historyEvents"] >= 2  # started, job created, cancelled...
    with pytest.raises(InstanceNotFound):
        engine.get_instance(doomed["id"])
    for table in ("step_execution", "job", "audit_log"):
        sql = f"SELECT count(*) FROM {table} WHERE instance_id = %s"
        assert _count(database_url, sql, doomed["id"]) == 0, table
    assert engine.get_instance(kept["id"])["status"] == "RUNNING"
    assert len(engine.audit_trail(kept["id"])) > 0

    with pytest.raises(InstanceNotFound):
        engine.delete_instance(doomed["id"])  # twice: the second finds nothing
    with pytest.raises(InstanceNotFound):
        engine.delete_instance(str(uuid.uuid4()))
    with pytest.raises(InstanceNotFound):
        engine.delete_instance("not-a-uuid")  # a path that names nothing: a 404 too
