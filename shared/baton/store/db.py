"""Connections and transactions, with driver errors translated at this boundary.

Two connection sources share one interface: a pool (local server, tests, benchmarks) and a single
reused connection (a Lambda container: one request at a time, reconnect after a failure). Both
connect with ``prepare_threshold=None`` because server-side prepared statements pin RDS Proxy
connections, and the request path uses no session state (no SET, no session advisory locks).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol, TypeVar

import psycopg
from psycopg import errors as pg_errors
from psycopg.rows import dict_row

from baton.errors import Conflict, StaleVersion, Unavailable

log = logging.getLogger(__name__)

T = TypeVar("T")
Conn = psycopg.Connection[dict[str, Any]]

# Raised by the instance fencing trigger (migration 0001) when a write carries a stale version.
STALE_VERSION_SQLSTATE = "BT409"
# Serialization failures and deadlocks: the transaction is safe to run again from the start.
_RETRYABLE = (pg_errors.SerializationFailure, pg_errors.DeadlockDetected)
MAX_ATTEMPTS = 5


def connect(conninfo: str, **kwargs: Any) -> Conn:
    try:
        return psycopg.connect(
            conninfo, row_factory=dict_row, prepare_threshold=None, connect_timeout=5, **kwargs
        )
    except psycopg.OperationalError as e:
        raise Unavailable(f"database unreachable: {_first_line(e)}") from e


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


class ConnectionSource(Protocol):
    def connection(self) -> Any:
        """A context manager yielding a connection with no open transaction."""

    def close(self) -> None: ...


class SingleConnection:
    """One connection, reused across invocations and re-opened after it breaks (Lambda)."""

    def __init__(self, conninfo: str | Callable[[], str]) -> None:
        self._conninfo = conninfo
        self._conn: Conn | None = None
        self._lock = threading.Lock()

    @contextmanager
    def connection(self) -> Iterator[Conn]:
        with self._lock:
            if self._conn is None or self._conn.closed or self._conn.broken:
                info = self._conninfo() if callable(self._conninfo) else self._conninfo
                self._conn = connect(info, autocommit=False)
            try:
                yield self._conn
            finally:
                if not self._conn.closed and not self._conn.broken:
                    self._conn.rollback()  # never leak an open transaction to the next request

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


class PooledConnections:
    """A psycopg_pool pool for processes that serve requests from several threads."""

    def __init__(self, conninfo: str, *, min_size: int = 1, max_size: int = 10) -> None:
        from psycopg_pool import ConnectionPool

        self._pool: ConnectionPool[Conn] = ConnectionPool(
            conninfo,
            min_size=min_size,
            max_size=max_size,
            kwargs={"row_factory": dict_row, "prepare_threshold": None, "connect_timeout": 5},
            open=False,
            timeout=10,
            check=ConnectionPool.check_connection,
        )
        self._pool.open(wait=False)

    @contextmanager
    def connection(self) -> Iterator[Conn]:
        from psycopg_pool import PoolTimeout

        try:
            with self._pool.connection() as conn:
                yield conn
        except PoolTimeout as e:
            raise Unavailable(f"no database connection available: {_first_line(e)}") from e

    def close(self) -> None:
        self._pool.close()


class Database:
    """Runs units of work in transactions, translating driver errors to Baton's."""

    def __init__(self, source: ConnectionSource) -> None:
        self.source = source

    @classmethod
    def single(cls, conninfo: str | Callable[[], str]) -> Database:
        return cls(SingleConnection(conninfo))

    @classmethod
    def pooled(cls, conninfo: str, *, min_size: int = 1, max_size: int = 10) -> Database:
        return cls(PooledConnections(conninfo, min_size=min_size, max_size=max_size))

    def transaction(self, work: Callable[[Conn], T]) -> T:
        """Run ``work(conn)`` in one transaction; re-run it on deadlock/serialization failure.

        ``work`` may commit itself (the store pipelines its final writes together with the
        COMMIT to save a round trip); otherwise it is committed here.
        """
        for attempt in range(1, MAX_ATTEMPTS + 1):
            try:
                with self.source.connection() as conn, _translated():
                    try:
                        result = work(conn)
                        conn.commit()
                    except BaseException:
                        if not conn.closed and not conn.broken:
                            conn.rollback()
                        raise
                    return result
            except _RETRYABLE:
                if attempt == MAX_ATTEMPTS:
                    raise Conflict("too much contention; try again") from None
                log.info("transaction retried after a deadlock/serialization failure")
        raise AssertionError("unreachable")

    def autocommit(self, work: Callable[[Conn], T]) -> T:
        """Run ``work(conn)`` as single statements, each committed on its own."""
        with self.source.connection() as conn, _translated():
            conn.autocommit = True
            try:
                return work(conn)
            finally:
                if not conn.closed and not conn.broken:
                    conn.autocommit = False

    def close(self) -> None:
        self.source.close()


_UNAVAILABLE = (psycopg.OperationalError, pg_errors.AdminShutdown, pg_errors.CannotConnectNow)


_UNAVAILABLE = (psycopg.OperationalError, pg_errors.AdminShutdown, pg_errors.CannotConnectNow)


@contextmanager
def _translated() -> Iterator[None]:
    try:
        yield
    except _RETRYABLE:
        raise
    except psycopg.Error as e:
        if e.sqlstate == STALE_VERSION_SQLSTATE:
            raise StaleVersion(str(e.diag.message_detail or "?")) from e
        if isinstance(e, _UNAVAILABLE):
            raise Unavailable(f"database unavailable: {_first_line(e)}") from e
        raise
