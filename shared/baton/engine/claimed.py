"""The state each job was claimed in, kept for its completion in the process that claimed it.

A completion decides on the job and its instance as they are; reading them is one round trip and
one statement per completion (about a fifth of a per-commit completion's cost). The claim already
holds both: with ``CLAIM_WITH_STATE`` it returns, next to each job, the columns that read would
return, and this cache keeps them until the job's result arrives. The local server, a worker
process using the library, and a warm Lambda container that served the poll all complete in the
process that claimed.

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
from datetime import timedelta
from typing import Any

# A kept state is dropped this long before its lease would run out (the claim's clock started a
# round trip before this process's did): after that, another worker may hold the job.
LEASE_MARGIN_SECONDS = 1.0

# Stored bytes (PostgreSQL's, of input + variables) all kept states may hold together: with
# small instances the entry count binds first; a Lambda container keeps a few MB at most.
DEFAULT_MAX_BYTES = 4_000_000

# The columns of job_sql.READ_JOB_WITH_INSTANCE taken from a CLAIM_WITH_STATE row's st_ ones.
INSTANCE_COLUMNS = (
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


class ClaimedStates:
    """Bounded, thread-safe: job id -> the row its completion would read, as of its claim."""

    def __init__(self, max_entries: int, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        # job id -> (monotonic time of the claim, stored bytes, the row), the ids by their 128-bit
        # integers: hashing a uuid.UUID runs Python code, an int's does not (a job's ids are
        # looked up about ten times between its claim and its completion).
        self._rows: OrderedDict[int, tuple[float, int, dict[str, Any]]] = OrderedDict()
        self._by_instance: dict[int, set[int]] = {}
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._rows)

    def keep(self, claimed: Iterable[dict[str, Any]], worker_id: str) -> None:
        """Keep the state of each job of a CLAIM_WITH_STATE result that carries one."""
        if self.max_entries <= 0:
            return
        at = time.monotonic()
        with self._lock:
            for r in claimed:
                if not r.get("st_fits"):
                    continue
                row = _read_row(r, worker_id)
                jid, iid = row["job_id"].int, row["id"].int
                size = int(r.get("st_bytes") or 0)
                self._drop(jid)
                self._rows[jid] = (at, size, row)
                self._bytes += size
                self._by_instance.setdefault(iid, set()).add(jid)
            while self._rows and (
                len(self._rows) > self.max_entries or self._bytes > self.max_bytes
            ):
                self._drop(next(iter(self._rows)))

    def take(self, job_id: uuid.UUID) -> dict[str, Any] | None:
        """The job's row as of its claim, with ``now`` moved on by the time elapsed since (None:
        not kept, already taken, or its lease has run out)."""
        with self._lock:
            entry = self._drop(job_id.int)
        if entry is None:
            return None
        at, _, row = entry
        elapsed = time.monotonic() - at
        if elapsed >= row["lease_seconds"] - LEASE_MARGIN_SECONDS:
            return None
        # Taken out of the cache above, so the row is the caller's alone: moved on in place.
        row["now"] += timedelta(seconds=elapsed)
        return row

    def forget_instance(self, instance_id: uuid.UUID) -> None:
        """A decision changed the instance: its jobs' kept states are out of date."""
        with self._lock:
            for jid in list(self._by_instance.get(instance_id.int, ())):
                self._drop(jid)

    def _drop(self, job_id: int) -> tuple[float, int, dict[str, Any]] | None:
        entry = self._rows.pop(job_id, None)
        if entry is not None:
            self._bytes -= entry[1]
            iid = entry[2]["id"].int
            jobs = self._by_instance.get(iid)
            if jobs is not None:
                jobs.discard(job_id)
                if not jobs:
                    del self._by_instance[iid]
        return entry


def _read_row(r: dict[str, Any], worker_id: str) -> dict[str, Any]:
    """A CLAIM_WITH_STATE row in the shape of READ_JOB_WITH_INSTANCE's."""
    row = {
        "job_id": r["id"],
        "job_status": "LOCKED",
        "worker_id": worker_id,
        "attempt": r["attempt"],
        "retries_remaining": r["retries_remaining"],
        "lease_seconds": r["lease_seconds"],
        "lease_lapsed": False,
        "past_deadline": False,
        "step_execution_id": r["step_execution_id"],
        "step_id": r["step_id"],
        "scope": r["st_scope"],
        "id": r["instance_id"],
        "now": r["st_now"],
    }
    for column in INSTANCE_COLUMNS:
        row[column] = r["st_" + column]
    return row
