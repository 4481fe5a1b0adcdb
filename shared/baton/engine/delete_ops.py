"""Deletes: one version of a definition, and a finished instance with everything it left behind.

A definition version is a row of its own: instances running it keep their immutable snapshot
(``definition_snapshot``) and finish on it; a queue trigger is the latest remaining version's, so
deleting a triggered latest version stops its trigger at once (the dispatcher also drops a start
whose version vanished under it). An instance is deleted only once it has ended: while it runs
(or is paused) there is still work that would lose its instance.
"""

from __future__ import annotations

from typing import Any

from baton.engine import views
from baton.engine.archive_reads import ArchiveReads
from baton.engine.core import log
from baton.engine.ids import path_uuid
from baton.engine.retention_ops import RetentionOps
from baton.errors import Conflict, DefinitionNotFound, InstanceNotFound
from baton.store import definition_sql, instance_sql
from baton.store.db import Conn, first_in_transaction

# The statuses an instance never leaves: only these may be deleted. Spelled out rather than
# "not RUNNING", so a status added later (PAUSED) is not deletable by accident.
DELETABLE_STATUSES = frozenset({"COMPLETED", "FAILED", "TIMED_OUT", "CANCELLED"})


class DeleteOps(RetentionOps, ArchiveReads):
    def delete_definition(self, name: str, version: int) -> dict[str, Any]:
        """Delete one version of a definition; returns it as it was."""
        row = self.db.autocommit(
            lambda c: c.execute(
                definition_sql.DELETE_VERSION, {"name": name, "version": version}
            ).fetchone()
        )
        if row is None:
            raise DefinitionNotFound(name, version)
        log.info("definition version deleted", extra={"definition": name, "version": version})
        return views.definition(row)

    def delete_instance(self, instance_id: str) -> dict[str, Any]:
        """Delete a finished instance with its step executions, jobs and history (audit rows),
        then its payload objects; a running or paused one is a conflict; an archived one loses
        its index row, document and archived payloads. Returns what was deleted."""
        iid = path_uuid(instance_id, InstanceNotFound)

        def work(conn: Conn) -> dict[str, Any] | None:
            locked = first_in_transaction(conn, instance_sql.LOCK_FOR_DELETE, {"id": iid})
            if locked is None:
                return None
            if locked["status"] not in DELETABLE_STATUSES:
                raise Conflict(
                    f"instance {instance_id} is {locked['status']}: only a finished instance "
                    "can be deleted (cancel it first)"
                )
            objects[:] = self._paths_to_delete(conn, iid)
            with conn.pipeline():
                audit = conn.execute(instance_sql.DELETE_AUDIT, {"id": iid})
                conn.execute(instance_sql.DELETE_OUTBOX, {"id": iid})
                jobs = conn.execute(instance_sql.DELETE_JOBS, {"id": iid})
                steps = conn.execute(instance_sql.DELETE_STEPS, {"id": iid})
                gone = conn.execute(instance_sql.DELETE_INSTANCE, {"id": iid})
            row = gone.fetchone()
            assert row is not None  # locked above
            return {
                "id": str(row["id"]),
                "definitionName": row["definition_name"],
                "definitionVersion": row["definition_version"],
                "status": row["status"],
                "stepExecutions": steps.rowcount,
                "jobs": jobs.rowcount,
                "historyEvents": audit.rowcount,
            }

        objects: list[str] = []  # its payload objects: deleted once its rows are gone
        deleted = self.db.transaction(work, explicit_begin=True)
        if deleted is None:  # archived: its index row and objects go (never was: not found)
            return self.delete_archived(iid, instance_id)
        self._delete_objects(iid, objects)
        log.info("instance deleted", extra={"instance_id": instance_id})
        return {k: v for k, v in deleted.items() if v is not None}
