"""The state each job was claimed in, kept for its completion in the process that claimed it.

A completion decides on the job and its instance as they are; reading them is one round trip and
one statement per completion (about a fifth of a per-commit completion's cost). The claim already
holds both: it returns, next to each job, the columns that read would return
(``job_sql.CLAIMED_STATE_KEYS``), and this cache keeps them until the job's result arrives. The
local server, a worker process using the library, and a warm Lambda container that served the
poll all complete in the process that claimed.

Nothing here is trusted for correctness. The decision made on a kept state is written with the
optimistic path's fences: the instance version it was claimed at, and the job's status, worker
and attempt. If anything moved since the claim (another branch of the instance completed, a
cancel, a reclaim after the lease lapsed), the write is refused whole and the result is decided
again on a fresh, locked read, exactly as when an unlocked read was raced. So the cache only
trades a read for the chance of a refused write, and keeps that chance small:

* an entry is taken once (the first result for the job removes it);
* a decision written for an instance drops the entries of its other jobs (their version moved);
* an entry whose lease has run out is dropped unread (the job may be someone else's now);
* entries are bounded in number and in the stored size of their input and variables (oldest
  out first), and a claim returns the state only of instances whose input and variables are
  small (``job_sql.CLAIMED_STATE_MAX_BYTES``).

The ``now`` a decision uses (a timer's wake time, a retry's due time) is the database's clock at
the claim plus the time elapsed since on this process's monotonic clock.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from baton.store.job_sql import CLAIMED_KEYS, CLAIMED_STATE_KEYS, STATE, STATE_FROM_JOB

# A kept state is dropped this long before its lease would run out (the claim's clock started a
# round trip before this process's did): after that, another worker may hold the job.
LEASE_MARGIN_SECONDS = 1.0

# Stored bytes (PostgreSQL's, of input + variables) all kept states may hold together: with
# small instances the entry count binds first; a Lambda container keeps a few MB at most.
DEFAULT_MAX_BYTES = 4_000_000

# The ids and times of a kept state, kept as the claim's JSON gave them (text) until a decision
# needs them typed (``typed``): the batch's common shape (``engine.one_step``) writes them as
# they are.
_IDS = (
    "job_id",
    "step_execution_id",
    "id",
    "queue_task_id",
    "parent_instance_id",
    "parent_step_execution_id",
)
_BYTES = CLAIMED_KEYS.index("state_bytes")
# The order ``_row`` reads a claimed job's values and its state's in (job_sql.CLAIMED_KEYS,
# job_sql.CLAIMED_STATE_KEYS), checked here once: a dict display by position costs a third of
# dict(zip(keys, values)) per job.
_STATE_ORDER = (
    "lease_seconds",
    "scope",
    "definition_name",
    "status",
    "version",
    "input",
    "variables",
    "correlation_id",
    "snapshot_id",
    "queue_task_id",
    "parent_instance_id",
    "parent_step_execution_id",
    "step_count",
    "depth",
    "created_at",
)
_FROM_JOB = (
    ("job_id", 0),
    ("id", 1),
    ("step_id", 2),
    ("step_execution_id", 3),
    ("attempt", 5),
    ("retries_remaining", 6),
)
if CLAIMED_STATE_KEYS != _STATE_ORDER or set(STATE_FROM_JOB) != set(_FROM_JOB):
    raise RuntimeError("engine.claimed._row reads the claim in an order job_sql no longer has")


class ClaimedStates:
    """Bounded, thread-safe: job id -> the row its completion would read, as of its claim."""

    def __init__(self, max_entries: int, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        # job id -> (monotonic time of the claim, stored bytes, the row), the ids as the
        # canonical text of their UUIDs (a str hashes once and keeps it; a uuid.UUID's hash
        # runs Python code at every look-up).
        self._rows: OrderedDict[str, tuple[float, int, dict[str, Any]]] = OrderedDict()
        self._by_instance: dict[str, set[str]] = {}
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._rows)

    def __contains__(self, job_id: object) -> bool:
        """Is the state of ``job_id`` (its id's canonical text) kept now?"""
        return job_id in self._rows

    def keep(self, claimed: Iterable[list[Any]], worker_id: str, now: str) -> None:
        """Keep the state of each job of a claim (``job_sql.claim``'s lists, and its clock)
        that carries one."""
        if self.max_entries <= 0:
            return
        at = time.monotonic()
        with self._lock:
            for job in claimed:
                state = job[STATE]
                if state is None:
                    continue
                row = _row(job, state, worker_id, now)
                jid, iid = row["job_id"], row["id"]
                size = job[_BYTES] or 0
                if jid in self._rows:
                    self._drop(jid)
                self._rows[jid] = (at, size, row)
                self._bytes += size
                self._by_instance.setdefault(iid, set()).add(jid)
            while self._rows and (
                len(self._rows) > self.max_entries or self._bytes > self.max_bytes
            ):
                self._drop(next(iter(self._rows)))

    def take(self, job_id: uuid.UUID) -> dict[str, Any] | None:
        """The job's row as of its claim, typed as READ_JOB_WITH_INSTANCE's, with ``now`` moved
        on by the time elapsed since (None: not kept, already taken, or its lease has run
        out)."""
        row = self.take_as_claimed(str(job_id))
        return None if row is None else typed(row)

    def take_as_claimed(self, job_id: str) -> dict[str, Any] | None:
        """``take`` by the job id's canonical text, the row as the claim gave it: its ids and
        times as text (``typed`` makes it READ_JOB_WITH_INSTANCE's), and ``elapsed``, the
        seconds since the claim."""
        return self.take_many((job_id,)).get(job_id)

    def take_many(self, job_ids: Iterable[str]) -> dict[str, dict[str, Any]]:
        """``take_as_claimed`` for each of ``job_ids`` (a batch's: one lock, one clock
        reading): the rows found, by job id."""
        now = time.monotonic()
        found: dict[str, dict[str, Any]] = {}
        with self._lock:
            for jid in job_ids:
                entry = self._drop(jid)
                if entry is None:
                    continue
                at, _, row = entry
                elapsed = now - at
                if elapsed < row["lease_seconds"] - LEASE_MARGIN_SECONDS:
                    # Taken out of the cache, so the row is the caller's alone.
                    row["elapsed"] = elapsed
                    found[jid] = row
        return found

    def forget_instance(self, instance_id: uuid.UUID | str) -> None:
        """A decision changed the instance: its jobs' kept states are out of date."""
        self.forget_instances((instance_id,))

    def forget_instances(self, instance_ids: Iterable[uuid.UUID | str]) -> None:
        """``forget_instance`` for each of ``instance_ids`` (one lock)."""
        with self._lock:
            by_instance = self._by_instance
            for iid in instance_ids:
                jobs = by_instance.get(str(iid))
                if jobs:
                    for jid in list(jobs):
                        self._drop(jid)

    def _drop(self, job_id: str) -> tuple[float, int, dict[str, Any]] | None:
        entry = self._rows.pop(job_id, None)
        if entry is not None:
            self._bytes -= entry[1]
            iid = entry[2]["id"]
            jobs = self._by_instance.get(iid)
            if jobs is not None:
                jobs.discard(job_id)
                if not jobs:
                    del self._by_instance[iid]
        return entry


def _row(job: list[Any], state: list[Any], worker_id: str, now: str) -> dict[str, Any]:
    """A claimed job with its state as READ_JOB_WITH_INSTANCE's row, its ids and times as
    text (``_STATE_ORDER``, ``_FROM_JOB``)."""
    (
        lease_seconds,
        scope,
        definition_name,
        status,
        version,
        input_,
        variables,
        correlation_id,
        snapshot_id,
        queue_task_id,
        parent_instance_id,
        parent_step_execution_id,
        step_count,
        depth,
        created_at,
    ) = state
    return {
        "job_id": job[0],
        "job_status": "LOCKED",
        "worker_id": worker_id,
        "attempt": job[5],
        "retries_remaining": job[6],
        "lease_seconds": lease_seconds,
        "step_execution_id": job[3],
        "step_id": job[2],
        "scope": scope,
        "id": job[1],
        "definition_name": definition_name,
        "status": status,
        "version": version,
        "input": input_,
        "variables": variables,
        "correlation_id": correlation_id,
        "snapshot_id": snapshot_id,
        "queue_task_id": queue_task_id,
        "parent_instance_id": parent_instance_id,
        "parent_step_execution_id": parent_step_execution_id,
        "step_count": step_count,
        "depth": depth,
        "created_at": created_at,
        "now": now,
    }


def typed(row: dict[str, Any]) -> dict[str, Any]:
    """A row taken as claimed (``take_as_claimed``) as READ_JOB_WITH_INSTANCE reads it: UUIDs
    and datetimes where the claim's JSON gave text, ``now`` moved on by the time elapsed since
    the claim, the lease not lapsed (the take checked it)."""
    out = dict(row)
    for key in _IDS:
        value = out[key]
        if value is not None:
            out[key] = uuid.UUID(value)
    now = datetime.fromisoformat(out["now"])
    out["now"] = now + timedelta(seconds=out.pop("elapsed", 0.0))
    out["created_at"] = datetime.fromisoformat(out["created_at"])
    out["lease_lapsed"] = False
    return out
