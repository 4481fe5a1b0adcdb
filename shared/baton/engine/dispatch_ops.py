"""The event-driven dispatch mode (``BATON_DISPATCH_MODE=outbox``, docs/dispatch.md): the relay
that drains the outbox to the broker, and the claim by id with which a worker takes the lease on
a job the broker delivered.

The relay is elected per drain transaction by ``pg_try_advisory_xact_lock``: a relay that does not
get the lock does nothing, the one that does publishes the due rows and marks them relayed in that
same transaction. Publishing happens only while the lock is held, and the marks become visible
before the lock is released (commit makes them visible, then releases locks), so two relays never
publish one row twice; a relay that dies after publishing but before its commit leaves the rows
pending, and the next holder publishes them again with the same deduplication id (job id +
attempt), which the broker drops within its window and a claim by id refuses after it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Protocol

from baton.engine import views
from baton.engine.core import log
from baton.engine.ids import parse_uuid
from baton.engine.job_ops import JobOps
from baton.errors import JobNotClaimable, JobNotFound, JobThrottled
from baton.store import job_sql, outbox_sql
from baton.store.db import Conn, first_in_transaction

# Relayed rows are kept this long (past SQS FIFO's 5-minute deduplication window), then pruned.
RELAYED_KEEP_SECONDS = 900


@dataclass(frozen=True, slots=True)
class Dispatch:
    """One outbox row on its way to the broker."""

    outbox_id: int
    job_id: str
    instance_id: str
    job_type: str
    attempt: int

    @property
    def deduplication_id(self) -> str:
        return f"{self.job_id}-{self.attempt}"

    def body(self) -> dict[str, Any]:
        return {
            "jobId": self.job_id,
            "instanceId": self.instance_id,
            "jobType": self.job_type,
            "attempt": self.attempt,
        }


class Publisher(Protocol):
    def publish(self, dispatches: list[Dispatch]) -> set[int]:
        """Send ``dispatches`` in order; return the outbox ids the broker accepted."""


class DispatchOps(JobOps):
    def take_job(self, job_id: str, worker_id: str, *, attempt: int | None = None) -> bool:
        """Lease a waiting job to ``worker_id`` for a result it gives without having polled
        (Conductor applies an update to a task by its id, polled or not): ``claim_job`` due or
        not (a job of a type with limits only when due; ``JobThrottled`` at its limit). False
        when it could not be taken (taken or ended meanwhile: the caller reads it again)."""
        try:
            self.claim_job(job_id, worker_id, attempt=attempt, due_only=False)
        except JobNotClaimable:
            return False
        return True

    def claim_job(
        self,
        job_id: str,
        worker_id: str,
        *,
        attempt: int | None = None,
        due_only: bool = True,
    ) -> dict[str, Any]:
        """Take the lease on one job by id, if it is still claimable (at ``attempt``, when
        given): the job in a poll's wire form. A duplicate or stale delivery raises
        ``JobNotClaimable``; a job type at its limit raises ``JobThrottled``. ``due_only``
        False takes a job of a type without limits before it is due too (``take_job``)."""
        jid = parse_uuid(job_id, "jobId")
        rows = self.db.autocommit(
            lambda c: job_sql.claim_by_id(
                c, job_id=jid, worker_id=worker_id, attempt=attempt, due_only=due_only
            )
        )
        if not rows:
            state = self.db.autocommit(
                lambda c: c.execute(job_sql.CLAIM_REFUSAL, {"job_id": jid}).fetchone()
            )
            if state is None:
                raise JobNotFound(job_id)
            waiting = state["status"] == "UNLOCKED" and not state["not_due"]
            if attempt is not None and attempt != state["attempt"]:
                raise JobNotClaimable(job_id, f"it is on attempt {state['attempt']}, not {attempt}")
            if not waiting:
                why = "it is not due yet" if state["not_due"] else f"it is {state['status']}"
                raise JobNotClaimable(job_id, why)
            if not state["limited"]:
                raise JobNotClaimable(job_id, "it was taken meanwhile")
            rows, grants = self.db.autocommit(
                lambda c: job_sql.claim_limited_by_id(
                    c,
                    job_id=jid,
                    job_type=state["job_type"],
                    worker_id=worker_id,
                    attempt=attempt,
                )
            )
            self._report_limits(rows, grants)
            if not rows:
                if any(g["grant_now"] == 0 for g in grants):
                    raise JobThrottled(job_id, state["job_type"])
                raise JobNotClaimable(job_id, "it was taken meanwhile")
        self._report_claimed_rows(rows)
        return views.claimed_job(rows[0])

    def relay_outbox(
        self, publisher: Publisher, *, batch: int = 100, max_batches: int = 50, report: bool = True
    ) -> dict[str, int]:
        """Drain the due outbox rows to ``publisher`` if this relay wins the election, one
        transaction per batch. ``report``: also prune old relayed rows and report relay lag and
        outbox depth (a relay draining several times a second does it once a second). Returns
        the counts (``depth`` -1 when not reported)."""
        relayed = skipped = batches = 0
        elected = False
        for _ in range(max_batches):
            outcome = self.db.transaction(
                lambda c: self._relay_batch(c, publisher, batch), explicit_begin=True
            )
            if outcome is None:
                break  # another relay holds the lock: it drains
            elected = True
            batches += 1
            sent, stale, full = outcome
            relayed += sent
            skipped += stale
            if not full:
                break
        if not report:
            if relayed:
                self.metrics.add("OutboxRelayed", relayed)
            return {
                "relayed": relayed,
                "skipped": skipped,
                "pruned": 0,
                "elected": int(elected),
                "batches": batches,
                "depth": -1,
            }
        pruned = 0
        if elected:
            pruned = self.db.autocommit(
                lambda c: (
                    c.execute(
                        outbox_sql.PRUNE, {"keep_seconds": RELAYED_KEEP_SECONDS, "limit": 5000}
                    ).rowcount
                )
            )
        backlog = self.db.autocommit(lambda c: c.execute(outbox_sql.BACKLOG).fetchone())
        assert backlog is not None
        m = self.metrics
        if relayed:
            m.add("OutboxRelayed", relayed)
        m.add("OutboxDepth", int(backlog["depth"]))
        m.add("RelayLag", float(backlog["lag_seconds"]) * 1000, "Milliseconds")
        return {
            "relayed": relayed,
            "skipped": skipped,
            "pruned": max(pruned, 0),
            "elected": int(elected),
            "batches": batches,
            "depth": int(backlog["depth"]),
        }

    def _relay_batch(
        self, conn: Conn, publisher: Publisher, batch: int
    ) -> tuple[int, int, bool] | None:
        """One drain transaction: None if not elected, else (published, skipped, batch full).
        Publishing happens inside it, before the marks commit (see the module docstring)."""
        lead = first_in_transaction(conn, outbox_sql.TRY_LEAD, {"key": outbox_sql.RELAY_LOCK_KEY})
        if lead is None or not lead["leader"]:
            conn.execute(b"ROLLBACK", prepare=False)
            return None
        rows = conn.execute(outbox_sql.DUE, {"limit": batch}).fetchall()
        live = [
            Dispatch(r["id"], str(r["job_id"]), str(r["instance_id"]), r["job_type"], r["attempt"])
            for r in rows
            if r["live"]
        ]
        started = time.monotonic()
        accepted = publisher.publish(live) if live else set()
        done = [r["id"] for r in rows if not r["live"] or r["id"] in accepted]
        conn.execute(outbox_sql.MARK_RELAYED, {"ids": done})
        conn.execute(b"COMMIT", prepare=False)
        if live:
            log.info(
                "outbox relayed",
                extra={
                    "published": len(accepted),
                    "failed": len(live) - len(accepted),
                    "skipped": len(rows) - len(live),
                    "firstJobId": live[0].job_id,
                    "publishMillis": round((time.monotonic() - started) * 1000, 1),
                },
            )
        # A batch with a refused message is not "full": the rest waits for the next pass.
        return len(accepted), len(rows) - len(live), len(rows) == batch and len(done) == len(rows)
