"""Named priority queues (reference 004) and queue-triggered workflows.

Dequeue order is priority descending, then oldest first, claimed with SKIP LOCKED. A dequeued
task is invisible until its visibility timeout; a lapse or a failure raises ``retryCount`` and
returns it to ``pending``, or to ``dead`` at ``maxRetries``. Only the holder of the current
``receipt`` can ack or nack, so a consumer that lost its claim cannot settle someone else's.

A definition with an enabled queue trigger consumes its queue through the dispatcher (a scheduled
function, also nudged right after a push): one instance per task, started in the same transaction
that claims the task, and the instance's end settles the task in the transaction that ends it.
"""

from __future__ import annotations

import logging
import re
import uuid
from typing import Any

from baton.definitions import QUEUE_NAME_PATTERN, QUEUE_NAME_RULE, WorkflowDefinition
from baton.engine import views
from baton.engine.service import Engine, _uuid
from baton.errors import Conflict, NotFound, Problem, ValidationFailed
from baton.store import definitions as defs_sql
from baton.store import queues as q_sql
from baton.store.db import Conn

log = logging.getLogger("baton.queues")

_QUEUE_NAME = re.compile(QUEUE_NAME_PATTERN)
STATES = ("pending", "processing", "completed", "failed", "dead")
DEFAULT_VISIBILITY_SECS = 300
DEFAULT_MAX_RETRIES = 3
# A triggered instance times out at the visibility timeout (the sweeper fails it and its task
# retries); the task's own claim lapses only after this grace, so the two never race.
TRIGGER_GRACE_SECS = 60
_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_]+)\s*\}\}")


def check_queue_name(name: str) -> str:
    if not _QUEUE_NAME.fullmatch(name):
        rule = f"{name!r} is not a valid queue name: {QUEUE_NAME_RULE}"
        raise ValidationFailed([Problem("queueName", rule)], detail=rule)
    return name


def render_template(template: Any, variables: dict[str, Any]) -> Any:
    """Fill ``{{name}}`` placeholders; a string that is one placeholder takes the raw value."""
    if isinstance(template, str):
        whole = _PLACEHOLDER.fullmatch(template.strip())
        if whole and whole.group(1) in variables:
            return variables[whole.group(1)]

        def sub(m: re.Match[str]) -> str:
            value = variables.get(m.group(1))
            return m.group(0) if value is None else str(value)

        return _PLACEHOLDER.sub(sub, template)
    if isinstance(template, dict):
        return {k: render_template(v, variables) for k, v in template.items()}
    if isinstance(template, list):
        return [render_template(v, variables) for v in template]
    return template


def trigger_input(definition: WorkflowDefinition, task: dict[str, Any]) -> dict[str, Any]:
    base: dict[str, Any] = {
        "title": task["title"],
        "body": task["body"],
        "queueName": task["queue_name"],
        "queueTaskId": str(task["id"]),
        "queuePriority": task["priority"],
    }
    # 004 names its placeholders in snake_case; accept both spellings.
    names = {
        **base,
        "queue_name": base["queueName"],
        "queue_task_id": base["queueTaskId"],
        "queue_priority": base["queuePriority"],
    }
    rendered = render_template(definition.input_template or {}, names)
    return {**base, **rendered}


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
        check_queue_name(queue)
        # One statement, autocommit: one round trip and one commit per push.
        row = self.db.autocommit(
            lambda c: c.execute(
                q_sql.PUSH,
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
        check_queue_name(queue)

        def work(conn: Conn) -> list[dict[str, Any]]:
            # Lapse expired claims first so they are visible to this very dequeue; both
            # statements travel in one pipelined round trip.
            with conn.pipeline():
                recycled = conn.execute(q_sql.RECYCLE_EXPIRED, {"queue": queue, "limit": 500})
                claimed = conn.execute(
                    q_sql.DEQUEUE,
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
        tid, rcpt = _uuid(task_id, "taskId"), _uuid(receipt, "receipt")

        def work(conn: Conn) -> dict[str, Any]:
            row = conn.execute(q_sql.ACK, {"id": tid, "queue": queue, "receipt": rcpt}).fetchone()
            if row is None:
                state = self._state(conn, queue, tid, task_id)
                if state["status"] == "completed" and state["receipt"] == rcpt:  # a repeat
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
        tid, rcpt = _uuid(task_id, "taskId"), _uuid(receipt, "receipt")

        def work(conn: Conn) -> dict[str, Any]:
            row = conn.execute(
                q_sql.NACK,
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
            if row["status"] == "dead":
                self.metrics.add("QueueDeadLettered", 1)
            return {"id": task_id, "status": row["status"], "retryCount": row["retry_count"]}

        return self.db.autocommit(work)

    def _state(self, conn: Conn, queue: str, tid: uuid.UUID, task_id: str) -> dict[str, Any]:
        state = conn.execute(q_sql.TASK_STATE, {"id": tid, "queue": queue}).fetchone()
        if state is None:
            raise NotFound("queue task", task_id)
        return state

    @staticmethod
    def _why(state: dict[str, Any], receipt: uuid.UUID) -> str:
        if state["status"] != "processing":
            return f"task is {state['status']}, not processing"
        return "the receipt is not current: the claim lapsed and the task was dequeued again"

    def stats(self, queue: str) -> dict[str, int]:
        check_queue_name(queue)
        rows = self.db.autocommit(lambda c: c.execute(q_sql.STATS, {"queue": queue}).fetchall())
        counts = {s: 0 for s in STATES}
        counts.update({r["status"]: int(r["n"]) for r in rows})
        return counts

    def peek(self, queue: str, limit: int = 10) -> dict[str, Any]:
        check_queue_name(queue)
        if not 1 <= limit <= 100:
            raise ValidationFailed([Problem("limit", "must be between 1 and 100")])
        rows = self.db.autocommit(
            lambda c: c.execute(q_sql.PEEK, {"queue": queue, "limit": limit}).fetchall()
        )
        return {"tasks": [_task_view(r) for r in rows]}

    def purge(self, queue: str) -> dict[str, int]:
        check_queue_name(queue)
        deleted = self.db.transaction(lambda c: c.execute(q_sql.PURGE, {"queue": queue}).rowcount)
        return {"deleted": deleted}

    def _recycle(self, conn: Conn, queue: str | None, limit: int = 500) -> int:
        rows = conn.execute(q_sql.RECYCLE_EXPIRED, {"queue": queue, "limit": limit}).fetchall()
        self._count_dead(rows)
        return len(rows)

    def _count_dead(self, rows: list[dict[str, Any]]) -> None:
        dead = sum(1 for r in rows if r["status"] == "dead")
        if dead:
            self.metrics.add("QueueDeadLettered", dead)

    # --- queue triggers ------------------------------------------------------------------------

    def dispatch(self, queue: str | None = None, *, nudged: bool = False) -> int:
        """Start instances for the pending tasks of queue-triggered definitions.

        ``queue``: only that queue's triggers (a nudge after a push); ``nudged`` ignores the
        poll interval. Returns the number of instances started.
        """
        triggers = self.db.autocommit(
            lambda c: c.execute(q_sql.TRIGGERS_FOR_QUEUE, {"queue": queue}).fetchall()
        )
        started = 0
        for t in triggers:
            definition = WorkflowDefinition.model_validate(t["body"] | {"name": t["name"]})
            started += self._dispatch_one(t["name"], t["version"], definition, nudged)
        return started

    def _dispatch_one(
        self, name: str, version: int, definition: WorkflowDefinition, nudged: bool
    ) -> int:
        trigger = definition.trigger
        assert trigger is not None
        consumer = f"trigger:{name}"

        def work(conn: Conn) -> int:
            conn.execute(q_sql.LOCK_TRIGGER, {"name": name})
            state = conn.execute(q_sql.LOCK_TRIGGER_ROW, {"name": name}).fetchone()
            if state is None or not (state["due"] or nudged):
                return 0
            self._recycle(conn, trigger.queue_name)
            busy = conn.execute(
                q_sql.IN_FLIGHT, {"queue": trigger.queue_name, "consumer": consumer}
            ).fetchone()
            slots = trigger.max_concurrency - int(busy["n"] if busy else 0)
            if slots <= 0:
                return 0
            tasks = conn.execute(
                q_sql.DEQUEUE,
                {
                    "queue": trigger.queue_name,
                    "consumer": consumer,
                    "visibility": trigger.visibility_timeout_secs + TRIGGER_GRACE_SECS,
                    "max_tasks": slots,
                },
            ).fetchall()
            if not tasks:
                conn.execute(
                    q_sql.SET_NEXT_POLL, {"name": name, "seconds": trigger.poll_interval_secs}
                )
                return 0
            stored = conn.execute(
                defs_sql.DEFINITION_WITH_TASK_DEFS, {"name": name, "version": version}
            ).fetchone()
            assert stored is not None
            snapshot_id, plan = self.engine.snapshot_of(conn, stored)
            for task in tasks:
                iid, _ = self.engine.start_in(
                    conn,
                    plan,
                    snapshot_id,
                    name=name,
                    version=version,
                    input=trigger_input(definition, task),
                    correlation_id=f"queue:{trigger.queue_name}:{task['id']}",
                    queue_task_id=task["id"],
                    timeout_seconds=_min_positive(
                        definition.timeout_seconds, trigger.visibility_timeout_secs
                    ),
                    commit=False,
                )
                conn.execute(
                    q_sql.ATTACH_INSTANCE,
                    {"id": task["id"], "instance_id": iid, "max_retries": trigger.max_retries},
                )
                self.metrics.add(
                    "QueueDispatchLatency", task["latency"].total_seconds() * 1000, "Milliseconds"
                )
                log.info(
                    "queue task dispatched",
                    extra={
                        "queue": trigger.queue_name,
                        "queue_task_id": str(task["id"]),
                        "instance_id": str(iid),
                    },
                )
            return len(tasks)

        return self.db.transaction(work)

    def tick(self) -> dict[str, int]:
        """The dispatcher's scheduled duty: lapse expired claims, dispatch, report depth."""
        recycled = self.db.autocommit(lambda c: self._recycle(c, None))
        started = self.dispatch()
        depth = self.db.autocommit(lambda c: c.execute(q_sql.DEPTH_BY_STATE).fetchall())
        for state in ("pending", "processing", "dead"):
            total = sum(int(r["n"]) for r in depth if r["status"] == state)
            self.metrics.add(f"QueueDepth{state.capitalize()}", total)
        self.metrics.add("QueueDepth", sum(int(r["n"]) for r in depth if r["status"] == "pending"))
        return {"instancesStarted": started, "claimsLapsed": recycled}


def _min_positive(*values: int) -> int:
    positive = [v for v in values if v > 0]
    return min(positive) if positive else 0
