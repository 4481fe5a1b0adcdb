"""Named priority queues: push, dequeue, ack/nack, stats, peek, purge.

Dequeue order is priority descending, then oldest first, claimed with SKIP LOCKED. A dequeued
task is invisible until its visibility timeout; a lapse or a failure raises ``retryCount`` and
returns it to ``pending``, or to ``dead`` at ``maxRetries``. Only the holder of the current
``receipt`` can ack or nack, so a consumer that lost its claim cannot settle someone else's.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from baton.engine import views
from baton.engine.ids import parse_uuid
from baton.engine.service import Engine
from baton.errors import Conflict, NotFound, Problem, ValidationFailed
from baton.model import QUEUE_NAME_PATTERN, QUEUE_NAME_RULE
from baton.status import QueueTaskStatus
from baton.store import queue_sql
from baton.store.db import Conn

_QUEUE_NAME = re.compile(QUEUE_NAME_PATTERN)
DEFAULT_VISIBILITY_SECS = 300
DEFAULT_MAX_RETRIES = 3
RECYCLE_BATCH = 500


def check_queue_name(name: str) -> str:
    """``name`` if it is a valid queue name, else a validation problem naming the rule."""
    if not _QUEUE_NAME.fullmatch(name):
        rule = f"{name!r} is not a valid queue name: {QUEUE_NAME_RULE}"
        raise ValidationFailed([Problem("queueName", rule)], detail=rule)
    return name


def _task_view(row: dict[str, Any]) -> dict[str, Any]:
    out = {
        "id": str(row["id"]),
        "queueName": row["queue_name"],
        "title": row["title"],
        "body": row["body"],
        "priority": row["priority"],
        "retryCount": row["retry_count"],
        "maxRetries": row["max_retries"],
        "createdAt": views.ts(row["created_at"]),
    }
    if row.get("receipt") is not None:
        out["receipt"] = str(row["receipt"])
        out["visibleAt"] = views.ts(row["visibility_expires_at"])
    return out


class Queues:
    """Queue operations over the engine's database."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.db = engine.db
        self.metrics = engine.metrics

    # --- producers and consumers ----------------------------------------------------------------

    def push(
        self,
        queue: str,
        title: str,
        body: str = "",
        priority: int = 0,
        max_retries: int = DEFAULT_MAX_RETRIES,
    ) -> dict[str, Any]:
        """Add a task to ``queue`` (one autocommit statement)."""
        check_queue_name(queue)
        # One statement, autocommit: one round trip and one commit per push.
        row = self.db.autocommit(
            lambda c: c.execute(
                queue_sql.PUSH,
                {
                    "id": uuid.uuid4(),
                    "queue": queue,
                    "title": title,
                    "body": body,
                    "priority": priority,
                    "max_retries": max_retries,
                },
            ).fetchone()
        )
        assert row is not None
        return {
            "id": str(row["id"]),
            "queueName": row["queue_name"],
            "status": row["status"],
            "priority": row["priority"],
            "createdAt": views.ts(row["created_at"]),
        }

    def dequeue(
        self,
        queue: str,
        consumer_id: str,
        *,
        visibility_timeout_secs: int = DEFAULT_VISIBILITY_SECS,
        max_tasks: int = 1,
    ) -> list[dict[str, Any]]:
        """Claim up to ``max_tasks`` pending tasks, invisible to others until the timeout."""
        check_queue_name(queue)

        def work(conn: Conn) -> list[dict[str, Any]]:
            # Lapse expired claims first so they are visible to this very dequeue; both
            # statements travel in one pipelined round trip.
            with conn.pipeline():
                recycled = conn.execute(
                    queue_sql.RECYCLE_EXPIRED, {"queue": queue, "limit": RECYCLE_BATCH}
                )
                claimed = conn.execute(
                    queue_sql.DEQUEUE,
                    {
                        "queue": queue,
                        "consumer": consumer_id,
                        "visibility": visibility_timeout_secs,
                        "max_tasks": max_tasks,
                    },
                )
            self._count_dead(recycled.fetchall())
            return claimed.fetchall()

        rows = self.db.autocommit(work)
        for r in rows:
            self.metrics.add(
                "QueueDispatchLatency", r["latency"].total_seconds() * 1000, "Milliseconds"
            )
        return [_task_view(r) for r in rows]

    def ack(self, queue: str, task_id: str, receipt: str) -> dict[str, Any]:
        """Complete a dequeued task; only the current receipt may. A repeat is harmless."""
        tid, rcpt = parse_uuid(task_id, "taskId"), parse_uuid(receipt, "receipt")

        def work(conn: Conn) -> dict[str, Any]:
            row = conn.execute(
                queue_sql.ACK, {"id": tid, "queue": queue, "receipt": rcpt}
            ).fetchone()
            if row is None:
                state = self._state(conn, queue, tid, task_id)
                if (
                    state["status"] == QueueTaskStatus.COMPLETED and state["receipt"] == rcpt
                ):  # a repeat
                    return {"id": task_id, "status": "completed", "applied": False}
                raise Conflict(self._why(state, rcpt))
            return {"id": task_id, "status": "completed", "applied": True}

        return self.db.autocommit(work)

    def nack(
        self,
        queue: str,
        task_id: str,
        receipt: str,
        error: str | None = None,
        retryable: bool = True,
    ) -> dict[str, Any]:
        """Fail a dequeued task: back to pending, to dead at maxRetries, or failed."""
        tid, rcpt = parse_uuid(task_id, "taskId"), parse_uuid(receipt, "receipt")

        def work(conn: Conn) -> dict[str, Any]:
            row = conn.execute(
                queue_sql.NACK,
                {
                    "id": tid,
                    "queue": queue,
                    "receipt": rcpt,
                    "error": error,
                    "retryable": retryable,
                },
            ).fetchone()
            if row is None:
                raise Conflict(self._why(self._state(conn, queue, tid, task_id), rcpt))
            if row["status"] == QueueTaskStatus.DEAD:
                self.metrics.add("QueueDeadLettered", 1)
            return {"id": task_id, "status": row["status"], "retryCount": row["retry_count"]}

        return self.db.autocommit(work)

    def _state(self, conn: Conn, queue: str, tid: uuid.UUID, task_id: str) -> dict[str, Any]:
        state = conn.execute(queue_sql.TASK_STATE, {"id": tid, "queue": queue}).fetchone()
        if state is None:
            raise NotFound("queue task", task_id)
        return state

    @staticmethod
    def _why(state: dict[str, Any], receipt: uuid.UUID) -> str:
        if state["status"] != QueueTaskStatus.PROCESSING:
            return f"task is {state['status']}, not processing"
        return "the receipt is not current: the claim lapsed and the task was dequeued again"

    def stats(self, queue: str) -> dict[str, int]:
        """Task counts by status."""
        check_queue_name(queue)
        rows = self.db.autocommit(lambda c: c.execute(queue_sql.STATS, {"queue": queue}).fetchall())
        counts = {s.value: 0 for s in QueueTaskStatus}
        counts.update({r["status"]: int(r["n"]) for r in rows})
        return counts

    def peek(self, queue: str, limit: int = 10) -> dict[str, Any]:
        """Pending tasks in dequeue order, without claiming them."""
        check_queue_name(queue)
        if not 1 <= limit <= 100:
            raise ValidationFailed([Problem("limit", "must be between 1 and 100")])
        rows = self.db.autocommit(
            lambda c: c.execute(queue_sql.PEEK, {"queue": queue, "limit": limit}).fetchall()
        )
        return {"tasks": [_task_view(r) for r in rows]}

    def purge(self, queue: str) -> dict[str, int]:
        """Delete every task of ``queue``, whatever its status."""
        check_queue_name(queue)
        deleted = self.db.transaction(
            lambda c: c.execute(queue_sql.PURGE, {"queue": queue}).rowcount
        )
        return {"deleted": deleted}

    def recycle(self, conn: Conn, queue: str | None, limit: int = RECYCLE_BATCH) -> int:
        """Lapse expired claims (of one queue, or every queue) in the caller's unit of work."""
        rows = conn.execute(queue_sql.RECYCLE_EXPIRED, {"queue": queue, "limit": limit}).fetchall()
        self._count_dead(rows)
        return len(rows)

    def _count_dead(self, rows: list[dict[str, Any]]) -> None:
        dead = sum(1 for r in rows if r["status"] == QueueTaskStatus.DEAD)
        if dead:
            self.metrics.add("QueueDeadLettered", dead)
