"""Shared helpers for Baton's benchmarks: a Postgres server (external or embedded), fresh
databases on it, spawned worker processes that never outlive the run, a wire-level round-trip
counter, and plain aligned printing.

Benchmarks import this module as ``_common`` (it sits next to them); importing it also makes the
core library importable as ``baton`` from ``shared/``, in the parent and in spawned children alike.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import queue
import shutil
import sys
import tempfile
import time
import traceback
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from multiprocessing.context import SpawnProcess
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "shared") not in sys.path:
    sys.path.insert(0, str(ROOT / "shared"))

import psycopg  # noqa: E402
from psycopg import pq  # noqa: E402
from psycopg.conninfo import make_conninfo  # noqa: E402

SPAWN = mp.get_context("spawn")
_T0 = time.perf_counter()


class BenchError(RuntimeError):
    """The benchmark could not produce a trustworthy number (lost work, a dead worker...)."""


# --- printing ---------------------------------------------------------------------------------


def log(message: str) -> None:
    """A progress line, prefixed with the seconds since the benchmark started."""
    print(f"[{time.perf_counter() - _T0:7.1f}s] {message}", flush=True)


def rate(count: float, seconds: float) -> float:
    return count / seconds if seconds > 0 else float("inf")


def fmt_num(value: float | int | str | None, decimals: int = 0) -> str:
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    return f"{value:,.{decimals}f}"


def table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """An aligned text table: first column left-aligned, the others right-aligned."""
    body = [list(map(str, r)) for r in rows]
    widths = [max(len(str(h)), *(len(r[i]) for r in body)) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        out = [c.ljust(widths[i]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(cells)]
        return "  ".join(out).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths]), *map(line, body)])


# --- Postgres: a server, and fresh databases on it ---------------------------------------------


@contextlib.contextmanager
def postgres_server(url: str | None) -> Iterator[str]:
    """Yield a server URL: ``url`` if given, else ``$DATABASE_URL``, else an embedded PostgreSQL
    in a temporary directory that is stopped and deleted on exit."""
    url = url or os.environ.get("DATABASE_URL") or None
    if url:
        log("using the external PostgreSQL server from --database-url / DATABASE_URL")
        yield url
        return
    from baton.store.embedded import EmbeddedPostgres

    root = Path(tempfile.mkdtemp(prefix="baton-bench-pg-"))
    # pgserver keeps files under XDG_RUNTIME_DIR; give it its own directory, outside the data
    # directory (initdb refuses a non-empty one).
    os.environ.setdefault("XDG_RUNTIME_DIR", str(root / "run"))
    Path(os.environ["XDG_RUNTIME_DIR"]).mkdir(parents=True, exist_ok=True)
    pg = EmbeddedPostgres(root / "data", keep_data=False)
    log(f"starting embedded PostgreSQL in {root}")
    try:
        uri = pg.start()
        yield uri
    finally:
        log("stopping embedded PostgreSQL")
        with contextlib.suppress(Exception):  # Ctrl-C may already have stopped it
            pg.stop()
        shutil.rmtree(root, ignore_errors=True)


def server_summary(url: str) -> str:
    """One line of the server settings that decide commit cost."""
    with psycopg.connect(url, autocommit=True) as conn:
        version = conn.execute("SHOW server_version").fetchone()
        names = ("fsync", "synchronous_commit", "shared_buffers", "max_connections")
        values = {
            n: row[0] for n in names if (row := conn.execute(f"SHOW {n}").fetchone()) is not None
        }
    parts = [f"PostgreSQL {version[0] if version else '?'}"]
    parts += [f"{k}={v}" for k, v in values.items()]
    return ", ".join(parts)


@contextlib.contextmanager
def fresh_database(
    server_url: str, label: str, *, migrate: bool = True, keep: bool = False
) -> Iterator[str]:
    """Create an empty database (with Baton's migrations applied unless ``migrate=False``), yield
    its conninfo, and drop it on exit."""
    name = f"bench_{label}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = make_conninfo(server_url, dbname=name)
    try:
        if migrate:
            from baton.store import migrations

            migrations.apply(url)
        yield url
    finally:
        if not keep:
            with (
                contextlib.suppress(psycopg.Error),
                psycopg.connect(server_url, autocommit=True) as conn,
            ):
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def settle(url: str, *tables: str) -> None:
    """ANALYZE the tables and CHECKPOINT (when allowed), so a timed phase starts from the same
    state rather than paying for the previous phase's dirty buffers."""
    with psycopg.connect(url, autocommit=True) as conn:
        for t in tables:
            conn.execute(f"ANALYZE {t}")
        with contextlib.suppress(psycopg.errors.InsufficientPrivilege):
            conn.execute("CHECKPOINT")


# --- CPU accounting (Linux /proc; None elsewhere or for a remote server) ------------------------

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def process_cpu_seconds(pid: int) -> float | None:
    """User+system CPU seconds of a process on this machine (e.g. a Postgres backend)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) "
    return (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime


def _ppid(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat[stat.rindex(")") + 2 :].split()[1])


def postmaster_pid(url: str) -> int | None:
    """The pid of the server's postmaster if it runs on this machine (else None)."""
    with psycopg.connect(url) as conn:
        backend = conn.info.backend_pid
        parent = _ppid(backend)
        if parent is None:
            return None
        # Only trust it if it is really that server (not a pid that exists here by chance).
        row = conn.execute("SELECT pg_backend_pid()").fetchone()
        alive = Path(f"/proc/{backend}").exists()
    return parent if row and row[0] == backend and alive else None


def server_cpu_seconds(postmaster: int | None, exclude: Iterable[int] = ()) -> float | None:
    """CPU seconds of a local server: the postmaster and the processes it forked that are alive
    now (walwriter, checkpointer, autovacuum...), except the ``exclude`` pids (backends metered
    by their clients)."""
    if postmaster is None:
        return None
    skip = set(exclude)
    total = process_cpu_seconds(postmaster) or 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in skip:
            continue
        if _ppid(int(entry.name)) == postmaster:
            total += process_cpu_seconds(int(entry.name)) or 0.0
    return total


def machine_busy_seconds() -> float | None:
    """CPU seconds all cores have been busy since boot (user, nice, system, irq, steal)."""
    try:
        first = Path("/proc/stat").read_text().splitlines()[0].split()
    except (OSError, IndexError):
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, first[1:9])
    return (user + nice + system + irq + softirq + steal) / _TICK


@dataclass
class CpuMeter:
    """CPU used by this process and by its Postgres backend (when on this machine) since
    ``start()``; read it in the worker, before the connection closes."""

    backend_pid: int
    cpu0: float = 0.0
    server0: float | None = None

    def start(self) -> None:
        self.cpu0 = time.process_time()
        self.server0 = process_cpu_seconds(self.backend_pid)

    def read(self) -> dict[str, float | None]:
        server = process_cpu_seconds(self.backend_pid)
        return {
            "cpu": time.process_time() - self.cpu0,
            "server_cpu": None if server is None or self.server0 is None else server - self.server0,
        }


def sum_or_none(values: Iterable[float | None]) -> float | None:
    total = 0.0
    for v in values:
        if v is None:
            return None
        total += v
    return total


@dataclass
class CpuWindow:
    """Machine-wide busy CPU over a timed phase, split into the benchmark's clients, their
    backends, the server's other processes (those alive at both ends of the window), and the
    rest of the machine: anything else running there makes the numbers noisy."""

    postmaster: int | None = None
    backend_pids: Sequence[int] = ()
    busy0: float | None = None
    server0: float | None = None
    wall0: float = 0.0
    busy: float | None = None
    server: float | None = None  # the server's processes other than backend_pids
    wall: float = 0.0

    def start(self) -> None:
        self.server0 = server_cpu_seconds(self.postmaster, self.backend_pids)
        self.busy0, self.wall0 = machine_busy_seconds(), time.monotonic()

    def stop(self) -> None:
        end = machine_busy_seconds()
        server = server_cpu_seconds(self.postmaster, self.backend_pids)
        self.wall = time.monotonic() - self.wall0
        self.busy = None if end is None or self.busy0 is None else end - self.busy0
        self.server = None if server is None or self.server0 is None else server - self.server0

    def rest_fraction(self, client: float, backends: float | None) -> float | None:
        """Share of the machine's CPU used by anything but the benchmark and its server."""
        avail = self.wall * (os.cpu_count() or 1)
        if self.busy is None or avail <= 0:
            return None
        return (self.busy - client - (backends or 0.0) - (self.server or 0.0)) / avail

    def describe(self, client: float, backends: float | None) -> str:
        cores = os.cpu_count() or 1
        avail = self.wall * cores
        if self.busy is None or avail <= 0:
            return f"client processes {client:.1f} CPU-s"

        def pct(x: float) -> str:
            return f"{100 * max(x, 0) / avail:.0f}%"

        parts = [f"clients {pct(client)}"]
        rest = self.busy - client
        if backends is not None:
            parts.append(f"their backends {pct(backends)}")
            rest -= backends
        if self.server is not None:
            parts.append(f"other Postgres processes {pct(self.server)}")
            rest -= self.server
        parts.append(f"rest of the machine {pct(rest)}")
        parts.append(f"idle {pct(avail - self.busy)}")
        return f"{', '.join(parts)} (of {cores} cores over {self.wall:.1f}s)"


# --- worker processes ---------------------------------------------------------------------------


@contextlib.contextmanager
def spawned(
    target: Callable[..., None], args_per_process: Sequence[tuple[Any, ...]], name: str
) -> Iterator[list[SpawnProcess]]:
    """Start one spawned process per argument tuple; on exit (normal, error or Ctrl-C) terminate
    whichever are still alive and reap them all, so nothing outlives the benchmark."""
    procs = [
        SPAWN.Process(target=target, args=a, name=f"{name}-{k}", daemon=True)
        for k, a in enumerate(args_per_process)
    ]
    started: list[SpawnProcess] = []
    try:
        for p in procs:
            p.start()
            started.append(p)
        yield procs
    finally:
        for p in started:
            if p.is_alive():
                p.terminate()
        for p in started:
            p.join(5)
            if p.is_alive():
                p.kill()
                p.join()


def wait_for(event: Any, parent_pid: int) -> None:
    """Block on a start signal, but give up if the parent process is gone (killed hard)."""
    while not event.wait(1.0):
        if os.getppid() != parent_pid:
            raise SystemExit("parent process is gone")


def worker_entry(body: Callable[[], None], outbox: Any, worker: int) -> None:
    """Run a worker's body in a child: ignore Ctrl-C (the parent decides when children stop) and
    turn any failure into an ``("error", worker, traceback)`` message before exiting non-zero."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        body()
    except BaseException:
        outbox.put(("error", worker, traceback.format_exc()))
        raise SystemExit(1) from None


def collect(
    inbox: Any,
    procs: Sequence[SpawnProcess],
    kind: str,
    *,
    timeout: float,
    tick: Callable[[], None] | None = None,
    tick_every: float = 0.25,
) -> dict[int, Any]:
    """Wait for one ``(kind, worker, payload)`` message from every process; return payloads by
    worker. Raises BenchError on a worker's error message, a dead worker, or the timeout."""
    got: dict[int, Any] = {}
    deadline = time.monotonic() + timeout
    while len(got) < len(procs):
        try:
            msg_kind, worker, payload = inbox.get(timeout=tick_every)
        except queue.Empty:
            if tick is not None:
                tick()
            dead = [p.name for k, p in enumerate(procs) if k not in got and not p.is_alive()]
            if dead:
                raise BenchError(f"worker process(es) died: {', '.join(dead)}") from None
            if time.monotonic() > deadline:
                raise BenchError(f"timed out after {timeout:.0f}s waiting for '{kind}'") from None
            continue
        if msg_kind == "error":
            raise BenchError(f"worker {worker} failed:\n{payload}")
        if msg_kind != kind:
            raise BenchError(f"worker {worker} sent {msg_kind!r} while waiting for {kind!r}")
        got[worker] = payload
    if tick is not None:
        tick()
    return got


class Progress:
    """Prints ``what: done/total (pct)`` each time another ``step`` fraction is reached."""

    def __init__(self, what: str, total: int, *, step: float = 0.2) -> None:
        self.what, self.total, self.step = what, total, step
        self._next = step

    def update(self, done: int) -> None:
        if self.total <= 0:
            return
        frac = done / self.total
        if frac + 1e-9 >= self._next:
            while self._next <= frac + 1e-9:
                self._next += self.step
            log(f"  {self.what}: {done:,}/{self.total:,} ({frac:.0%})")


# --- round trips --------------------------------------------------------------------------------

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
