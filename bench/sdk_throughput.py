"""SDK throughput: drain N one-step workflows through the HTTP API with the Python worker SDK's
``Runner`` at parallelism 1, 4 and 16, against a ``baton dev`` this script starts, then the same
drain in-process through the engine library (no HTTP), and print the ratios.

    .venv/bin/python bench/sdk_throughput.py --jobs 2000

Set-up: a PostgreSQL server (``--database-url`` / ``$DATABASE_URL``, else an embedded one), a
fresh migrated database on it, and ``baton dev`` serving that database on a free port. Each
phase uses its own definition and job type, so no phase sees another's jobs:

1. sdk p=P (P = 1, 4, 16): start N instances through the engine library (not timed), then time
   one ``Runner`` (one process, P job threads, one HTTP client) from ``start()`` until it has
   completed N jobs. Handlers return ``{"ok": true}`` at once, so this measures the poll /
   dispatch / complete path: HTTP, the local API server and the engine.
2. engine in-process: start N instances, then time one thread looping ``Engine.poll(batch)`` and
   ``Engine.complete_job`` on one connection, as a single worker process would without HTTP.

After each phase a query checks that every instance is COMPLETED and every job was delivered
exactly once; otherwise the run fails (exit 1). The last lines are ``sdk/engine ratio`` lines:
SDK jobs/s at each parallelism over the in-process engine's jobs/s.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from support import BenchError
from support.cpu import CpuWindow, Stopwatch
from support.postgres import fresh_database, postgres_server, server_summary
from support.processes import DevServer, dev_server
from support.reporting import Progress, fmt_num, log, rate, table
from support.workload import RESULT, drain_in_process, start_instances, verify

if TYPE_CHECKING:
    from baton_worker import InMemoryMetrics, Runner

PARALLELISMS = (1, 4, 16)


@dataclass(slots=True)
class Phase:
    name: str
    parallelism: int | None
    jobs: int
    seconds: float
    client_cpu: float
    server_cpu: float | None
    polls: int | None
    window: CpuWindow

    @classmethod
    def measured(
        cls, name: str, parallelism: int | None, jobs: int, polls: int | None, watch: Stopwatch
    ) -> Phase:
        return cls(
            name, parallelism, jobs, watch.seconds, watch.cpu, watch.other_cpu, polls, watch.window
        )

    @property
    def per_second(self) -> float:
        return rate(self.jobs, self.seconds)


# --- phases -------------------------------------------------------------------------------------


def _runner(
    server: DevServer, job_type: str, parallelism: int, batch: int, metrics: InMemoryMetrics
) -> Runner:
    """One SDK runner whose handler returns at once: what is measured is the path around it."""
    from baton_worker import Registry, Runner, RunnerOptions

    registry = Registry()
    registry.handler(job_type)(lambda ctx: RESULT)
    return Runner(
        registry,
        url=server.url,
        api_key=server.api_key,
        metrics=metrics,
        options=RunnerOptions(
            worker_id=f"bench-p{parallelism}",
            parallelism=parallelism,
            max_jobs_per_poll=batch,
            poll_interval=0.05,
            max_poll_interval=0.2,
        ),
    )


def sdk_phase(url: str, server: DevServer, parallelism: int, args: argparse.Namespace) -> Phase:
    from baton_worker import InMemoryMetrics

    n = args.jobs
    job_type, name = f"bench-sdk-p{parallelism}", f"bench-sdk-p{parallelism}"
    log(f"sdk p={parallelism}: {n:,} one-step instances")
    start_instances(url, name, job_type, n)
    metrics = InMemoryMetrics()
    runner = _runner(server, job_type, parallelism, args.batch, metrics)
    progress = Progress("jobs completed", n)
    watch = Stopwatch(other=server.cpu_seconds)
    watch.start()
    runner.start()
    try:
        while (done := metrics.jobs_completed[job_type]) < n:
            if metrics.jobs_failed[job_type] or metrics.outcomes_unreported[job_type]:
                raise BenchError(f"sdk p={parallelism}: failures: {metrics.snapshot()}")
            if watch.elapsed() > args.timeout:
                raise BenchError(f"sdk p={parallelism}: {done}/{n} after {args.timeout:.0f}s")
            progress.update(done)
            time.sleep(0.01)
        watch.stop()
    finally:
        runner.stop(timeout=60)
    progress.update(n)
    verify(url, name, job_type, n)
    phase = Phase.measured(f"sdk over HTTP, p={parallelism}", parallelism, n, metrics.polls, watch)
    log(f"sdk p={parallelism}: {phase.per_second:,.0f} jobs/s ({metrics.polls:,} polls)")
    return phase


def engine_phase(url: str, args: argparse.Namespace) -> Phase:
    drained = drain_in_process(url, args.jobs, batch=args.batch, timeout=args.timeout)
    return Phase.measured(
        "engine in-process (no HTTP)", None, drained.jobs, drained.polls, drained.watch
    )


# --- report -------------------------------------------------------------------------------------


def cpu_shares(p: Phase) -> str:
    """Shares of the machine's CPU over the phase: this process (the runner, or the engine
    loop), the baton dev process, everything else (PostgreSQL, other programs), idle."""
    named = [("this process", p.client_cpu), ("baton dev", p.server_cpu)]
    shares = p.window.shares(named, rest="PostgreSQL and the rest")
    if shares is None:
        return f"this process {p.client_cpu:.1f} CPU-s"
    return f"{shares} of {os.cpu_count()} cores over {p.window.wall:.1f}s"


def report(phases: Sequence[Phase], engine: Phase, batch: int) -> None:
    print(flush=True)

    def row(p: Phase) -> list[str]:
        server = "-" if p.server_cpu is None else f"{1e6 * p.server_cpu / p.jobs:,.0f}"
        return [
            p.name,
            "-" if p.parallelism is None else str(p.parallelism),
            f"{p.jobs:,}",
            f"{p.seconds:.2f}",
            fmt_num(p.per_second),
            "-" if not p.polls else f"{p.jobs / p.polls:.1f}",
            f"{1e6 * p.client_cpu / p.jobs:,.0f}",
            server,
        ]

    headers = [
        "phase",
        "parallelism",
        "jobs",
        "seconds",
        "jobs/s",
        "jobs/poll",
        "client CPU us/job",
        "server CPU us/job",
    ]
    print(table(headers, [*map(row, phases), row(engine)]))
    print()
    for p in (*phases, engine):
        print(f"CPU during {p.name}: {cpu_shares(p)}")
    print(
        f"(max jobs per poll {batch}; 'server' is the baton dev process: HTTP, the API functions "
        "and their engine calls, not PostgreSQL)"
    )
    for p in phases:
        print(f"sdk/engine ratio, p={p.parallelism}: {p.per_second / engine.per_second:.2f}")
    sys.stdout.flush()


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--jobs", type=int, default=2000, help="jobs per phase (default 2000)")
    p.add_argument("--batch", type=int, default=10, help="max jobs per poll (default 10)")
    p.add_argument(
        "--parallelism",
        type=int,
        action="append",
        help="runner parallelism to measure (repeatable; default "
        f"{', '.join(map(str, PARALLELISMS))})",
    )
    p.add_argument(
        "--database-url",
        default=os.environ.get("DATABASE_URL") or None,
        help="server to use (default: $DATABASE_URL, else an embedded PostgreSQL)",
    )
    p.add_argument("--timeout", type=float, default=600, help="per phase, seconds")
    args = p.parse_args(argv)
    if args.jobs < 1 or not 1 <= args.batch <= 100:
        p.error("--jobs must be positive and --batch between 1 and 100")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    parallelisms = tuple(args.parallelism or PARALLELISMS)
    log(
        f"sdk throughput: {args.jobs:,} one-step workflows per phase, parallelism "
        f"{', '.join(map(str, parallelisms))}, batch {args.batch}"
    )
    try:
        with postgres_server(args.database_url) as pg:
            log(server_summary(pg))
            with fresh_database(pg, "sdk") as url, dev_server(url) as server:
                phases = [sdk_phase(url, server, p, args) for p in parallelisms]
                engine = engine_phase(url, args)
    except KeyboardInterrupt:
        log("interrupted")
        return 130
    except BenchError as e:
        print(f"FAIL: {e}", file=sys.stderr, flush=True)
        return 1
    report(phases, engine, args.batch)
    return 0


if __name__ == "__main__":
    sys.exit(main())
