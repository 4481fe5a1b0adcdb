"""Batch starts: up to 100 instances started in one transaction, each item answered on its own.

A single start costs a transaction, its round trips and a commit (one WAL flush) per instance; a
batch shares them. The transaction's round trips do not grow with the batch:

1. its BEGIN with one read of every distinct stored definition the batch names (pipelined);
2. the instance rows of the items carrying an idempotency key, inserted in key order (two
   batches sharing keys take them in the same order and cannot deadlock each other), pipelined,
   with a read of the keys that turn out to be taken (their repeats: EXISTING, or CONFLICT when
   the key first came with a different request), only when the batch carries keys;
3. every new instance's first decision, the COMMIT and the read of every answered instance, in
   one pipeline: the decisions in one set-based statement (``writer.write_starts``), but for a
   decision that needs more than its writes (one that starts a sub-workflow, say), which goes
   as a single start writes it.

Each item is decided before anything is written (its definition found, its input checked, its
first steps planned), so an item refused (INVALID, NOT_FOUND) never writes a row and never fails
its neighbours. An item repeating a key an earlier item of the same batch carries is started
after the batch, as if it had been sent after it (EXISTING, or CONFLICT). An inline definition
costs its item a round trip for its task definitions and snapshot.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from baton.definitions import WorkflowDefinition, parse_definition
from baton.engine import views, writer
from baton.engine.decide import Decider, InstanceState
from baton.engine.instance_ops import InstanceOps, instance_row, key_reused, start_fingerprint
from baton.engine.plan import Plan, job_types
from baton.errors import (
    BatonError,
    Conflict,
    DefinitionNotFound,
    NotFound,
    Problem,
    ValidationFailed,
)
from baton.payload_ref import is_payload_ref
from baton.status import InstanceStatus
from baton.store import definition_sql, instance_sql
from baton.store.db import Conn

StartOutcome = Literal["STARTED", "EXISTING", "INVALID", "NOT_FOUND", "CONFLICT"]
MAX_BATCH_STARTS = 100


@dataclass(frozen=True, slots=True)
class StartItem:
    """One start of a batch, as ``start_instance`` takes it (``input`` already resolved from an
    uploaded payload by the caller)."""

    definition_name: str | None = None
    definition_version: int | None = None
    definition: Any = None
    input: dict[str, Any] | None = None
    correlation_id: str | None = None
    idempotency_key: str | None = None


@dataclass(frozen=True, slots=True)
class StartAnswer:
    """One item's answer: the instance (STARTED, EXISTING), or why not (the error a single start
    would have raised)."""

    outcome: StartOutcome
    instance: dict[str, Any] | None = None
    error: BatonError | None = None


def refused(error: BatonError) -> StartAnswer:
    """The answer to an item refused with ``error``."""
    if isinstance(error, NotFound):
        return StartAnswer("NOT_FOUND", error=error)
    if isinstance(error, Conflict):
        return StartAnswer("CONFLICT", error=error)
    return StartAnswer("INVALID", error=error)


@dataclass(slots=True)
class _Start:
    """An item on its way: checked, then decided, then written (or found to exist)."""

    index: int
    item: StartItem
    input: dict[str, Any]
    inline: WorkflowDefinition | None
    fingerprint: str | None
    id: uuid.UUID = field(default_factory=uuid.uuid4)
    decider: Decider | None = None
    state: InstanceState | None = None
    insert: dict[str, Any] | None = None
    name: str = ""


class StartBatchOps(InstanceOps):
    def start_instances(self, items: Sequence[StartItem | BatonError]) -> list[StartAnswer]:
        """Start ``items`` (an error: an item the caller refused already) in one transaction;
        one answer per item, in order."""
        answers: dict[int, StartAnswer] = {}
        starts: list[_Start] = []
        repeats: list[int] = []
        keys: set[str] = set()
        for k, item in enumerate(items):
            if isinstance(item, BatonError):
                answers[k] = refused(item)
                continue
            key = item.idempotency_key
            if key is not None and key in keys:
                repeats.append(k)  # after this transaction, as if sent after it
                continue
            try:
                starts.append(self._batch_checked(k, item))
            except BatonError as e:
                answers[k] = refused(e)
                continue
            if key is not None:
                keys.add(key)
        if starts:
            answers.update(self._batch_start_together(starts))
        if repeats:
            again = self.start_instances([items[k] for k in repeats])
            answers.update(zip(repeats, again, strict=True))
        return [answers[k] for k in range(len(items))]

    def _batch_checked(self, index: int, item: StartItem) -> _Start:
        """What a single start checks before its transaction, done for one item."""
        input = item.input or {}
        self._check_size(input, "instance input")
        inline: WorkflowDefinition | None = None
        if item.definition is not None:
            inline = parse_definition(item.definition)
            if item.definition_name is not None and item.definition_name != inline.name:
                raise ValidationFailed(
                    [Problem("definitionName", "differs from the inline definition's name")]
                )
        elif item.definition_name is None:
            raise ValidationFailed(
                [Problem("definitionName", "give definitionName or an inline definition")]
            )
        fingerprint = None
        if item.idempotency_key is not None:
            content = self.payloads(input) if self.payloads and is_payload_ref(input) else input
            fingerprint = start_fingerprint(
                item.definition_name, item.definition_version, inline, content, item.correlation_id
            )
        return _Start(index, item, input, inline, fingerprint)

    def _batch_start_together(self, starts: list[_Start]) -> dict[int, StartAnswer]:
        def work(conn: Conn) -> tuple[dict[int, StartAnswer], list[_Start]]:
            for s in starts:  # a retried transaction decides again, on fresh ids
                s.id, s.decider, s.state, s.insert = uuid.uuid4(), None, None, None
            answers = self._batch_decide(conn, starts)
            decided = [s for s in starts if s.index not in answers]
            answers.update(self._batch_take_keys(conn, decided))
            new = [s for s in decided if s.index not in answers]
            rows = self._batch_write(
                conn, new, [a for a in answers.values() if a.outcome == "EXISTING"]
            )
            for s in new:
                answers[s.index] = StartAnswer("STARTED", rows.get(str(s.id)))
            for k, a in answers.items():
                if a.outcome == "EXISTING" and a.instance is not None:
                    answers[k] = StartAnswer("EXISTING", rows.get(a.instance["id"]))
            return answers, new

        answers, new = self.db.transaction(work, explicit_begin=True)
        deciders = [s.decider for s in new if s.decider is not None]
        self._report(*deciders)
        for s in new:
            assert s.decider is not None
            self._note_deliveries(s.id, s.decider.changes)
        self.deliver_pending()
        return answers

    def _batch_decide(self, conn: Conn, starts: list[_Start]) -> dict[int, StartAnswer]:
        """Find each item's definition (the stored ones in one round trip, with the BEGIN) and
        plan its first steps; an item that cannot start is answered here, having written
        nothing."""
        wanted = sorted(
            {
                (s.item.definition_name, s.item.definition_version)
                for s in starts
                if s.inline is None
            },
            key=lambda nv: (nv[0] or "", nv[1] or 0),
        )
        stored: dict[tuple[str | None, int | None], dict[str, Any] | None] = {}
        with conn.pipeline():
            conn.execute(b"BEGIN", prepare=False)
            cursors = [
                (nv, conn.execute(definition_sql.DEFINITION_WITH_TASK_DEFS, _nv(nv)))
                for nv in wanted
            ]
        for nv, cur in cursors:
            stored[nv] = cur.fetchone()
        answers: dict[int, StartAnswer] = {}
        now = datetime.now(UTC)
        plans: dict[Any, tuple[Plan, int, int | None]] = {}
        for s in starts:
            try:
                plan, snapshot_id, version = self._batch_plan_of(conn, s, stored, plans)
                self._batch_decide_one(conn, s, plan, snapshot_id, version=version, now=now)
            except BatonError as e:
                answers[s.index] = refused(e)
        return answers

    def _batch_plan_of(
        self,
        conn: Conn,
        s: _Start,
        stored: dict[tuple[str | None, int | None], dict[str, Any] | None],
        plans: dict[Any, tuple[Plan, int, int | None]],
    ) -> tuple[Plan, int, int | None]:
        """The item's plan, snapshot and version: once per distinct definition of the batch."""
        key: Any = (
            ("inline", s.inline.digest())
            if s.inline is not None
            else (s.item.definition_name, s.item.definition_version)
        )
        if key not in plans:
            plans[key] = self._batch_snapshot(conn, s, stored)
        plan, snapshot_id, version = plans[key]
        s.name = plan.definition.name
        return plan, snapshot_id, version

    def _batch_snapshot(
        self,
        conn: Conn,
        s: _Start,
        stored: dict[tuple[str | None, int | None], dict[str, Any] | None],
    ) -> tuple[Plan, int, int | None]:
        if s.inline is not None:
            row = conn.execute(
                definition_sql.TASK_DEFS_AS_TEXT, {"names": sorted(job_types(s.inline))}
            ).fetchone()
            snapshot_id, plan = self.snapshots.of_inline(
                conn, s.inline, row["task_defs"] if row else None
            )
            return plan, snapshot_id, None
        row = stored[(s.item.definition_name, s.item.definition_version)]
        if row is None:
            assert s.item.definition_name is not None
            raise DefinitionNotFound(s.item.definition_name, s.item.definition_version)
        snapshot_id, plan = self.snapshots.of_stored(conn, row)
        return plan, snapshot_id, row["version"]

    def _batch_decide_one(
        self,
        conn: Conn,
        s: _Start,
        plan: Plan,
        snapshot_id: int,
        *,
        version: int | None,
        now: datetime,
    ) -> None:
        s.insert = instance_row(
            s.id,
            plan,
            snapshot_id,
            name=s.name,
            version=version,
            input=s.input,
            correlation_id=s.item.correlation_id,
            idempotency_key=s.item.idempotency_key,
            idempotency_fingerprint=s.fingerprint,
        )
        s.state = InstanceState(
            id=s.id,
            definition_name=s.name,
            status=InstanceStatus.RUNNING,
            version=1,
            input=s.input,
            variables={},
            correlation_id=s.item.correlation_id,
        )
        decider = self.decider(conn, plan, s.state, now)
        decider.start()
        s.decider = decider

    def _batch_take_keys(self, conn: Conn, decided: list[_Start]) -> dict[int, StartAnswer]:
        """Insert the keyed items' instance rows (in key order); a key taken already answers
        its item EXISTING (the same request) or CONFLICT (another one)."""
        keyed = sorted(
            (s for s in decided if s.item.idempotency_key is not None),
            key=lambda s: s.item.idempotency_key or "",
        )
        if not keyed:
            return {}
        with conn.pipeline():
            cursors = [(s, conn.execute(instance_sql.INSERT_INSTANCE, s.insert)) for s in keyed]
        taken = [s for s, cur in cursors if cur.fetchone() is None]
        if not taken:
            return {}
        rows = conn.execute(
            instance_sql.IDS_BY_IDEMPOTENCY_KEYS,
            {"keys": [s.item.idempotency_key for s in taken]},
        ).fetchall()
        existing = {r["idempotency_key"]: r for r in rows}
        answers: dict[int, StartAnswer] = {}
        for s in taken:
            key = s.item.idempotency_key
            assert key is not None
            row = existing[key]
            if row["idempotency_fingerprint"] != s.fingerprint:
                answers[s.index] = refused(key_reused(key, row["id"]))
            else:
                answers[s.index] = StartAnswer("EXISTING", {"id": str(row["id"])})
        return answers

    def _batch_write(
        self, conn: Conn, new: list[_Start], existing: list[StartAnswer]
    ) -> dict[str, dict[str, Any]]:
        """Every new instance's first decision, the COMMIT and the read of the answered
        instances, in one round trip; the instances' views by id."""
        ids = [s.id for s in new] + [uuid.UUID(a.instance["id"]) for a in existing if a.instance]
        decisions = []
        for s in new:
            assert s.state is not None and s.decider is not None
            keyed = s.item.idempotency_key is not None
            decisions.append((s.state, s.decider.changes, None if keyed else s.insert))
        with conn.pipeline():
            writer.write_starts(conn, decisions, outbox=self.settings.outbox)
            conn.execute(b"COMMIT", prepare=False)
            read = conn.execute(instance_sql.INSTANCES_BY_IDS, {"ids": ids}) if ids else None
        rows = read.fetchall() if read is not None else []
        return {str(r["id"]): views.instance(r) for r in rows}


def _nv(nv: tuple[str | None, int | None]) -> dict[str, Any]:
    return {"name": nv[0], "version": nv[1]}
