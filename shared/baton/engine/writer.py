"""The decision writer: turns a decision's :class:`~baton.engine.decide.Changes` into ONE SQL
statement and sends it (with the COMMIT, when it ends a transaction) in one round trip.

Three entry points, one per way a decision is made:

- :func:`write_start`: a new instance (its row, first steps and jobs), in the caller's transaction;
- :func:`write_locked`: a decision made in a transaction that locked the instance row first;
- :func:`write_optimistic`: a decision made on an unlocked read (job complete and fail), on an
  autocommit connection; the statement is atomic on its own and fenced by what was read.

The statement is a chain of data-modifying CTEs. PostgreSQL gives no order among the CTEs of one
statement, so each update carries a dependency on the update before it (``/*after*/`` in the
store's SQL): the rows of a decision are locked in one order everywhere, instance first, then
jobs, then steps (the claim and the reaper lock jobs before steps too), and no two paths can
deadlock on them. A write guarded by what the decision read (the instance's version through the
fencing trigger; the reported job's status, holder and attempt) must touch exactly the rows it
expects, or the statement fails as a whole with SQLSTATE BT409 (``StaleVersion``) and nothing of
the decision lands. One statement cannot update a row twice, nor update a row it inserts: the
decider folds those together, and cancelling open work excludes the rows the decision writes.
Instances a decision starts (sub-workflows, a failure workflow) are written in the same statement.
"""

from __future__ import annotations

import functools
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from psycopg import Cursor, RawCursor
from psycopg.types.json import Jsonb

from baton import jsontext
from baton.engine.decide import Changes, InstanceState, JobRef, NewJob, NewStep, StepUpdate
from baton.status import InstanceStatus
from baton.store import batch_sql, instance_sql, job_sql, queue_sql
from baton.store.db import Conn
from baton.store.raw_sql import RawStatement

_PARAM = re.compile(r"%\((\w+)\)s")
_CTE_REF = re.compile(r"/\*cte:(\w+)\*/")
AFTER = "/*after*/"
# The batch writes, converted once (longer than psycopg caches its conversions for).
WRITE_DECISIONS = RawStatement(batch_sql.WRITE_DECISIONS)
WRITE_UPDATES = RawStatement(batch_sql.WRITE_UPDATES)
START_DECISIONS = RawStatement(batch_sql.START_DECISIONS)
# A per-commit completion of the common shape (see write_settled), and a batch of them only.
WRITE_SETTLED = RawStatement(instance_sql.COMPLETE_ONE_STEP)
WRITE_ONE_STEPS = RawStatement(batch_sql.COMPLETE_ONE_STEPS)


@dataclass(frozen=True, slots=True)
class Piece:
    """One write: constant SQL from the store, its parameters, the rows it must touch (None: any),
    and a name other pieces refer to as ``/*cte:name*/``."""

    sql: str
    params: dict[str, Any]
    expect: int | None = None
    name: str | None = None


@dataclass(frozen=True, slots=True)
class Settled:
    """A decision made without a decider (``engine.one_step``), as ONE row: the instance (``id``,
    its ``variables`` after the result, which are its output too, and the ``expected`` version
    it was read at), the ended job (``job_id`` with its guard: ``g_status``, ``g_worker``,
    ``g_attempt``) and the step (``step_id``, its ``output``). A batch of them only is written
    by ``batch_sql.COMPLETE_ONE_STEPS`` from these rows as they are; one alone by
    ``COMPLETE_ONE_STEP``; among other decisions, as the rows :class:`_SetRows` makes of the
    decider's :class:`Changes` for the same decision (``add_settled``).
    ``tests/integration/test_one_step_batch.py`` compares what each leaves."""

    instance_id: uuid.UUID | str  # (as the claim gave it: text)
    row: dict[str, Any]


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
        parent_instance_id=row.get("parent_instance_id"),
        parent_step_execution_id=row.get("parent_step_execution_id"),
        step_count=row.get("step_count") or 0,
        depth=row.get("depth") or 0,
        created_at=row.get("created_at"),
    )


def job_ref(row: dict[str, Any]) -> JobRef:
    """The reported job as read by the job-with-instance queries."""
    return JobRef(
        id=row["job_id"],
        step_id=row["step_id"],
        step_execution_id=row["step_execution_id"],
        status=row["job_status"],
        worker_id=row["worker_id"],
        attempt=row["attempt"],
        retries_remaining=row["retries_remaining"],
        scope=row.get("scope") or "",
    )


def write_start(
    conn: Conn,
    inst: InstanceState,
    changes: Changes,
    *,
    insert: dict[str, Any] | None,
    commit: bool,
    outbox: bool = False,
    reads: Sequence[tuple[str, dict[str, Any]]] = (),
) -> list[Cursor[dict[str, Any]]]:
    """Write a new instance's first decision in the caller's open transaction.

    ``insert``: the instance row, written here with what the decision made of it (None when the
    caller inserted it already, to learn whether an idempotency key was new). ``commit`` False
    leaves the transaction open. ``reads`` (with ``commit``) run after the COMMIT in the same
    round trip; their cursors are returned, to fetch from.
    """
    pieces = pieces_of(inst, changes, new_instance=True, insert=insert, outbox=outbox)
    return _send(conn, pieces, commit=commit, reads=reads)


def write_locked(
    conn: Conn, inst: InstanceState, changes: Changes, *, outbox: bool = False
) -> None:
    """Write a decision and commit, in the caller's transaction (which locked the instance).
    ``outbox``: new jobs are outbox-mode jobs (BATON_DISPATCH_MODE=outbox)."""
    pieces = pieces_of(inst, changes, new_instance=False, insert=None, outbox=outbox)
    _send(conn, pieces, commit=True)


def write_optimistic(
    conn: Conn, inst: InstanceState, changes: Changes, *, outbox: bool = False
) -> None:
    """Write a decision made on an unlocked read, on an autocommit connection: one statement,
    atomic on its own, refused whole if the instance or the reported job moved since the read."""
    pieces = pieces_of(inst, changes, new_instance=False, insert=None, outbox=outbox)
    _send(conn, pieces, commit=False)


def write_settled(conn: Conn, one: Settled) -> None:
    """Write one decision made without a decider (``engine.one_step``) on an unlocked read or
    a kept state, on an autocommit connection: one statement (``COMPLETE_ONE_STEP``: only the
    rows the shape writes, what is constant for it folded in, its parameters in order, prepared
    at its first run), atomic on its own, refused whole if the instance or the reported job
    moved since. The instance's output is its variables and the audit rows are the shape's
    (as ``one`` says, and as the statement derives them)."""
    row = one.row
    WRITE_SETTLED.execute(
        conn,
        {
            "id": str(row["id"]),
            "variables": _rows(row["variables"]),
            "expected": row["expected"],
            "job_id": str(row["job_id"]),
            "g_status": row["g_status"],
            "g_worker": row["g_worker"],
            "g_attempt": row["g_attempt"],
            "step_id": str(row["step_id"]),
            "step_output": _rows(row["output"]),
        },
    )


def write_many(
    conn: Conn,
    decisions: list[tuple[InstanceState, Changes]],
    *,
    outbox: bool = False,
    settled: Sequence[Settled] = (),
) -> None:
    """Write several decisions made on unlocked reads in one transaction, on an autocommit
    connection, all in one pipeline (one round trip, one commit): the decisions' instances
    locked in id order; one set-based statement for every decision that needs only the common
    writes (``batch_sql.WRITE_UPDATES`` or ``WRITE_DECISIONS``, see ``_SetRows.statement``, with
    the ``settled`` ones already in its rows; ``COMPLETE_ONE_STEPS`` from their own rows when
    the batch is ``settled`` ones only), one chained statement for each of the others. A refused
    fence (StaleVersion) or any error rolls back all of them.

    When every decision fits the set-based statement (the common case), that one statement is
    the whole transaction (autocommit) and locks the instances itself (``locked``). Otherwise
    the transaction is the pipeline's implicit one (PostgreSQL runs the statements up to a Sync
    as one transaction, committed at the Sync, or rolled back there at the first error), not a
    BEGIN ... COMMIT block: a refused block would leave the connection in a failed transaction
    whose ROLLBACK makes psycopg forget every prepared statement of the connection (it deallocates
    them all at any ROLLBACK), so that each hot statement was parsed and planned afresh for its
    next five runs after every raced batch; and it logged a warning at each."""
    if not decisions and not settled:
        return
    assert conn.autocommit, "write_many runs in one statement or its pipeline's transaction"
    if not decisions:  # (a drain of one-step workflows): one statement, which locks them too
        WRITE_ONE_STEPS.execute(
            conn, {"settled": _rows([one.row for one in settled]), "n_instances": len(settled)}
        )
        return
    common = _SetRows()
    for one in settled:
        common.add_settled(one)
    alone: list[tuple[bytes, list[Any]]] = []
    for inst, changes in decisions:
        if _common_writes_only(inst, changes):
            common.add(inst, changes, outbox)
        else:
            pieces = pieces_of(inst, changes, new_instance=False, insert=None, outbox=outbox)
            alone.append(positional(pieces))
    ids: list[str] = []
    if len(decisions) + len(settled) > 1:
        # As text (UUIDs and text alike), which sorts as the UUIDs do.
        ids = [str(inst.id) for inst, _ in decisions]
        ids.extend(str(one.instance_id) for one in settled)
    if not alone:
        # One statement, atomic on its own, that locks the instances itself: no pipeline
        # (psycopg's pipeline and a second statement cost ~15 us of client CPU per batch).
        common.statement().execute(conn, common.params(lock=ids))
        return
    with conn.pipeline():
        cur = conn.cursor()
        if ids:
            cur.execute(batch_sql.LOCK_INSTANCES, {"ids": sorted(ids)})
        if common.count:
            common.statement().execute(conn, common.params())
        write = RawCursor(conn)  # each chain as _send sends it
        for query, args in alone:
            write.execute(query, args)


def _common_writes_only(inst: InstanceState, changes: Changes) -> bool:
    """Does the decision need only the writes ``batch_sql.WRITE_DECISIONS`` makes?"""
    return not (
        changes.children
        or changes.cancel_scopes
        or changes.timed_out_jobs
        or changes.cancelled_jobs
        or changes.alerted_jobs
        or changes.consumed_events
        or _settles_queue_task(inst)
    )


class _SetRows:
    """The rows of many decisions, by write, for ``batch_sql.WRITE_DECISIONS``."""

    def __init__(self) -> None:
        self.count = 0
        self.instances: list[dict[str, Any]] = []
        self.ended_jobs: list[dict[str, Any]] = []
        self.retried_jobs: list[dict[str, Any]] = []
        self.new_jobs: list[dict[str, Any]] = []
        self.step_updates: list[dict[str, Any]] = []
        self.new_steps: list[dict[str, Any]] = []
        self.events: list[dict[str, Any]] = []
        self.audit: list[dict[str, Any]] = []
        self.new_instances: list[dict[str, Any]] = []  # START_DECISIONS only

    def add(
        self,
        inst: InstanceState,
        changes: Changes,
        outbox: bool,
        insert: dict[str, Any] | None = None,
    ) -> None:
        # Called once per decision of a batch: each kind of row is built only when the decision
        # has some (most have a job, a step update and two audit rows, and nothing else).
        # ``insert``: a new instance's INSERT_INSTANCE parameters (a batch start's instance
        # without an idempotency key), inserted with what the decision made of it.
        self.count += 1
        iid = inst.id
        update, steps = _advance(inst, changes, inserted=insert is not None)
        if insert is not None:
            self.new_instances.append(_new_instance_row(inst, changes, insert))
        if update is not None:
            self.instances.append(update)
        for row in steps:
            row["instance_id"] = iid
            self.new_steps.append(row)
        for new in changes.new_jobs:
            row = _job_row(new, outbox)
            row["instance_id"] = iid
            self.new_jobs.append(row)
        for j in changes.completed_jobs:
            self.ended_jobs.append({**_guard(j), "status": "COMPLETED"})
        for j in changes.failed_jobs:
            self.ended_jobs.append({**_guard(j), "status": "FAILED"})
        for r in changes.retried_jobs:
            self.retried_jobs.append({**_guard(r.job), "run_at": r.run_at})
        for u in changes.step_updates.values():
            self.step_updates.append(_step_update_row(u))
        if changes.events:
            self.events.extend(_event_rows(changes))
        for a in changes.audit:
            self.audit.append(
                {"job_id": a.job_id, "event": a.event, "detail": a.detail, "instance_id": iid}
            )

    def add_settled(self, one: Settled) -> None:
        # The rows the decider's changes make for the shape: a key whose value would be null or
        # false is left out (the statements read a missing key as NULL, which every expression
        # there takes as it takes null and false for a COMPLETED instance and step: no reason,
        # no timeout to keep or reset, no step attempt, state, child or wake-up to set).
        row = one.row
        iid, jid, attempt, holder = row["id"], row["job_id"], row["g_attempt"], row["g_worker"]
        self.count += 1
        self.instances.append(
            {
                "id": iid,
                "status": "COMPLETED",
                "variables": row["variables"],
                "output": row["variables"],
                "expected": row["expected"],
                "added_steps": 0,
            }
        )
        self.ended_jobs.append(
            {
                "id": jid,
                "g_status": row["g_status"],
                "g_worker": holder,
                "g_attempt": attempt,
                "status": "COMPLETED",
            }
        )
        self.step_updates.append(
            {"id": row["step_id"], "status": "COMPLETED", "output": row["output"], "error": ""}
        )
        self.audit.append(
            {
                "job_id": jid,
                "event": "JOB_COMPLETED",
                "detail": {"attempt": attempt, "workerId": holder},
                "instance_id": iid,
            }
        )
        self.audit.append({"event": "INSTANCE_COMPLETED", "instance_id": iid})

    def statement(self) -> RawStatement:
        """``WRITE_UPDATES`` when the rows need no more (no retried or new jobs, no new steps, no
        events: a batch of one-step completions), else ``WRITE_DECISIONS``."""
        if self.retried_jobs or self.new_jobs or self.new_steps or self.events:
            return WRITE_DECISIONS
        return WRITE_UPDATES

    def params(self, lock: list[str] | None = None) -> dict[str, Any]:
        """The statement's parameters; ``lock``: the instances it locks first (in id order)."""
        return {
            "lock": _rows(lock or []),
            "instances": _rows(self.instances),
            "n_instances": len(self.instances),
            "ended_jobs": _rows(self.ended_jobs),
            "n_ended_jobs": len(self.ended_jobs),
            "retried_jobs": _rows(self.retried_jobs),
            "n_retried_jobs": len(self.retried_jobs),
            "new_jobs": _rows(self.new_jobs),
            "step_updates": _rows(self.step_updates),
            "new_steps": _rows(self.new_steps),
            "events": _rows(self.events),
            "audit": _rows(self.audit),
            "new_instances": _rows(self.new_instances),
        }


def _new_instance_row(
    inst: InstanceState, changes: Changes, insert: dict[str, Any]
) -> dict[str, Any]:
    """START_DECISIONS' row of a new top-level instance without an idempotency key: what
    ``pieces_of`` gives INSERT_INSTANCE for it."""
    if insert.get("idempotency_key") is not None or insert.get("parent_instance_id") is not None:
        raise ValueError("only a top-level instance without an idempotency key is inserted here")
    return {
        "id": inst.id,
        "definition_name": insert["definition_name"],
        "definition_version": insert["definition_version"],
        "snapshot_id": insert["snapshot_id"],
        "status": inst.status,
        "input": insert["input"].obj,  # (instance_row's Jsonb)
        "variables": inst.variables,
        "output": inst.output,
        "reason": inst.reason,
        "correlation_id": insert["correlation_id"],
        "queue_task_id": insert.get("queue_task_id"),
        "step_count": len(changes.new_steps),
        "timeout_seconds": insert.get("timeout_seconds"),
    }


def write_starts(
    conn: Conn,
    starts: Sequence[tuple[InstanceState, Changes, dict[str, Any] | None]],
    *,
    outbox: bool = False,
) -> None:
    """Write the first decisions of a batch start's instances in the caller's open transaction
    (sent in its pipeline, nothing fetched): every decision ``batch_sql.START_DECISIONS`` can
    carry in one statement (a new instance with its ``insert`` parameters, or a keyed one its
    transaction inserted already, with None), each other (one that starts a sub-workflow, say)
    in its own chained statement, as ``write_start`` writes it."""
    common = _SetRows()
    for inst, changes, insert in starts:
        if _common_writes_only(inst, changes):
            common.add(inst, changes, outbox, insert)
        else:
            write_start(conn, inst, changes, insert=insert, commit=False, outbox=outbox)
    if common.count:
        START_DECISIONS.execute(conn, common.params())


def statement(pieces: list[Piece]) -> tuple[bytes, dict[str, Any]]:
    """The one statement (SQL, parameters) that carries ``pieces``, in its readable
    ``%(p<k>_<name>)s`` form (what ``tests/unit/test_writer_golden.py`` pins); it is sent as
    ``positional`` gives it."""
    params: dict[str, Any] = {}
    for k, piece in enumerate(pieces):
        params.update({f"p{k}_{name}": value for name, value in piece.params.items()})
    shape = tuple((p.sql, p.expect, p.name) for p in pieces)
    return _chained_sql(shape), params


def positional(pieces: list[Piece]) -> tuple[bytes, list[Any]]:
    """``statement`` in PostgreSQL's ``$n`` form with its parameters in order: the text and
    where each parameter comes from are made once per shape (``_numbered``), so a decision
    costs neither a prefixed dictionary nor psycopg's conversion of the text (which it caches
    only for texts of up to 4 kB, and a decision's chain is often longer)."""
    query, order = _numbered(tuple((p.sql, p.expect, p.name) for p in pieces))
    return query, [pieces[k].params[name] for k, name in order]


def _send(
    conn: Conn,
    pieces: list[Piece],
    *,
    commit: bool,
    reads: Sequence[tuple[str, dict[str, Any]]] = (),
) -> list[Cursor[dict[str, Any]]]:
    query, args = positional(pieces)
    # Sent as it is (RawCursor); prepared as psycopg prepares any statement, after its fifth
    # run: a decision has a few shapes and the hot ones run on every completion.
    write: Cursor[dict[str, Any]] = RawCursor(conn)
    if not commit:
        if reads:
            raise ValueError("reads follow a COMMIT: give them only with commit")
        # One statement on an autocommit connection (an optimistic decision): a pipeline would
        # add only psycopg's own cost (about 25 us of client CPU per completion).
        write.execute(query, args)
        return []
    with conn.pipeline():
        write.execute(query, args)
        cur = conn.cursor()
        # COMMIT travels in this pipeline's one Sync (conn.commit() here would add a second,
        # empty round trip when the pipeline block closes). Never prepared: a statement the
        # server skips after an error would leave psycopg believing it had been prepared.
        cur.execute(b"COMMIT", prepare=False)
        # Reads of what was just committed share the Sync (each its own implicit transaction
        # after the COMMIT); skipped with the rest if the write fails.
        return [conn.execute(sql, params) for sql, params in reads]


@functools.lru_cache(maxsize=512)
def _chained_sql(shape: tuple[tuple[str, int | None, str | None], ...]) -> bytes:
    """``WITH w0 AS (…), w1 AS (…) … SELECT …``, each update after the one before it.

    Built only from the store's constant SQL (never from data), and cached per shape.
    """
    names = {name: f"w{k}" for k, (_, _, name) in enumerate(shape) if name}
    ctes: list[str] = []
    previous: tuple[int, int | None] | None = None  # the last ordered piece and its expectation
    for k, (sql, expect, _) in enumerate(shape):
        body = _PARAM.sub(lambda m, k=k: f"%(p{k}_{m.group(1)})s", sql.strip())  # type: ignore[misc]
        body = _CTE_REF.sub(lambda m: names[m.group(1)], body)
        if AFTER in body:
            body = body.replace(" " + AFTER, _after(previous))
            previous = (k, expect)
        elif expect is not None:
            raise ValueError("only ordered writes (with /*after*/) can carry an expectation")
        ctes.append(f"w{k} AS ({body})")
    final = "SELECT 1"
    if previous is not None and previous[1] is not None:
        final = f"SELECT {_check(*previous)} FROM w{previous[0]}"  # noqa: S608 (indices only)
    return ("WITH " + ",\n".join(ctes) + "\n" + final).encode()


@functools.lru_cache(maxsize=512)
def _numbered(
    shape: tuple[tuple[str, int | None, str | None], ...],
) -> tuple[bytes, tuple[tuple[int, str], ...]]:
    """``_chained_sql(shape)`` with ``$n`` placeholders, and the parameter each ``$n`` takes:
    (the piece's index, its parameter's name)."""
    raw = RawStatement(_chained_sql(shape).decode())
    order = [name[1:].split("_", 1) for name in raw.names]  # p<k>_<name>
    return raw.query, tuple((int(k), name) for k, name in order)


def _check(k: int, expect: int | None) -> str:
    return f"baton_expect(count(*) = {expect}, 'w{k}')"


def _after(previous: tuple[int, int | None] | None) -> str:
    """The condition that makes a write wait for (and check) the ordered write before it."""
    if previous is None:
        return ""
    k, expect = previous
    if expect is None:
        return f" AND (SELECT count(*) FROM w{k}) >= 0"  # noqa: S608 (indices only)
    return f" AND (SELECT {_check(k, expect)} FROM w{k}) = 1"  # noqa: S608 (indices only)


def _json(value: Any) -> Jsonb | None:
    return None if value is None else Jsonb(value)


def _guard(job: JobRef) -> dict[str, Any]:
    return {
        "id": job.id,
        "g_status": job.status,
        "g_worker": job.worker_id,
        "g_attempt": job.attempt,
    }


# orjson writes UUIDs natively (their canonical text, as str() gives), datetimes in ISO form.
_dump_rows = jsontext.dumps_with(str)


def _rows(values: Sequence[Any]) -> str:
    return _dump_rows(values).decode()


def pieces_of(
    inst: InstanceState,
    changes: Changes,
    *,
    new_instance: bool,
    insert: dict[str, Any] | None,
    outbox: bool = False,
) -> list[Piece]:
    """Every write of a decision, in lock order: instance, jobs, steps, then the rest."""
    iid = inst.id
    out: list[Piece] = []
    if insert is not None:
        # The row is inserted by this statement, so what the decision made of the instance goes
        # into the insert itself (an update could not see the row).
        out.append(
            Piece(
                instance_sql.INSERT_INSTANCE,
                {
                    "parent_instance_id": None,
                    "parent_step_execution_id": None,
                    "depth": 0,
                    **insert,
                    "status": inst.status,
                    "variables": Jsonb(inst.variables),
                    "output": _json(inst.output),
                    "reason": inst.reason,
                    "step_count": len(changes.new_steps),
                },
            )
        )
    update, steps = _advance(inst, changes, inserted=insert is not None)
    if update is not None:
        typed = {**update, "variables": Jsonb(update["variables"])}
        out.append(
            Piece(instance_sql.UPDATE_INSTANCE, {**typed, "output": _json(update["output"])})
        )
    if len(steps) == 1:  # the common case keeps its typed, prepared single-row insert
        out.append(Piece(instance_sql.INSERT_STEP, {**_jsonb(steps[0]), "instance_id": iid}))
    elif steps:
        out.append(Piece(instance_sql.INSERT_STEPS, {"instance_id": iid, "rows": _rows(steps)}))
    jobs = [_job_row(j, outbox) for j in changes.new_jobs]
    if len(jobs) == 1:
        row = jobs[0]
        out.append(
            Piece(
                job_sql.INSERT,
                {**row, "instance_id": iid, "payload": changes.new_jobs[0].payload_json},
            )
        )
    elif jobs:
        out.append(Piece(job_sql.INSERT_MANY, {"instance_id": iid, "rows": _rows(jobs)}))
    for child in changes.children:
        out.extend(
            pieces_of(
                child.state, child.changes, new_instance=True, insert=child.insert, outbox=outbox
            )
        )
    # Jobs before steps, the guarded jobs first.
    out.extend(Piece(job_sql.MARK_COMPLETED, _guard(j), 1) for j in changes.completed_jobs)
    out.extend(Piece(job_sql.MARK_FAILED, _guard(j), 1) for j in changes.failed_jobs)
    out.extend(Piece(job_sql.MARK_TIMED_OUT, _guard(j), 1) for j in changes.timed_out_jobs)
    out.extend(Piece(job_sql.MARK_CANCELLED, _guard(j), 1) for j in changes.cancelled_jobs)
    out.extend(Piece(job_sql.CLEAR_DEADLINE, _guard(j), 1) for j in changes.alerted_jobs)
    out.extend(
        Piece(job_sql.SCHEDULE_RETRY, {**_guard(r.job), "run_at": r.run_at}, 1)
        for r in changes.retried_jobs
    )
    prefixes = _outermost(changes.cancel_scopes)
    written_jobs = changes.written_jobs()
    for k, prefix in enumerate(prefixes):
        name = f"cancelled_jobs_{k}"
        out.append(
            Piece(
                job_sql.CANCEL_OPEN,
                {"instance_id": iid, "prefix": prefix, "written": written_jobs},
                name=name,
            )
        )
        out.append(Piece(job_sql.AUDIT_CANCELLED.replace("cancelled_jobs", name), {}))
    for u in changes.step_updates.values():
        row = _step_update_row(u)
        out.append(
            Piece(
                instance_sql.UPDATE_STEP,
                {**row, "output": _json(row["output"]), "state": _json(row["state"])},
            )
        )
    written_steps = [*changes.step_updates, *changes.new_steps]
    for k, prefix in enumerate(prefixes):
        name = f"cancelled_steps_{k}"
        out.append(
            Piece(
                instance_sql.CANCEL_OPEN_STEPS,
                {"instance_id": iid, "prefix": prefix, "written": written_steps},
                name=name,
            )
        )
        out.append(Piece(instance_sql.CANCEL_CHILDREN.replace("cancelled_steps", name), {}))
    if changes.events:
        out.append(Piece(instance_sql.INSERT_EVENTS, {"rows": _rows(_event_rows(changes))}))
    if changes.consumed_events:
        out.append(
            Piece(instance_sql.DELETE_EVENTS, {"instance_id": iid, "ids": changes.consumed_events})
        )
    if changes.audit:
        out.append(
            Piece(
                instance_sql.INSERT_AUDIT, {"instance_id": iid, "rows": _rows(_audit_rows(changes))}
            )
        )
    if _settles_queue_task(inst):
        # A queue-triggered instance ended: settle its queue task in this same statement.
        out.append(
            Piece(
                queue_sql.SETTLE_FOR_INSTANCE,
                {
                    "id": inst.queue_task_id,
                    "instance_id": iid,
                    "outcome": queue_outcome(InstanceStatus(inst.status)),
                    "error": inst.reason,
                },
            )
        )
    return out


def _advance(
    inst: InstanceState, changes: Changes, *, inserted: bool = False
) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """What a decision makes of its instance row (None: a row the same statement inserts, or
    one left as it was) and its new step rows, numbered after the instance's last step; moves
    ``inst`` on to the version and step count the writes leave."""
    added = len(changes.new_steps)
    update: dict[str, Any] | None = None
    if not inserted and (changes.instance_changed or added):
        update = {
            "id": inst.id,
            "status": inst.status,
            "variables": inst.variables,
            "output": inst.output,
            "reason": inst.reason,
            "expected": inst.version,
            "clear_timeout": inst.clear_timeout,
            "reset_timeout": inst.reset_timeout,
            "added_steps": added,
        }
        inst.version += 1
    steps = [
        {**_step_row(s), "seq": inst.step_count + k}
        for k, s in enumerate(changes.new_steps.values(), 1)
    ]
    inst.step_count += added
    return update, steps


def _step_update_row(u: StepUpdate) -> dict[str, Any]:
    return {
        "id": u.id,
        "status": u.status,
        "output": u.output,
        "error": u.error,
        "attempt": u.attempt,
        "state": u.state,
        "child_instance_id": u.child_instance_id,
        "wake_at": u.wake_at,
        "set_wake": u.set_wake,
    }


def _event_rows(changes: Changes) -> list[dict[str, Any]]:
    return [
        {
            "instance_id": e.instance_id,
            "kind": e.kind,
            "step_execution_id": e.step_execution_id,
            "payload": e.payload,
        }
        for e in changes.events
    ]


def _audit_rows(changes: Changes) -> list[dict[str, Any]]:
    return [
        {
            "job_id": a.job_id,
            "event": a.event,
            "detail": a.detail,
        }
        for a in changes.audit
    ]


def _settles_queue_task(inst: InstanceState) -> bool:
    """A queue-triggered instance that ended settles its queue task in the same statement."""
    return inst.queue_task_id is not None and InstanceStatus(inst.status).terminal


def _step_row(s: NewStep) -> dict[str, Any]:
    return {
        "id": s.id,
        "step_id": s.step_id,
        "step_type": s.step_type,
        "status": s.status,
        "attempt": s.attempt,
        "input": s.input,
        "output": s.output,
        "error": s.error,
        "parent_id": s.parent_id,
        "scope": s.scope,
        "branch": s.branch,
        "item_index": s.item_index,
        "iteration": s.iteration,
        "state": s.state,
        "wake_at": s.wake_at,
        "child_instance_id": s.child_instance_id,
    }


def _jsonb(row: dict[str, Any]) -> dict[str, Any]:
    """A step row as typed parameters (its JSON columns wrapped)."""
    return {
        **row,
        "input": _json(row["input"]),
        "output": _json(row["output"]),
        "state": _json(row["state"]),
    }


def _job_row(j: NewJob, outbox: bool) -> dict[str, Any]:
    return {
        "dispatch_outbox": outbox,
        "id": j.id,
        "step_execution_id": j.step_execution_id,
        "job_type": j.job_type,
        "status": j.status,
        "lease_seconds": j.lease_seconds,
        "retries_remaining": j.retries_remaining,
        "payload": j.payload,
        "payload_bytes": len(j.payload_json),
        "poll_timeout": j.poll_timeout_seconds,
        "timeout": j.timeout_seconds,
        "start_delay": j.start_delay_seconds,
        "total_timeout": j.total_timeout_seconds,
    }


def _outermost(prefixes: list[str]) -> list[str]:
    """The prefixes no other one contains (a row is cancelled once, by one update)."""
    unique = sorted(set(prefixes), key=len)
    kept: list[str] = []
    for p in unique:
        if not any(p.startswith(q) for q in kept):
            kept.append(p)
    return kept


def queue_outcome(status: InstanceStatus) -> str:
    """How an ended instance settles its queue task: done, retried, or given up (cancelled)."""
    if status == InstanceStatus.COMPLETED:
        return "completed"
    if status == InstanceStatus.CANCELLED:
        return "failed"
    return "retry"
