"""Queue-triggered workflows: a definition with an enabled queue trigger consumes
its queue through the dispatcher (a scheduled function, also nudged right after a push).

One instance per task, started in the same transaction that claims the task, and the claim names
the instance (``queue_sql.DEQUEUE_FOR_TRIGGER``); the instance's end settles the task in the
statement that ends it (see the decision writer), whichever decision that is, the start included.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from baton.definitions import WorkflowDefinition
from baton.engine.queue_ops import Queues
from baton.status import QueueTaskStatus
from baton.store import definition_sql, queue_sql
from baton.store.db import Conn

log = logging.getLogger("baton.queues")

_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_]+)\s*\}\}")


class _VersionDeleted(Exception):
    """The triggering version was deleted after the triggers were read: the dispatch rolls back
    (its claims with it) and the next one reads the triggers anew."""


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
    # Placeholders may be spelled in snake_case (as queue fields are in other tools) or camelCase.
    names = {
        **base,
        "queue_name": base["queueName"],
        "queue_task_id": base["queueTaskId"],
        "queue_priority": base["queuePriority"],
    }
    rendered = render_template(definition.input_template or {}, names)
    return {**base, **rendered}


class QueueTriggers:
    """The dispatcher of queue-triggered definitions, over the queue operations."""

    def __init__(self, queues: Queues) -> None:
        self.queues = queues
        self.engine = queues.engine
        self.db = queues.db
        self.metrics = queues.metrics

    def dispatch(self, queue: str | None = None, *, nudged: bool = False) -> int:
        """Start instances for the pending tasks of queue-triggered definitions.

        ``queue``: only that queue's triggers (a nudge after a push); ``nudged`` ignores the
        poll interval. Returns the number of instances started.
        """
        triggers = self.db.autocommit(
            lambda c: c.execute(queue_sql.TRIGGERS_FOR_QUEUE, {"queue": queue}).fetchall()
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
            conn.execute(queue_sql.LOCK_TRIGGER, {"name": name})
            state = conn.execute(queue_sql.LOCK_TRIGGER_ROW, {"name": name}).fetchone()
            if state is None or not (state["due"] or nudged):
                return 0
            self.queues.recycle(conn, trigger.queue_name)
            busy = conn.execute(
                queue_sql.IN_FLIGHT, {"queue": trigger.queue_name, "consumer": consumer}
            ).fetchone()
            slots = trigger.max_concurrency - int(busy["n"] if busy else 0)
            if slots <= 0:
                return 0
            # Each task is claimed for the instance that processes it, named by the claim: the
            # instance's end settles the task it names, even an end in this very transaction.
            tasks = conn.execute(
                queue_sql.DEQUEUE_FOR_TRIGGER,
                {
                    "queue": trigger.queue_name,
                    "consumer": consumer,
                    "max_tasks": slots,
                    "max_retries": trigger.max_retries,
                },
            ).fetchall()
            if not tasks:
                conn.execute(
                    queue_sql.SET_NEXT_POLL, {"name": name, "seconds": trigger.poll_interval_secs}
                )
                return 0
            stored = conn.execute(
                definition_sql.DEFINITION_WITH_TASK_DEFS, {"name": name, "version": version}
            ).fetchone()
            if stored is None:
                raise _VersionDeleted
            snapshot_id, plan = self.engine.snapshots.of_stored(conn, stored)
            for task in tasks:
                iid = self.engine.start_in(
                    conn,
                    plan,
                    snapshot_id,
                    name=name,
                    version=version,
                    input=trigger_input(definition, task),
                    correlation_id=f"queue:{trigger.queue_name}:{task['id']}",
                    queue_task_id=task["id"],
                    instance_id=task["instance_id"],
                    commit=False,
                ).id
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

        try:
            started = self.db.transaction(work)
        except _VersionDeleted:
            log.info("queue trigger's version deleted", extra={"definition": name})
            return 0
        self.engine.deliver_pending()
        return started

    def tick(self) -> dict[str, int]:
        """The dispatcher's scheduled duty: lapse expired claims, dispatch, report depth."""
        recycled = self.db.autocommit(lambda c: self.queues.recycle(c, None))
        started = self.dispatch()
        depth = self.db.autocommit(lambda c: c.execute(queue_sql.DEPTH_BY_STATE).fetchall())
        for state in (QueueTaskStatus.PENDING, QueueTaskStatus.PROCESSING, QueueTaskStatus.DEAD):
            total = sum(int(r["n"]) for r in depth if r["status"] == state)
            self.metrics.add(f"QueueDepth{state.capitalize()}", total)
        self.metrics.add(
            "QueueDepth", sum(int(r["n"]) for r in depth if r["status"] == QueueTaskStatus.PENDING)
        )
        return {"instancesStarted": started, "claimsLapsed": recycled}
