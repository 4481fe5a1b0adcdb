"""The scheduled duties: the lease reaper and the sweeper (timeouts). Every wake-up is a row with a
due time, found by an indexed query; nothing here keeps an in-memory timer."""

from __future__ import annotations

import uuid

from baton.engine.core import EngineCore, log
from baton.store import instance_sql, job_sql
from baton.store.db import Conn, first_in_transaction


class Duties(EngineCore):
    def reap_expired_leases(self, limit: int = 1000) -> int:
        """Return expired leases to UNLOCKED and count them (the lease reaper)."""
        row = self.db.autocommit(
            lambda c: c.execute(job_sql.REAP_EXPIRED, {"limit": limit}).fetchone()
        )
        n = int(row["n"]) if row else 0
        if n:
            self.metrics.add("LeasesExpired", n)
            log.info("expired leases returned", extra={"count": n})
        return n

    def sweep(self, limit: int = 500) -> dict[str, int]:
        """Enforce instance timeouts whose due time has passed (the sweeper)."""
        due = self.db.autocommit(
            lambda c: c.execute(instance_sql.TIMED_OUT_DUE, {"limit": limit}).fetchall()
        )
        timed_out = sum(self._time_out_instance(r["id"]) for r in due)
        return {"instancesTimedOut": timed_out}

    def _time_out_instance(self, iid: uuid.UUID) -> int:
        def work(conn: Conn) -> int:
            row = first_in_transaction(conn, instance_sql.LOCK_INSTANCE_IF_DUE, {"id": iid})
            if row is None:
                return 0  # completed or changed meanwhile
            self._decide(conn, row, lambda d: d.workflow_timed_out())
            return 1

        return self.db.transaction(work, explicit_begin=True)
