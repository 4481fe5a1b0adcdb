"""The scheduled duties: the lease reaper and the sweeper (timeouts). Every wake-up is a row with a
due time, found by an indexed query; nothing here keeps an in-memory timer."""

from __future__ import annotations

import uuid

from baton.engine import writer
from baton.engine.core import EngineCore, log
from baton.status import InstanceStatus, JobStatus
from baton.store import instance_sql, job_sql
from baton.store.db import Conn, first_in_transaction


class Duties(EngineCore):
    def reap_expired_leases(self, limit: int = 1000) -> int:
        """Turn lapsed leases into the jobs' next attempts, or, with no retries left, fail their
        steps (the lease reaper). Returns the number of leases that lapsed."""
        row = self.db.autocommit(
            lambda c: c.execute(job_sql.REAP_EXPIRED, {"limit": limit}).fetchone()
        )
        assert row is not None
        exhausted = sum(self._lease_exhausted(jid) for jid in row["exhausted"])
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
                or row["status"] != InstanceStatus.RUNNING
            ):
                return 0  # settled, renewed or claimed meanwhile
            job = writer.job_ref(row)
            self._decide(conn, row, lambda d: d.lease_exhausted(job, row["lease_seconds"]))
            return 1

        return self.db.transaction(work, explicit_begin=True)

    def sweep(self, limit: int = 500) -> dict[str, int]:
        """Enforce every timeout whose due time has passed (the sweeper): instances'
        ``timeoutSeconds``, and jobs' ``timeoutSeconds`` and ``pollTimeoutSeconds``."""
        due = self.db.autocommit(
            lambda c: c.execute(instance_sql.TIMED_OUT_DUE, {"limit": limit}).fetchall()
        )
        instances = sum(self._time_out_instance(r["id"]) for r in due)
        jobs = self.db.autocommit(
            lambda c: c.execute(job_sql.PAST_DEADLINE, {"limit": limit}).fetchall()
        )
        attempts = sum(self._time_out_job(r["id"]) for r in jobs)
        return {"instancesTimedOut": instances, "jobTimeouts": attempts}

    def _time_out_job(self, jid: uuid.UUID) -> int:
        def work(conn: Conn) -> int:
            row = first_in_transaction(
                conn, job_sql.LOCK_JOB_WITH_INSTANCE_OR_SKIP, {"job_id": jid}
            )
            if (
                row is None  # being decided elsewhere: the next pass sees what came of it
                or not row["past_deadline"]
                or row["job_status"] not in (JobStatus.UNLOCKED, JobStatus.LOCKED)
                or row["status"] != InstanceStatus.RUNNING
            ):
                return 0
            job = writer.job_ref(row)
            waiting = row["job_status"] == JobStatus.UNLOCKED
            self._decide(conn, row, lambda d: d.job_timed_out(job, waiting=waiting))
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
