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
import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from support import ROOT, BenchError
from support.cpu import CpuWindow, process_cpu_seconds
from support.postgres import fresh_database, postgres_server, server_summary, settle
from support.reporting import Progress, fmt_num, log, rate, table

PARALLELISMS = (1, 4, 16)
OUTPUT = {"ok": True}


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

    @property
    def per_second(self) -> float:
        return rate(self.jobs, self.seconds)


# --- the server ---------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(slots=True)
class DevServer:
    url: str
    api_key: str
    process: subprocess.Popen[bytes]
    log_path: Path

    def cpu_seconds(self) -> float | None:
        return process_cpu_seconds(self.process.pid)


@contextlib.contextmanager
def dev_server(database_url: str, timeout: float = 60.0) -> Iterator[DevServer]:
    """``baton dev`` on ``database_url`` (its own data dir for the local S3), stopped on exit."""
    import httpx

    port, api_key = _free_port(), secrets.token_hex(12)
    with tempfile.TemporaryDirectory(prefix="baton-bench-dev-") as data_dir:
        env = {
            **os.environ,
            "DATABASE_URL": database_url,
            "BATON_API_KEY": api_key,
            "BATON_TICK_SECONDS": "1",
            "PYTHONUNBUFFERED": "1",
        }
        cmd = [sys.executable, "-m", "baton.cli", "dev", "--port", str(port)]
        cmd += ["--data-dir", data_dir]
        log_path = Path(data_dir) / "server.log"
        with log_path.open("wb") as out:
            process = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
        server = DevServer(f"http://127.0.0.1:{port}", api_key, process, log_path)
        try:
            deadline = time.monotonic() + timeout
            while True:
                if process.poll() is not None:
                    raise BenchError(f"baton dev exited:\n{log_path.read_text()[-3000:]}")
                with contextlib.suppress(httpx.TransportError):
                    if httpx.get(server.url + "/v1/definitions", timeout=1).status_code == 401:
                        break
                if time.monotonic() > deadline:
                    raise BenchError(f"baton dev not ready after {timeout:.0f}s")
                time.sleep(0.1)
            log(f"baton dev serving {server.url} (pid {process.pid})")
            yield server
        finally:
            if process.poll() is None:
                process.send_signal(signal.SIGINT)
                try:
                    process.wait(30)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()


# --- instances and checks -----------------------------------------------------------------------


def start_instances(url: str, name: str, job_type: str, n: int) -> None:
    """Register a one-step definition and start ``n`` instances of it (library, not timed)."""
    from baton.engine.service import Engine
    from baton.store.db import Database

    db = Database.single(url)
    try:
        engine = Engine(db)
        steps = [{"id": "work", "type": "SERVICE_TASK", "jobType": job_type}]
        engine.register_definition({"name": name, "steps": steps})
        began = time.monotonic()
        for i in range(n):
            engine.start_instance(definition_name=name, input={"n": i})
        log(f"  {n:,} instances of {name} started in {time.monotonic() - began:.1f}s")
    finally:
        db.close()
    settle(url, "instance", "step_execution", "job", "audit_log")


def verify(url: str, name: str, job_type: str, n: int) -> None:
    """All ``n`` instances COMPLETED, all jobs COMPLETED, each delivered exactly once."""
    import psycopg

    with psycopg.connect(url) as conn:
        inst = dict(
            conn.execute(
                "SELECT status, count(*) FROM instance WHERE definition_name = %s GROUP BY 1",
                (name,),
            ).fetchall()
        )
        jobs = dict(
            conn.execute(
                "SELECT status, count(*) FROM job WHERE job_type = %s GROUP BY 1", (job_type,)
            ).fetchall()
        )
        twice = conn.execute(
            "SELECT count(*) FROM job WHERE job_type = %s AND deliveries <> 1", (job_type,)
        ).fetchone()
    problems = []
    if inst != {"COMPLETED": n}:
        problems.append(f"instances: expected {n} COMPLETED, found {inst}")
    if jobs != {"COMPLETED": n}:
        problems.append(f"jobs: expected {n} COMPLETED, found {jobs}")
    if twice and twice[0]:
        problems.append(f"{twice[0]} jobs were delivered more than once")
    if problems:
        raise BenchError(f"{name} lost or duplicated work:\n  " + "\n  ".join(problems))


# --- phases -------------------------------------------------------------------------------------


def sdk_phase(url: str, server: DevServer, parallelism: int, args: argparse.Namespace) -> Phase:
    from baton_worker import InMemoryMetrics, Registry, Runner, RunnerOptions

    n = args.jobs
    job_type, name = f"bench-sdk-p{parallelism}", f"bench-sdk-p{parallelism}"
    log(f"sdk p={parallelism}: {n:,} one-step instances")
    start_instances(url, name, job_type, n)
    registry = Registry()
    registry.register(job_type, lambda ctx: OUTPUT)
    metrics = InMemoryMetrics()
    runner = Runner(
        registry,
        url=server.url,
        api_key=server.api_key,
        metrics=metrics,
        options=RunnerOptions(
            worker_id=f"bench-p{parallelism}",
            parallelism=parallelism,
            max_jobs_per_poll=args.batch,
            poll_interval=0.05,
            max_poll_interval=0.2,
        ),
    )
    progress = Progress("jobs completed", n)
    window = CpuWindow()
    server0 = server.cpu_seconds()
    window.start()
    cpu0 = time.process_time()
    t0 = time.monotonic()
    runner.start()
    try:
        deadline = t0 + args.timeout
        while (done := metrics.jobs_completed[job_type]) < n:
            if metrics.jobs_failed[job_type] or metrics.outcomes_unreported[job_type]:
                raise BenchError(f"sdk p={parallelism}: failures: {metrics.snapshot()}")
            if time.monotonic() > deadline:
                raise BenchError(f"sdk p={parallelism}: {done}/{n} after {args.timeout:.0f}s")
            progress.update(done)
            time.sleep(0.01)
        seconds = time.monotonic() - t0
        cpu = time.process_time() - cpu0
        window.stop()
        server1 = server.cpu_seconds()
    finally:
        runner.stop(timeout=60)
    progress.update(n)
    verify(url, name, job_type, n)
    phase = Phase(
        f"sdk over HTTP, p={parallelism}",
        parallelism,
        n,
        seconds,
        cpu,
        None if server0 is None or server1 is None else server1 - server0,
        metrics.polls,
        window,
    )
    log(f"sdk p={parallelism}: {phase.per_second:,.0f} jobs/s ({metrics.polls:,} polls)")
    return phase


def engine_phase(url: str, args: argparse.Namespace) -> Phase:
    from baton.engine.service import Engine
    from baton.store.db import Database

    n = args.jobs
    job_type = name = "bench-engine-inprocess"
    log(f"engine in-process: {n:,} one-step instances")
    start_instances(url, name, job_type, n)
    db = Database.single(url)
    engine = Engine(db)
    db.autocommit(lambda conn: conn.execute("SELECT 1"))  # connect outside the timing
    window = CpuWindow()
    window.start()
    cpu0 = time.process_time()
    t0 = time.monotonic()
    done = polls = 0
    try:
        while done < n:
            claimed = engine.poll("bench-engine", [job_type], args.batch)
            polls += 1
            if not claimed:
                if time.monotonic() - t0 > args.timeout:
                    raise BenchError(f"engine in-process: {done}/{n} after {args.timeout:.0f}s")
                time.sleep(0.001)
                continue
            for job in claimed:
                engine.complete_job(job["id"], "bench-engine", OUTPUT)
            done += len(claimed)
        seconds = time.monotonic() - t0
        cpu = time.process_time() - cpu0
        window.stop()
    finally:
        db.close()
    verify(url, name, job_type, n)
    phase = Phase("engine in-process (no HTTP)", None, n, seconds, cpu, None, polls, window)
    log(f"engine in-process: {phase.per_second:,.0f} jobs/s")
    return phase


# --- report -------------------------------------------------------------------------------------


def cpu_shares(p: Phase) -> str:
    """Shares of the machine's CPU over the phase: this process (the runner, or the engine
    loop), the baton dev process, everything else (PostgreSQL, other programs), idle."""
    w = p.window
    avail = w.wall * (os.cpu_count() or 1)
    if w.busy is None or avail <= 0:
        return f"this process {p.client_cpu:.1f} CPU-s"
    parts = [f"this process {100 * p.client_cpu / avail:.0f}%"]
    other = w.busy - p.client_cpu
    if p.server_cpu is not None:
        parts.append(f"baton dev {100 * p.server_cpu / avail:.0f}%")
        other -= p.server_cpu
    parts.append(f"PostgreSQL and the rest {100 * max(other, 0) / avail:.0f}%")
    parts.append(f"idle {100 * max(avail - w.busy, 0) / avail:.0f}%")
    return f"{', '.join(parts)} of {os.cpu_count()} cores over {w.wall:.1f}s"


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
