"""Named priority queues, on real Postgres."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest
from baton.engine.queue_ops import Queues
from baton.engine.service import Engine
from baton.errors import Conflict, NotFound, ValidationFailed
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.helpers import wait_until


@pytest.fixture
def queues(engine: Engine) -> Queues:
    return Queues(engine)


def _expire_claims(database_url: str, queue: str) -> None:
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(
            "UPDATE queue_task SET visibility_expires_at = now() - interval '1 second'"
            " WHERE queue_name = %s AND status = 'processing'",
            (queue,),
        )


def test_dequeue_is_priority_descending_then_oldest_first(queues: Queues) -> None:
    pushed = [("low-1", 0), ("high-1", 10), ("low-2", 0), ("mid", 5), ("high-2", 10)]
    for title, priority in pushed:
        queues.push("work", title, priority=priority)
    order = [queues.dequeue("work", "c")[0]["title"] for _ in pushed]
    assert order == ["high-1", "high-2", "mid", "low-1", "low-2"]
    assert queues.dequeue("work", "c") == []


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(priorities=st.lists(st.integers(-3, 3), min_size=1, max_size=12))
def test_dequeue_order_matches_a_stable_sort_by_priority(
    queues: Queues, priorities: list[int]
) -> None:
    queues.purge("prop")
    for i, p in enumerate(priorities):
        queues.push("prop", f"t{i}", priority=p)
    got = [t["title"] for t in queues.dequeue("prop", "c", max_tasks=100)]
    expected = [f"t{i}" for i, _ in sorted(enumerate(priorities), key=lambda x: -x[1])]
    assert got == expected


def test_concurrent_consumers_get_distinct_tasks(queues: Queues, database_url: str) -> None:
    n = 400
    for i in range(n):
        queues.push("busy", f"t{i}", priority=i % 7)
    seen: list[str] = []
    lock = threading.Lock()

    def consume(k: int) -> None:
        while True:
            tasks = queues.dequeue("busy", f"c{k}", max_tasks=5)
            if not tasks:
                return
            with lock:
                seen.extend(t["id"] for t in tasks)
            for t in tasks:
                queues.ack("busy", t["id"], t["receipt"])

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(consume, range(8)))
    assert len(seen) == n and len(set(seen)) == n
    assert queues.stats("busy") == {
        "pending": 0,
        "processing": 0,
        "completed": n,
        "failed": 0,
        "dead": 0,
    }


def test_an_expired_claim_makes_the_task_visible_again_with_its_count_raised(
    queues: Queues, database_url: str
) -> None:
    queues.push("vis", "t")
    first = queues.dequeue("vis", "a", visibility_timeout_secs=1)[0]
    assert queues.dequeue("vis", "b") == []  # invisible while claimed
    again = wait_until(lambda: queues.dequeue("vis", "b"), timeout=5, what="visibility")[0]
    assert again["id"] == first["id"] and again["retryCount"] == 1
    assert again["receipt"] != first["receipt"]
    with pytest.raises(Conflict, match="receipt is not current"):
        queues.ack("vis", first["id"], first["receipt"])  # the lapsed consumer cannot ack
    assert queues.ack("vis", again["id"], again["receipt"])["applied"] is True
    assert queues.ack("vis", again["id"], again["receipt"])["applied"] is False  # repeat


def test_failures_retry_until_max_retries_then_dead(queues: Queues) -> None:
    queues.push("fail", "t", max_retries=3)
    statuses = []
    for _ in range(3):
        task = queues.dequeue("fail", "c")[0]
        statuses.append(queues.nack("fail", task["id"], task["receipt"], "boom")["status"])
    assert statuses == ["pending", "pending", "dead"]
    assert queues.dequeue("fail", "c") == []  # dead is never retried automatically
    assert queues.stats("fail")["dead"] == 1


def test_lapsed_claims_also_count_towards_dead(queues: Queues, database_url: str) -> None:
    queues.push("lapse", "t", max_retries=2)
    for _ in range(2):
        queues.dequeue("lapse", "c")
        _expire_claims(database_url, "lapse")
    assert queues.dequeue("lapse", "c") == []
    assert queues.stats("lapse")["dead"] == 1


def test_non_retryable_nack_fails_the_task(queues: Queues) -> None:
    queues.push("q", "t")
    task = queues.dequeue("q", "c")[0]
    assert (
        queues.nack("q", task["id"], task["receipt"], "bad input", retryable=False)["status"]
        == "failed"
    )
    with pytest.raises(Conflict, match="failed, not processing"):
        queues.ack("q", task["id"], task["receipt"])


def test_peek_never_claims_and_hides_dead_tasks(queues: Queues) -> None:
    queues.push("peek", "dead-one", max_retries=1)
    doomed = queues.dequeue("peek", "c")[0]
    queues.nack("peek", doomed["id"], doomed["receipt"])
    for i in range(3):
        queues.push("peek", f"p{i}", priority=i)
    assert [t["title"] for t in queues.peek("peek", 2)["tasks"]] == ["p2", "p1"]
    assert [t["title"] for t in queues.peek("peek")["tasks"]] == ["p2", "p1", "p0"]
    assert all("receipt" not in t for t in queues.peek("peek")["tasks"])
    assert queues.stats("peek")["pending"] == 3
    with pytest.raises(ValidationFailed):
        queues.peek("peek", 101)


def test_stats_add_up_after_a_mixed_run(queues: Queues) -> None:
    for i in range(10):
        queues.push("mix", f"t{i}", max_retries=1)
    tasks = queues.dequeue("mix", "c", max_tasks=6)
    for t in tasks[:3]:
        queues.ack("mix", t["id"], t["receipt"])
    queues.nack("mix", tasks[3]["id"], tasks[3]["receipt"])  # max_retries 1: dead
    queues.nack("mix", tasks[4]["id"], tasks[4]["receipt"], retryable=False)
    stats = queues.stats("mix")
    assert stats == {"pending": 4, "processing": 1, "completed": 3, "failed": 1, "dead": 1}
    assert sum(stats.values()) == 10


def test_purge_removes_only_that_queue(queues: Queues) -> None:
    for name in ("a", "b"):
        for i in range(3):
            queues.push(name, f"{name}{i}")
    queues.dequeue("a", "c")
    assert queues.purge("a") == {"deleted": 3}
    assert sum(queues.stats("a").values()) == 0
    assert queues.stats("b")["pending"] == 3


@pytest.mark.parametrize("name", ["", "has space", "under_score", "x" * 65, "ünï"])
def test_queue_names_follow_the_rule(queues: Queues, name: str) -> None:
    with pytest.raises(ValidationFailed, match="letters, digits and hyphens"):
        queues.push(name, "t")


def test_unknown_task_is_not_found(queues: Queues) -> None:
    with pytest.raises(NotFound):
        queues.ack(
            "q", "00000000-0000-0000-0000-000000000009", "00000000-0000-0000-0000-000000000009"
        )
