"""Listing queues and their tasks, and redriving dead letters, on real Postgres."""

from __future__ import annotations

import uuid

import psycopg
import pytest
from baton.engine import paging, queue_ops
from baton.engine.queue_ops import Queues
from baton.engine.service import Engine
from baton.errors import ValidationFailed


@pytest.fixture
def queues(engine: Engine) -> Queues:
    return Queues(engine)


def _kill(queues: Queues, queue: str, title: str, *, error: str = "boom") -> str:
    """Push a task with one retry, first in line, and fail it: it ends dead."""
    pushed = queues.push(queue, title, body=f"body of {title}", priority=100, max_retries=1)
    task_id: str = pushed["id"]
    (claimed,) = queues.dequeue(queue, "c")
    assert claimed["id"] == task_id
    assert queues.nack(queue, task_id, claimed["receipt"], error)["status"] == "dead"
    return task_id


def test_queues_are_listed_by_name_with_counts_and_paged(queues: Queues) -> None:
    for name in ("b-q", "a-q", "c-q"):
        queues.push(name, "t")
    _kill(queues, "a-q", "x")
    first = queues.list_queues(limit=2)
    assert [q["name"] for q in first["queues"]] == ["a-q", "b-q"]
    assert first["queues"][0] == {
        "name": "a-q",
        "pending": 1,
        "processing": 0,
        "completed": 0,
        "failed": 0,
        "dead": 1,
    }
    rest = queues.list_queues(limit=2, page_token=first["nextPageToken"])
    assert [q["name"] for q in rest["queues"]] == ["c-q"]
    assert "nextPageToken" not in rest
    with pytest.raises(ValidationFailed):
        queues.list_queues(page_token="made-up")


def test_tasks_are_listed_oldest_first_with_last_error_and_retry_count(queues: Queues) -> None:
    alive = queues.push("inbox", "alive")["id"]
    dead = _kill(queues, "inbox", "doomed", error="the parser choked")
    every = queues.list_tasks("inbox")["tasks"]
    assert [t["id"] for t in every] == [alive, dead]
    (listed,) = queues.list_tasks("inbox", status="dead")["tasks"]
    assert listed["id"] == dead
    assert listed["status"] == "dead"
    assert listed["lastError"] == "the parser choked"
    assert listed["retryCount"] == 1 and listed["maxRetries"] == 1
    assert listed["body"] == "body of doomed" and listed["bodyTruncated"] is False
    assert listed["completedAt"] and listed["updatedAt"]
    assert [t["id"] for t in queues.list_tasks("inbox", status="pending")["tasks"]] == [alive]


def test_task_pages_follow_their_tokens_without_gaps_or_repeats(queues: Queues) -> None:
    ids = [queues.push("many", f"t{i}")["id"] for i in range(7)]
    seen: list[str] = []
    token = None
    while True:
        page = queues.list_tasks("many", limit=3, page_token=token)
        seen += [t["id"] for t in page["tasks"]]
        token = page.get("nextPageToken")
        if not token:
            break
    assert seen == ids


def test_a_page_of_large_bodies_stops_before_its_byte_budget(
    queues: Queues, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(paging, "PAGE_BUDGET_BYTES", 150_000)
    monkeypatch.setattr(queue_ops, "LIST_BODY_CHARS", 60_000)
    for i in range(4):
        queues.push("fat", f"t{i}", body="x" * 100_000)
    page = queues.list_tasks("fat", limit=100)
    assert len(page["tasks"]) == 2  # 2 x 60,000 characters fit in 150,000 bytes, 3 do not
    assert all(t["bodyTruncated"] and len(t["body"]) == 60_000 for t in page["tasks"])
    rest = queues.list_tasks("fat", limit=100, page_token=page["nextPageToken"])
    assert len(rest["tasks"]) == 2 and "nextPageToken" not in rest


def test_an_unknown_status_is_refused_naming_the_allowed_ones(queues: Queues) -> None:
    with pytest.raises(ValidationFailed) as e:
        queues.list_tasks("inbox", status="DEAD")
    (problem,) = e.value.problems
    assert problem.path == "status"
    assert "pending, processing, completed, failed, dead" in problem.message


def test_redrive_all_moves_every_dead_task_back_with_its_retry_count_reset(
    queues: Queues,
) -> None:
    dead = [_kill(queues, "dlq", f"d{i}") for i in range(3)]
    done = queues.push("dlq", "done")["id"]
    (claimed,) = queues.dequeue("dlq", "c")
    queues.ack("dlq", done, claimed["receipt"])
    result = queues.redrive("dlq")
    assert result == {"redriven": 3, "taskIds": dead, "skipped": [], "remaining": 0}
    assert queues.stats("dlq") == {
        "pending": 3,
        "processing": 0,
        "completed": 1,
        "failed": 0,
        "dead": 0,
    }
    listed = queues.list_tasks("dlq", status="pending")["tasks"]
    assert all(t["retryCount"] == 0 and t["lastError"] == "boom" for t in listed)
    assert all("completedAt" not in t for t in listed)
    # Back to work: dequeued again, and dead again only after its retries.
    (again,) = queues.dequeue("dlq", "c")
    assert queues.nack("dlq", again["id"], again["receipt"], "again")["status"] == "dead"


def test_redrive_all_works_in_batches_and_says_how_many_are_left(
    queues: Queues, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(queue_ops, "REDRIVE_BATCH", 2)
    dead = [_kill(queues, "big", f"d{i}") for i in range(3)]
    first = queues.redrive("big")
    assert first["taskIds"] == dead[:2] and first["remaining"] == 1
    second = queues.redrive("big")
    assert second["taskIds"] == dead[2:] and second["remaining"] == 0


def test_redrive_named_reports_the_tasks_it_did_not_move(queues: Queues) -> None:
    dead = _kill(queues, "named", "d")
    other_dead = _kill(queues, "named", "d2")
    pending = queues.push("named", "p")["id"]
    elsewhere = _kill(queues, "other", "x")
    missing = str(uuid.uuid4())
    result = queues.redrive("named", [dead, pending, elsewhere, missing, dead])
    assert result["redriven"] == 1 and result["taskIds"] == [dead]
    assert result["skipped"] == [
        {"id": pending, "status": "pending", "reason": "the task is pending, not dead"},
        {"id": elsewhere, "reason": f"queue 'named' has no task {elsewhere}"},
        {"id": missing, "reason": f"queue 'named' has no task {missing}"},
    ]
    assert result["remaining"] == 1  # other_dead was not named
    assert queues.list_tasks("named", status="dead")["tasks"][0]["id"] == other_dead
    assert queues.stats("other")["dead"] == 1


def test_redrive_refuses_malformed_task_ids_listing_each(queues: Queues) -> None:
    with pytest.raises(ValidationFailed) as e:
        queues.redrive("named", ["not-a-uuid", str(uuid.uuid4()), "nope"])
    assert [p.path for p in e.value.problems] == ["taskIds[0]", "taskIds[2]"]


def test_redriven_task_of_a_trigger_is_dispatched_again(
    engine: Engine, queues: Queues, database_url: str
) -> None:
    """A queue-triggered task that died is started again by its trigger once redriven."""
    from baton.engine.queue_triggers import QueueTriggers

    engine.register_definition(
        {
            "name": "consumer",
            "trigger": {"type": "queue", "queueName": "jobs", "maxRetries": 1},
            "steps": [{"id": "ok", "type": "USER_TASK"}],
        }
    )
    triggers = QueueTriggers(queues)
    task_id = queues.push("jobs", "t")["id"]
    assert triggers.dispatch("jobs", nudged=True) == 1
    (running,) = engine.search_instances(definition_name="consumer")["instances"]
    engine.cancel_instance(running["id"])  # a cancel settles the task as failed, not dead
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("UPDATE queue_task SET status = 'dead' WHERE id = %s", (task_id,))
    assert queues.redrive("jobs", [task_id])["redriven"] == 1
    assert triggers.dispatch("jobs", nudged=True) == 1
    assert len(engine.search_instances(definition_name="consumer")["instances"]) == 2
