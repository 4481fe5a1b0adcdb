"""Queue-triggered workflows: one instance per queue task, on real Postgres."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psycopg
import pytest
from baton.engine.queue_ops import Queues
from baton.engine.queue_triggers import QueueTriggers, render_template
from baton.engine.service import Engine


@pytest.fixture
def queues(engine: Engine) -> Queues:
    return Queues(engine)


@pytest.fixture
def triggers(queues: Queues) -> QueueTriggers:
    return QueueTriggers(queues)


def _triggered(name: str, queue: str, **trigger: Any) -> dict[str, Any]:
    return {
        "name": name,
        "steps": [
            {
                "id": "handle",
                "type": "SERVICE_TASK",
                "jobType": f"{name}-job",
                "retryCount": 0,
                "input": {"t": "${workflow.input.title}"},
            }
        ],
        "trigger": {"type": "queue", "queueName": queue, **trigger},
        "inputTemplate": {
            "prompt": "Process {{title}} ({{queue_priority}})",
            "prio": "{{queuePriority}}",
        },
    }


def test_a_queue_trigger_starts_one_instance_per_task_with_its_input(
    engine: Engine, queues: Queues, triggers: QueueTriggers
) -> None:
    engine.register_definition(_triggered("rep", "reports", maxConcurrency=10))
    pushed = queues.push("reports", "Q4 report", body='{"id": 42}', priority=5)
    assert triggers.dispatch() == 1
    assert triggers.dispatch() == 0  # nothing pending: the next poll waits pollIntervalSecs
    job = engine.poll("w", ["rep-job"], 1)[0]
    inst = engine.get_instance(job["instanceId"])
    assert inst["input"] == {
        "title": "Q4 report",
        "body": '{"id": 42}',
        "queueName": "reports",
        "queueTaskId": pushed["id"],
        "queuePriority": 5,
        "prompt": "Process Q4 report (5)",
        "prio": 5,
    }
    assert queues.stats("reports")["processing"] == 1
    engine.complete_job(job["id"], "w", {"ok": True})
    assert queues.stats("reports") == {
        "pending": 0,
        "processing": 0,
        "completed": 1,
        "failed": 0,
        "dead": 0,
    }


def test_a_failing_triggered_instance_retries_its_task_then_dead_letters_it(
    engine: Engine, queues: Queues, triggers: QueueTriggers
) -> None:
    engine.register_definition(_triggered("fl", "flaky", maxRetries=2))
    queues.push("flaky", "always fails")
    instances = set()
    for _ in range(2):
        assert triggers.dispatch(nudged=True) == 1
        job = engine.poll("w", ["fl-job"], 1)[0]
        instances.add(job["instanceId"])
        engine.fail_job(job["id"], "w", "nope", retryable=False)
    assert len(instances) == 2  # a fresh instance per attempt
    assert triggers.dispatch(nudged=True) == 0
    assert queues.stats("flaky")["dead"] == 1


def test_max_concurrency_one_processes_the_queue_in_priority_order(
    engine: Engine, queues: Queues, triggers: QueueTriggers
) -> None:
    for title, p in [("low", 1), ("high", 9), ("mid", 5)]:
        queues.push("ordered", title, priority=p)
    engine.register_definition(_triggered("ord", "ordered"))
    done = []
    for _ in range(3):
        assert triggers.dispatch(nudged=True) == 1
        assert triggers.dispatch(nudged=True) == 0  # one at a time
        job = engine.poll("w", ["ord-job"], 5)
        assert len(job) == 1
        done.append(job[0]["input"]["t"])
        engine.complete_job(job[0]["id"], "w", {})
    assert done == ["high", "mid", "low"]


def test_disabled_and_superseded_triggers_consume_nothing(
    engine: Engine, queues: Queues, triggers: QueueTriggers
) -> None:
    engine.register_definition(_triggered("off", "quiet", enabled=False))
    engine.register_definition(_triggered("gone", "quiet"))
    engine.register_definition({"name": "gone", "steps": [{"id": "u", "type": "USER_TASK"}]})
    queues.push("quiet", "t")
    assert triggers.dispatch(nudged=True) == 0
    assert queues.stats("quiet")["pending"] == 1


def test_concurrent_dispatchers_respect_max_concurrency(
    engine: Engine, queues: Queues, triggers: QueueTriggers
) -> None:
    engine.register_definition(_triggered("par", "par-q", maxConcurrency=3))
    for i in range(10):
        queues.push("par-q", f"t{i}")
    with ThreadPoolExecutor(4) as pool:
        started = sum(pool.map(lambda _: triggers.dispatch(nudged=True), range(8)))
    assert started == 3
    assert queues.stats("par-q")["processing"] == 3


def test_a_task_belongs_to_its_running_instance_whatever_the_visibility_timeout(
    engine: Engine, queues: Queues, triggers: QueueTriggers, database_url: str
) -> None:
    engine.register_definition(_triggered("slow", "slow-q", visibilityTimeoutSecs=1))
    queues.push("slow-q", "t")
    assert triggers.dispatch(nudged=True) == 1
    first = engine.poll("w", ["slow-job"], 1)[0]
    instance = engine.get_instance(first["instanceId"])
    assert instance.get("timeoutAt") is None  # the trigger adds no timeout of its own
    with psycopg.connect(database_url, autocommit=True) as conn:  # long past any visibility
        conn.execute("UPDATE queue_task SET visibility_expires_at = now() - interval '1 hour'")
    assert triggers.tick()["claimsLapsed"] == 0
    assert triggers.dispatch(nudged=True) == 0  # no second instance for the same task
    assert queues.stats("slow-q")["processing"] == 1
    engine.complete_job(first["id"], "w", {}, attempt=1)
    assert queues.stats("slow-q")["completed"] == 1  # its instance's end settled it


def test_a_cancelled_triggered_instance_fails_its_task_instead_of_requeueing_it(
    engine: Engine, queues: Queues, triggers: QueueTriggers
) -> None:
    engine.register_definition(_triggered("cx", "cx-q"))
    queues.push("cx-q", "t")
    triggers.dispatch(nudged=True)
    job = engine.poll("w", ["cx-job"], 1)[0]
    engine.cancel_instance(job["instanceId"], "not wanted")
    assert queues.stats("cx-q")["failed"] == 1
    assert triggers.dispatch(nudged=True) == 0


def test_render_template_fills_placeholders() -> None:
    variables = {"title": "T", "queue_priority": 3}
    assert render_template(
        {"a": "{{title}}!", "b": ["{{queue_priority}}"], "c": "{{nope}}"}, variables
    ) == {"a": "T!", "b": [3], "c": "{{nope}}"}


def test_queue_depth_metrics_on_tick(engine: Engine) -> None:
    from baton.metrics import CountingMetrics

    metrics = CountingMetrics()
    engine.metrics = metrics
    q = Queues(engine)
    q.push("m", "doomed", max_retries=1)
    q.push("m", "waiting")
    (task,) = q.dequeue("m", "c", max_tasks=1)
    assert task["title"] == "doomed"
    q.nack("m", task["id"], task["receipt"], "boom")  # its only try: dead
    QueueTriggers(q).tick()
    # Every depth is reported, zero included (a dashboard must see 0, not a gap).
    assert metrics.totals["QueueDepth"] == 1
    assert metrics.totals["QueueDepthPending"] == 1
    assert metrics.totals["QueueDepthDead"] == 1
    assert metrics.totals["QueueDepthProcessing"] == 0


# Definitions whose instance ends in the transaction that starts it, and how it ends: the end
# settles the queue task whatever decision it is (here the start itself).
_ENDS_AT_START: dict[str, tuple[list[dict[str, Any]], str, str]] = {
    "set-variable": (
        [{"id": "note", "type": "SET_VARIABLE", "variables": {"seen": "${workflow.input.title}"}}],
        "COMPLETED",
        "completed",
    ),
    "terminate-completed": (
        [{"id": "stop", "type": "TERMINATE", "status": "COMPLETED"}],
        "COMPLETED",
        "completed",
    ),
    "terminate-failed": (
        [{"id": "stop", "type": "TERMINATE", "status": "FAILED", "reason": "no"}],
        "FAILED",
        "pending",
    ),
    "failing-step": (
        # Its input resolves to a string, not an object: the step fails as it is scheduled.
        [{"id": "bad", "type": "SERVICE_TASK", "jobType": "x", "input": "${workflow.input.title}"}],
        "FAILED",
        "pending",
    ),
    "switch-to-nothing": (
        [
            {
                "id": "route",
                "type": "SWITCH",
                "on": "${workflow.input.title}",
                "cases": {"other": [{"id": "u", "type": "USER_TASK"}]},
            }
        ],
        "COMPLETED",
        "completed",
    ),
}


@pytest.mark.parametrize("kind", sorted(_ENDS_AT_START))
def test_an_instance_that_ends_as_it_starts_settles_its_queue_task(
    engine: Engine, queues: Queues, triggers: QueueTriggers, database_url: str, kind: str
) -> None:
    steps, status, task_status = _ENDS_AT_START[kind]
    engine.register_definition(
        {
            "name": f"at-once-{kind}",
            "steps": steps,
            "trigger": {"type": "queue", "queueName": f"q-{kind}", "maxRetries": 3},
        }
    )
    pushed = queues.push(f"q-{kind}", "t")
    assert triggers.dispatch(nudged=True) == 1
    (inst,) = engine.search_instances(definition_name=f"at-once-{kind}")["instances"]
    assert inst["status"] == status
    stats = queues.stats(f"q-{kind}")
    assert stats["processing"] == 0 and stats[task_status] == 1, stats
    if task_status == "pending":  # a failed instance retries its task: a fresh instance
        assert triggers.dispatch(nudged=True) == 1
        with psycopg.connect(database_url) as conn:
            row = conn.execute(
                "SELECT retry_count, last_error FROM queue_task WHERE id = %s", (pushed["id"],)
            ).fetchone()
        assert row is not None and row[0] == 2 and row[1]


def test_instances_that_end_at_once_never_block_a_one_at_a_time_queue(
    engine: Engine, queues: Queues, triggers: QueueTriggers
) -> None:
    engine.register_definition(
        {
            "name": "one-by-one",
            "steps": [{"id": "note", "type": "SET_VARIABLE", "variables": {"t": "x"}}],
            "trigger": {"type": "queue", "queueName": "single", "maxConcurrency": 1},
        }
    )
    for i in range(5):
        queues.push("single", f"t{i}")
    for _ in range(5):
        assert triggers.dispatch(nudged=True) == 1
    assert triggers.dispatch(nudged=True) == 0
    assert queues.stats("single") == {
        "pending": 0,
        "processing": 0,
        "completed": 5,
        "failed": 0,
        "dead": 0,
    }


def test_the_migration_settles_the_tasks_such_instances_left_processing(
    engine: Engine, queues: Queues, database_url: str
) -> None:
    """Tasks left 'processing' by the old order of writes (the instance's end settled nothing,
    then the task was attached to the ended instance) are settled by migration 0012."""
    from baton.store import migrations

    (repair,) = [m for m in migrations.available() if m.name == "settle_ended_queue_tasks"]
    engine.register_definition(
        {"name": "quick", "steps": [{"id": "n", "type": "SET_VARIABLE", "variables": {"a": 1}}]}
    )
    engine.register_definition(
        {"name": "doomed", "steps": [{"id": "t", "type": "TERMINATE", "status": "FAILED"}]}
    )
    engine.register_definition({"name": "waits", "steps": [{"id": "u", "type": "USER_TASK"}]})
    stuck = {}
    for name in ("quick", "doomed", "waits"):
        inst, _ = engine.start_instance(definition_name=name)
        task = queues.push("legacy", name)
        stuck[name] = task["id"]
        with psycopg.connect(database_url, autocommit=True) as conn:
            conn.execute(
                "UPDATE queue_task SET status = 'processing', consumer_id = 'trigger:x',"
                " receipt = gen_random_uuid(), instance_id = %s, visibility_expires_at = NULL"
                " WHERE id = %s",
                (inst["id"], task["id"]),
            )
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(repair.sql.encode())
        rows = dict(
            conn.execute(
                "SELECT title, status || ':' || retry_count FROM queue_task"
                " WHERE queue_name = 'legacy'"
            ).fetchall()
        )
    # Settled as their instance's end would have; the running instance keeps its task.
    assert rows == {"quick": "completed:0", "doomed": "pending:1", "waits": "processing:0"}
