"""The decision writer: turns a decision's :class:`~baton.engine.decide.Changes` into SQL and sends
it, with the COMMIT, in one pipelined round trip.

Three entry points, one per way a decision is made:

- :func:`write_start`: a new instance (its row, first steps and jobs), in the caller's transaction;
- :func:`write_locked`: a decision made in a transaction that locked the instance row first;
- :func:`write_optimistic`: a decision made on an unlocked read (job complete and fail), on an
  autocommit connection; the writes are atomic on their own and fenced by the version read.

Where no row is touched twice, the writes go as ONE statement of data-modifying CTEs (psycopg's
per-statement cost was most of the client CPU per job); a decision that cancels open work updates
rows twice, which one statement cannot do, so its writes go one by one in the same pipeline.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any

from psycopg.types.json import Jsonb

from baton.engine.decide import Changes, InstanceState
from baton.status import InstanceStatus
from baton.store import instance_sql, job_sql, queue_sql
from baton.store.db import Conn

Piece = tuple[str, dict[str, Any]]
_PARAM = re.compile(r"%\((\w+)\)s")


def state_from_row(row: dict[str, Any]) -> InstanceState:
    """The decider's view of an instance row (as read by the instance and job queries)."""
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


def write_start(
    conn: Conn,
    inst: InstanceState,
    changes: Changes,
    *,
    insert: dict[str, Any] | None,
    commit: bool,
) -> None:
    """Write a new instance's first decision in the caller's open transaction.

    ``insert``: the instance row, written here first (None when the caller inserted it already,
    to learn whether an idempotency key was new). ``commit`` False leaves the transaction open.
    """
    pieces = pieces_of(inst, changes, new_instance=True, insert=insert)
    _send(conn, pieces, combine=combinable(pieces, changes), begin=False, commit=commit)


def write_locked(conn: Conn, inst: InstanceState, changes: Changes) -> None:
    """Write a decision and commit, in the caller's transaction (which locked the instance)."""
    pieces = pieces_of(inst, changes, new_instance=False, insert=None)
    _send(conn, pieces, combine=combinable(pieces, changes), begin=False, commit=True)


def write_optimistic(conn: Conn, inst: InstanceState, changes: Changes) -> None:
    """Write a decision made on an unlocked read, on an autocommit connection.

    One statement is atomic by itself; several are wrapped in BEGIN ... COMMIT here. Either way
    the fenced instance update refuses the whole write if the instance changed since the read.
    """
    pieces = pieces_of(inst, changes, new_instance=False, insert=None)
    combine = combinable(pieces, changes)
    wrap = not combine and len(pieces) > 1
    _send(conn, pieces, combine=combine, begin=wrap, commit=wrap)


def statements(pieces: list[Piece], *, combine: bool) -> list[tuple[bytes, dict[str, Any]]]:
    """The statements (SQL, parameters) that carry ``pieces``: one combined, or one each."""
    if combine:
        return [_combined(pieces)]
    return [(sql.encode(), params) for sql, params in pieces]


def combinable(pieces: list[Piece], changes: Changes) -> bool:
    """True when the pieces can go as one statement (no row is touched twice)."""
    return len(pieces) > 1 and not changes.cancel_open_work


def _send(conn: Conn, pieces: list[Piece], *, combine: bool, begin: bool, commit: bool) -> None:
    with conn.pipeline():
        cur = conn.cursor()
        # Transaction control is never prepared: a statement the server skips after an error in
        # this pipeline would leave psycopg believing it had been prepared.
        if begin:
            cur.execute(b"BEGIN", prepare=False)
        for sql, params in statements(pieces, combine=combine):
            # The combined statement has a few shapes and runs on every completion: prepare it.
            # Piecewise writes (cancellations) are rarer; keep them out of the prepared cache.
            cur.execute(sql, params, prepare=None if combine else False)
        if commit:
            # COMMIT travels in this pipeline's one Sync (conn.commit() here would add a second,
            # empty round trip when the pipeline block closes).
            cur.execute(b"COMMIT", prepare=False)


@functools.lru_cache(maxsize=256)
def _combined_sql(fragments: tuple[str, ...]) -> bytes:
    """``WITH w0 AS (<stmt>), w1 AS (<stmt>) ... SELECT 1``, parameters renamed per piece.

    Built only from the store's constant SQL (never from data), and cached per shape.
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


def _json(value: Any) -> Jsonb | None:
    return None if value is None else Jsonb(value)


def pieces_of(
    inst: InstanceState, changes: Changes, *, new_instance: bool, insert: dict[str, Any] | None
) -> list[Piece]:
    """Every write of a decision, in order, as (constant SQL, parameters)."""
    iid = inst.id
    out: list[Piece] = []
    if insert is not None:
        out.append((instance_sql.INSERT_INSTANCE, insert))
    # The fenced instance update goes first: a stale decision fails before it has written anything.
    if changes.instance_changed and not (new_instance and inst.status == InstanceStatus.RUNNING):
        out.append(
            (
                instance_sql.UPDATE_INSTANCE,
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
                instance_sql.INSERT_STEP,
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
                job_sql.INSERT,
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
    out.extend((job_sql.MARK_COMPLETED, {"id": job_id}) for job_id in changes.completed_jobs)
    out.extend((job_sql.MARK_FAILED, {"id": job_id}) for job_id in changes.failed_jobs)
    out.extend(
        (job_sql.SCHEDULE_RETRY, {"id": r.id, "run_at": r.run_at}) for r in changes.retried_jobs
    )
    for u in changes.step_updates:
        out.append(
            (
                instance_sql.UPDATE_STEP,
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
        out.append((job_sql.CANCEL_OPEN_FOR_INSTANCE, {"instance_id": iid}))
        out.append((instance_sql.CANCEL_OPEN_STEPS, {"instance_id": iid}))
    if changes.audit:
        rows = [
            {
                "job_id": None if a.job_id is None else str(a.job_id),
                "event": a.event,
                "detail": a.detail,
            }
            for a in changes.audit
        ]
        out.append(
            (
                instance_sql.INSERT_AUDIT,
                {"instance_id": iid, "rows": json.dumps(rows, separators=(",", ":"))},
            )
        )
    if inst.queue_task_id is not None and inst.status != InstanceStatus.RUNNING:
        # A queue-triggered instance ended: settle its queue task in this same transaction.
        out.append(
            (
                queue_sql.SETTLE_FOR_INSTANCE,
                {
                    "id": inst.queue_task_id,
                    "instance_id": iid,
                    "ok": inst.status == InstanceStatus.COMPLETED,
                    "error": inst.reason,
                },
            )
        )
    return out
