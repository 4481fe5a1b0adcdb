"""What a decision reads while it decides (``baton.engine.records.Reader``): earlier outputs by
scope, operator executions, the outputs a join collects, and child definitions to start. Reads
run in the decision's own transaction and are cached for the decision."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from baton.definitions import parse_definition
from baton.engine.plan import task_def_names
from baton.engine.records import ChildPlan, Exec
from baton.engine.snapshots import Snapshots
from baton.errors import ValidationFailed
from baton.store import definition_sql, instance_sql
from baton.store.db import Conn


def exec_from_row(row: dict[str, Any]) -> Exec:
    return Exec(
        id=row["id"],
        step_id=row["step_id"],
        scope=row["scope"],
        status=row["status"],
        attempt=row["attempt"],
        state=row["state"],
        input=row["input"],
        child_instance_id=row["child_instance_id"],
        output=row.get("output"),
    )


class DbReader:
    """A decision's reads on ``conn`` for instance ``instance_id``."""

    def __init__(self, conn: Conn, instance_id: uuid.UUID, snapshots: Snapshots) -> None:
        self.conn = conn
        self.instance_id = instance_id
        self.snapshots = snapshots

    def output(self, step_id: str, scope_prefix: str) -> Any:
        return instance_sql.latest_output(self.conn, self.instance_id, step_id, scope_prefix)

    def record(self, step_id: str, scope_prefix: str) -> dict[str, Any] | None:
        row: dict[str, Any] | None = self.conn.execute(
            instance_sql.LATEST_RECORD,
            {"instance_id": self.instance_id, "step_id": step_id, "prefix": scope_prefix},
        ).fetchone()
        return row

    def execution(self, exec_id: uuid.UUID) -> Exec | None:
        row = self.conn.execute(instance_sql.EXECUTION, {"id": exec_id}).fetchone()
        return None if row is None else exec_from_row(row)

    def last_outputs(self, parent_id: uuid.UUID, step_ids: Sequence[str]) -> list[dict[str, Any]]:
        return self.conn.execute(
            instance_sql.LAST_OUTPUTS, {"parent_id": parent_id, "step_ids": list(step_ids)}
        ).fetchall()

    def outputs_within(self, prefix: str, step_ids: Sequence[str]) -> list[dict[str, Any]]:
        return self.conn.execute(
            instance_sql.LAST_OUTPUTS_WITHIN,
            {"instance_id": self.instance_id, "prefix": prefix, "step_ids": list(step_ids)},
        ).fetchall()

    def latest_of(self, step_ids: Sequence[str]) -> list[dict[str, Any]]:
        return self.conn.execute(
            instance_sql.LATEST_OF_STEPS,
            {"instance_id": self.instance_id, "step_ids": list(step_ids)},
        ).fetchall()

    def open_steps(self) -> list[dict[str, Any]]:
        return self.conn.execute(
            instance_sql.OPEN_STEPS, {"instance_id": self.instance_id}
        ).fetchall()

    def outputs_by_list(
        self, prefix: str, step_ids: Sequence[str], after: tuple[str, str] | None = None
    ) -> list[dict[str, Any]]:
        after_step, after_scope = after or ("", "")
        params = {
            "instance_id": self.instance_id,
            "prefix": prefix,
            "step_ids": list(step_ids),
            "after_step": after_step,
            "after_scope": after_scope,
        }
        return self.conn.execute(instance_sql.LAST_OUTPUTS_BY_LIST, params).fetchall()

    def child_plan(
        self,
        name: str | None,
        version: int | None,
        inline: dict[str, Any] | None,
        *,
        from_conductor: bool = False,
    ) -> ChildPlan | None:
        if inline is not None:
            try:
                definition = parse_definition(inline)
            except ValidationFailed:
                return None  # validated at registration; a snapshot cannot hold a bad one
            row = self.conn.execute(
                definition_sql.TASK_DEFS_AS_TEXT, {"names": sorted(task_def_names(definition))}
            ).fetchone()
            snapshot_id, plan = self.snapshots.of_inline(
                self.conn,
                definition,
                row["task_defs"] if row else None,
                from_conductor=from_conductor,
            )
            return ChildPlan(snapshot_id, plan, definition.name, None)
        stored = self.conn.execute(
            definition_sql.DEFINITION_WITH_TASK_DEFS, {"name": name, "version": version}
        ).fetchone()
        if stored is None:
            return None
        snapshot_id, plan = self.snapshots.of_stored(self.conn, stored)
        return ChildPlan(snapshot_id, plan, stored["name"], stored["version"])
