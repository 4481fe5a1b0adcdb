"""SQL for instances, step executions, snapshots and audit rows, and the writer that flushes a
decision (:class:`~baton.engine.decide.Changes`) in one pipelined round trip."""

from __future__ import annotations

import functools
import json
import re
import uuid
from typing import Any

from psycopg.types.json import Jsonb

from baton.engine.decide import Changes, InstanceState
from baton.store import jobs, queues
from baton.store.db import Conn

UPSERT_SNAPSHOT = """
WITH ins AS (
    INSERT INTO definition_snapshot (digest, body) VALUES (%(digest)s, %(body)s::jsonb)
    ON CONFLICT (digest) DO NOTHING
    RETURNING id
)
SELECT id, true AS inserted FROM ins
UNION ALL
SELECT id, false FROM definition_snapshot WHERE digest = %(digest)s
LIMIT 1
"""

SNAPSHOT_BY_DIGEST = "SELECT id FROM definition_snapshot WHERE digest = %(digest)s"

SNAPSHOT_BODY = "SELECT body::text AS body FROM definition_snapshot WHERE id = %(id)s"

INSERT_INSTANCE = """
INSERT INTO instance (id, definition_name, definition_version, snapshot_id, status, input,
                      variables, correlation_id, idempotency_key, queue_task_id, timeout_at,
                      version)
VALUES (%(id)s, %(definition_name)s, %(definition_version)s, %(snapshot_id)s, 'RUNNING',
        %(input)s, %(variables)s, %(correlation_id)s, %(idempotency_key)s, %(queue_task_id)s,
        CASE WHEN %(timeout_seconds)s::int > 0
             THEN now() + make_interval(secs => %(timeout_seconds)s::int) END,
        1)
ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
RETURNING id, now() AS now
"""

ID_BY_IDEMPOTENCY_KEY = "SELECT id FROM instance WHERE idempotency_key = %(key)s"

LOCK_INSTANCE = """
SELECT id, definition_name, status, version, input, variables, correlation_id, snapshot_id,
       queue_task_id, now() AS now
  FROM instance WHERE id = %(id)s
   FOR UPDATE
"""

# The fencing trigger refuses this unless %(expected)s is the version the writer read.
UPDATE_INSTANCE = """
UPDATE instance
   SET status = %(status)s, variables = %(variables)s, output = %(output)s, reason = %(reason)s,
       version = %(expected)s::bigint + 1, updated_at = now(),
       completed_at = CASE WHEN %(status)s <> 'RUNNING' THEN now() END,
       timeout_at = CASE WHEN %(clear_timeout)s OR %(status)s <> 'RUNNING' THEN NULL
                         ELSE timeout_at END
 WHERE id = %(id)s
"""

GET_INSTANCE = """
SELECT i.id, i.definition_name, i.definition_version, i.status, i.input, i.variables, i.output,
       i.reason, i.version, i.correlation_id, i.idempotency_key, i.parent_instance_id,
       i.created_at, i.updated_at, i.completed_at, i.timeout_at, i.snapshot_id
  FROM instance i WHERE i.id = %(id)s
"""

STEPS_OF_INSTANCE = """
SELECT s.id, s.step_id, s.step_type, s.status, s.attempt, s.input, s.output, s.error,
       s.created_at, s.started_at, s.completed_at,
       j.id AS job_id, j.job_type, j.worker_id, j.status AS job_status
  FROM step_execution s
  LEFT JOIN job j ON j.instance_id = s.instance_id AND j.step_execution_id = s.id
 WHERE s.instance_id = %(id)s
 ORDER BY s.created_at, s.id
"""

LATEST_STEP = """
SELECT id, step_type, status FROM step_execution
 WHERE instance_id = %(instance_id)s AND step_id = %(step_id)s
 ORDER BY created_at DESC LIMIT 1
"""

LATEST_OUTPUT = """
SELECT output FROM step_execution
 WHERE instance_id = %(instance_id)s AND step_id = %(step_id)s AND status = 'COMPLETED'
 ORDER BY created_at DESC LIMIT 1
"""

INSERT_STEP = """
INSERT INTO step_execution (id, instance_id, step_id, step_type, status, input, started_at)
VALUES (%(id)s, %(instance_id)s, %(step_id)s, %(step_type)s, %(status)s, %(input)s,
        CASE WHEN %(status)s = 'IN_PROGRESS' THEN now() END)
"""

UPDATE_STEP = """
UPDATE step_execution
   SET status = %(status)s,
       output = coalesce(%(output)s, output),
       error = coalesce(%(error)s, error),
       attempt = coalesce(%(attempt)s, attempt),
       completed_at = CASE WHEN %(status)s IN ('SCHEDULED', 'IN_PROGRESS') THEN NULL
                           ELSE now() END,
       updated_at = now()
 WHERE id = %(id)s
"""

CANCEL_OPEN_STEPS = """
UPDATE step_execution SET status = 'CANCELLED', completed_at = now(), updated_at = now()
 WHERE instance_id = %(instance_id)s AND status IN ('SCHEDULED', 'IN_PROGRESS')
"""

# Every audit row of a decision in one statement, passed as one JSON text parameter (cheaper
# to send from Python than three typed arrays).
INSERT_AUDIT = """
INSERT INTO audit_log (instance_id, job_id, event, detail)
SELECT %(instance_id)s, t.job_id, t.event, t.detail
  FROM jsonb_to_recordset(%(rows)s::jsonb) AS t(job_id uuid, event text, detail jsonb)
"""

AUDIT_OF_INSTANCE = """
SELECT id, at, job_id, event, detail FROM audit_log
 WHERE instance_id = %(id)s ORDER BY id
"""

LOCK_INSTANCE_IF_DUE = """
SELECT id, definition_name, status, version, input, variables, correlation_id, snapshot_id,
       queue_task_id, now() AS now
  FROM instance
 WHERE id = %(id)s AND status = 'RUNNING' AND timeout_at <= now()
   FOR UPDATE
"""

SEARCH = """
SELECT i.id, i.definition_name, i.definition_version, i.status, i.input, i.variables, i.output,
       i.reason, i.version, i.correlation_id, i.idempotency_key, i.parent_instance_id,
       i.created_at, i.updated_at, i.completed_at, i.timeout_at
  FROM instance i
 WHERE (%(status)s::text IS NULL OR i.status = %(status)s)
   AND (%(definition_name)s::text IS NULL OR i.definition_name = %(definition_name)s)
   AND (%(correlation_id)s::text IS NULL OR i.correlation_id = %(correlation_id)s)
   AND (%(after_created)s::timestamptz IS NULL
        OR (i.created_at, i.id) < (%(after_created)s::timestamptz, %(after_id)s::uuid))
 ORDER BY i.created_at DESC, i.id DESC
 LIMIT %(limit)s
"""

TIMED_OUT_DUE = """
SELECT id FROM instance
 WHERE status = 'RUNNING' AND timeout_at IS NOT NULL AND timeout_at <= now()
 ORDER BY timeout_at
 LIMIT %(limit)s
"""


def _json(value: Any) -> Jsonb | None:
    return None if value is None else Jsonb(value)


def state_from_row(row: dict[str, Any]) -> InstanceState:
    return InstanceState(
        id=row["id"],
        definition_name=row["definition_name"],
        status=row["status"],
        version=row["version"],
        input=row["input"],
        variables=row["variables"],
        correlation_id=row["correlation_id"],
        queue_task_id=row.get("queue_task_id"),
    )


def latest_output(conn: Conn, instance_id: uuid.UUID, step_id: str) -> Any:
    row = conn.execute(LATEST_OUTPUT, {"instance_id": instance_id, "step_id": step_id}).fetchone()
    return None if row is None else row["output"]


def write(
    conn: Conn,
    inst: InstanceState,
    changes: Changes,
    *,
    new_instance: bool,
    commit: bool = True,
    insert: dict[str, Any] | None = None,
    in_transaction: bool = True,
) -> None:
    """Write one decision and commit, all pipelined into a single round trip.

    ``in_transaction``: the caller's transaction is open (its first statement took the
    instance lock); else the connection is in autocommit mode (an optimistic decision) and the
    writes are made atomic here: one statement, or BEGIN ... COMMIT around several.
    ``new_instance``: the instance row was just inserted (at version 1) and needs no update
    unless the decision changed it. ``insert``: the new instance row, written here first.

    Where no row is touched twice, the writes go as ONE statement of data-modifying CTEs
    (psycopg's per-statement cost was most of the client CPU per job); a decision that cancels
    open work updates rows twice, so its writes go one by one in the same pipeline.
    """
    pieces = _pieces(inst, changes, new_instance=new_instance, insert=insert)
    combine = len(pieces) > 1 and not changes.cancel_open_work
    wrap = not in_transaction and not combine and len(pieces) > 1
    with conn.pipeline():
        cur = conn.cursor()
        # Never prepared: a statement the server skips after an error in this pipeline would
        # leave psycopg believing it had been prepared.
        if wrap:
            cur.execute(b"BEGIN", prepare=False)
        if combine:
            query, params = _combined(pieces)
            cur.execute(query, params)
        else:
            for sql, params in pieces:
                cur.execute(sql.encode(), params, prepare=False)
        if wrap or (in_transaction and commit):
            # COMMIT travels in this pipeline's one Sync (conn.commit() here would add a second,
            # empty round trip when the pipeline block closes).
            cur.execute(b"COMMIT", prepare=False)


Piece = tuple[str, dict[str, Any]]
_PARAM = re.compile(r"%\((\w+)\)s")


@functools.lru_cache(maxsize=256)
def _combined_sql(fragments: tuple[str, ...]) -> bytes:
    """``WITH w0 AS (<stmt>), w1 AS (<stmt>) ... SELECT 1``, parameters renamed per piece.

    Built only from this module's constant SQL (never from data), and cached per shape.
    """
    ctes = []
    for k, sql in enumerate(fragments):
        body = _PARAM.sub(lambda m, k=k: f"%(p{k}_{m.group(1)})s", sql.strip())  # type: ignore[misc]
        ctes.append(f"w{k} AS ({body})")
    return ("WITH " + ",\n".join(ctes) + "\nSELECT 1").encode()


def _combined(pieces: list[Piece]) -> tuple[bytes, dict[str, Any]]:
    params: dict[str, Any] = {}
    for k, (_, p) in enumerate(pieces):
        params.update({f"p{k}_{name}": value for name, value in p.items()})
    return _combined_sql(tuple(sql for sql, _ in pieces)), params


def _pieces(
    inst: InstanceState, changes: Changes, *, new_instance: bool, insert: dict[str, Any] | None
) -> list[Piece]:
    iid = inst.id
    out: list[Piece] = []
    if insert is not None:
        out.append((INSERT_INSTANCE, insert))
    # The fenced instance update goes first: it takes the instance row lock before any job or
    # step row (the order every other path uses, so no deadlock), and a stale decision fails
    # before it has written anything.
    if changes.instance_changed and not (new_instance and inst.status == "RUNNING"):
        out.append(
            (
                UPDATE_INSTANCE,
                {
                    "id": iid,
                    "status": inst.status,
                    "variables": Jsonb(inst.variables),
                    "output": _json(inst.output),
                    "reason": inst.reason,
                    "expected": inst.version,
                    "clear_timeout": inst.clear_timeout,
                },
            )
        )
        inst.version += 1
    for s in changes.new_steps:
        out.append(
            (
                INSERT_STEP,
                {
                    "id": s.id,
                    "instance_id": iid,
                    "step_id": s.step_id,
                    "step_type": s.step_type,
                    "status": s.status,
                    "input": _json(s.input),
                },
            )
        )
    for j in changes.new_jobs:
        out.append(
            (
                jobs.INSERT,
                {
                    "id": j.id,
                    "instance_id": iid,
                    "step_execution_id": j.step_execution_id,
                    "job_type": j.job_type,
                    "lease_seconds": j.lease_seconds,
                    "retries_remaining": j.retries_remaining,
                    "payload": j.payload_json,
                    "payload_bytes": len(j.payload_json),
                    "poll_timeout": j.poll_timeout_seconds,
                },
            )
        )
    out.extend((jobs.MARK_COMPLETED, {"id": job_id}) for job_id in changes.completed_jobs)
    out.extend((jobs.MARK_FAILED, {"id": job_id}) for job_id in changes.failed_jobs)
    out.extend(
        (jobs.SCHEDULE_RETRY, {"id": r.id, "run_at": r.run_at}) for r in changes.retried_jobs
    )
    for u in changes.step_updates:
        out.append(
            (
                UPDATE_STEP,
                {
                    "id": u.id,
                    "status": u.status,
                    "output": _json(u.output),
                    "error": u.error,
                    "attempt": u.attempt,
                },
            )
        )
    if changes.cancel_open_work:
        out.append((jobs.CANCEL_OPEN_FOR_INSTANCE, {"instance_id": iid}))
        out.append((CANCEL_OPEN_STEPS, {"instance_id": iid}))
    if changes.audit:
        out.append(
            (
                INSERT_AUDIT,
                {
                    "instance_id": iid,
                    "rows": json.dumps(
                        [
                            {
                                "job_id": None if a.job_id is None else str(a.job_id),
                                "event": a.event,
                                "detail": a.detail,
                            }
                            for a in changes.audit
                        ],
                        separators=(",", ":"),
                    ),
                },
            )
        )
    if inst.queue_task_id is not None and inst.status != "RUNNING":
        # A queue-triggered instance ended: settle its queue task in this same transaction.
        out.append(
            (
                queues.SETTLE_FOR_INSTANCE,
                {
                    "id": inst.queue_task_id,
                    "instance_id": iid,
                    "ok": inst.status == "COMPLETED",
                    "error": inst.reason,
                },
            )
        )
    return out
