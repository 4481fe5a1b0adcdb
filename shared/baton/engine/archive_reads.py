"""Reading an archived instance as if it were still in the database (``archived: true``): its
view, its steps and history a page at a time, the search of the archive index, and deleting it.

An instance is looked for in the database first, then in ``archived_instance``: the index row
commits in the same transaction that deletes the rows, so exactly one of the two holds it.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from baton.engine import paging
from baton.engine.core import EngineCore, log
from baton.errors import InstanceNotFound, Problem, Unavailable, ValidationFailed
from baton.status import InstanceStatus
from baton.store import archive_sql

ARCHIVE_UNCONFIGURED = (
    "archived instances are in the payload bucket, and no bucket is configured "
    "(BATON_PAYLOAD_BUCKET)"
)


class ArchiveReads(EngineCore):
    def _archived_entry(self, iid: uuid.UUID) -> dict[str, Any] | None:
        return self.db.autocommit(
            lambda c: c.execute(archive_sql.INDEX_ROW, {"id": iid}).fetchone()
        )

    def _archived_document(self, iid: uuid.UUID, instance_id: str) -> dict[str, Any]:
        """The archived document of ``iid``; InstanceNotFound when it was never archived."""
        entry = self._archived_entry(iid)
        if entry is None:
            raise InstanceNotFound(instance_id)
        if self.archive is None:
            raise Unavailable(ARCHIVE_UNCONFIGURED)
        doc = self.archive.get(entry["object_key"])
        if doc is None:
            raise Unavailable(
                f"archive: the document of instance {instance_id} is missing at "
                f"{entry['object_key']} (deleted from the bucket outside Baton?)"
            )
        return doc

    def archived_view(
        self,
        iid: uuid.UUID,
        instance_id: str,
        *,
        include_steps: bool = True,
        conductor_view: bool = False,
    ) -> dict[str, Any]:
        """An archived instance as ``GET /v1/instances/{id}`` shows it, ``archived: true``;
        ``conductor_view``: as ``get_instance`` reads it for Conductor's surface, from the
        document's ``conductor`` part (a document written before it had one reads as before)."""
        doc = self._archived_document(iid, instance_id)
        out = _view(doc)
        part = doc.get("conductor") if conductor_view else None
        part = part if isinstance(part, dict) else {}
        for key in ("forks", "failedAtJoin"):
            if key in part:
                out[key] = part[key]
        if include_steps:
            dropped = set(part.get("notKept") or ())
            steps = [s for s in doc["steps"] if s["id"] not in dropped]
            fit = paging.within_budget(steps, paging.PAGE_BUDGET_BYTES - paging.json_size(out))
            out["steps"] = steps[:fit]
            if fit < len(steps):
                out["stepsTruncated"] = True
        return out

    def archived_page(
        self, iid: uuid.UUID, instance_id: str, key: str, limit: int, after: int
    ) -> dict[str, Any]:
        """One page of an archived instance's steps (``key`` "steps") or history ("events"),
        byte-budgeted like the database's pages; the token is the position served up to."""
        doc = self._archived_document(iid, instance_id)
        items = doc["steps"] if key == "steps" else doc["history"]
        window = items[after : after + limit]
        served = paging.within_budget(window)
        end = after + served
        token = paging.encode_token(str(end)) if end < len(items) else None
        return {**paging.page(key, window[:served], token), "archived": True}

    def search_archived(
        self,
        *,
        definition_name: str | None,
        status: str | None,
        correlation_id: str | None,
        since: datetime | None,
        until: datetime | None,
        limit: int,
        page_token: str | None,
    ) -> dict[str, Any]:
        """Archived instances found in the index, latest end first (``since``/``until``: their
        end time); each as ``GET`` shows it without steps (read from its document, a few at a
        time), ``archived: true``."""
        if status is not None and status not in InstanceStatus.__members__:
            raise ValidationFailed(
                [Problem("status", f"one of {', '.join(InstanceStatus)}, not {status!r}")]
            )
        limit = paging.clamp(limit, self.settings.max_search_limit)
        after_completed, after_id = None, None
        if page_token:
            completed, last = paging.decode_token(page_token, 2)
            try:
                after_completed, after_id = datetime.fromisoformat(completed), uuid.UUID(last)
            except ValueError:
                raise ValidationFailed(
                    [Problem("pageToken", "not a token this API issued")]
                ) from None
        rows = self.db.autocommit(
            lambda c: c.execute(
                archive_sql.SEARCH_INDEX,
                {
                    "definition_name": definition_name,
                    "status": status,
                    "correlation_id": correlation_id,
                    "since": since,
                    "until": until,
                    "after_completed": after_completed,
                    "after_id": after_id,
                    "limit": limit + 1,
                },
            ).fetchall()
        )
        token = None
        if len(rows) > limit:
            last_row = rows[limit - 1]
            token = paging.encode_token(last_row["completed_at"].isoformat(), str(last_row["id"]))
        rows = rows[:limit]
        if not rows:
            return paging.page("instances", [], token)
        archive = self.archive
        if archive is None:
            raise Unavailable(ARCHIVE_UNCONFIGURED)
        # Each listed run as GET shows it without its steps: read from its document.
        docs = archive.parallel(lambda r: archive.get(r["object_key"]), rows)
        listed = [_view(d) for d in docs if d is not None]
        if len(listed) < len(rows):
            log.warning("archived documents missing", extra={"missing": len(rows) - len(listed)})
        return paging.page("instances", listed, token)

    def delete_archived(self, iid: uuid.UUID, instance_id: str) -> dict[str, Any]:
        """Delete an archived instance: its index row, then its document and payload objects."""
        doc = self._archived_document(iid, instance_id)
        assert self.archive is not None  # the document was read from it
        row = self.db.autocommit(
            lambda c: c.execute(archive_sql.DELETE_INDEX_ROW, {"id": iid}).fetchone()
        )
        if row is None:  # deleted meanwhile by another request
            raise InstanceNotFound(instance_id)
        self.archive.delete([row["object_key"], *doc.get("payloads", {}).values()])
        log.info("archived instance deleted", extra={"instance_id": instance_id})
        return {
            "id": doc["id"],
            "definitionName": doc["definitionName"],
            "definitionVersion": doc.get("definitionVersion"),
            "status": doc["status"],
            "stepExecutions": len(doc["steps"]),
            "jobs": len(doc["jobs"]),
            "historyEvents": len(doc["history"]),
            "archived": True,
        }


def _view(doc: dict[str, Any]) -> dict[str, Any]:
    """An archived run's instance view (without its steps), marked archived."""
    return {**doc["instance"], "archived": True, "archivedAt": doc["archivedAt"]}
