"""Firing schedules, exactly once per slot, from the scheduled duty loop (the sweeper's pass).

Each pass (1) materializes the slots whose time has come: a row per slot, keyed (schedule,
slot time), under the schedule's row lock taken with SKIP LOCKED; slots older than the catch-up
window are recorded MISSED; (2) for each schedule with a slot due, locks the schedule (SKIP
LOCKED: a schedule another loop is firing is left to it) and settles its due slots in order with
the overlap policy. A started instance is written in the transaction that settles its slot, with
``correlationId`` ``schedule:<id>:<slot time>`` and that as its idempotency key: a slot is STARTED
once, whatever loops race on it. Nothing here keeps an in-memory timer.

Overlap (as Temporal names them), when the schedule's last instance is still running or paused:
SKIP drops the slot (SKIPPED); BUFFER_ONE keeps one slot waiting (BUFFERED), skipping the others;
BUFFER_ALL keeps them all, fired one at a time in order; CANCEL_OTHER and TERMINATE_OTHER cancel
the running instance and then start (Baton's cancel ends it at once, so both start without
waiting; the reasons differ); ALLOW_ALL starts regardless.
"""

from __future__ import annotations

import contextlib
import logging
import re
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

from baton.engine.schedule_ops import spec_of
from baton.engine.schedule_spec import iso
from baton.engine.service import Engine
from baton.errors import BatonError, Conflict, NotFound
from baton.status import InstanceStatus
from baton.store import definition_sql, schedule_sql
from baton.store.db import Conn

log = logging.getLogger("baton.schedules")

SCHEDULES_PER_PASS = 500
MATERIALIZE_BATCHES = 10
SLOTS_PER_SCHEDULE = 100
# A pass materializes at most this many slots of one schedule (the rest on the next passes),
# and records at most MISSED_RECORDED of the slots older than the catch-up window (a long
# downtime of a schedule every second would otherwise write a row per second missed).
MATERIALIZE_PER_PASS = 1000
MISSED_RECORDED = 100
_LIVE = (InstanceStatus.RUNNING, InstanceStatus.PAUSED)
_FAILED = (InstanceStatus.FAILED, InstanceStatus.TIMED_OUT)
_PLACEHOLDER = re.compile(r"\$\{\s*(schedule\.(?:time|id))\s*\}")


def resolve_input(value: Any, variables: dict[str, str]) -> Any:
    """``${schedule.time}`` and ``${schedule.id}`` in ``value``'s strings, replaced."""
    if isinstance(value, str):
        whole = _PLACEHOLDER.fullmatch(value.strip())
        if whole:
            return variables[whole.group(1)]
        return _PLACEHOLDER.sub(lambda m: variables[m.group(1)], value)
    if isinstance(value, dict):
        return {k: resolve_input(v, variables) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve_input(v, variables) for v in value]
    return value


class _CancelFirst(Exception):
    """The running instance must be cancelled before the next slot starts; ``settled``: what the
    transaction settled (and committed) before that slot."""

    def __init__(self, instance_id: uuid.UUID, settled: Counter[str]) -> None:
        self.instance_id = instance_id
        self.settled = settled


class ScheduleDuty:
    """The schedules' part of the duty loop."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.db = engine.db
        self.metrics = engine.metrics

    def tick(self, now: datetime | None = None) -> dict[str, int]:
        """One pass at ``now`` (the clock by default; the tests pass a fake one)."""
        now = now or datetime.now(UTC)
        counts: Counter[str] = Counter()
        counts["scheduleSlotsMissed"] += self.materialize(now)
        due = self.db.autocommit(
            lambda c: c.execute(
                schedule_sql.WITH_DUE_SLOTS, {"now": now, "limit": SCHEDULES_PER_PASS * 10}
            ).fetchall()
        )
        for r in due[:SCHEDULES_PER_PASS]:
            counts.update(self.fire_schedule(r["schedule_id"], now))
        out = {
            "schedulesFired": counts["STARTED"],
            "scheduleSlotsSkipped": counts["SKIPPED"],
            "scheduleSlotsMissed": counts["scheduleSlotsMissed"] + counts["MISSED"],
        }
        for name, metric in (
            ("schedulesFired", "ScheduleFired"),
            ("scheduleSlotsSkipped", "ScheduleSkipped"),
            ("scheduleSlotsMissed", "ScheduleMissed"),
        ):
            if out[name]:
                self.metrics.add(metric, out[name])
        return out

    def materialize(self, now: datetime) -> int:
        """Write the slots whose time has come; returns how many were missed."""

        def work(conn: Conn) -> tuple[int, int]:
            rows = conn.execute(
                schedule_sql.TO_MATERIALIZE, {"now": now, "limit": SCHEDULES_PER_PASS}
            ).fetchall()
            return len(rows), sum(self._materialize_one(conn, row, now) for row in rows)

        # A batch of schedules per transaction, until none is left (or a pass has done enough).
        missed = 0
        for _ in range(MATERIALIZE_BATCHES):
            taken, batch_missed = self.db.transaction(work)
            missed += batch_missed
            if taken < SCHEDULES_PER_PASS:
                break
        return missed

    def _materialize_one(self, conn: Conn, row: dict[str, Any], now: datetime) -> int:
        spec = spec_of(row)
        sid = row["id"]
        # The oldest slot time still within the catch-up window (older ones are missed).
        horizon = now - timedelta(seconds=row["catchup_window_seconds"]) - timedelta(microseconds=1)
        slots: list[tuple[datetime, datetime, str, str | None]] = []
        since = row["materialized_until"]
        missed = 0
        if since < horizon:  # downtime past the catch-up window: those slots are missed
            for t in spec.fire_times(since, horizon):
                missed += 1
                if missed <= MISSED_RECORDED:
                    detail = "older than the catch-up window when the duty loop came"
                    slots.append((t, spec.due_at(sid, t), "MISSED", detail))
                elif missed >= 100_000:
                    break
            since = horizon
        until = now
        for t in spec.fire_times(since, now):
            if len(slots) >= MATERIALIZE_PER_PASS:
                until = slots[-1][0]
                break
            slots.append((t, spec.due_at(sid, t), "PENDING", None))
        conn.execute(
            schedule_sql.INSERT_SLOTS,
            {
                "id": sid,
                "kind": "SCHEDULED",
                "slot_times": [s[0] for s in slots],
                "due_ats": [s[1] for s in slots],
                "statuses": [s[2] for s in slots],
                "details": [s[3] for s in slots],
            },
        )
        conn.execute(
            schedule_sql.SET_MATERIALIZED,
            {"id": sid, "until": until, "next_fire_at": spec.next_after(until)},
        )
        if missed:
            log.warning("schedule slots missed", extra={"schedule_id": sid, "count": missed})
        return missed

    def fire_schedule(self, sid: str, now: datetime) -> Counter[str]:
        """Settle the due slots of schedule ``sid`` (unless another loop holds it)."""
        counts: Counter[str] = Counter()
        for _ in range(3):
            try:
                counts.update(self.db.transaction(lambda c: self._fire_locked(c, sid, now)))
                break
            except _CancelFirst as cancel:
                counts.update(cancel.settled)
                row = self.db.autocommit(
                    lambda c: c.execute(schedule_sql.GET, {"id": sid}).fetchone()
                )
                if row is None:
                    break
                policy = row["overlap_policy"]
                with contextlib.suppress(Conflict, NotFound):  # it may have ended meanwhile
                    self.engine.cancel_instance(
                        str(cancel.instance_id),
                        f"{'terminated' if policy == 'TERMINATE_OTHER' else 'cancelled'} by "
                        f"schedule {sid} ({policy}): its next slot is due",
                    )
        self.engine.deliver_pending()
        return counts

    def _fire_locked(self, conn: Conn, sid: str, now: datetime) -> Counter[str]:
        counts: Counter[str] = Counter()
        sched = conn.execute(schedule_sql.LOCK_OR_SKIP, {"id": sid}).fetchone()
        if sched is None:
            return counts  # another loop is firing it
        slots = conn.execute(
            schedule_sql.DUE_SLOTS, {"id": sid, "now": now, "limit": SLOTS_PER_SCHEDULE}
        ).fetchall()
        last = sched["last_instance_id"]
        found = (
            None
            if last is None
            else conn.execute(schedule_sql.INSTANCE_STATUS, {"id": last}).fetchone()
        )
        status = None if found is None else found["status"]
        if sched["pause_on_failure"] and status in _FAILED:
            note = f"paused after instance {last} ended {status} (pauseOnFailure)"
            conn.execute(schedule_sql.PAUSE_AFTER_FAILURE, {"id": sid, "note": note})
            conn.execute(schedule_sql.DROP_PENDING, {"id": sid})
            conn.execute(schedule_sql.SET_LAST_INSTANCE, {"id": sid, "instance_id": None})
            log.info(
                "schedule paused after a failure",
                extra={"schedule_id": sid, "instance_id": str(last)},
            )
            return counts
        running = status in _LIVE
        policy = sched["overlap_policy"]
        window = timedelta(seconds=sched["catchup_window_seconds"])
        buffered = any(s["status"] == "BUFFERED" for s in slots)
        for slot in slots:
            if sched["paused"] and slot["kind"] == "SCHEDULED":
                continue
            outcome, iid, detail = "STARTED", None, None
            if (
                slot["kind"] == "SCHEDULED"
                and slot["status"] == "PENDING"
                and now - slot["due_at"] > window
            ):
                outcome, detail = "MISSED", "older than the catch-up window when the duty loop came"
            elif running and policy in ("CANCEL_OTHER", "TERMINATE_OTHER"):
                assert last is not None
                if counts:  # keep what was settled: cancel, then come back
                    conn.commit()
                raise _CancelFirst(last, counts)
            elif running and policy == "SKIP":
                outcome, detail = "SKIPPED", f"instance {last} still running (SKIP)"
            elif running and policy == "BUFFER_ONE":
                if slot["status"] == "BUFFERED":
                    continue
                if buffered:
                    outcome, detail = "SKIPPED", "one slot is buffered already (BUFFER_ONE)"
                else:
                    outcome, detail, buffered = "BUFFERED", f"waiting for instance {last}", True
            elif running and policy == "BUFFER_ALL":
                if slot["status"] == "BUFFERED":
                    continue
                outcome, detail = "BUFFERED", f"waiting for instance {last}"
            if outcome == "STARTED":
                outcome, iid, detail = self._start(conn, sched, slot["slot_time"])
                if iid is not None:
                    if slot["status"] == "BUFFERED":
                        buffered = False
                    running, last = True, iid
                    conn.execute(schedule_sql.SET_LAST_INSTANCE, {"id": sid, "instance_id": iid})
                    lateness = (now - slot["slot_time"]).total_seconds() * 1000
                    self.metrics.add("ScheduleLateness", max(0.0, lateness), "Milliseconds")
            conn.execute(
                schedule_sql.SETTLE_SLOT,
                {
                    "id": sid,
                    "slot_time": slot["slot_time"],
                    "status": outcome,
                    "instance_id": iid,
                    "detail": detail,
                },
            )
            counts[outcome] += 1
        return counts

    def _start(
        self, conn: Conn, sched: dict[str, Any], slot: datetime
    ) -> tuple[str, uuid.UUID | None, str | None]:
        sid = sched["id"]
        key = f"schedule:{sid}:{iso(slot)}"
        try:
            with conn.transaction():  # a savepoint: a refused start fails its slot only
                stored = conn.execute(
                    definition_sql.DEFINITION_WITH_TASK_DEFS,
                    {"name": sched["definition_name"], "version": sched["definition_version"]},
                ).fetchone()
                if stored is None:
                    version = sched["definition_version"]
                    which = "" if version is None else f" version {version}"
                    return (
                        "FAILED",
                        None,
                        f"definition {sched['definition_name']!r}{which} not found",
                    )
                snapshot_id, plan = self.engine.snapshots.of_stored(conn, stored)
                data = resolve_input(
                    sched["input"], {"schedule.time": iso(slot), "schedule.id": sid}
                )
                started = self.engine.start_in(
                    conn,
                    plan,
                    snapshot_id,
                    name=stored["name"],
                    version=stored["version"],
                    input=data,
                    correlation_id=key,
                    idempotency_key=key,
                    commit=False,
                )
        except BatonError as e:
            log.warning("schedule slot not started", extra={"schedule_id": sid, "error": e.detail})
            return "FAILED", None, e.detail
        log.info(
            "schedule slot fired",
            extra={"schedule_id": sid, "slot": iso(slot), "instance_id": str(started.id)},
        )
        return "STARTED", started.id, None
