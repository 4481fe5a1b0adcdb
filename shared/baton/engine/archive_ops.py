"""Retention and archive: a terminal instance past its retention leaves the database for S3.

The duty loop (the sweeper) archives in batches, each in four short steps, none of which holds a
lock on a running instance or a transaction open across S3 calls:

Each sweep starts batches for at most ``PASS_SECONDS`` (the sweeper's timers and timeouts come
every second), up to ``MAX_BATCHES``.

1. **Claim** (one autocommit statement): up to ``ARCHIVE_BATCH`` terminal instances past their
   retention get a claim row with this pass's token. Another archiver skips claimed instances,
   so each is archived by one of them; a claim whose archiver died lapses after
   ``CLAIM_LEASE_SECONDS`` and is taken over.
2. **Write**: their rows are read (instance, steps, jobs, history), their payload objects copied
   under ``archive/payloads/<id>/``, and one document per instance PUT at its key
   (``engine.archive_store``); only documents S3 confirmed go on.
3. **Delete** (one transaction per batch): the claimed instances are locked ``SKIP LOCKED``;
   those still terminal at the version that was written get their index row
   (``archived_instance``) and lose their rows: history, outbox, events, jobs, steps, instance.
4. **Tidy**: the moved payload objects are deleted; for a claimed instance whose rows stayed
   (it was retried meanwhile, or locked by someone else), the objects written for it are
   deleted, then the claims are released.

A crash after step 2 leaves the rows and the documents: the next archiver (once the claim
lapsed) writes the same documents at the same keys again and deletes the rows; nothing is
visible twice (readers look in the database first, the index row commits with the delete).
A crash after step 3 leaves moved payload objects at their old keys, where the payload
retention's lifecycle rule expires them.
"""

from __future__ import annotations

import time
import uuid
from collections import defaultdict
from datetime import datetime
from typing import Any

from baton.engine import views
from baton.engine.archive_store import (
    FORMAT,
    ArchiveStore,
    document_key,
    encode,
    payload_key,
    rewrite_refs,
)
from baton.engine.conductor_view import conductor_extras
from baton.engine.core import log
from baton.engine.plan import Plan
from baton.engine.retention_ops import RetentionOps
from baton.errors import Unavailable
from baton.store import archive_sql, retention_sql
from baton.store.db import Conn

ARCHIVE_BATCH = 100  # instances per claim, per document batch and per delete transaction
MAX_BATCHES = 10  # batches per sweep at most (a sweep runs every second)
# No new batch starts after this long in one sweep: the sweeper's other duties (timers and
# timeouts due within 2 s) come every second, and archiving is background work.
PASS_SECONDS = 0.5
CLAIM_LEASE_SECONDS = 600


class ArchiveOps(RetentionOps):
    # Called with a step's name ("written": every document of the batch is stored, no row is
    # deleted yet); tests inject a crash there.
    archive_fault: Any = None

    def archive_expired(
        self,
        *,
        batch: int = ARCHIVE_BATCH,
        max_batches: int = MAX_BATCHES,
        lease_seconds: float = CLAIM_LEASE_SECONDS,
        pass_seconds: float = PASS_SECONDS,
    ) -> int:
        """Archive terminal instances past their retention, up to ``max_batches`` batches of
        ``batch``, none started after ``pass_seconds``; how many were archived. 0 without a
        bucket or a retention."""
        archive = self.archive
        if archive is None:
            return 0
        default = self.settings.retention_seconds
        row = self.db.autocommit(
            lambda c: c.execute(archive_sql.SHORTEST_DEFINITION_RETENTION).fetchone()
        )
        periods = [p for p in (default, row and row["seconds"]) if p]
        if not periods:
            return 0
        total = 0
        stop_at = time.monotonic() + pass_seconds
        for _ in range(max_batches):
            claimed, archived = self._archive_batch(
                archive, default, min(periods), batch, lease_seconds
            )
            total += archived
            if claimed < batch or time.monotonic() >= stop_at:
                break
        return total

    def _archive_batch(
        self, archive: ArchiveStore, default: int, shortest: int, batch: int, lease: float
    ) -> tuple[int, int]:
        token = uuid.uuid4()
        claimed = [
            r["instance_id"]
            for r in self.db.autocommit(
                lambda c: c.execute(
                    archive_sql.claim_expired_sql(batch),
                    {"default": default, "shortest": shortest, "lease": lease, "token": token},
                ).fetchall()
            )
        ]
        if not claimed:
            return 0, 0
        written: dict[uuid.UUID, _Written] = {}
        try:
            written = self._write_documents(archive, claimed, default)
            if self.archive_fault is not None:
                self.archive_fault("written")
            deleted = self._delete_rows(token, written) if written else []
        except Unavailable as e:
            log.warning("archive batch not finished", extra={"error": str(e)})
            deleted = []
        self._tidy(archive, token, claimed, written, deleted)
        if deleted:
            done = [written[i] for i in deleted]
            size = sum(w.size for w in done)
            lag = max(w.lag_seconds for w in done)
            self.metrics.add("InstancesArchived", len(done))
            self.metrics.add("ArchivedBytes", size, unit="Bytes")
            self.metrics.add("ArchiveLag", lag, unit="Seconds")
            log.info(
                "instances archived",
                extra={"instances": len(done), "bytes": size, "lag_seconds": round(lag, 1)},
            )
        return len(claimed), len(deleted)

    def _write_documents(
        self, archive: ArchiveStore, ids: list[uuid.UUID], default: int
    ) -> dict[uuid.UUID, _Written]:
        """Read the claimed instances and store one document each (with their payloads)."""
        params = {"ids": ids, "default": default}

        plans: dict[int, Plan] = {}

        def read(conn: Conn) -> tuple[list[dict[str, Any]], ...]:
            with conn.pipeline():
                cursors = [
                    conn.execute(sql, params)
                    for sql in (
                        archive_sql.INSTANCES_OF,
                        archive_sql.STEPS_OF,
                        archive_sql.JOBS_OF,
                        archive_sql.HISTORY_OF,
                        retention_sql.PATHS_OF,
                    )
                ]
            rows = tuple(c.fetchall() for c in cursors)
            for sid in {r["snapshot_id"] for r in rows[0]}:  # (kept by the process)
                plans[sid] = self.snapshots.plan(conn, sid)
            return rows

        instances, steps, jobs, history, paths = self.db.autocommit(read)
        if not instances:
            return {}
        by: dict[str, defaultdict[uuid.UUID, list[Any]]] = {
            k: defaultdict(list) for k in ("steps", "rows", "jobs", "history", "paths")
        }
        for r in steps:
            by["rows"][r["instance_id"]].append(r)
            by["steps"][r["instance_id"]].append(views.step(r))
        for r in jobs:
            by["jobs"][r["instance_id"]].append(r["job"])
        for r in history:
            by["history"][r["instance_id"]].append(views.history_event(r))
        for r in paths:
            by["paths"][r["instance_id"]].append(r["path"])
        moved = self._copy_payloads(archive, by["paths"])
        docs = [
            _document(
                r,
                by["steps"][r["id"]],
                by["jobs"][r["id"]],
                by["history"][r["id"]],
                moved,
                conductor=_conductor_part(plans[r["snapshot_id"]], by["rows"][r["id"]]),
            )
            for r in instances
        ]

        def put(doc: tuple[dict[str, Any], _Written]) -> None:
            archive.put(doc[1].key, doc[1].body)

        archive.parallel(put, docs)  # raises Unavailable unless every one is confirmed
        return {w.id: w for _, w in docs}

    def _copy_payloads(
        self, archive: ArchiveStore, paths: dict[uuid.UUID, list[str]]
    ) -> dict[uuid.UUID, dict[str, str]]:
        """Copy each instance's payload objects under the archive; per instance, the paths
        copied and their new keys (an object already gone keeps its old reference)."""
        pairs = [(iid, p, payload_key(iid, p)) for iid, ps in paths.items() for p in ps]
        copied = archive.parallel(lambda t: archive.copy(t[1], t[2]), pairs)
        moved: dict[uuid.UUID, dict[str, str]] = defaultdict(dict)
        for (iid, path, key), ok in zip(pairs, copied, strict=True):
            if ok:
                moved[iid][path] = key
        return moved

    def _delete_rows(self, token: uuid.UUID, written: dict[uuid.UUID, _Written]) -> list[uuid.UUID]:
        """One short transaction: index rows in, the archived instances' rows out; their ids.
        Only instances still claimed by ``token``, not locked by anyone, and still at the
        version their document holds (a retry meanwhile made it stale) are deleted."""

        def work(conn: Conn) -> list[uuid.UUID]:
            locked = conn.execute(
                archive_sql.LOCK_CLAIMED, {"ids": sorted(written), "token": token}
            ).fetchall()
            ids = [
                r["id"]
                for r in locked
                if r["status"] in archive_sql.TERMINAL and r["version"] == written[r["id"]].version
            ]
            if not ids:
                return []
            done = [written[i] for i in ids]
            with conn.pipeline():
                conn.execute(archive_sql.INSERT_INDEX, _index_params(done))
                for sql in archive_sql.DELETE_ROWS:
                    conn.execute(sql, {"ids": ids})
            return ids

        return self.db.transaction(work)

    def _tidy(
        self,
        archive: ArchiveStore,
        token: uuid.UUID,
        claimed: list[uuid.UUID],
        written: dict[uuid.UUID, _Written],
        deleted: list[uuid.UUID],
    ) -> None:
        """After the delete: the moved payload objects go; the objects written for instances
        whose rows stayed go too (while the claim keeps other archivers off them); then the
        claims are released."""
        gone = set(deleted)
        try:
            if gone:
                originals = sorted({p for i in gone for p in written[i].moved})
                kept = self._inputs_of_others(originals, sorted(gone))
                archive.delete([p for p in originals if p not in kept])
            stale = [w for i, w in written.items() if i not in gone]
            archive.delete([k for w in stale for k in (w.key, *w.moved.values())])
        except Unavailable as e:  # left to the payload lifecycle rule; stale ones rewritten
            log.warning("archive objects not tidied", extra={"error": str(e)})
        self.db.autocommit(
            lambda c: c.execute(archive_sql.RELEASE_CLAIMS, {"ids": claimed, "token": token})
        )

    def _inputs_of_others(self, paths: list[str], ids: list[uuid.UUID]) -> set[str]:
        """Which of ``paths`` an instance still in the database has as its input."""
        if not paths:
            return set()
        rows = self.db.autocommit(
            lambda c: c.execute(
                archive_sql.INPUT_OF_OTHERS, {"paths": paths, "ids": ids}
            ).fetchall()
        )
        return {r["path"] for r in rows}


class _Written:
    """One instance's document as written: its key, bytes and what the index row holds."""

    __slots__ = (
        "body",
        "completed_at",
        "correlation_id",
        "created_at",
        "definition_name",
        "definition_version",
        "id",
        "key",
        "lag_seconds",
        "moved",
        "parent_instance_id",
        "size",
        "status",
        "version",
    )

    def __init__(self, row: dict[str, Any], key: str, body: bytes, moved: dict[str, str]):
        self.id: uuid.UUID = row["id"]
        self.version: int = row["version"]
        self.definition_name: str = row["definition_name"]
        self.definition_version: int | None = row["definition_version"]
        self.status: str = row["status"]
        self.correlation_id: str | None = row["correlation_id"]
        self.parent_instance_id: uuid.UUID | None = row["parent_instance_id"]
        self.created_at: datetime = row["created_at"]
        self.completed_at: datetime = row["completed_at"]
        self.key = key
        self.body = body
        self.size = len(body)
        self.moved = moved  # original payload path -> archive key
        due = row["completed_at"].timestamp() + float(row["retention_seconds"])
        self.lag_seconds = max(0.0, row["now"].timestamp() - due)


def _conductor_part(plan: Plan, rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """What Conductor's surface reads of the instance besides its steps (``forks`` and
    ``failedAtJoin``), and ``notKept``: the ids of the executions of iterations its keepLastN
    loops no longer keep; None when there is none of it (the rows' state, which they are
    worked out from, is not in the document)."""
    kept, part = conductor_extras(plan, rows)
    if len(kept) < len(rows):
        shown = {r["id"] for r in kept}
        part["notKept"] = [str(r["id"]) for r in rows if r["id"] not in shown]
    return part or None


def _document(
    row: dict[str, Any],
    steps: list[dict[str, Any]],
    jobs: list[dict[str, Any]],
    history: list[dict[str, Any]],
    moved: dict[uuid.UUID, dict[str, str]],
    *,
    conductor: dict[str, Any] | None = None,
) -> tuple[dict[str, Any], _Written]:
    """The archive document of one instance (format ``FORMAT``): top-level fields for queries
    (Athena), the instance as ``GET /v1/instances/{id}`` showed it, its steps, its jobs as
    stored, its history, and what Conductor's surface reads besides (``conductor``, only for
    an instance with forks or trimmed loops); payload references point into the archive."""
    mine = moved.get(row["id"], {})
    instance = views.instance(row)
    doc = {
        "format": FORMAT,
        "id": str(row["id"]),
        "definitionName": row["definition_name"],
        "definitionVersion": row["definition_version"],
        "status": row["status"],
        "correlationId": row["correlation_id"],
        "parentInstanceId": instance.get("parentInstanceId"),
        "createdAt": instance["createdAt"],
        "completedAt": instance["completedAt"],
        "archivedAt": views.ts(row["now"]),
        "retentionSeconds": row["retention_seconds"],
        "instance": instance,
        "steps": steps,
        "jobs": jobs,
        "history": history,
        "payloads": mine,
    }
    if conductor is not None:
        doc["conductor"] = conductor
    doc = rewrite_refs(doc, mine)
    key = document_key(row["definition_name"], row["completed_at"], row["id"])
    return doc, _Written(row, key, encode(doc), mine)


def _index_params(done: list[_Written]) -> dict[str, list[Any]]:
    return {
        "ids": [w.id for w in done],
        "keys": [w.key for w in done],
        "names": [w.definition_name for w in done],
        "versions": [w.definition_version for w in done],
        "statuses": [w.status for w in done],
        "correlations": [w.correlation_id for w in done],
        "parents": [w.parent_instance_id for w in done],
        "created": [w.created_at for w in done],
        "completed": [w.completed_at for w in done],
        "sizes": [w.size for w in done],
    }
