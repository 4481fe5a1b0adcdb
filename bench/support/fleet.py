"""A fleet: worker processes that run a benchmark's timed stages in step. Each worker opens its
own connection and reports ready with its backend's pid (so that backend's CPU can be metered);
before each stage it waits for the parent's signal. The parent times a stage from that signal
to the last item any worker did, and meters the machine's CPU meanwhile; each worker reports
its items, its own CPU and its backend's, and its round trips, and the parent sums them into a
``PhaseResult``. A benchmark then declares a phase as the stages it runs and what it does with
their results, and writes a worker as the work of each stage between ``begin`` and ``report``.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from multiprocessing.context import SpawnProcess
from multiprocessing.queues import Queue
from multiprocessing.sharedctypes import Synchronized
from multiprocessing.synchronize import Event
from typing import Any

from support.cpu import CpuMeter, CpuWindow, sum_or_none
from support.processes import SPAWN, add, collect, spawned, wait_for, worker_entry
from support.reporting import Progress, rate
from support.wire import WIRE, merge_wire

READY_TIMEOUT = 120.0  # seconds for every worker to import, connect and report ready


@dataclass(slots=True)
class Channels:
    """What the parent and its workers share (all from the spawn context)."""

    outbox: Queue[Any]  # workers -> parent: (stage | "ready" | "error", worker, payload)
    go: dict[str, Event]  # the parent's start signal, by stage
    done: dict[str, Synchronized[int]]  # items done so far by all workers, by stage

    @classmethod
    def create(cls, stages: Sequence[str]) -> Channels:
        return cls(
            outbox=SPAWN.Queue(),
            go={stage: SPAWN.Event() for stage in stages},
            done={stage: SPAWN.Value("q", 0) for stage in stages},
        )


@dataclass(slots=True)
class Member:
    """A worker's side of the fleet; it travels to the spawned child as an argument."""

    channels: Channels
    index: int
    parent_pid: int
    meter: CpuMeter | None = None

    def run(self, body: Callable[[], None]) -> None:
        """Run the worker's body, turning a failure into an error message for the parent."""
        worker_entry(body, self.channels.outbox, self.index)

    def ready(self, backend_pid: int) -> None:
        """Connected: from now on this worker's backend is metered with it."""
        self.meter = CpuMeter(backend_pid)
        self.channels.outbox.put(("ready", self.index, backend_pid))

    def begin(self, stage: str) -> None:
        """Wait for the parent's signal, then count round trips and CPU from zero."""
        wait_for(self.channels.go[stage], self.parent_pid)
        WIRE.reset()
        self._meter().start()

    def shared_count(self, stage: str) -> Synchronized[int]:
        """Items done in ``stage`` by all workers together (the parent's progress, too)."""
        return self.channels.done[stage]

    def add(self, stage: str, n: int) -> None:
        add(self.channels.done[stage], n)

    def usage(self) -> dict[str, float | None]:
        """CPU seconds since ``begin``: read it before the connection (and backend) closes."""
        return self._meter().read()

    def report(
        self, stage: str, payload: dict[str, Any], *, usage: dict[str, float | None] | None = None
    ) -> None:
        """Send this worker's figures for ``stage``: ``payload`` holds ``items`` (how many),
        ``end`` (monotonic time of the last one, 0 if none) and ``wire`` (round trips), plus
        anything the benchmark wants; CPU is read now unless ``usage`` was read earlier."""
        figures = {**payload, **(usage if usage is not None else self.usage())}
        self.channels.outbox.put((stage, self.index, figures))

    def _meter(self) -> CpuMeter:
        if self.meter is None:
            raise RuntimeError("a worker reports ready (with its backend) before any stage")
        return self.meter


@dataclass(slots=True)
class PhaseResult:
    name: str
    items: int
    seconds: float
    cpu: float  # client CPU seconds, all worker processes
    server_cpu: float | None  # CPU seconds of their backends (None: server not on this machine)
    wire: dict[str, Any]
    window: CpuWindow
    reports: list[dict[str, Any]]  # each worker's payload, for what a benchmark adds

    @classmethod
    def build(
        cls, name: str, t0: float, reports: Sequence[dict[str, Any]], window: CpuWindow
    ) -> PhaseResult:
        ends = [r["end"] for r in reports if r["end"]]
        return cls(
            name,
            sum(r["items"] for r in reports),
            (max(ends) - t0) if ends else float("nan"),
            sum(r["cpu"] for r in reports),
            sum_or_none(r["server_cpu"] for r in reports),
            merge_wire(r["wire"] for r in reports),
            window,
            list(reports),
        )

    def total(self, key: str) -> int:
        return sum(r[key] for r in self.reports)

    def cpu_line(self) -> str:
        return f"CPU during {self.name}: {self.window.describe(self.cpu, self.server_cpu)}"

    @property
    def per_second(self) -> float:
        return rate(self.items, self.seconds)

    def round_trips_per_item(self) -> float:
        return float(sum(self.wire["round_trips"].values())) / max(self.items, 1)


@dataclass(slots=True)
class Fleet:
    """The parent's side: running workers, their backends' pids and the server's postmaster."""

    channels: Channels
    procs: list[SpawnProcess]
    backends: list[int]
    postmaster: int | None

    def run(
        self, stage: str, name: str, *, progress: str, total: int, timeout: float
    ) -> PhaseResult:
        """Signal ``stage``, wait for every worker's report (printing ``progress`` of ``total``
        items as they are done) and return the stage's figures as the phase ``name``."""
        shown = Progress(progress, total)
        done = self.channels.done[stage]
        window = CpuWindow(self.postmaster, self.backends)
        window.start()
        t0 = time.monotonic()
        self.channels.go[stage].set()
        reports = collect(
            self.channels.outbox,
            self.procs,
            stage,
            timeout=timeout,
            tick=lambda: shown.update(done.value),
        )
        window.stop()
        return PhaseResult.build(name, t0, list(reports.values()), window)


@contextlib.contextmanager
def fleet(
    target: Callable[[Any, Member], None],
    config: Any,
    *,
    workers: int,
    name: str,
    stages: Sequence[str],
    postmaster: int | None,
) -> Iterator[Fleet]:
    """Spawn ``workers`` processes running ``target(config, member)`` and wait until each has
    reported ready; on exit, stop whichever are still running."""
    channels = Channels.create(stages)
    members = [Member(channels, k, os.getpid()) for k in range(workers)]
    with spawned(target, [(config, m) for m in members], name) as procs:
        ready = collect(channels.outbox, procs, "ready", timeout=READY_TIMEOUT)
        yield Fleet(channels, procs, list(ready.values()), postmaster)
