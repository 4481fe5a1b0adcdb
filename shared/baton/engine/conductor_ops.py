"""What the Conductor-compatible surface needs beyond the workers' ``/v1`` operations: a lease
for the task definition's ``responseTimeoutSeconds`` (Conductor workers never heartbeat), the
IN_PROGRESS callback (the same attempt handed out again later), lease extension, and task logs
kept with their job in the audit log."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg.types.json import Jsonb

from baton.engine import views
from baton.engine.core import EngineCore
from baton.engine.ids import parse_uuid
from baton.errors import JobNotFound
from baton.store import conductor_sql, job_sql

# Conductor's default responseTimeoutSeconds for a task type without a task definition.
CONDUCTOR_RESPONSE_TIMEOUT_SECONDS = 3600
# Conductor's search counts its hits up to this many (and pages no further).
SEARCH_CAP = 10_000


class ConductorOps(EngineCore):
    def search_for_conductor(
        self,
        *,
        conditions: Sequence[conductor_sql.Condition] = (),
        free_text: str | None,
        start: int,
        size: int,
        sort: Sequence[tuple[str, str]] = (),
    ) -> tuple[int, list[dict[str, Any]]]:
        """Conductor's workflow search: the total hits (up to ``SEARCH_CAP``) and the instances
        from ``start`` that meet every condition, in ``sort``'s order (column, ASC or DESC),
        then newest first (``free_text``: a workflow id or a correlation id)."""
        count, page, params = conductor_sql.search_sql(conditions, sort)
        params.update(free=free_text, start=min(start, SEARCH_CAP), size=size, cap=SEARCH_CAP)

        def work(conn: Any) -> tuple[int, list[dict[str, Any]]]:
            total = conn.execute(count, params).fetchone()
            rows = conn.execute(page, params).fetchall()
            return int(total["n"]) if total else 0, [views.instance(r) for r in rows]

        return self.db.autocommit(work)

    def lease_for_conductor(self, job_ids: list[str], worker_id: str) -> dict[str, Any]:
        """Lease freshly claimed jobs that run on Baton's default lease for Conductor's default
        responseTimeoutSeconds instead; returns the new expiry by job id."""
        if not job_ids:
            return {}
        rows = self.db.autocommit(
            lambda c: c.execute(
                conductor_sql.LEASE_FOR_CONDUCTOR,
                {
                    "ids": job_sql.uuid_text_array(job_ids),
                    "worker_id": worker_id,
                    "seconds": CONDUCTOR_RESPONSE_TIMEOUT_SECONDS,
                    "default_seconds": self.settings.default_lease_seconds,
                },
            ).fetchall()
        )
        return {str(r["id"]): r["lock_expires_at"] for r in rows}

    def task_references(self, job_ids: list[str]) -> dict[str, tuple[str | None, int | None]]:
        """How Conductor names each job's task, by job id: a dynamic fork's task's reference
        (its item's key; None: the step's id) and the iteration of the innermost DO_WHILE it
        runs in (None: in none)."""
        if not job_ids:
            return {}
        rows = self.db.autocommit(
            lambda c: c.execute(
                conductor_sql.TASK_REFERENCES, {"ids": job_sql.uuid_text_array(job_ids)}
            ).fetchall()
        )
        return {str(r["id"]): (r["reference"], r["iteration"]) for r in rows}

    def job_state(self, job_id: str) -> dict[str, Any]:
        """A job's status, attempt and lease holder with its instance's status."""
        jid = parse_uuid(job_id, "taskId")
        row = self.db.autocommit(
            lambda c: c.execute(conductor_sql.JOB_STATE, {"job_id": jid}).fetchone()
        )
        if row is None:
            raise JobNotFound(job_id)
        return dict(row)

    def postpone_job(
        self, job_id: str, worker_id: str, seconds: int, *, attempt: int | None = None
    ) -> bool:
        """Hand a leased job back, due again in ``seconds``, same attempt (False: not held)."""
        jid = parse_uuid(job_id, "taskId")
        row = self.db.autocommit(
            lambda c: c.execute(
                conductor_sql.POSTPONE,
                {"job_id": jid, "worker_id": worker_id, "seconds": seconds, "attempt": attempt},
            ).fetchone()
        )
        return row is not None

    def extend_lease(self, job_id: str, worker_id: str) -> bool:
        jid = parse_uuid(job_id, "taskId")
        row = self.db.autocommit(
            lambda c: c.execute(
                conductor_sql.EXTEND, {"job_id": jid, "worker_id": worker_id}
            ).fetchone()
        )
        return row is not None

    def add_task_logs(self, job_id: str, attempt: int, logs: list[dict[str, Any]]) -> None:
        """Keep a task result's logs with its job (audit event TASK_LOGS)."""
        if not logs:
            return
        jid = parse_uuid(job_id, "taskId")
        self.db.autocommit(
            lambda c: c.execute(
                conductor_sql.ADD_LOGS, {"job_id": jid, "attempt": attempt, "logs": Jsonb(logs)}
            )
        )

    def task_logs(self, job_id: str) -> list[dict[str, Any]]:
        jid = parse_uuid(job_id, "taskId")
        rows = self.db.autocommit(
            lambda c: c.execute(conductor_sql.LOGS_OF_JOB, {"job_id": jid}).fetchall()
        )
        out: list[dict[str, Any]] = []
        for r in rows:
            out.extend(r["detail"].get("logs") or [])
        return out
