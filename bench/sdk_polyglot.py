"""Jobs/s through the local HTTP server with each language's SDK runner, the Python SDK as the
baseline, on one ``baton dev`` in one run.

Each language's conformance worker (``tests/conformance/workers/<language>/run``) serves the
``echo`` handler with its SDK's defaults (long-poll and batched results on) and ``--parallelism``
slots. For each language in turn: start ``--jobs`` one-step instances (through the library, not
timed), start the worker (its build is not timed), and wait until every instance has completed.
The drain's time is taken from the database's own audit rows, from the first dispatch to the last
completion, so a worker's start-up and the wait for its READY line are not counted; its CPU is
the worker process's own from start to stop, start-up and JIT included (what an operator pays
for), its build excluded (a run script builds in child processes, then execs the worker). The
server's CPU is counted over the drain alone, and its access log says how many requests each
job cost (polls, result batches, others) and what they cost the server (each line's
``cpu_ms``: "in polls" and "in batches" per job; the rest of the server's CPU is its other
threads, the scheduled functions ticking and the long-poll listener). PostgreSQL's CPU over
the drain is its postmaster's and the processes it forked (the server's pooled backends
included; a local server only).

Every SDK runs at its defaults, which are the same request sizes in all four (polls of up to
100 jobs, sized to the free slots; result batches of up to 100). ``--python-sizes 10,32`` runs
the Python baseline at the sizes its SDK defaulted to before (10 and 32), for comparison with
earlier figures.

The issue's targets: Go and Java >= 1.5x the Python SDK's rate, TypeScript >= 1.0x.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import threading
import time
import uuid
from pathlib import Path

import psycopg
from support import BenchError
from support.cpu import postmaster_pid, process_cpu_seconds, server_cpu_seconds
from support.postgres import fresh_database, postgres_server
from support.processes import DevServer, dev_server
from support.reporting import fmt_num, log, table
from support.workload import start_instances, verify

ROOT = Path(__file__).resolve().parents[1]
WORKERS = ROOT / "tests" / "conformance" / "workers"
LANGUAGES = ("python", "go", "java", "typescript")
READY_SECONDS = 300.0


class Worker:
    """One language's conformance worker, started and stopped by the benchmark."""

    def __init__(
        self,
        language: str,
        dev: DevServer,
        prefix: str,
        parallelism: int,
        python_sizes: tuple[int, int] | None,
    ) -> None:
        env = {
            **os.environ,
            "BATON_URL": dev.url,
            "BATON_API_KEY": dev.api_key,
            "CONFORMANCE_WORKER_ID": f"bench-{language}",
            "CONFORMANCE_JOB_PREFIX": prefix,
            "CONFORMANCE_PARALLELISM": str(parallelism),
        }
        if python_sizes is not None and language == "python":
            env["CONFORMANCE_MAX_JOBS_PER_POLL"] = str(python_sizes[0])
            env["CONFORMANCE_MAX_RESULTS_PER_FLUSH"] = str(python_sizes[1])
        self.language = language
        self.process = subprocess.Popen(
            [str(WORKERS / language / "run")],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.ready = threading.Event()
        self.peak_cpu = 0.0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.strip() == "READY":
                self.ready.set()

    def sample_cpu(self) -> None:
        # Sampled while it runs: once it exits, its CPU can no longer be read from /proc.
        # The run script execs its worker: the process's own CPU is the worker's (its start-up
        # and JIT included), without the build a run script may do first in child processes
        # (go build, tsc, mvn), which sampling the whole tree counted whenever a sample fell
        # inside it.
        self.peak_cpu = max(self.peak_cpu, process_cpu_seconds(self.process.pid) or 0.0)

    def stop(self) -> None:
        self.sample_cpu()
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise BenchError(f"the {self.language} worker did not stop within 60 s") from None


def _completed(conn: psycopg.Connection[tuple[int]], name: str) -> int:
    row = conn.execute(
        "SELECT count(*) FROM instance WHERE definition_name = %s AND status = 'COMPLETED'",
        (name,),
    ).fetchone()
    return int(row[0]) if row else 0


def _drain_seconds(url: str, name: str) -> float:
    """From the first dispatch to the last completion of ``name``'s jobs, by the audit rows."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT extract(epoch FROM max(a.at) FILTER (WHERE a.event = 'JOB_COMPLETED')"
            " - min(a.at) FILTER (WHERE a.event = 'JOB_DISPATCHED'))"
            " FROM audit_log a JOIN instance i ON i.id = a.instance_id"
            " WHERE i.definition_name = %s",
            (name,),
        ).fetchone()
    if not row or row[0] is None:
        raise BenchError(f"no dispatch or completion recorded for {name}")
    return float(row[0])


def _requests(log_path: Path, offset: int) -> tuple[dict[str, int], dict[str, float]]:
    """The server's requests logged after ``offset``, by kind (polls, result batches, others):
    how many, and the server's CPU seconds for them (``cpu_ms`` of each access-log line: the
    request thread's own). A request is this worker's when it came while it ran (one worker at
    a time)."""
    counts = {"poll": 0, "batch": 0, "other": 0}
    cpu = {"poll": 0.0, "batch": 0.0, "other": 0.0}
    with log_path.open("rb") as f:
        f.seek(offset)
        for line in f:
            if b'"request"' not in line:
                continue
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if entry.get("message") != "request":
                continue
            path = str(entry.get("path", ""))
            kind = (
                "poll"
                if path.startswith("/v1/jobs/poll")
                else "batch"
                if path.startswith("/v1/jobs/complete-batch")
                else "other"
            )
            counts[kind] += 1
            cpu[kind] += float(entry.get("cpu_ms") or 0.0) / 1000
    return counts, cpu


def drain(
    url: str,
    dev: DevServer,
    language: str,
    jobs: int,
    parallelism: int,
    python_sizes: tuple[int, int] | None,
) -> dict[str, float]:
    prefix = f"poly-{language[:2]}-{uuid.uuid4().hex[:6]}-"
    name = job_type = prefix + "echo"
    start_instances(url, name, job_type, jobs)
    log(f"{language}: starting its worker (parallelism {parallelism})")
    log_offset = dev.log_path.stat().st_size
    # One connection watches the drain (a connection per look forked a backend 20 times a
    # second beside the drain); its own CPU is left out of PostgreSQL's.
    with psycopg.connect(url, autocommit=True) as watch:
        watcher = [watch.info.backend_pid]
        worker = Worker(language, dev, prefix, parallelism, python_sizes)
        postgres = postmaster_pid(url)
        server_before = dev.cpu_seconds()
        postgres_before = server_cpu_seconds(postgres, exclude=watcher)
        try:
            deadline = time.monotonic() + READY_SECONDS + jobs / 50
            last_log = 0.0
            while (done := _completed(watch, name)) < jobs:
                if worker.process.poll() is not None:
                    raise BenchError(
                        f"the {language} worker exited with {worker.process.returncode}"
                    )
                if time.monotonic() > deadline:
                    raise BenchError(
                        f"{language}: {done:,} of {jobs:,} completed before the deadline"
                    )
                if time.monotonic() - last_log > 5:
                    log(f"  {language}: {done:,}/{jobs:,} completed")
                    last_log = time.monotonic()
                worker.sample_cpu()
                time.sleep(0.05)
            server_after = dev.cpu_seconds()
            postgres_after = server_cpu_seconds(postgres, exclude=watcher)
        finally:
            worker.stop()
    verify(url, name, job_type, jobs)
    seconds = _drain_seconds(url, name)
    server_cpu = (
        None if server_before is None or server_after is None else server_after - server_before
    )
    postgres_cpu = (
        None
        if postgres_before is None or postgres_after is None
        else postgres_after - postgres_before
    )
    requests, request_cpu = _requests(dev.log_path, log_offset)
    per_job = {kind: round(seconds * 1e6 / jobs) for kind, seconds in request_cpu.items()}
    log(
        f"{language}: {jobs:,} jobs in {seconds:.2f}s; requests {requests}; "
        f"server CPU us/job by request kind {per_job}"
    )
    return {
        "poll_us": request_cpu["poll"] / jobs * 1e6,
        "batch_us": request_cpu["batch"] / jobs * 1e6,
        "polls_per_1k": requests["poll"] / jobs * 1000,
        "batches_per_1k": requests["batch"] / jobs * 1000,
        "other_per_1k": requests["other"] / jobs * 1000,
        "rate": jobs / seconds,
        "seconds": seconds,
        "worker_us": worker.peak_cpu / jobs * 1e6,
        "server_us": float("nan") if server_cpu is None else server_cpu / jobs * 1e6,
        "postgres_us": float("nan") if postgres_cpu is None else postgres_cpu / jobs * 1e6,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description="jobs/s through each language's SDK runner")
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--parallelism", type=int, default=16)
    parser.add_argument("--languages", default=",".join(LANGUAGES))
    parser.add_argument("--database-url", default=None)
    parser.add_argument(
        "--python-sizes",
        metavar="POLL,BATCH",
        help="the Python baseline's max_jobs_per_poll and max_results_per_flush instead of its "
        "defaults (100,100), e.g. 10,32 as it defaulted to before",
    )
    args = parser.parse_args()
    python_sizes = None
    if args.python_sizes:
        poll, batch = (int(v) for v in args.python_sizes.split(","))
        python_sizes = (poll, batch)
    languages = [lang for lang in args.languages.split(",") if lang]
    missing = [lang for lang in languages if not (WORKERS / lang / "run").exists()]
    if missing:
        raise SystemExit(f"no conformance worker for: {', '.join(missing)}")
    if "python" not in languages:
        raise SystemExit("the Python SDK is the baseline: keep python in --languages")
    results: dict[str, dict[str, float]] = {}
    with (
        postgres_server(args.database_url) as server,
        fresh_database(server, "poly") as url,
        dev_server(url) as dev,
    ):
        for language in languages:
            results[language] = drain(url, dev, language, args.jobs, args.parallelism, python_sizes)
    if python_sizes is not None:
        log(f"python ran with max_jobs_per_poll {python_sizes[0]}, batches {python_sizes[1]}")
    base = results["python"]["rate"]
    targets = {"go": 1.5, "java": 1.5, "typescript": 1.0}
    print()
    print(
        table(
            [
                "SDK",
                "jobs/s",
                "x python",
                "target",
                "worker CPU us/job",
                "server CPU us/job",
                "in polls",
                "in batches",
                "PostgreSQL CPU us/job",
                "polls/1k jobs",
                "batches/1k jobs",
            ],
            [
                [
                    lang,
                    fmt_num(r["rate"]),
                    f"{r['rate'] / base:.2f}",
                    f">= {targets[lang]:.1f}" if lang in targets else "baseline",
                    fmt_num(r["worker_us"]),
                    fmt_num(r["server_us"]),
                    fmt_num(r["poll_us"]),
                    fmt_num(r["batch_us"]),
                    fmt_num(r["postgres_us"]),
                    fmt_num(r["polls_per_1k"]),
                    fmt_num(r["batches_per_1k"]),
                ]
                for lang, r in results.items()
            ],
        )
    )
    print_bound(results)


def print_bound(results: dict[str, dict[str, float]]) -> None:
    """What the worker's language can buy on this machine: worker, server and PostgreSQL share
    its cores, so a drain bound by CPU runs at about cores / (worker + server + PostgreSQL CPU
    per job). A worker that cost nothing would drain at most (W + S + P) / (S + P) times the
    Python SDK's rate, with the server and PostgreSQL CPU per job of Python's own drain; the
    cores' use says how close each drain came to being bound by CPU at all."""
    cores = os.cpu_count() or 1
    print()
    for lang, r in results.items():
        total = r["worker_us"] + r["server_us"] + r["postgres_us"]
        busy = r["rate"] * total / 1e6 / cores
        print(
            f"{lang}: {total:,.0f} us of CPU per job in all (worker + server + PostgreSQL); "
            f"the {cores} cores {busy:.0%} busy over the drain"
        )
    py = results["python"]
    shared = py["server_us"] + py["postgres_us"]
    if shared == shared and shared > 0:  # not NaN
        bound = (py["worker_us"] + shared) / shared
        print(
            f"bound: a worker costing 0 us per job, beside this run's server and PostgreSQL "
            f"({shared:,.0f} us per job in Python's drain), would drain at most {bound:.2f}x "
            f"the Python SDK's rate on this machine"
        )


if __name__ == "__main__":
    main()
