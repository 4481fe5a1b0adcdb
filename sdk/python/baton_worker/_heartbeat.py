"""Automatic heartbeats: one thread that extends the lease of every job still running at half
of its lease.

The lease comes from the job's ``lockExpiresAt`` (the server's clock). It is turned into a local
monotonic deadline at receipt, so the schedule does not depend on the two clocks agreeing beyond
the network delay; a server clock far off from ours only makes heartbeats early (never late):
the first heartbeat is due at half the remaining lease, and never sooner than ``MIN_INTERVAL``.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime

from baton_worker.errors import BatonApiError, BatonError

log = logging.getLogger("baton_worker.heartbeat")

MIN_INTERVAL = 0.1  # seconds; a floor against a heartbeat storm when the lease looks expired
RETRY_SHARE = 0.25  # after a failed heartbeat, try again after this share of what remains


def parse_timestamp(value: str) -> datetime:
    """An RFC 3339 timestamp from the API (``...Z`` or an offset) as an aware datetime."""
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    parsed = datetime.fromisoformat(text)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def seconds_until(expires_at: datetime, *, now: datetime | None = None) -> float:
    """Seconds from ``now`` (default: this machine's clock) until ``expires_at``."""
    return (expires_at - (now or datetime.now(UTC))).total_seconds()


def next_heartbeat_in(remaining: float) -> float:
    """When to heartbeat a lease with ``remaining`` seconds left: halfway, with a floor."""
    return max(MIN_INTERVAL, remaining / 2)


# Sends one heartbeat; returns the new lockExpiresAt, raises on failure.
SendHeartbeat = Callable[[str], datetime]


class Heartbeater:
    """Keeps the leases of tracked jobs alive until they are untracked."""

    def __init__(
        self,
        send: SendHeartbeat,
        *,
        on_lost: Callable[[str, BaseException], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._send = send
        self._on_lost = on_lost
        self._clock = clock
        self._cond = threading.Condition()
        self._expires: dict[str, datetime] = {}  # tracked jobs -> their lease's end
        self._due: dict[str, float] = {}  # tracked jobs -> monotonic time of the next heartbeat
        self._heap: list[tuple[float, int, str]] = []
        self._seq = itertools.count()
        self._stopped = False
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="baton-heartbeat", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def track(self, job_id: str, lock_expires_at: datetime) -> None:
        """Heartbeat a job at half of its lease, which now ends at ``lock_expires_at``.

        Called at dispatch, and again after every heartbeat (automatic or the handler's own).
        """
        delay = next_heartbeat_in(seconds_until(lock_expires_at))
        with self._cond:
            self._expires[job_id] = lock_expires_at
            self._schedule_locked(job_id, self._clock() + delay)

    def untrack(self, job_id: str) -> None:
        """Stop heartbeating a job (its outcome is reported, or its lease is lost)."""
        with self._cond:
            self._expires.pop(job_id, None)
            self._due.pop(job_id, None)

    def tracked(self) -> int:
        with self._cond:
            return len(self._expires)

    def _schedule_locked(self, job_id: str, at: float) -> None:
        self._due[job_id] = at
        heapq.heappush(self._heap, (at, next(self._seq), job_id))
        self._cond.notify_all()

    def _next_due(self) -> str | None:
        """Block until a heartbeat is due (its job id) or the heartbeater stops (None)."""
        with self._cond:
            while not self._stopped:
                if not self._heap:
                    self._cond.wait()
                    continue
                at, _, job_id = self._heap[0]
                if self._due.get(job_id) != at:  # untracked or re-timed since: a stale entry
                    heapq.heappop(self._heap)
                    continue
                wait = at - self._clock()
                if wait > 0:
                    self._cond.wait(wait)
                    continue
                heapq.heappop(self._heap)
                del self._due[job_id]
                return job_id
            return None

    def _loop(self) -> None:
        while (job_id := self._next_due()) is not None:
            try:
                expires = self._send(job_id)
            except BatonApiError as e:
                if e.transient:
                    self._retry_soon(job_id, e)
                else:  # 404/409: completed, cancelled, or reclaimed by another worker
                    self.untrack(job_id)
                    self._on_lost(job_id, e)
            except BatonError as e:  # no answer at all
                self._retry_soon(job_id, e)
            except Exception as e:  # a bug must not end the heartbeats of every other job
                log.exception("heartbeat failed unexpectedly", extra={"job_id": job_id})
                self._retry_soon(job_id, e)
            else:
                with self._cond:
                    # Untracked while the call was in flight (the job is done), or re-timed by
                    # the handler's own heartbeat: nothing more to do here.
                    if job_id not in self._expires or job_id in self._due:
                        continue
                self.track(job_id, expires)

    def _retry_soon(self, job_id: str, error: BaseException) -> None:
        with self._cond:
            expires = self._expires.get(job_id)
            if expires is None:
                return
            delay = max(MIN_INTERVAL, RETRY_SHARE * seconds_until(expires))
            log.warning(
                "heartbeat failed; retrying",
                extra={"job_id": job_id, "error": str(error), "retry_in_s": round(delay, 3)},
            )
            if job_id not in self._due:
                self._schedule_locked(job_id, self._clock() + delay)
