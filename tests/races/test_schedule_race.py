"""Two duty loops (two engines, each with its own connections) fire the same schedules' slots at
the same moments: every slot is settled once, every STARTED slot started exactly one instance, and
nothing deadlocks (the ``racing`` fixture reads ``pg_stat_database.deadlocks``)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

from baton.engine.schedule_firing import ScheduleDuty
from baton.engine.schedule_ops import Schedules
from baton.engine.service import Engine
from baton.store.db import Database

PASSES = 30
POLICIES = ("ALLOW_ALL", "SKIP", "CANCEL_OTHER", "BUFFER_ALL")


def test_two_duty_loops_fire_each_slot_once(racing: Engine, database_url: str) -> None:
    racing.register_definition(
        {
            "name": "tick",
            "steps": [{"id": "w", "type": "SERVICE_TASK", "jobType": "tick-job", "retryCount": 0}],
        }
    )
    schedules = Schedules(racing)
    for n in range(40):
        schedules.create(
            {
                "id": f"race-{n}",
                "definitionName": "tick",
                "spec": {"interval": {"everySeconds": 1}},
                "overlapPolicy": POLICIES[n % len(POLICIES)],
                "catchupWindowSeconds": 3600,
            }
        )
    other_db = Database.pooled(database_url, min_size=2, max_size=8)
    loops = [ScheduleDuty(racing), ScheduleDuty(Engine(other_db))]
    base = datetime.now(UTC)
    barrier = threading.Barrier(2)

    def run(duty: ScheduleDuty) -> int:
        fired = 0
        for i in range(PASSES):
            now = base + timedelta(seconds=i + 1)
            if duty is loops[0]:  # the slots are rows before both loops race to fire them
                duty.materialize(now)
            barrier.wait(timeout=60)
            fired += duty.tick(now)["schedulesFired"]
            barrier.wait(timeout=60)
        return fired

    try:
        with ThreadPoolExecutor(2) as pool:
            fired = sum(pool.map(run, loops))
        # Whatever is still buffered waits for a run to end: one more pass settles nothing twice.
        fired += loops[0].tick(base + timedelta(seconds=PASSES + 1))["schedulesFired"]
    finally:
        other_db.close()

    rows = racing.db.autocommit(
        lambda c: c.execute(
            "SELECT s.schedule_id, s.slot_time, s.status, s.instance_id, i.correlation_id"
            "  FROM schedule_slot s LEFT JOIN instance i ON i.id = s.instance_id"
        ).fetchall()
    )
    started = [r for r in rows if r["status"] == "STARTED"]
    # Each loop counts the slots it started: together, each slot once.
    assert len(started) == fired > 0
    instances = racing.db.autocommit(
        lambda c: c.execute(
            "SELECT correlation_id, count(*) AS n FROM instance"
            " WHERE correlation_id LIKE 'schedule:%%' GROUP BY correlation_id"
        ).fetchall()
    )
    assert all(r["n"] == 1 for r in instances), "a slot started two instances"
    assert len(instances) == len(started)
    assert {r["correlation_id"] for r in instances} == {r["correlation_id"] for r in started}
    allow_all = [r for r in rows if r["schedule_id"] in {f"race-{n}" for n in range(0, 40, 4)}]
    assert len(allow_all) >= 10 * (PASSES - 1)
    assert all(r["status"] == "STARTED" for r in allow_all)
    assert not [r for r in rows if r["status"] == "PENDING"]
