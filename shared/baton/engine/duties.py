"""The scheduled duties: the lease reaper and the sweeper (timeouts). Every wake-up is a row with a
due time, found by an indexed query; nothing here keeps an in-memory timer."""

from __future__ import annotations

import uuid
from typing import Any

from baton import jsontext
from baton.engine import writer
from baton.engine.archive_ops import ArchiveOps
from baton.engine.core import log
from baton.engine.decide import Decider
from baton.engine.instance_ops import InstanceOps
from baton.engine.operators.sub_workflow import FAILURE_WORKFLOW_EVENT, start_failure_workflow
from baton.engine.reads import exec_from_row
from baton.status import InstanceStatus, JobStatus, StepStatus
from baton.store import definition_sql, instance_sql, job_sql
from baton.store.db import Conn, first_in_transaction

# Instances whose work in flight still counts: a paused one's jobs finish and time out as usual.
LIVE = (InstanceStatus.RUNNING, InstanceStatus.PAUSED)
# How long a worker's stop signal is kept (it matters to the waits of its moment: 20 s at most).
WORKER_STOP_KEPT_SECONDS = 600


class Duties(ArchiveOps, InstanceOps):
    def reap_expired_leases(self, limit: int = 1000) -> int:
        """Turn lapsed leases into the jobs' next attempts, or, with no retries left, fail their
        steps (the lease reaper). Returns the number of leases that lapsed."""
        row = self.db.autocommit(
            lambda c: c.execute(job_sql.REAP_EXPIRED, {"limit": limit}).fetchone()
        )
        assert row is not None
        exhausted = sum(self._lease_exhausted(jid) for jid in row["exhausted"])
        self.deliver_pending()
        n = int(row["n"]) + exhausted
        if n:
            self.metrics.add("LeasesExpired", n)
            log.info("expired leases returned", extra={"count": n, "exhausted": exhausted})
        return n

    def _lease_exhausted(self, jid: uuid.UUID) -> int:
        def work(conn: Conn) -> int:
            row = first_in_transaction(conn, job_sql.LOCK_JOB_WITH_INSTANCE, {"job_id": jid})
            if (
                row is None
                or row["job_status"] != JobStatus.LOCKED
                or not row["lease_lapsed"]
                or row["retries_remaining"] > 0
                or row["status"] not in LIVE
            ):
                return 0  # settled, renewed or claimed meanwhile
            job = writer.job_ref(row)
            self._decide(conn, row, lambda d: d.lease_exhausted(job, row["lease_seconds"]))
            return 1

        return self.db.transaction(work, explicit_begin=True)

    def sweep(self, limit: int = 500) -> dict[str, int]:
        """Enforce every timeout whose due time has passed (the sweeper): instances'
        ``timeoutSeconds``, and jobs' ``timeoutSeconds`` and ``pollTimeoutSeconds``; fire due
        timers, deliver left-over events, retire the payloads of ended instances and archive
        those past their retention."""
        due = self.db.autocommit(
            lambda c: c.execute(instance_sql.TIMED_OUT_DUE, {"limit": limit}).fetchall()
        )
        instances = sum(self._time_out_instance(r["id"]) for r in due)
        jobs = self.db.autocommit(
            lambda c: c.execute(job_sql.PAST_DEADLINE, {"limit": limit}).fetchall()
        )
        attempts = sum(self._time_out_job(r["id"]) for r in jobs)
        timers = self.db.autocommit(
            lambda c: c.execute(instance_sql.TIMERS_DUE, {"limit": limit}).fetchall()
        )
        fired = sum(self._fire_timer(r["instance_id"], r["id"]) for r in timers)
        # The backstop for events a committed decision left for another instance (delivered
        # at once by the operation that made them, unless it was cut off).
        pending = self.db.autocommit(
            lambda c: c.execute(instance_sql.INSTANCES_WITH_EVENTS, {"limit": limit}).fetchall()
        )
        delivered = sum(self.deliver_events(r["instance_id"], wait=False) for r in pending)
        self.deliver_pending()
        # Workers' stop signals outlive every wait they could end (20 s at most) by far.
        self.db.autocommit(
            lambda c: c.execute(job_sql.FORGET_WORKER_STOPS, {"seconds": WORKER_STOP_KEPT_SECONDS})
        )
        if fired:
            self.metrics.add("TimersFired", fired)
        return {
            "instancesTimedOut": instances,
            "jobTimeouts": attempts,
            "timersFired": fired,
            "eventsDelivered": delivered,
            # Payload objects of ended instances tagged for expiry (0 without a bucket)
            "payloadsRetired": self.retire_payloads(),
            # Terminal instances past their retention moved to the archive (0: no retention)
            "instancesArchived": self.archive_expired(),
        }

    def _fire_timer(self, iid: uuid.UUID, exec_id: uuid.UUID) -> int:
        def work(conn: Conn) -> int:
            row = first_in_transaction(conn, instance_sql.LOCK_INSTANCE_OR_SKIP, {"id": iid})
            if row is None or row["status"] != InstanceStatus.RUNNING:
                return 0  # being decided elsewhere (the next pass fires it), or paused or ended
            found = conn.execute(instance_sql.EXECUTION, {"id": exec_id}).fetchone()
            if found is None or found["status"] != StepStatus.IN_PROGRESS:
                return 0
            e = exec_from_row(found)
            self._decide(conn, row, lambda d: d.timer_fired(e))
            return 1

        return self.db.transaction(work, explicit_begin=True)

    def deliver_events(self, iid: uuid.UUID, *, wait: bool = True) -> int:
        """Act on the events other transactions left for instance ``iid`` (a child ended, a
        parent asks it to cancel) and those it left itself when it ended (its failure workflow
        to start), in one decision that locks it; returns how many. ``wait`` False skips an
        instance being decided elsewhere (the sweeper comes back to it)."""

        def work(conn: Conn) -> int:
            lock = instance_sql.LOCK_INSTANCE if wait else instance_sql.LOCK_INSTANCE_OR_SKIP
            row = first_in_transaction(conn, lock, {"id": iid})
            if row is None:
                return 0
            events = conn.execute(
                instance_sql.EVENTS_OF_INSTANCE,
                {"id": iid, "kinds": ["CHILD_ENDED", "CANCEL", FAILURE_WORKFLOW_EVENT]},
            ).fetchall()
            if not events:
                return 0
            failures = [e for e in events if e["kind"] == FAILURE_WORKFLOW_EVENT]
            others = [e for e in events if e["kind"] != FAILURE_WORKFLOW_EVENT]
            if others and row["status"] not in LIVE:  # it ended meanwhile: nothing to act on
                conn.execute(
                    instance_sql.DELETE_EVENTS,
                    {"instance_id": iid, "ids": [e["id"] for e in others]},
                )
                others = []
            if not failures and not others:
                return len(events)
            output, view = self._failed_reads(conn, iid) if failures else (None, None)

            def act(d: Decider) -> None:
                for e in failures:
                    d.changes.consumed_events.append(e["id"])
                    start_failure_workflow(d, e["payload"], output, view)
                _act_on_events(d, others)

            self._decide(conn, row, act)
            return len(events)

        return self.db.transaction(work, explicit_begin=True)

    def _failed_reads(self, conn: Conn, iid: uuid.UUID) -> tuple[Any, dict[str, Any] | None]:
        """What the failure workflow of ``iid`` (which has ended) is told of it besides what its
        event says, read on ``conn``: its output, and Conductor's view of it (``failed_view``;
        None without one). The view's tasks are left out when their JSON is above
        ``max_payload_bytes`` and no payload bucket would take it."""
        extras: dict[str, Any] = {}
        viewed = self.failed_view is not None
        row, steps = self._read_instance(conn, iid, extras, viewed, viewed)
        if row is None:
            return None, None
        if self.failed_view is None:
            return row["output"], None
        instance = self._instance_view(row, steps, str(iid))
        instance.update(extras)
        source = None
        if row["definition_version"] is not None:
            found = conn.execute(
                definition_sql.GET_VERSION,
                {"name": row["definition_name"], "version": row["definition_version"]},
            ).fetchone()
            source = None if found is None else found.get("conductor")
        audit = self._audit_view(
            conn.execute(instance_sql.AUDIT_OF_INSTANCE, {"id": iid}).fetchall()
        )
        view = dict(self.failed_view(instance, audit, source))
        tasks = view.get("tasks") or []
        if self.offload is None and len(jsontext.dumps(tasks)) > self.settings.max_payload_bytes:
            log.warning(
                "failed workflow's tasks left out of its failure workflow's input (too large)",
                extra={"instance_id": str(iid), "tasks": len(tasks)},
            )
            view.pop("tasks", None)
        return row["output"], view

    def _time_out_job(self, jid: uuid.UUID) -> int:
        def work(conn: Conn) -> int:
            row = first_in_transaction(
                conn, job_sql.LOCK_JOB_PAST_DEADLINE_OR_SKIP, {"job_id": jid}
            )
            if (
                row is None  # being decided elsewhere: the next pass sees what came of it
                or not row["past_deadline"]
                or row["job_status"] not in (JobStatus.UNLOCKED, JobStatus.LOCKED)
                or row["status"] not in LIVE
            ):
                return 0
            job = writer.job_ref(row)
            waiting = row["job_status"] == JobStatus.UNLOCKED
            budget = not row["own_deadline_passed"]  # the step's totalTimeoutSeconds came
            self._decide(conn, row, lambda d: d.job_timed_out(job, waiting=waiting, budget=budget))
            return 1

        return self.db.transaction(work, explicit_begin=True)

    def _time_out_instance(self, iid: uuid.UUID) -> int:
        def work(conn: Conn) -> int:
            row = first_in_transaction(conn, instance_sql.LOCK_INSTANCE_IF_DUE, {"id": iid})
            if row is None:
                return 0  # completed or changed meanwhile
            self._decide(conn, row, lambda d: d.workflow_timed_out())
            return 1

        return self.db.transaction(work, explicit_begin=True)


def _act_on_events(d: Decider, events: list[dict[str, Any]]) -> None:
    for event in events:
        payload = event["payload"] or {}
        if event["kind"] == "CANCEL":
            d.changes.consumed_events.append(event["id"])
            if d.active:
                d.cancel(str(payload.get("reason") or "cancelled by its parent"))
            continue
        exec_id = event["step_execution_id"]
        e = None if exec_id is None else d.reader.execution(exec_id)
        child = payload.get("childId")
        if e is None or str(e.child_instance_id) != child:
            d.changes.consumed_events.append(event["id"])  # from a child the step moved on from
            continue
        d.child_ended(
            e, payload.get("status", ""), payload.get("output"), payload.get("reason"), event["id"]
        )
