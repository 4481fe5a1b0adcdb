"""Definition snapshots and their compiled plans, cached per engine.

At start, an instance's definition is copied, with the task definitions of its job types embedded,
into an immutable, content-addressed ``definition_snapshot`` row that instances of the same
definition share. Later edits to stored definitions never touch a running instance. A snapshot
never changes, so the plan compiled from it is cached by id and never goes stale.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from baton.definitions import WorkflowDefinition
from baton.engine.plan import Plan, PlanCache, http_task_def_name
from baton.model import TaskDef
from baton.store import instance_sql
from baton.store.db import Conn
from baton.structure import Node, walk

_MAX_CACHED = 1024


class Snapshots:
    """Snapshot rows and compiled plans for one database (snapshot ids are per database)."""

    def __init__(self) -> None:
        self._plans = PlanCache()
        # (definition body text, task definitions text, registered on /api, the Conductor
        # source of an inline start) -> (id, plan)
        self._by_text: dict[tuple[str, str | None, bool, str | None], tuple[int, Plan]] = {}

    def of_stored(self, conn: Conn, stored: dict[str, Any]) -> tuple[int, Plan]:
        """The snapshot of a stored definition row (``DEFINITION_WITH_TASK_DEFS``)."""
        return self._snapshot(
            conn,
            stored["body"],
            stored["task_defs"],
            None,
            from_conductor=bool(stored.get("from_conductor")),
        )

    def of_inline(
        self,
        conn: Conn,
        definition: WorkflowDefinition,
        task_defs_text: str | None,
        *,
        conductor_source: str | None = None,
        from_conductor: bool = False,
    ) -> tuple[int, Plan]:
        """The snapshot of an inline definition (a dynamic workflow) with its task defs;
        ``conductor_source``: the Conductor WorkflowDef (JSON text) it was translated from (an
        inline start on ``/api``), kept with the snapshot; with it, or ``from_conductor`` (a
        sub-workflow's definition given in Conductor's dialect when the child starts), it is
        snapshotted as a definition registered on ``/api`` is."""
        body = definition.model_dump_json(by_alias=True, exclude_none=True)
        return self._snapshot(
            conn,
            body,
            task_defs_text,
            definition,
            from_conductor=from_conductor or conductor_source is not None,
            conductor_source=conductor_source,
        )

    def plan(self, conn: Conn, snapshot_id: int) -> Plan:
        """The compiled plan of a snapshot; the first time a process sees it, one extra read."""
        plan = self._plans.get(snapshot_id)
        if plan is None:
            row = conn.execute(instance_sql.SNAPSHOT_BODY, {"id": snapshot_id}).fetchone()
            assert row is not None, f"snapshot {snapshot_id} is referenced but missing"
            plan = self._plans.compile(snapshot_id, row["body"])
        return plan

    def _snapshot(
        self,
        conn: Conn,
        body_text: str,
        task_defs_text: str | None,
        parsed: WorkflowDefinition | None,
        *,
        from_conductor: bool = False,
        conductor_source: str | None = None,
    ) -> tuple[int, Plan]:
        """Embed task definitions and store the immutable snapshot (deduplicated by digest).
        A definition registered on ``/api`` (``from_conductor``) gets Conductor's ad-hoc task
        definition for a system task with none: an HTTP, HTTP_POLL or EVENT step without a
        task definition or a ``retryCount`` of its own is not retried (Conductor's
        ``MetadataMapperService`` gives such tasks retryCount 0 at start, where a SIMPLE
        task's ad-hoc definition keeps the defaults Baton's has).

        Cached by (definition, task definitions) text: a repeated start of the same definition
        costs no snapshot round trip and no parsing.
        """
        key = (body_text, task_defs_text, from_conductor, conductor_source)
        hit = self._by_text.get(key)
        if hit is not None:
            return hit
        definition = parsed or WorkflowDefinition.model_validate_json(body_text)
        task_defs = {
            n: TaskDef.model_validate(b).wire()
            for n, b in json.loads(task_defs_text or "{}").items()
        }
        raw = definition.wire()
        # Every SERVICE_TASK, HTTP(_POLL) and EVENT; from /api, also those of the definitions
        # its SUB_WORKFLOW steps carry inline, which Conductor starts as it starts any other.
        nodes = _with_inline_children(raw["steps"]) if from_conductor else walk(raw["steps"])
        for node in nodes:
            if node.type == "SERVICE_TASK":
                named = node.step.get("jobType")
            elif node.type in ("HTTP", "HTTP_POLL"):
                named = http_task_def_name(node.step.get("name"), node.step["id"])
            elif node.type == "EVENT":
                named = None  # its settings are its own: no task definition
            else:
                continue
            if named in task_defs:
                node.step["taskDef"] = task_defs[named]
            elif from_conductor and node.type != "SERVICE_TASK":
                node.step.setdefault("retryCount", 0)
        embedded = WorkflowDefinition.model_validate(raw)
        body = embedded.model_dump_json(by_alias=True, exclude_none=True)
        params = {"digest": embedded.digest(), "body": body}
        row = conn.execute(instance_sql.UPSERT_SNAPSHOT, params).fetchone()
        if row is None:
            # A concurrent start inserted the same snapshot after this statement's snapshot
            # was taken; a new statement sees its committed row.
            row = conn.execute(instance_sql.SNAPSHOT_BY_DIGEST, params).fetchone()
        assert row is not None
        if conductor_source is not None:
            conn.execute(
                instance_sql.SET_SNAPSHOT_CONDUCTOR,
                {"id": row["id"], "conductor": conductor_source},
            )
        result = (int(row["id"]), self._plans.compile(row["id"], body))
        # Cache only a row that was committed before this transaction: one inserted here could
        # still roll back, and a cached id would then point at nothing.
        if not row.get("inserted"):
            if len(self._by_text) >= _MAX_CACHED:
                self._by_text.pop(next(iter(self._by_text)))
            self._by_text[key] = result
        return result


def _with_inline_children(steps: Any) -> Iterator[Node]:
    """Every step of ``steps`` (as ``walk``), and of the definitions its SUB_WORKFLOW steps carry
    inline, however nested."""
    for node in walk(steps):
        yield node
        inline = node.step.get("definition") if node.type == "SUB_WORKFLOW" else None
        if isinstance(inline, dict):
            yield from _with_inline_children(inline.get("steps"))
