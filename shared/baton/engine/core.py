"""What every engine operation shares: the database, settings, metrics, the snapshot cache, and the
one sequence every decision follows: plan → state → decide → write → report.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from baton.engine import writer
from baton.engine.decide import Decider
from baton.engine.snapshots import Snapshots
from baton.errors import InstanceNotFound, PayloadTooLarge
from baton.metrics import MetricsSink, NullMetrics
from baton.settings import EngineSettings
from baton.store import instance_sql
from baton.store.db import Conn, Database, first_in_transaction

log = logging.getLogger("baton.engine")

R = TypeVar("R")


class EngineCore:
    """State and helpers shared by the engine's operation groups (see :class:`Engine`)."""

    def __init__(
        self,
        db: Database,
        settings: EngineSettings | None = None,
        metrics: MetricsSink | None = None,
    ) -> None:
        self.db = db
        self.settings = settings or EngineSettings()
        self.metrics: MetricsSink = metrics or NullMetrics()
        self.snapshots = Snapshots()
        # (when read, job types with a concurrency or rate limit): see JobOps._limited_types
        self._limits: tuple[float, frozenset[str]] = (float("-inf"), frozenset())

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
        decider = Decider(
            self.snapshots.plan(conn, row["snapshot_id"]),
            state,
            lambda step_id: instance_sql.latest_output(conn, state.id, step_id),
            row["now"],
            max_job_input_bytes=self.settings.max_payload_bytes,
        )
        result = event(decider)
        if optimistic:
            writer.write_optimistic(conn, state, decider.changes)
        else:
            writer.write_locked(conn, state, decider.changes)
        self._report(decider)
        return result

    def _report(self, decider: Decider) -> None:
        for name, value in decider.changes.counters.items():
            self.metrics.add(name, value)
        for name, value, dimensions in decider.changes.dimensioned:
            self.metrics.add(name, value, dimensions=dimensions)

    def _lock_instance(self, conn: Conn, iid: uuid.UUID) -> dict[str, Any]:
        """Open a transaction by locking the instance row (with BEGIN in the same round trip)."""
        row = first_in_transaction(conn, instance_sql.LOCK_INSTANCE, {"id": iid})
        if row is None:
            raise InstanceNotFound(str(iid))
        return row

    def _check_size(self, value: Any, what: str) -> None:
        """Refuse an inline JSON payload above the hard limit (413)."""
        size = len(json.dumps(value, separators=(",", ":")))
        if size > self.settings.max_payload_bytes:
            raise PayloadTooLarge(size, self.settings.max_payload_bytes, what)
