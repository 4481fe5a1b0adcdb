"""Waiting on an instance (Conductor's synchronous execution) on real PostgreSQL: each write of
the instance's row notifies the waiter (migration 0019), so a wait ends when the instance ends
or reaches a step, woken by NOTIFY; empty-handed waits end at their deadline; behind RDS Proxy
(no LISTEN) the re-read loop finds the same."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest
from baton.engine.long_poll import instance_wakeup, wait_for_instance
from baton.engine.service import Engine
from baton.store.db import Database
from baton.store.job_listener import JobWakeups

from tests.support.helpers import one_step, wait_until


@pytest.fixture
def wakeups(database_url: str) -> Iterator[JobWakeups]:
    hub = JobWakeups(database_url)
    yield hub
    hub.close()


@pytest.fixture
def notify_engine(db: Database, wakeups: JobWakeups) -> Engine:
    return Engine(db, wakeups=wakeups)


def _ended(instance: dict[str, Any]) -> bool:
    return bool(instance["status"] != "RUNNING")


def _waiting(hub: JobWakeups, key: str) -> bool:
    with hub._cond:
        return hub._waiting[key] >= 1 and hub._registered_now([key])


def _complete_the_job(engine: Engine) -> None:
    jobs = engine.poll("w", ["work"], 1)
    assert len(jobs) == 1
    engine.complete_job(jobs[0]["id"], "w", {"done": True})


def test_an_instance_write_notifies_its_waiter(notify_engine: Engine, wakeups: JobWakeups) -> None:
    notify_engine.register_definition(one_step("flow"))
    instance, _ = notify_engine.start_instance(definition_name="flow")
    key = instance_wakeup(instance["id"])
    with wakeups.subscribe([key]) as sub:
        assert sub.ready
        sub.wait(0.0)  # the listener's first connection wakes every waiter once: drained
        _complete_the_job(notify_engine)  # the decision ends the instance: its row is written
        assert sub.wait(5.0), "no NOTIFY for the instance's write"


def test_a_write_of_another_instance_does_not_wake_the_waiter(
    notify_engine: Engine, wakeups: JobWakeups
) -> None:
    notify_engine.register_definition(one_step("flow"))
    waited, _ = notify_engine.start_instance(definition_name="flow")
    notify_engine.start_instance(definition_name="flow")
    with wakeups.subscribe([instance_wakeup(waited["id"])]) as sub:
        sub.wait(0.0)  # the listener's first connection wakes every waiter once: drained
        other = notify_engine.poll("w", ["work"], 2)
        mine = [j for j in other if j["instanceId"] != waited["id"]]
        notify_engine.complete_job(mine[0]["id"], "w", {})
        assert not sub.wait(0.5)


@pytest.mark.parametrize("listen", [True, False], ids=["notify", "reread"])
def test_wait_for_instance_ends_when_the_instance_ends(
    notify_engine: Engine, wakeups: JobWakeups, listen: bool
) -> None:
    notify_engine.register_definition(one_step("flow"))
    instance, _ = notify_engine.start_instance(definition_name="flow")
    iid = instance["id"]
    reads: list[int] = []

    def read() -> dict[str, Any]:
        reads.append(1)
        return notify_engine.get_instance(iid)

    with ThreadPoolExecutor(1) as pool:
        waiting: Future[dict[str, Any]] = pool.submit(
            wait_for_instance, read, _ended, iid, 20.0, wakeups if listen else None
        )
        if listen:
            wait_until(lambda: _waiting(wakeups, instance_wakeup(iid)), timeout=5)
        else:
            wait_until(lambda: len(reads) >= 2, timeout=5)  # in its re-read loop
        assert not waiting.done()
        _complete_the_job(notify_engine)
        ended = waiting.result(timeout=15)  # well before its 20 s deadline
    assert ended["status"] == "COMPLETED"
    assert ended["steps"][0]["output"] == {"done": True}


def test_wait_for_instance_gives_the_instance_as_it_is_at_the_deadline(
    notify_engine: Engine, wakeups: JobWakeups
) -> None:
    notify_engine.register_definition(one_step("flow"))
    instance, _ = notify_engine.start_instance(definition_name="flow")
    iid = instance["id"]
    found = wait_for_instance(lambda: notify_engine.get_instance(iid), _ended, iid, 0.3, wakeups)
    assert found["status"] == "RUNNING"
    assert [s["status"] for s in found["steps"]] == ["SCHEDULED"]


def test_an_instance_waits_row_goes_when_the_wait_ends(
    notify_engine: Engine, wakeups: JobWakeups, db: Database
) -> None:
    """Many short waits must not leave rows behind for every notifying trigger to step over."""
    notify_engine.register_definition(one_step("flow"))
    instance, _ = notify_engine.start_instance(definition_name="flow")
    iid = instance["id"]
    key = instance_wakeup(iid)

    def rows() -> int:
        found = db.autocommit(
            lambda c: c.execute(
                "SELECT count(*) AS n FROM job_waiter WHERE job_type = %s", (key,)
            ).fetchone()
        )
        assert found is not None
        return int(found["n"])

    with wakeups.subscribe([key]) as sub:
        assert sub.ready
        assert rows() == 1
    wait_until(lambda: rows() == 0, timeout=5, what="the instance's waiter row to go")
    # a job type's row stays (long-polls of that type come back)
    with wakeups.subscribe(["work"]) as sub:
        assert sub.ready
    assert db.autocommit(
        lambda c: c.execute("SELECT 1 FROM job_waiter WHERE job_type = 'work'").fetchone()
    )
