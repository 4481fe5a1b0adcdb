"""Long-poll wake-ups: one LISTEN connection per process, fanned out to the waiting requests.

A long-poll that found nothing to claim subscribes to its job types and sleeps; the transaction
that makes a job of one of those types claimable sends ``NOTIFY baton_job, '<job type>'``
(migration 0008) and this process's listener thread wakes every subscriber of that type, which
claims again. The triggers notify only for types that have a live row in ``job_waiter``: the
listener keeps one row per type some request of this process waits for, refreshed while it
waits. No request holds a database connection while it sleeps.

Never behind RDS Proxy: LISTEN pins the proxy's connection (the re-claim loop serves there).
"""

from __future__ import annotations

import logging
import os
import select
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress

import psycopg

from baton.errors import Unavailable
from baton.store.db import Conn, connect

log = logging.getLogger(__name__)

CHANNEL = "baton_job"
# A job_waiter row lives this long unless refreshed; the listener refreshes the rows of the types
# it waits for every REFRESH_SECONDS, so a crashed process stops costing NOTIFYs within a minute.
WAITER_TTL_SECONDS = 60
REFRESH_SECONDS = 20
# How long a subscriber waits for the listener to be listening with its types registered before
# it carries on without (its backstop re-claims still find the jobs).
READY_TIMEOUT_SECONDS = 1.0
RECONNECT_DELAY_SECONDS = 1.0

REGISTER = """
INSERT INTO job_waiter (job_type, expires_at)
SELECT t, now() + make_interval(secs => %(ttl)s) FROM unnest(%(types)s::text[]) AS t
    ON CONFLICT (job_type) DO UPDATE SET expires_at = EXCLUDED.expires_at
"""
# Types nobody has waited for in a while: gone, so the table stays the size of the live set.
FORGET_STALE = "DELETE FROM job_waiter WHERE expires_at < now() - interval '1 hour'"
# Keys waited for once (an instance's, ``instance/<id>``): their row goes as soon as nobody here
# waits for them any more, or many short waits would leave thousands of rows for every
# notifying trigger to step over.
TRANSIENT_PREFIX = "instance/"
# Keys notified unconditionally (a worker's stop signal, ``worker/<id>``, rare): waited for like
# the others, but with no job_waiter row, since nothing checks one before notifying them.
UNREGISTERED_PREFIX = "worker/"
FORGET = "DELETE FROM job_waiter WHERE job_type = ANY(%(types)s)"


class Subscription:
    """A request's interest in some job types; ``wait`` returns when one of them was notified."""

    def __init__(self, hub: JobWakeups, types: Sequence[str]) -> None:
        self._hub = hub
        self.types = tuple(types)
        self._seen = hub._generations(self.types)
        self.ready = False

    def wait(self, timeout: float) -> bool:
        """Sleep until a job type of this subscription is notified (True) or ``timeout``
        passes (False). A notification that came since the last wait returns at once."""
        hub = self._hub
        deadline = time.monotonic() + timeout
        with hub._cond:
            while True:
                now = hub._generations(self.types)
                if now != self._seen:
                    self._seen = now
                    return True
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                hub._cond.wait(left)


class JobWakeups:
    """The process's LISTEN connection (a daemon thread, started on first use, reconnecting
    after errors) and the registry of what its requests wait for."""

    def __init__(self, conninfo: str | Callable[[], str]) -> None:
        self._conninfo = conninfo
        self._cond = threading.Condition()
        self._waiting: Counter[str] = Counter()  # job type -> requests waiting for it
        self._notified: Counter[str] = Counter()  # job type -> notifications seen (generation)
        self._registered: dict[str, float] = {}  # job type -> monotonic time the row is good till
        self._retired: set[str] = set()  # transient keys nobody waits for: rows to delete
        self._listening = False
        self._closed = False
        self._thread: threading.Thread | None = None
        self._wake_r, self._wake_w = os.pipe()
        for fd in (self._wake_r, self._wake_w):
            os.set_blocking(fd, False)  # a full pipe never blocks a request; it wakes anyway
        self.wakeups = 0  # notifications received (tests, diagnostics)

    @contextmanager
    def subscribe(self, types: Sequence[str], also: Sequence[str] = ()) -> Iterator[Subscription]:
        """Wait for ``types`` within the block, and for the ``also`` keys (``worker/<id>``: not
        registered, their notifications are unconditional). On entry the listener is listening
        and the types are registered (or ``READY_TIMEOUT_SECONDS`` passed: ``ready`` is False)."""
        self._ensure_started()
        keys = (*types, *also)
        with self._cond:
            for t in keys:
                self._waiting[t] += 1
            sub = Subscription(self, keys)
        try:
            if not self._registered_now(types):
                self._poke()
            with self._cond:
                sub.ready = self._cond.wait_for(
                    lambda: self._closed or self._registered_now(types), READY_TIMEOUT_SECONDS
                )
            yield sub
        finally:
            with self._cond:
                self._waiting.subtract(keys)
                self._waiting += Counter()  # drop types nobody waits for any more
                done = {t for t in types if t.startswith(TRANSIENT_PREFIX) and not self._waiting[t]}
                self._retired |= done
            if done:
                self._poke()

    def close(self) -> None:
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._cond.notify_all()
        with suppress(OSError):
            os.write(self._wake_w, b"x")
        if self._thread is not None:
            self._thread.join(5)
        for fd in (self._wake_r, self._wake_w):
            with suppress(OSError):
                os.close(fd)

    # --- inside the hub --------------------------------------------------------------------------

    def _generations(self, types: Sequence[str]) -> tuple[int, ...]:
        return tuple(self._notified[t] for t in types)

    def _registered_now(self, types: Sequence[str]) -> bool:
        now = time.monotonic()
        return self._listening and all(self._registered.get(t, 0.0) > now for t in types)

    def _ensure_started(self) -> None:
        with self._cond:
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(
                    target=self._run, name="baton-job-listener", daemon=True
                )
                self._thread.start()

    def _poke(self) -> None:
        """Wake the listener thread (to register new types at once)."""
        if not self._closed:
            with suppress(OSError):  # a full pipe already wakes it
                os.write(self._wake_w, b"x")

    def _run(self) -> None:
        while not self._closed:
            try:
                self._listen()
            except (psycopg.Error, OSError, Unavailable) as e:
                if self._closed:
                    break
                log.warning(
                    "job listener lost its connection; reconnecting", extra={"error": str(e)}
                )
                with self._cond:
                    self._listening = False
                    self._registered.clear()
                time.sleep(RECONNECT_DELAY_SECONDS)

    def _listen(self) -> None:
        info = self._conninfo() if callable(self._conninfo) else self._conninfo
        with connect(info, autocommit=True, application_name="baton-job-listener") as conn:
            conn.add_notify_handler(lambda n: self._on_notify([n.payload]))
            conn.execute(f"LISTEN {CHANNEL}")
            with self._cond:
                self._listening = True
                # Notifications may have been missed while not listening: everyone re-claims.
                for t in list(self._waiting):
                    self._notified[t] += 1
                self._cond.notify_all()
            refreshed = 0.0
            while not self._closed:
                due = time.monotonic() - refreshed >= REFRESH_SECONDS
                self._register(conn, every=due)
                self._forget(conn)
                if due:
                    conn.execute(FORGET_STALE)
                    refreshed = time.monotonic()
                ready, _, _ = select.select([conn.fileno(), self._wake_r], [], [], REFRESH_SECONDS)
                if self._wake_r in ready:
                    with suppress(BlockingIOError):
                        os.read(self._wake_r, 4096)
                if conn.fileno() in ready:
                    self._drain(conn)

    def _drain(self, conn: Conn) -> None:
        pg = conn.pgconn
        pg.consume_input()
        payloads = []
        while (n := pg.notifies()) is not None:
            payloads.append(n.extra.decode())
        if pg.status != psycopg.pq.ConnStatus.OK:
            raise psycopg.OperationalError("listener connection lost")
        if payloads:
            self._on_notify(payloads)

    def _on_notify(self, payloads: list[str]) -> None:
        with self._cond:
            self.wakeups += len(payloads)
            for t in payloads:
                self._notified[t] += 1
            self._cond.notify_all()

    def _forget(self, conn: Conn) -> None:
        """Delete the rows of transient keys nobody here waits for any more."""
        with self._cond:
            types = [t for t in self._retired if not self._waiting[t]]
            self._retired.clear()
            for t in types:
                self._registered.pop(t, None)
        if types:
            conn.execute(FORGET, {"types": types})

    def _register(self, conn: Conn, *, every: bool) -> None:
        """Upsert the job_waiter rows of the types waited for: all of them when ``every``,
        else only those not registered yet."""
        now = time.monotonic()
        with self._cond:
            types = [
                t
                for t in self._waiting
                if (every or self._registered.get(t, 0.0) <= now)
                and not t.startswith(UNREGISTERED_PREFIX)
            ]
        if not types:
            return
        conn.execute(REGISTER, {"types": types, "ttl": WAITER_TTL_SECONDS})
        good_till = now + WAITER_TTL_SECONDS - REFRESH_SECONDS
        with self._cond:
            for t in types:
                self._registered[t] = good_till
            self._cond.notify_all()
