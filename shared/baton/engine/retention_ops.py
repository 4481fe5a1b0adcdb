"""Payload retention: an instance's payload objects expire a retention period after it ENDED.

S3 lifecycle rules count an object's age from when it was written, so a rule on the payload
prefix alone would delete the payloads of an instance that runs longer than the period. Instead,
the sweeper walks the ended instances in the order they ended (from a mark kept in
``payload_retention_mark``) and has every object each of them references *retired*: copied onto
itself with the tag ``baton-retention=ended``, which restarts its age, so the bucket's
tag-filtered rule deletes it ``payloadExpiryDays`` after the instance ended. Objects nobody ever
referenced (an upload never used, a value offloaded by a decision that then rolled back) fall to
the bucket's longer prefix-wide rule.

- A path a running (or paused) instance has as its input is left alone (a client may start
  several instances with one upload); the last of them to end retires it.
- A retried or restarted instance runs on its objects again: they are *revived* (the tag
  removed) after the reopening commits; the walk revives too, should the reopening slip in
  between its read and its tagging.
- Deleting an ended instance deletes its objects once the rows are gone.
- A failed S3 call rolls the walk back: the mark stays and the next sweep tries again; nothing
  is lost, an object may be copied twice (harmless).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from baton.engine.core import EngineCore, log
from baton.errors import Unavailable
from baton.store import retention_sql
from baton.store.db import Conn

# How long after an instance's end the walk waits before passing it (see ENDED_SINCE).
ENDED_LAG_SECONDS = 60
RETIRE_BATCH = 200  # instances per walk step


class RetentionOps(EngineCore):
    def retire_payloads(
        self, limit: int = RETIRE_BATCH, *, lag_seconds: float | None = None
    ) -> int:
        """One step of the walk over ended instances: retire the objects of up to ``limit`` of
        them that ended at least ``lag_seconds`` (default: ``ENDED_LAG_SECONDS``) ago; how
        many objects were retired. 0 without a payload bucket."""
        objects = self.payload_objects
        if objects is None:
            return 0
        lag = ENDED_LAG_SECONDS if lag_seconds is None else lag_seconds
        touched: list[uuid.UUID] = []

        def work(conn: Conn) -> int:
            mark = conn.execute(retention_sql.LOCK_MARK).fetchone()
            if mark is None:  # another sweeper is walking
                return 0
            ended = conn.execute(
                retention_sql.ENDED_SINCE,
                {**mark, "lag": lag, "limit": limit},
            ).fetchall()
            if not ended:
                return 0
            ids = [r["id"] for r in ended]
            paths = self._retirable(conn, ids)
            retired = objects.retire(paths) if paths else 0
            last = ended[-1]
            conn.execute(
                retention_sql.ADVANCE_MARK,
                {"ended_at": last["completed_at"], "instance_id": last["id"]},
            )
            touched.extend(ids)
            return retired

        retired = self.db.transaction(work)
        if touched:
            self._revive_reopened(touched)
        if retired:
            self.metrics.add("PayloadsRetired", retired)
            log.info("payloads retired", extra={"objects": retired, "instances": len(touched)})
        return retired

    def revive_payloads(self, instance_id: uuid.UUID) -> None:
        """After a retry or restart committed: the instance's objects lose the ended tag."""
        objects = self.payload_objects
        if objects is None:
            return
        paths = self.db.autocommit(lambda c: self._paths(c, [instance_id]))
        if paths:
            objects.revive(paths)
            log.info(
                "payloads revived", extra={"instance_id": str(instance_id), "objects": len(paths)}
            )

    def _retirable(self, conn: Conn, ids: list[uuid.UUID]) -> list[str]:
        """The paths ``ids`` reference, but those a running instance has as its input."""
        paths = set(self._paths(conn, ids))
        if not paths:
            return []
        shared = conn.execute(retention_sql.STILL_REFERENCED, {"paths": sorted(paths)})
        return sorted(paths - {r["path"] for r in shared.fetchall()})

    @staticmethod
    def _paths(conn: Conn, ids: Sequence[uuid.UUID]) -> list[str]:
        rows = conn.execute(retention_sql.PATHS_OF, {"ids": list(ids)}).fetchall()
        return sorted({r["path"] for r in rows})

    def _revive_reopened(self, ids: list[uuid.UUID]) -> None:
        """Revive the objects of walked instances that run again (reopened meanwhile)."""
        running = self.db.autocommit(
            lambda c: c.execute(retention_sql.RUNNING_AMONG, {"ids": ids}).fetchall()
        )
        for r in running:
            self.revive_payloads(r["id"])

    def _paths_to_delete(self, conn: Conn, instance_id: uuid.UUID) -> list[str]:
        """Before an ended instance's rows go: the objects to delete after (see DeleteOps)."""
        if self.payload_objects is None:
            return []
        return self._retirable(conn, [instance_id])

    def _delete_objects(self, instance_id: uuid.UUID, paths: list[str]) -> None:
        """After the rows are gone: delete the objects (a failure leaves them to the bucket's
        prefix-wide rule and is logged; the instance is deleted either way)."""
        if not paths or self.payload_objects is None:
            return
        try:
            self.payload_objects.delete(paths)
        except Unavailable as e:  # S3 down: the rows are gone all the same
            log.warning(
                "payload objects of a deleted instance not deleted",
                extra={"instance_id": str(instance_id), "objects": len(paths), "error": str(e)},
            )
