"""Queue-triggered workflows: one instance per queue task, on real Postgres."""

from __future__ import annotations

from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from baton.engine.queue_ops import Queues
from baton.engine.queue_triggers import QueueTriggers, render_template
from baton.engine.service import Engine
from baton.errors import Conflict

from tests.support.helpers import wait_until


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


def test_a_triggered_instance_that_outlives_the_visibility_timeout_is_timed_out_and_retried(
    engine: Engine, queues: Queues, triggers: QueueTriggers
) -> None:
    engine.register_definition(_triggered("slow", "slow-q", visibilityTimeoutSecs=1))
    queues.push("slow-q", "t")
    triggers.dispatch(nudged=True)
    first = engine.poll("w", ["slow-job"], 1)[0]
    wait_until(lambda: engine.sweep()["instancesTimedOut"], timeout=5)
    assert engine.get_instance(first["instanceId"])["status"] == "TIMED_OUT"
    assert queues.stats("slow-q")["pending"] == 1
    assert triggers.dispatch(nudged=True) == 1
    with pytest.raises(Conflict):
        engine.complete_job(first["id"], "w", {})  # the timed-out attempt is cancelled


def test_render_template_fills_placeholders() -> None:
    variables = {"title": "T", "queue_priority": 3}
    assert render_template(
        {"a": "{{title}}!", "b": ["{{queue_priority}}"], "c": "{{nope}}"}, variables
    ) == {"a": "T!", "b": [3], "c": "{{nope}}"}


def test_queue_depth_metrics_on_tick(
    engine: Engine, queues: Queues, triggers: QueueTriggers
) -> None:
    from baton.metrics import CountingMetrics

    metrics = CountingMetrics()
    engine.metrics = metrics
    q = Queues(engine)
    q.push("m", "a")
    q.push("m", "b")
    QueueTriggers(q).tick()
    assert metrics.totals["QueueDepth"] == 2
    assert Counter(metrics.totals)["QueueDepthDead"] == 0
