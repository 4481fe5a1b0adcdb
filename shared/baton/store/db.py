"""Connections and transactions, with driver errors translated at this boundary.

Two connection sources share one interface: a pool (local server, tests, benchmarks) and a single
reused connection (a Lambda container: one request at a time, reconnect after a failure).

Prepared statements are on by default (psycopg prepares a statement after its fifth run: parsing
and planning were about half the server's CPU per job without them). Behind RDS Proxy they are
off (``prepare=False``): server-side prepared statements pin the proxy's connections. The request
path uses no other session state (no SET, no session advisory locks).

Round trips: a transaction's BEGIN travels with its first statement when that statement runs in a
pipeline (``first_in_transaction``), and the store's writer pipelines the COMMIT with the writes,
so a decision costs two round trips in all.
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
from psycopg.types.json import set_json_dumps, set_json_loads

from baton import jsontext
from baton.errors import InvalidValue, StaleVersion, Unavailable

log = logging.getLogger(__name__)

T = TypeVar("T")
Conn = psycopg.Connection[dict[str, Any]]

# Raised by the instance fencing trigger (migration 0001) when a write carries a stale version.
STALE_VERSION_SQLSTATE = "BT409"
# Serialization failures and deadlocks: the transaction is safe to run again from the start.
RETRYABLE = (pg_errors.SerializationFailure, pg_errors.DeadlockDetected)
MAX_ATTEMPTS = 5


PSYCOPG_DEFAULT_PREPARE_THRESHOLD = 5


def _prepare_threshold(prepare: bool) -> int | None:
    return PSYCOPG_DEFAULT_PREPARE_THRESHOLD if prepare else None


def connect(conninfo: str, *, prepare: bool = False, **kwargs: Any) -> Conn:
    try:
        conn = psycopg.connect(
            conninfo,
            row_factory=dict_row,
            prepare_threshold=_prepare_threshold(prepare),
            connect_timeout=5,
            **kwargs,
        )
    except psycopg.OperationalError as e:
        raise Unavailable(f"database unreachable: {_first_line(e)}") from e
    configure(conn)
    return conn


def configure(conn: Conn) -> None:
    """Per-connection driver settings: json/jsonb read and written by orjson (``jsontext``:
    the same values as the standard library, several times faster)."""
    set_json_loads(jsontext.loads, conn)
    set_json_dumps(jsontext.dumps, conn)


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


class ConnectionSource(Protocol):
    def connection(self) -> Any:
        """A context manager yielding a connection with no open transaction."""

    def close(self) -> None: ...


class SingleConnection:
    """One connection, reused across invocations and re-opened after it breaks (Lambda)."""

    def __init__(self, conninfo: str | Callable[[], str], *, prepare: bool = False) -> None:
        self._conninfo = conninfo
        self._prepare = prepare
        self._conn: Conn | None = None
        self._lock = threading.Lock()

    @contextmanager
    def connection(self) -> Iterator[Conn]:
        with self._lock:
            if self._conn is None or self._conn.closed or self._conn.broken:
                info = self._conninfo() if callable(self._conninfo) else self._conninfo
                self._conn = connect(info, prepare=self._prepare, autocommit=False)
            try:
                yield self._conn
            finally:
                _settle(self._conn, b"ROLLBACK")  # never leak an open transaction

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


class PooledConnections:
    """A psycopg_pool pool for processes that serve requests from several threads."""

    def __init__(
        self, conninfo: str, *, min_size: int = 1, max_size: int = 10, prepare: bool = True
    ) -> None:
        from psycopg_pool import ConnectionPool

        self._pool: ConnectionPool[Conn] = ConnectionPool(
            conninfo,
            min_size=min_size,
            max_size=max_size,
            kwargs={
                "row_factory": dict_row,
                "prepare_threshold": _prepare_threshold(prepare),
                "connect_timeout": 5,
            },
            configure=configure,
            open=False,
            timeout=3,  # an API answers 503 quickly rather than hang when the database is gone
            # No check on checkout: it costs a round trip per unit of work. A connection that
            # broke is discarded by the pool when it comes back in a bad state.
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
        except (psycopg.OperationalError, Unavailable):
            # The server went away (restart, failover): the pool's other idle connections are
            # most likely dead too. Drop them now so the next request gets a live one.
            self._pool.check()
            raise

    def close(self) -> None:
        self._pool.close()


class Database:
    """Runs units of work in transactions, translating driver errors to Baton's."""

    def __init__(self, source: ConnectionSource) -> None:
        self.source = source

    @classmethod
    def single(cls, conninfo: str | Callable[[], str], *, prepare: bool = False) -> Database:
        return cls(SingleConnection(conninfo, prepare=prepare))

    @classmethod
    def pooled(
        cls, conninfo: str, *, min_size: int = 1, max_size: int = 10, prepare: bool = True
    ) -> Database:
        return cls(
            PooledConnections(conninfo, min_size=min_size, max_size=max_size, prepare=prepare)
        )

    def transaction(self, work: Callable[[Conn], T], *, explicit_begin: bool = False) -> T:
        """Run ``work(conn)`` in one transaction; re-run it on deadlock/serialization failure.

        ``explicit_begin``: the connection is in autocommit mode and ``work`` opens the
        transaction itself with :func:`first_in_transaction`, whose BEGIN then shares a round
        trip with the first statement (psycopg's implicit BEGIN costs a round trip of its own).
        ``work`` may commit itself (the store pipelines its writes with the COMMIT); otherwise
        it is committed here.
        """
        for attempt in range(1, MAX_ATTEMPTS + 1):
            try:
                with self.source.connection() as conn, _translated():
                    conn.autocommit = explicit_begin
                    try:
                        result = work(conn)
                        _finish(conn, b"COMMIT")
                    except BaseException:
                        _settle(conn, b"ROLLBACK")
                        raise
                    finally:
                        if explicit_begin:
                            _restore_autocommit(conn)
                    return result
            except RETRYABLE:
                _contended(attempt)
        raise AssertionError("unreachable")

    def autocommit(self, work: Callable[[Conn], T], *, retry: bool = True) -> T:
        """Run ``work(conn)`` as single statements, each committed on its own.

        A statement that lost a deadlock or a serialization conflict was rolled back whole;
        ``work`` is run again from the start (its statements must be safe to repeat, as every
        autocommit unit in Baton is: one statement, or idempotent ones). ``retry`` False leaves
        that to the caller (an optimistic decision falls back to a locked one instead).
        """
        for attempt in range(1, MAX_ATTEMPTS + 1):
            try:
                return self._autocommit_once(work)
            except RETRYABLE:
                if not retry:
                    raise
                _contended(attempt)
        raise AssertionError("unreachable")

    def _autocommit_once(self, work: Callable[[Conn], T]) -> T:
        with self.source.connection() as conn, _translated():
            conn.autocommit = True
            try:
                return work(conn)
            except BaseException:
                # A failed explicit BEGIN ... COMMIT block survives its pipeline's Sync.
                _settle(conn, b"ROLLBACK")
                raise
            finally:
                _restore_autocommit(conn)

    def close(self) -> None:
        self.source.close()


def _contended(attempt: int) -> None:
    """After a deadlock or serialization failure: try again, or give up with a 503."""
    if attempt == MAX_ATTEMPTS:
        raise Unavailable("too much contention on the same rows; try again", 1) from None
    log.info(
        "unit of work retried after a deadlock/serialization failure", extra={"attempt": attempt}
    )


def first_in_transaction(
    conn: Conn, query: Any, params: dict[str, Any] | None = None
) -> dict[str, Any] | None:
    """Run a transaction's first statement with its BEGIN in one round trip; fetch one row.

    On an autocommit connection (``explicit_begin``) the BEGIN is sent here, in the pipeline;
    otherwise psycopg opens the transaction itself.
    """
    with conn.pipeline():
        if conn.autocommit:
            conn.execute(b"BEGIN", prepare=False)
        cur = conn.execute(query, params)
    return cur.fetchone()


def _settle(conn: Conn, command: bytes) -> None:
    """End whatever transaction an interrupted unit of work left open. A connection that cannot
    even do that (the server went away mid-pipeline) is closed, never reused half-open; the
    error the caller is already raising is the one that counts."""
    if conn.closed or conn.broken:
        return
    try:
        _finish(conn, command)
    except psycopg.Error:
        conn.close()


def _restore_autocommit(conn: Conn) -> None:
    """Leave the connection as the source expects it (autocommit off), or close it."""
    if conn.closed or conn.broken:
        return
    try:
        conn.autocommit = False
    except psycopg.Error:
        conn.close()


def _finish(conn: Conn, command: bytes) -> None:
    """COMMIT or ROLLBACK whatever transaction is still open (nothing, and no round trip, if
    ``work`` already committed)."""
    if conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
        return
    if conn.autocommit:
        conn.execute(command, prepare=False)
    elif command == b"COMMIT":
        conn.commit()
    else:
        conn.rollback()


_UNAVAILABLE = (psycopg.OperationalError, pg_errors.AdminShutdown, pg_errors.CannotConnectNow)


@contextmanager
def _translated() -> Iterator[None]:
    try:
        yield
    except RETRYABLE:
        raise
    except psycopg.Error as e:
        if e.sqlstate == STALE_VERSION_SQLSTATE:
            raise StaleVersion(str(e.diag.message_detail or "?")) from e
        if isinstance(e, _UNAVAILABLE):
            raise Unavailable(f"database unavailable: {_first_line(e)}") from e
        if isinstance(e, psycopg.DataError):
            # A value the column cannot hold (NUL in text, out of range, not representable).
            raise InvalidValue(f"a value was refused by the database: {_first_line(e)}") from e
        raise
