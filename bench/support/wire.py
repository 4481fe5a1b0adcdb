"""Round trips counted at the wire: a thin patch of psycopg (in the process that installs it)
counts every awaited server response and every statement, labelled by the SQL module constant
that holds the statement's text, and times each wait. Counting what goes over the wire, rather
than statements in the code, is what shows whether BEGIN and COMMIT travel with the work."""

from __future__ import annotations

import contextlib
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import pq

from support.reporting import table

# psycopg runs every exchange with the server through ``Connection.wait(generator)``. Which
# generator it is says what went over the wire:
#   - outside pipeline mode, an execute/commit/rollback is one request and one awaited response;
#   - inside pipeline mode, executes are only queued (no wait for the server), and a round trip is
#     a Sync (``_sync_gen``: Pipeline.sync() or a commit), the Sync sent when the pipeline block
#     exits (``_exit_gen``), or a flush forced by fetching a result early (``_fetch_gen``);
#   - commit/rollback with no open transaction send nothing; setting autocommit sends nothing;
#   - the first statement of a transaction on a non-autocommit connection is preceded by its own
#     BEGIN round trip (``BaseConnection._start_query``: send BEGIN, wait for the result; in
#     pipeline mode queue BEGIN and Sync), hidden inside that statement's wait: it is counted
#     separately as ``BEGIN`` and its time taken out of the statement's.
_PIPELINE_SYNCS = frozenset({"_sync_gen", "_exit_gen", "_fetch_gen"})
_TX_ENDS = frozenset({"_commit_gen", "_rollback_gen"})
_QUEUED_IN_PIPELINE = frozenset({"_execute_gen", "_executemany_gen_pipeline", "_exec_command"})
_NO_IO = frozenset({"_enter_gen", "_set_autocommit_gen", "_executemany_gen_pipeline"})


@dataclass
class WireStats:
    """Per-process counts: round trips (awaited server responses) and statements, by label."""

    round_trips: Counter[str] = field(default_factory=Counter)
    wait_seconds: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    statements: Counter[str] = field(default_factory=Counter)
    uncounted_waits: Counter[str] = field(default_factory=Counter)
    current: str = "?"
    queued: list[str] = field(default_factory=list)
    paused: bool = False
    installed: bool = False
    nested_seconds: float = 0.0  # BEGIN time inside the wait being measured

    def snapshot(self) -> dict[str, dict[str, float]]:
        """Plain, picklable copy: {"round_trips": ..., "wait_seconds": ..., "statements": ...}."""
        return {
            "round_trips": dict(self.round_trips),
            "wait_seconds": dict(self.wait_seconds),
            "statements": dict(self.statements),
        }

    def reset(self) -> None:
        self.round_trips.clear()
        self.wait_seconds.clear()
        self.statements.clear()
        self.uncounted_waits.clear()
        self.queued.clear()

    @contextlib.contextmanager
    def pause(self) -> Iterator[None]:
        """Leave bookkeeping queries (termination checks) out of the counts."""
        self.paused = True
        try:
            yield
        finally:
            self.paused = False


WIRE = WireStats()


def count_round_trips(labeler: Callable[[object], str]) -> WireStats:
    """Patch psycopg (in this process) to count statements and round trips into ``WIRE``.

    ``labeler(query)`` names a statement; a pipeline's round trip is labelled with the statements
    it carried, e.g. ``pipeline[INSERT_AUDIT+MARK_COMPLETED+COMMIT]``.
    """
    if WIRE.installed:
        return WIRE
    WIRE.installed = True
    cursor_execute = psycopg.Cursor.execute
    cursor_executemany = psycopg.Cursor.executemany
    conn_wait = psycopg.Connection.wait
    from psycopg._connection_base import BaseConnection as base  # private: only to see BEGIN

    conn_start_query = base._start_query

    def note(cur: psycopg.Cursor[Any], query: object, n: int) -> None:
        label = labeler(query)
        WIRE.current = label
        if not WIRE.paused:
            WIRE.statements[label] += n
        if cur.connection.pgconn.pipeline_status != pq.PipelineStatus.OFF:
            WIRE.queued.append(label if n == 1 else f"{label}x{n}")

    def execute(self: psycopg.Cursor[Any], query: Any, *args: Any, **kwargs: Any) -> Any:
        note(self, query, 1)
        return cursor_execute(self, query, *args, **kwargs)

    def executemany(self: psycopg.Cursor[Any], query: Any, params_seq: Any, **kw: Any) -> Any:
        if not isinstance(params_seq, Sequence):
            params_seq = list(params_seq)
        note(self, query, len(params_seq))
        # Without an open pipeline, psycopg opens one for executemany: label its Sync by it.
        return cursor_executemany(self, query, params_seq, **kw)

    def start_query(self: Any) -> Any:
        # A generator, like the original: its run time is the BEGIN round trip.
        if self.autocommit or self.pgconn.transaction_status != pq.TransactionStatus.IDLE:
            return (yield from conn_start_query(self))
        in_pipeline = self.pgconn.pipeline_status != pq.PipelineStatus.OFF
        t = time.perf_counter()
        try:
            return (yield from conn_start_query(self))
        finally:
            if not WIRE.paused:
                label = _pipeline_label([*WIRE.queued, "BEGIN"]) if in_pipeline else "BEGIN"
                WIRE.queued.clear()
                spent = time.perf_counter() - t
                WIRE.round_trips[label] += 1
                WIRE.wait_seconds[label] += spent
                WIRE.nested_seconds += spent

    def wait(self: psycopg.Connection[Any], gen: Any, *args: Any, **kwargs: Any) -> Any:
        name = getattr(getattr(gen, "gi_code", None), "co_name", "?")
        in_pipeline = self.pgconn.pipeline_status != pq.PipelineStatus.OFF
        label: str | None
        if name in _TX_ENDS:
            if self.pgconn.transaction_status == pq.TransactionStatus.IDLE:
                label = None  # nothing is sent
            else:
                word = "COMMIT" if name == "_commit_gen" else "ROLLBACK"
                label = _pipeline_label([*WIRE.queued, word]) if in_pipeline else word
                if in_pipeline:
                    WIRE.queued.clear()
        elif name in _PIPELINE_SYNCS:
            label = _pipeline_label(WIRE.queued)
            WIRE.queued.clear()
        elif (in_pipeline and name in _QUEUED_IN_PIPELINE) or name in _NO_IO:
            label = None
        elif name.startswith(("_execute", "_exec_command")):
            label = WIRE.current
        else:
            label = None
            WIRE.uncounted_waits[name] += 1
        if label is None or WIRE.paused:
            return conn_wait(self, gen, *args, **kwargs)
        WIRE.nested_seconds = 0.0
        t = time.perf_counter()
        try:
            return conn_wait(self, gen, *args, **kwargs)
        finally:
            WIRE.round_trips[label] += 1
            WIRE.wait_seconds[label] += time.perf_counter() - t - WIRE.nested_seconds

    psycopg.Cursor.execute = execute  # type: ignore[method-assign]
    psycopg.Cursor.executemany = executemany  # type: ignore[method-assign]
    psycopg.Connection.wait = wait  # type: ignore[method-assign]
    base._start_query = start_query  # type: ignore[method-assign]
    return WIRE


def _pipeline_label(labels: Sequence[str]) -> str:
    return f"pipeline[{'+'.join(labels) or 'empty Sync'}]"


def sql_labeler(*modules: object, extra: dict[str, str] | None = None) -> Callable[[object], str]:
    """Name statements by the module constant holding their text (``jobs.CLAIM``), or by
    ``extra`` (SQL text -> label); anything else by its first words."""
    names: dict[str, str] = dict(extra or {})
    for module in modules:
        short = getattr(module, "__name__", "?").rsplit(".", 1)[-1]
        for attr, value in vars(module).items():
            if attr.isupper() and isinstance(value, str) and len(value) > 10:
                names[value] = f"{short}.{attr}"

    def label(query: object) -> str:
        if isinstance(query, bytes):
            query = query.decode(errors="replace")
        if isinstance(query, str):
            found = names.get(query)
            if found is not None:
                return found
            return " ".join(query.split()[:4])[:48] or "(empty query, e.g. a pool's check)"
        return type(query).__name__

    return label


def merge_wire(snapshots: Iterable[dict[str, dict[str, float]]]) -> dict[str, Counter[str]]:
    """Sum per-process ``WireStats.snapshot()`` dicts."""
    total: dict[str, Counter[str]] = {
        "round_trips": Counter(),
        "wait_seconds": Counter(),
        "statements": Counter(),
    }
    for snap in snapshots:
        for key, counts in snap.items():
            total[key].update(counts)
    return total


def wire_table(wire: dict[str, Counter[str]], per: int, per_name: str) -> str:
    """Round trips by label: count per ``per_name`` and mean wait (client-observed latency)."""
    rts, secs = wire["round_trips"], wire["wait_seconds"]
    rows = [
        [
            label,
            f"{n / per:.3f}",
            f"{1000 * secs[label] / n:.3f}",
            f"{100 * secs[label] / max(sum(secs.values()), 1e-9):.0f}%",
        ]
        for label, n in rts.most_common()
    ]
    rows.append(["total", f"{sum(rts.values()) / per:.3f}", "", ""])
    return table(["round trip", f"per {per_name}", "ms each", "of wait"], rows)
