"""What every engine operation shares: the database, settings, metrics, the snapshot cache, and the
one sequence every decision follows: plan → state → decide → write → report.
"""

from __future__ import annotations

import json
import logging
import threading
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

from baton import jsontext
from baton.engine import writer
from baton.engine.archive_store import ArchiveStore
from baton.engine.claimed import ClaimedStates
from baton.engine.decide import Changes, Decider, InstanceState
from baton.engine.payloads import PayloadKind, PayloadObjects, limit_of
from baton.engine.plan import Plan
from baton.engine.reads import DbReader
from baton.engine.snapshots import Snapshots
from baton.errors import (
    BatonError,
    Conflict,
    InstanceNotFound,
    PayloadTooLarge,
    Problem,
    ValidationFailed,
)
from baton.metrics import MetricsSink, NullMetrics
from baton.scripting import SandboxLimits, shared_sandbox
from baton.settings import EngineSettings
from baton.store import archive_sql, instance_sql
from baton.store.db import Conn, Database, first_in_transaction
from baton.store.job_listener import JobWakeups

log = logging.getLogger("baton.engine")

R = TypeVar("R")

# Conductor's view of an ended instance, as a failure workflow is told of it: its ``tasks``
# (``failedWorkflow.tasks``) and, for a definition written for Conductor, its
# ``reasonForIncompletion`` (then the failure workflow's ``reason``). Given the instance as
# ``get_instance(conductor_view=True)`` reads it, its audit rows as ``audit_trail`` gives them,
# and the Conductor definition its definition was registered as (None: none). It lives with the
# Conductor surface, above the engine, which is handed it (``baton_lambda.runtime``); it reads
# nothing itself.
FailedView = Callable[[dict[str, Any], list[dict[str, Any]], Any], dict[str, Any]]

# What a value refused inline may be sent as instead: its payload kind, the field that carries
# its path, and the tools that offload it without being asked.
_OFFLOADED: dict[str, tuple[PayloadKind, str, str]] = {
    "instance input": (
        "WORKFLOW_INPUT",
        "inputPayloadPath",
        "baton instances start --input @file and the SDK's start_instance",
    ),
    "job output": ("STEP_OUTPUT", "outputPayloadPath", "the SDK's workers"),
}


class EngineCore:
    """State and helpers shared by the engine's operation groups (see :class:`Engine`)."""

    def __init__(
        self,
        db: Database,
        settings: EngineSettings | None = None,
        metrics: MetricsSink | None = None,
        payloads: Callable[[Any], Any] | None = None,
        offload: Callable[[str, str], Any] | None = None,
        *,
        wakeups: JobWakeups | None = None,
        payload_objects: PayloadObjects | None = None,
        archive: ArchiveStore | None = None,
        failed_view: FailedView | None = None,
    ) -> None:
        self.db = db
        # What a failure workflow is told of its failed instance's tasks (None: nothing)
        self.failed_view = failed_view
        # Where terminal instances past their retention go (None: no bucket; see archive_ops)
        self.archive = archive
        # Retires, revives and deletes payload objects (None: no bucket; see retention_ops)
        self.payload_objects = payload_objects
        # The process's LISTEN connection for long-polls (None: long-polls re-claim with backoff)
        self.wakeups = wakeups
        # Reads offloaded payloads for expressions (None: no bucket, references stay as they are)
        self.payloads = payloads
        # Writes a large value's JSON to the payload bucket under a kind, returning its reference
        self.offload = offload
        self.settings = settings or EngineSettings()
        self.metrics: MetricsSink = metrics or NullMetrics()
        # Runs definitions' scripts in child processes, bounded by the settings' limits.
        self.sandbox = shared_sandbox(
            SandboxLimits(
                time_seconds=self.settings.script_time_seconds,
                memory_bytes=self.settings.script_memory_bytes,
                process_bytes=self.settings.script_process_bytes,
            )
        )
        self.snapshots = Snapshots()
        # Claimed jobs' states, for deciding their completions without reading them again
        self.claimed = ClaimedStates(self.settings.claimed_states)
        # (when read, job types with a concurrency or rate limit): see JobOps._limited_types
        self._limits: tuple[float, frozenset[str]] = (float("-inf"), frozenset())
        self._local = threading.local()  # per request: instances to deliver events to

    def _decide(
        self,
        conn: Conn,
        row: dict[str, Any],
        event: Callable[[Decider], R],
        *,
        optimistic: bool = False,
    ) -> R:
        """One decision on the instance in ``row``: plan → state → ``event`` → write → report.

        ``row`` is the instance as read, with the database's ``now``. Locked (the default): the
        caller's transaction holds the instance row lock and the write commits it. Optimistic:
        ``row`` was read without a lock on an autocommit connection, and the fenced write refuses
        the whole decision (``StaleVersion``) if the instance changed since.
        """
        state = writer.state_from_row(row)
        plan = self.snapshots.plan(conn, row["snapshot_id"])
        decider = self.decider(conn, plan, state, row["now"])
        result = event(decider)
        try:
            if optimistic:
                writer.write_optimistic(conn, state, decider.changes, outbox=self.settings.outbox)
            else:
                writer.write_locked(conn, state, decider.changes, outbox=self.settings.outbox)
        finally:
            self.claimed.forget_instance(state.id)  # written or raced: its version moved
        self._report(decider)
        self._note_deliveries(state.id, decider.changes)
        return result

    def decider(self, conn: Conn, plan: Plan, state: InstanceState, now: datetime) -> Decider:
        """A decider for ``state`` reading through ``conn``, with the engine's limits."""
        return Decider(
            plan,
            state,
            DbReader(conn, state.id, self.snapshots),
            now,
            max_job_input_bytes=self.settings.max_payload_bytes,
            max_step_executions=self.settings.max_step_executions,
            unref=self.payloads,
            offload=self.offload,
            payload_limits=self.settings.payload_limits,
            sandbox=self.sandbox,
        )

    # --- events between instances ----------------------------------------------------------

    def _note_deliveries(self, iid: uuid.UUID, changes: Changes) -> None:
        """Instances this decision left an event for (a child's end, a cancel, its own failure
        workflow to start): the operation delivers them once its transaction has committed (the
        sweeper is the backstop)."""
        pending = self._pending()
        for event in changes.events:
            if event.kind in ("CHILD_ENDED", "CANCEL", "FAILURE_WORKFLOW"):
                pending.append((event.instance_id, False))
        if changes.cancel_scopes:
            # Cancelled SUB_WORKFLOW steps leave their children a CANCEL (written by the
            # statement itself, which alone knows which open steps had children).
            pending.append((iid, True))
        for child in changes.children:
            self._note_deliveries(child.state.id, child.changes)

    def _pending(self) -> list[tuple[uuid.UUID | None, bool]]:
        pending: list[tuple[uuid.UUID | None, bool]] | None = getattr(self._local, "pending", None)
        if pending is None:
            pending = []
            self._local.pending = pending
        return pending

    def has_pending(self) -> bool:
        """Whether the current thread's decisions left events to deliver after their commit."""
        return bool(self._pending())

    def deliver_pending(self) -> None:
        """Deliver the events the current thread's decisions left for instances (or, noted
        as ``(parent, True)``, for the children of an instance that cancelled work)."""
        pending = self._pending()
        rounds = 0
        while pending and rounds < 10_000:
            rounds += 1
            iid, children = pending.pop(0)
            if iid is None:
                continue
            if children:
                pending.extend((child, False) for child in self._children_with_events(iid))
                continue
            self.deliver_events(iid)

    def _children_with_events(self, parent: uuid.UUID) -> list[uuid.UUID]:
        rows = self.db.autocommit(
            lambda c: c.execute(instance_sql.CHILDREN_WITH_EVENTS, {"parent": parent}).fetchall()
        )
        return [r["id"] for r in rows]

    def deliver_events(self, iid: uuid.UUID) -> int:
        """Act on an instance's events from other transactions (implemented by the duties)."""
        raise NotImplementedError

    def _report(self, *deciders: Decider) -> None:
        """Count what the decisions did: one data point per counter for all of them (a batch
        of 100 completions adds JobsCompleted once, with 100)."""
        self._report_changes(*(decider.changes for decider in deciders))

    def _report_settled(self, n: int) -> None:
        """``_report`` of ``n`` decisions of the common shape (``engine.one_step``): each
        completed its job and its instance."""
        self.metrics.add("JobsCompleted", n)
        self.metrics.add("InstancesCompleted", n)

    def _report_changes(self, *decisions: Changes) -> None:
        """``_report`` of decisions' changes (one data point per counter for all of them)."""
        counters: dict[str, int] = {}
        for changes in decisions:
            for name, value in changes.counters.items():
                counters[name] = counters.get(name, 0) + value
        for name, total in counters.items():
            self.metrics.add(name, total)
        for changes in decisions:
            for name, value, dimensions in changes.dimensioned:
                self.metrics.add(name, value, dimensions=dimensions)

    def _lock_instance(self, conn: Conn, iid: uuid.UUID) -> dict[str, Any]:
        """Open a transaction by locking the instance row (with BEGIN in the same round trip)."""
        row = first_in_transaction(conn, instance_sql.LOCK_INSTANCE, {"id": iid})
        if row is None:
            raise missing_instance(conn, iid)
        return row

    def _check_size(self, value: Any, what: str) -> None:
        """Refuse an inline JSON payload above the hard limit (413), or holding NaN or an
        infinity (422: JSON has no such number; the store's own JSON would write it as null,
        changing the value, where the API refuses it at the edge already)."""
        if jsontext.surely_within(value, self.settings.max_payload_bytes):
            return  # the common case, without json.dumps (a few us per result)
        try:
            size = len(json.dumps(value, separators=(",", ":"), allow_nan=False))
        except ValueError:
            raise ValidationFailed(
                [Problem(what, "holds NaN or an infinity, which JSON has no number for")]
            ) from None
        if size > self.settings.max_payload_bytes:
            raise PayloadTooLarge(
                size,
                self.settings.max_payload_bytes,
                what,
                limit="inline limit",
                how=self._offload_advice(what),
            )

    def _offload_advice(self, what: str) -> str | None:
        """How to send a value too large to send inline: through an uploaded payload."""
        offload = _OFFLOADED.get(what)
        if offload is None:
            return None
        kind, field, tools = offload
        hard = limit_of(self.settings.payload_limits, kind).hard_bytes
        return (
            f"upload it first (POST /v1/payloads with kind {kind} and its sizeBytes, then PUT it "
            f"to the uploadUrl; up to {hard} bytes) and send {field} instead; {tools} do this "
            "by themselves"
        )


class ArchivedInstance(Conflict):
    """The instance was archived (its retention passed): it can be read and deleted only."""

    title = "Instance archived"

    def __init__(self, instance_id: str) -> None:
        super().__init__(
            f"instance {instance_id} is archived (its retention passed and its rows left the "
            "database): it can be read and deleted, not retried, restarted, cancelled, paused, "
            "resumed or signalled; start a new instance with its input instead"
        )


def missing_instance(conn: Conn, iid: uuid.UUID) -> BatonError:
    """The error for an instance that is not in the database: archived (409), else not found."""
    if conn.execute(archive_sql.IS_ARCHIVED, {"id": iid}).fetchone() is not None:
        return ArchivedInstance(str(iid))
    return InstanceNotFound(str(iid))
