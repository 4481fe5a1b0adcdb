"""Who used the machine's CPU during a timed phase, from Linux's /proc (None elsewhere, or for a
server on another machine). A worker meters its own CPU and its backend's (``CpuMeter``); the
parent meters the whole machine over the phase (``CpuWindow``) and splits it into the
benchmark's clients, their backends, the server's other processes and the rest of the machine:
a rate measured while something else was busy is depressed, and this is how a reader can tell.
Work timed in the benchmark's own process uses a ``Stopwatch`` (wall time, its CPU, the
machine's)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

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

    def shares(self, named: Sequence[tuple[str, float | None]], rest: str) -> str | None:
        """``label NN%`` of the machine's CPU for each named figure (CPU seconds; None: unknown,
        left out), then what the machine's busy CPU leaves under ``rest``, then idle; None when
        the machine's CPU is unknown."""
        avail = self.wall * (os.cpu_count() or 1)
        if self.busy is None or avail <= 0:
            return None

        def pct(x: float) -> str:
            return f"{100 * max(x, 0) / avail:.0f}%"

        parts, other = [], self.busy
        for label, seconds in named:
            if seconds is not None:
                parts.append(f"{label} {pct(seconds)}")
                other -= seconds
        parts += [f"{rest} {pct(other)}", f"idle {pct(avail - self.busy)}"]
        return ", ".join(parts)

    def describe(self, client: float, backends: float | None) -> str:
        named = [
            ("clients", client),
            ("their backends", backends),
            ("other Postgres processes", self.server),
        ]
        shares = self.shares(named, rest="rest of the machine")
        if shares is None:
            return f"client processes {client:.1f} CPU-s"
        return f"{shares} (of {os.cpu_count() or 1} cores over {self.wall:.1f}s)"


@dataclass(slots=True)
class Stopwatch:
    """Wall time and CPU over a section of this process: its own CPU, that of another local
    process if ``other`` reads it (the local API server, say), and the machine's (``window``).
    ``start()`` and ``stop()`` rather than a ``with`` block, so that what must happen after the
    measurement (stopping a runner) can sit in a ``finally`` around it."""

    other: Callable[[], float | None] | None = None
    window: CpuWindow = field(default_factory=CpuWindow)
    seconds: float = 0.0
    cpu: float = 0.0
    other_cpu: float | None = None
    _t0: float = 0.0
    _cpu0: float = 0.0
    _other0: float | None = None

    def start(self) -> None:
        self._other0 = self.other() if self.other is not None else None
        self.window.start()
        self._cpu0 = time.process_time()
        self._t0 = time.monotonic()

    def elapsed(self) -> float:
        return time.monotonic() - self._t0

    def stop(self) -> None:
        self.seconds = time.monotonic() - self._t0
        self.cpu = time.process_time() - self._cpu0
        self.window.stop()
        other = self.other() if self.other is not None else None
        self.other_cpu = None if other is None or self._other0 is None else other - self._other0
