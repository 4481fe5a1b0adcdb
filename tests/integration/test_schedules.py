"""Schedules on real PostgreSQL with a fake clock: the duty loop's pass is given its ``now``.

Each overlap policy, catch-up, backfill, trigger, pause, pauseOnFailure, and the API's reads.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from baton.engine.schedule_firing import ScheduleDuty, resolve_input
from baton.engine.schedule_ops import Schedules
from baton.engine.schedule_spec import iso
from baton.engine.service import Engine
from baton.errors import Conflict, NotFound, ValidationFailed

EVERY = 60


@pytest.fixture
def schedules(engine: Engine) -> Schedules:
    engine.register_definition(
        {
            "name": "nightly",
            "steps": [
                {"id": "work", "type": "SERVICE_TASK", "jobType": "nightly-job", "retryCount": 0}
            ],
        }
    )
    return Schedules(engine)


@pytest.fixture
def duty(engine: Engine) -> ScheduleDuty:
    return ScheduleDuty(engine)


def _create(schedules: Schedules, sid: str = "s1", **fields: Any) -> dict[str, Any]:
    body = {
        "id": sid,
        "definitionName": "nightly",
        "input": {"at": "${schedule.time}", "who": "schedule ${schedule.id}", "n": 1},
        "spec": {"interval": {"everySeconds": EVERY}},
        **fields,
    }
    return schedules.create(body)


def _slots(schedules: Schedules, sid: str = "s1") -> list[datetime]:
    """The schedule's slot times from now on (the first ten)."""
    return [
        datetime.fromisoformat(t.replace("Z", "+00:00"))
        for t in schedules.get(sid)["nextFireTimes"]
    ]


def _actions(engine: Engine, sid: str = "s1") -> list[dict[str, Any]]:
    rows = engine.db.autocommit(
        lambda c: c.execute(
            "SELECT slot_time, kind, status, instance_id FROM schedule_slot"
            " WHERE schedule_id = %(id)s ORDER BY slot_time",
            {"id": sid},
        ).fetchall()
    )
    return rows


def _outcomes(engine: Engine, sid: str = "s1") -> list[str]:
    return [r["status"] for r in _actions(engine, sid)]


def _finish(engine: Engine, iid: Any) -> None:
    engine.cancel_instance(str(iid), "done with it")


def test_a_slot_starts_one_instance_with_its_correlation_id_and_input(
    engine: Engine, schedules: Schedules, duty: ScheduleDuty
) -> None:
    _create(schedules)
    first = _slots(schedules)[0]
    assert duty.tick(first - timedelta(seconds=1))["schedulesFired"] == 0
    assert duty.tick(first)["schedulesFired"] == 1
    assert duty.tick(first + timedelta(seconds=1))["schedulesFired"] == 0  # once per slot
    [action] = _actions(engine)
    assert action["status"] == "STARTED"
    inst = engine.get_instance(str(action["instance_id"]))
    assert inst["correlationId"] == f"schedule:s1:{iso(first)}"
    assert inst["input"] == {"at": iso(first), "who": "schedule s1", "n": 1}
    view = schedules.get("s1")
    assert view["recentActions"][0] | {"at": None} == {
        "slotTime": iso(first),
        "kind": "SCHEDULED",
        "outcome": "STARTED",
        "instanceId": str(action["instance_id"]),
        "detail": None,
        "at": None,
    }
    assert len(view["nextFireTimes"]) == 10


def test_skip_drops_a_slot_while_the_last_run_is_going(
    engine: Engine, schedules: Schedules, duty: ScheduleDuty
) -> None:
    _create(schedules)
    s = _slots(schedules)
    duty.tick(s[0])
    assert duty.tick(s[1])["scheduleSlotsSkipped"] == 1
    _finish(engine, _actions(engine)[0]["instance_id"])
    duty.tick(s[2])
    assert _outcomes(engine) == ["STARTED", "SKIPPED", "STARTED"]


def test_buffer_one_keeps_one_slot_waiting(
    engine: Engine, schedules: Schedules, duty: ScheduleDuty
) -> None:
    _create(schedules, overlapPolicy="BUFFER_ONE", catchupWindowSeconds=3600)
    s = _slots(schedules)
    duty.tick(s[0])
    duty.tick(s[2])  # slots 1 and 2 due while 0 runs: 1 waits, 2 is skipped
    assert _outcomes(engine) == ["STARTED", "BUFFERED", "SKIPPED"]
    duty.tick(s[2] + timedelta(seconds=1))
    assert _outcomes(engine) == ["STARTED", "BUFFERED", "SKIPPED"]
    _finish(engine, _actions(engine)[0]["instance_id"])
    duty.tick(s[2] + timedelta(seconds=2))
    assert _outcomes(engine) == ["STARTED", "STARTED", "SKIPPED"]


def test_buffer_all_fires_every_waiting_slot_one_at_a_time(
    engine: Engine, schedules: Schedules, duty: ScheduleDuty
) -> None:
    _create(schedules, overlapPolicy="BUFFER_ALL", catchupWindowSeconds=3600)
    s = _slots(schedules)
    duty.tick(s[0])
    duty.tick(s[2])
    assert _outcomes(engine) == ["STARTED", "BUFFERED", "BUFFERED"]
    for n in (1, 2):
        _finish(engine, _actions(engine)[n - 1]["instance_id"])
        duty.tick(s[2] + timedelta(seconds=n))
        assert _outcomes(engine)[n] == "STARTED"
    assert _outcomes(engine) == ["STARTED", "STARTED", "STARTED"]


@pytest.mark.parametrize(
    ("policy", "word"), [("CANCEL_OTHER", "cancelled"), ("TERMINATE_OTHER", "terminated")]
)
def test_cancel_and_terminate_other_end_the_running_instance_first(
    engine: Engine, schedules: Schedules, duty: ScheduleDuty, policy: str, word: str
) -> None:
    _create(schedules, overlapPolicy=policy)
    s = _slots(schedules)
    duty.tick(s[0])
    duty.tick(s[1])
    first, second = _actions(engine)
    assert (first["status"], second["status"]) == ("STARTED", "STARTED")
    old = engine.get_instance(str(first["instance_id"]))
    assert old["status"] == "CANCELLED"
    assert word in old["reason"] and policy in old["reason"]
    assert engine.get_instance(str(second["instance_id"]))["status"] == "RUNNING"


def test_allow_all_starts_regardless(
    engine: Engine, schedules: Schedules, duty: ScheduleDuty
) -> None:
    _create(schedules, overlapPolicy="ALLOW_ALL")
    s = _slots(schedules)
    duty.tick(s[0])
    duty.tick(s[1])
    ids = [r["instance_id"] for r in _actions(engine)]
    assert all(engine.get_instance(str(i))["status"] == "RUNNING" for i in ids)
    assert len(set(ids)) == 2


def test_catch_up_fires_the_window_in_order_and_records_older_slots_missed(
    engine: Engine, schedules: Schedules, duty: ScheduleDuty
) -> None:
    _create(schedules, overlapPolicy="ALLOW_ALL", catchupWindowSeconds=2 * EVERY)
    s = _slots(schedules)
    result = duty.tick(s[6])  # down for six intervals: slots 5 and 6 (and 4, at the edge) in
    assert _outcomes(engine) == ["MISSED"] * 4 + ["STARTED"] * 3
    assert result == {"schedulesFired": 3, "scheduleSlotsSkipped": 0, "scheduleSlotsMissed": 4}
    started = [r for r in _actions(engine) if r["status"] == "STARTED"]
    created = [engine.get_instance(str(r["instance_id"]))["createdAt"] for r in started]
    assert created == sorted(created)


def test_default_catch_up_window_is_sixty_seconds(
    engine: Engine, schedules: Schedules, duty: ScheduleDuty
) -> None:
    _create(schedules, spec={"interval": {"everySeconds": 10}}, overlapPolicy="ALLOW_ALL")
    s = _slots(schedules)
    duty.tick(s[9])  # 90 s late for the first: slots older than 60 s missed
    assert _outcomes(engine) == ["MISSED"] * 3 + ["STARTED"] * 7


def test_backfill_fires_a_past_range_in_order_whatever_the_window(
    engine: Engine, schedules: Schedules, duty: ScheduleDuty
) -> None:
    _create(schedules, overlapPolicy="BUFFER_ALL")
    now = datetime.now(UTC)
    start = now - timedelta(hours=3)
    answer = schedules.backfill(
        "s1", {"from": iso(start), "to": iso(start + timedelta(seconds=4 * EVERY))}
    )
    assert answer["added"] in (4, 5)

    def backfilled() -> list[dict[str, Any]]:  # (a slot of the spec may come due meanwhile)
        return [r for r in _actions(engine) if r["kind"] == "BACKFILL"]

    duty.tick(now)
    outcomes = [r["status"] for r in backfilled()]
    assert outcomes == ["STARTED"] + ["BUFFERED"] * (answer["added"] - 1)
    for n in range(1, answer["added"]):
        _finish(engine, backfilled()[n - 1]["instance_id"])
        duty.tick(now + timedelta(seconds=n))
    assert [r["status"] for r in backfilled()] == ["STARTED"] * answer["added"]
    with pytest.raises(ValidationFailed) as err:
        schedules.backfill("s1", {"from": "later", "to": iso(start)})
    assert [p.path for p in err.value.problems] == ["from"]


def test_trigger_fires_now_even_while_paused(
    engine: Engine, schedules: Schedules, duty: ScheduleDuty
) -> None:
    _create(schedules, paused=True)
    s = _slots(schedules)
    duty.tick(s[2])
    assert _outcomes(engine) == []  # paused: no slot materialized
    schedules.trigger("s1")
    duty.tick(datetime.now(UTC) + timedelta(seconds=1))
    [action] = _actions(engine)
    assert (action["kind"], action["status"]) == ("TRIGGER", "STARTED")


def test_unpause_does_not_fire_the_paused_time(
    engine: Engine, schedules: Schedules, duty: ScheduleDuty
) -> None:
    _create(schedules, catchupWindowSeconds=3600)
    s = _slots(schedules)
    schedules.set_paused("s1", True, "maintenance")
    assert schedules.get("s1")["note"] == "maintenance"
    duty.tick(s[1])
    assert _outcomes(engine) == []
    schedules.set_paused("s1", False)
    # Unpaused now (before s[0]): it fires from now on only.
    duty.tick(s[0])
    assert _outcomes(engine) == ["STARTED"]


def test_pause_on_failure_pauses_before_the_next_slot(
    engine: Engine, schedules: Schedules, duty: ScheduleDuty
) -> None:
    _create(schedules, pauseOnFailure=True)
    s = _slots(schedules)
    duty.tick(s[0])
    job = engine.poll("w", ["nightly-job"], 1)[0]
    engine.fail_job(job["id"], "w", "broken", retryable=False)
    duty.tick(s[1])
    view = schedules.get("s1")
    assert view["paused"] is True and "pauseOnFailure" in view["note"]
    assert _outcomes(engine) == ["STARTED"]
    schedules.set_paused("s1", False)  # unpaused, it fires again (the failure is not held)
    duty.tick(s[2])
    assert _outcomes(engine) == ["STARTED", "STARTED"]


def test_a_missing_definition_fails_the_slot_only(
    engine: Engine, schedules: Schedules, duty: ScheduleDuty
) -> None:
    _create(schedules, definitionName="nope")
    s = _slots(schedules)
    duty.tick(s[0])
    [action] = _actions(engine)
    assert action["status"] == "FAILED"
    assert "'nope' not found" in schedules.get("s1")["recentActions"][0]["detail"]


def test_crud(schedules: Schedules) -> None:
    _create(schedules, "a")
    _create(schedules, "b", spec={"cron": ["@daily"], "timeZone": "Europe/Berlin"})
    with pytest.raises(Conflict):
        _create(schedules, "a")
    page = schedules.list_schedules(limit=1)
    assert [x["id"] for x in page["schedules"]] == ["a"]
    rest = schedules.list_schedules(limit=1, page_token=page["nextPageToken"])
    assert [x["id"] for x in rest["schedules"]] == ["b"] and "nextPageToken" not in rest
    replaced = schedules.replace(
        "a",
        {
            "definitionName": "nightly",
            "spec": {"cron": ["0 9 * * 1"]},
            "overlapPolicy": "ALLOW_ALL",
        },
    )
    assert replaced["overlapPolicy"] == "ALLOW_ALL" and replaced["spec"] == {"cron": ["0 9 * * 1"]}
    assert schedules.delete("a") == {"id": "a", "deleted": True}
    with pytest.raises(NotFound):
        schedules.get("a")
    with pytest.raises(NotFound):
        schedules.trigger("a")


def test_resolve_input() -> None:
    v = {
        "t": "${schedule.time}",
        "s": "at ${ schedule.time } for ${schedule.id}",
        "x": ["${schedule.id}", 3],
    }
    assert resolve_input(v, {"schedule.time": "T", "schedule.id": "I"}) == {
        "t": "T",
        "s": "at T for I",
        "x": ["I", 3],
    }


def test_the_loop_reads_only_schedules_whose_next_slot_has_come(
    engine: Engine, schedules: Schedules, duty: ScheduleDuty
) -> None:
    _create(schedules)
    _create(
        schedules, "ended", spec={"interval": {"everySeconds": 1}, "endAt": "2020-01-01T00:00:00Z"}
    )
    s = _slots(schedules)

    def next_fire_at(sid: str) -> Any:
        row = engine.db.autocommit(
            lambda c: c.execute(
                "SELECT next_fire_at FROM schedule WHERE id = %(id)s", {"id": sid}
            ).fetchone()
        )
        return row["next_fire_at"]

    assert next_fire_at("s1") == s[0]
    assert next_fire_at("ended") is None  # never read by the loop again
    duty.tick(s[0])
    assert next_fire_at("s1") == s[1]
    before = engine.db.autocommit(
        lambda c: c.execute("SELECT materialized_until FROM schedule WHERE id = 's1'").fetchone()
    )
    duty.tick(s[0] + timedelta(seconds=EVERY / 2))  # nothing due: the schedule is not touched
    after = engine.db.autocommit(
        lambda c: c.execute("SELECT materialized_until FROM schedule WHERE id = 's1'").fetchone()
    )
    assert before == after


def test_a_dry_run_shows_the_schedule_and_keeps_nothing(
    schedules: Schedules, engine: Engine
) -> None:
    shown = _create(schedules, "dry", dryRun=True)
    assert shown["id"] == "dry" and len(shown["nextFireTimes"]) == 10
    assert shown["recentActions"] == []
    with pytest.raises(NotFound):
        schedules.get("dry")
    assert _actions(engine, "dry") == []
    # A dry run checks what a create checks: the id taken, the spec.
    _create(schedules, "taken")
    with pytest.raises(Conflict):
        _create(schedules, "taken", dryRun=True)
    with pytest.raises(ValidationFailed):
        _create(schedules, "dry", dryRun="yes")
    # A replace's dry run shows the new spec and leaves the schedule as it was.
    before = schedules.get("taken")
    body = {"definitionName": "nightly", "spec": {"cron": ["0 9 * * *"]}, "dryRun": True}
    replaced = schedules.replace("taken", body)
    assert replaced["spec"] == {"cron": ["0 9 * * *"]}
    assert all(t.endswith("T09:00:00Z") for t in replaced["nextFireTimes"])
    after = schedules.get("taken")
    assert after["spec"] == before["spec"] and after["updatedAt"] == before["updatedAt"]
