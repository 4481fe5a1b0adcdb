"""Archive drain: how much archiving slows the workers down. The drain rate of new jobs (workers
polling and completing one-step workflows) while the duty loop archives N terminal instances,
against the same drain without archiving, in the same run, on the same database.

    .venv/bin/python bench/archive_drain.py --terminal 100000 --jobs 20000 --workers 4

1. Seed: N terminal instances that ended two days ago (each with a step execution, a job and
   three history rows, cloned in bulk from one real run), retention one day.
2. Baseline: M instances are started, then W worker processes drain their jobs (poll 50,
   complete each); nothing archives.
3. Archiving: the same with one archiver process doing the sweeper's archive pass
   (``archive_expired``: batches of 100 for at most 0.5 s) once a second, as the sweeper does,
   to a moto S3 server, from the start of the drain (the archiver process started, its S3
   client made, before: a sweeper is warm). moto runs niced in its own process (S3 is another
   service in AWS). The archiver shares the machine's CPU with the workers, the worst
   case (in AWS the sweeper is a Lambda of its own); ``--nice-archiver`` runs it at nice 19,
   its backend keeping normal priority.

Printed: jobs/s of each drain, their ratio (target >= 0.8x), and the instances the archiver
archived during the drain (per second), the drain's own CPU per job (workers and their
backends: unchanged means archiving adds no work or waiting to the drain's path), the
archiver's CPU per instance, and the database's side of each drain (its other processes' CPU,
autovacuum runs, what busy backends waited on). The machine's load is printed: on a shared
machine compare the ratios, not the rates.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
import uuid
from typing import Any

from support import BenchError
from support.cpu import CpuMeter, process_cpu_seconds
from support.db_side import DbSide
from support.library import connect, open_archiving_engine, open_engine
from support.postgres import fresh_database, postgres_server, server_summary, settle
from support.processes import SPAWN, collect, run_together, spawned, wait_for, worker_entry
from support.reporting import fmt_num, log, rate, table

RETENTION = 86_400
TABLES = ("instance", "step_execution", "job", "audit_log")
JOB_TYPE = "drain"
SEED_CHUNK = 10_000


def seed_terminal(url: str, n: int) -> None:
    """N terminal instances ended two days ago, cloned from one real run (its instance, step
    execution, job and history rows), in chunks with progress."""
    engine = open_engine(url)
    engine.register_definition(
        {"name": "seed", "steps": [{"id": "w", "type": "SERVICE_TASK", "jobType": "seed"}]}
    )
    template = engine.start_instance(definition_name="seed", input={"n": 1})[0]["id"]
    job = engine.poll("seed-worker", ["seed"], 1)[0]
    engine.complete_job(job["id"], "seed-worker", {"ok": True}, attempt=job["attempt"])
    engine.db.close()
    with connect(url, autocommit=True) as conn:
        done = 0
        while done < n:
            k = min(SEED_CHUNK, n - done)
            with conn.transaction():
                conn.execute(
                    "CREATE TEMP TABLE m ON COMMIT DROP AS SELECT gen_random_uuid() AS iid,"
                    " gen_random_uuid() AS sid, gen_random_uuid() AS jid"
                    " FROM generate_series(1, %s)",
                    (k,),
                )
                conn.execute(
                    "INSERT INTO instance SELECT (jsonb_populate_record(NULL::instance,"
                    " to_jsonb(t) || jsonb_build_object('id', m.iid, 'idempotency_key', NULL,"
                    " 'completed_at', now() - interval '2 days'))).* FROM instance t, m"
                    " WHERE t.id = %s",
                    (template,),
                )
                conn.execute(
                    "INSERT INTO step_execution SELECT (jsonb_populate_record("
                    "NULL::step_execution, to_jsonb(s) || jsonb_build_object('id', m.sid,"
                    " 'instance_id', m.iid))).* FROM step_execution s, m WHERE s.instance_id = %s",
                    (template,),
                )
                conn.execute(
                    "INSERT INTO job SELECT (jsonb_populate_record(NULL::job, to_jsonb(j) ||"
                    " jsonb_build_object('id', m.jid, 'instance_id', m.iid,"
                    " 'step_execution_id', m.sid))).* FROM job j, m WHERE j.instance_id = %s",
                    (template,),
                )
                conn.execute(
                    "INSERT INTO audit_log (at, instance_id, job_id, event, detail)"
                    " SELECT a.at, m.iid, CASE WHEN a.job_id IS NULL THEN NULL ELSE m.jid END,"
                    " a.event, a.detail FROM audit_log a, m WHERE a.instance_id = %s",
                    (template,),
                )
            done += k
            log(f"seeded {done:,} of {n:,} terminal instances")
        conn.execute("DELETE FROM audit_log WHERE instance_id = %s", (template,))
        conn.execute("DELETE FROM job WHERE instance_id = %s", (template,))
        conn.execute("DELETE FROM step_execution WHERE instance_id = %s", (template,))
        conn.execute("DELETE FROM instance WHERE id = %s", (template,))


def start_new(url: str, m: int) -> None:
    engine = open_engine(url)
    engine.register_definition(
        {"name": JOB_TYPE, "steps": [{"id": "w", "type": "SERVICE_TASK", "jobType": JOB_TYPE}]}
    )
    for i in range(m):
        engine.start_instance(definition_name=JOB_TYPE, input={"i": i})
        if (i + 1) % 5000 == 0:
            log(f"started {i + 1:,} of {m:,}")
    engine.db.close()


def _drain_worker(url: str, start: Any, out: Any, k: int, ppid: int) -> None:
    def body() -> None:
        engine = open_engine(url)
        meter = CpuMeter(engine.db.autocommit(lambda c: c.info.backend_pid))
        wait_for(start, ppid)
        meter.start()
        done, idle_since = 0, None
        while True:
            jobs = engine.poll(f"w{k}", [JOB_TYPE], 50)
            if not jobs:
                idle_since = idle_since or time.monotonic()
                if time.monotonic() - idle_since > 1.0:  # nothing left for a second: drained
                    break
                time.sleep(0.05)
                continue
            idle_since = None
            for job in jobs:
                engine.complete_job(job["id"], f"w{k}", {"ok": True}, attempt=job["attempt"])
            done += len(jobs)
        out.put(("done", k, (done, meter.read())))

    worker_entry(body, out, k)


def _archiver(
    url: str,
    endpoint: str,
    bucket: str,
    nice: bool,
    go: Any,
    stop: Any,
    out: Any,
    k: int,
    ppid: int,
) -> None:
    """The sweeper's cadence: one archive pass a second (each bounded by its time budget).
    The sweeper is a loop that runs for ever (a warm Lambda in AWS): its start (imports, the
    database connection, the S3 client) is done and reported ("ready") before the drain's clock
    starts, and is not counted."""

    def body() -> None:
        if nice:  # in AWS the sweeper is a Lambda of its own, not on the workers' CPU
            os.nice(19)
        engine = open_archiving_engine(url, endpoint, bucket, RETENTION)
        assert engine.archive is not None
        engine.archive.client.meta.service_model  # noqa: B018 (the client made, its model loaded)
        meter = CpuMeter(engine.db.autocommit(lambda c: c.info.backend_pid))
        out.put(("ready", k, None))
        wait_for(go, ppid)
        meter.start()
        archived, t0 = 0, time.perf_counter()
        while not stop.is_set() and os.getppid() == ppid:
            began = time.monotonic()
            n = engine.archive_expired()
            archived += n
            if n == 0:
                break
            time.sleep(max(0.0, began + 1.0 - time.monotonic()))
        out.put(("done", k, (archived, time.perf_counter() - t0, meter.read())))

    worker_entry(body, out, k)


def drain(url: str, workers: int, m: int, timeout: float) -> tuple[int, float, float, float]:
    """Drain the M jobs with W processes: (jobs completed, seconds until the last one, CPU
    seconds of the workers and their backends, of their backends alone)."""
    results, seconds = run_together(_drain_worker, [(url,)] * workers, "drain", timeout=timeout)
    jobs = sum(n for n, _ in results)
    backends = sum(c["server_cpu"] or 0.0 for _, c in results)
    cpu = sum(c["cpu"] or 0.0 for _, c in results) + backends
    # Each worker idles a second after the last job before it reports: not drain time.
    return int(jobs), max(seconds - 1.0, 1e-9), cpu, backends


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--terminal", type=int, default=100_000, help="terminal instances to archive")
    p.add_argument("--jobs", type=int, default=20_000, help="new jobs drained per phase")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument(
        "--nice-archiver",
        action="store_true",
        help="run the archiver process at nice 19 (its backend keeps normal priority)",
    )
    p.add_argument("--database-url")
    p.add_argument("--timeout", type=float, default=1800)
    args = p.parse_args()
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    # moto's S3 in a process of its own, niced: real S3 is another machine's CPU.
    port = _free_port()
    moto = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=lambda: os.nice(19),  # noqa: PLW1509 (no threads started yet)
    )
    endpoint = f"http://127.0.0.1:{port}"
    _wait_for_s3(endpoint)
    bucket = f"bench-archive-{uuid.uuid4().hex[:8]}"
    import boto3

    boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=bucket)
    try:
        with postgres_server(args.database_url) as server, fresh_database(server, "arch") as url:
            log(server_summary(url))
            seed_terminal(url, args.terminal)
            settle(url, "instance", "step_execution", "job", "audit_log")
            log(f"load: {os.getloadavg()[0]:.1f} (1 min)")

            start_new(url, args.jobs)
            settle(url, "instance", "job")
            log("phase 1: drain without archiving")
            base_db = DbSide(url, TABLES)
            base_db.start()
            base_jobs, base_s, base_cpu, base_backends = drain(
                url, args.workers, args.jobs, args.timeout
            )
            base_db.stop()

            start_new(url, args.jobs)
            settle(url, "instance", "job")
            log("phase 2: drain while archiving")
            go, stop, outbox = SPAWN.Event(), SPAWN.Event(), SPAWN.Queue()
            moto_cpu0 = process_cpu_seconds(moto.pid) or 0.0
            arch_db = DbSide(url, TABLES)
            with spawned(
                _archiver,
                [(url, endpoint, bucket, args.nice_archiver, go, stop, outbox, 0, os.getpid())],
                "archiver",
            ) as archiver:
                collect(outbox, archiver, "ready", timeout=args.timeout)
                go.set()  # its first pass runs while the drain's workers start
                arch_db.start()
                arch_jobs, arch_s, arch_cpu, arch_backends = drain(
                    url, args.workers, args.jobs, args.timeout
                )
                arch_db.stop()
                archived_during = _count(url, "SELECT count(*) FROM archived_instance")
                stop.set()
                kind, _, payload = outbox.get(timeout=args.timeout)
                if kind != "done":
                    raise BenchError(f"archiver failed: {payload}")
            archived_total, archive_s, archiver_cpu = payload
            moto_cpu = (process_cpu_seconds(moto.pid) or 0.0) - moto_cpu0
            log(f"load: {os.getloadavg()[0]:.1f} (1 min)")
    finally:
        moto.terminate()
        moto.wait(10)
    if base_jobs != args.jobs or arch_jobs != args.jobs:
        raise BenchError(f"drained {base_jobs} and {arch_jobs} jobs, expected {args.jobs} each")
    base_rate, arch_rate = rate(base_jobs, base_s), rate(arch_jobs, arch_s)
    print(
        table(
            ["phase", "jobs", "seconds", "jobs/s", "drain CPU ms/job", "archived during it"],
            [
                [
                    "drain alone",
                    fmt_num(base_jobs),
                    fmt_num(base_s, 1),
                    fmt_num(base_rate),
                    fmt_num(1000 * base_cpu / base_jobs, 2),
                    "-",
                ],
                [
                    "drain while archiving",
                    fmt_num(arch_jobs),
                    fmt_num(arch_s, 1),
                    fmt_num(arch_rate),
                    fmt_num(1000 * arch_cpu / arch_jobs, 2),
                    f"{archived_during:,} ({fmt_num(rate(archived_during, arch_s))}/s)",
                ],
            ],
        )
    )
    proc, backend = archiver_cpu["cpu"] or 0.0, archiver_cpu["server_cpu"] or 0.0
    per = 1000 / max(archived_total, 1)
    print(
        f"archiver: {archived_total:,} of {args.terminal:,} archived in {archive_s:.1f} s "
        f"({fmt_num(rate(archived_total, archive_s))}/s); CPU per instance: its process "
        f"{proc * per:.1f} ms, its backend {backend * per:.1f} ms; moto's S3 "
        f"{moto_cpu:.1f} s (niced); machine load {os.getloadavg()[0]:.1f} on "
        f"{os.cpu_count()} cores"
    )
    # The server's processes other than the metered backends (the archiver's backend is metered
    # over the archiver's whole run, a little longer than the drain: an estimate).
    arch_backend_share = backend * min(1.0, arch_s / max(archive_s, 1e-9))
    for label, db, backends, seconds in (
        ("alone", base_db, base_backends, base_s),
        ("while archiving", arch_db, arch_backends + arch_backend_share, arch_s),
    ):
        other = None if db.server_cpu is None else db.server_cpu - backends
        print(
            f"database, drain {label}: its other processes {fmt_num(other, 1)} s of CPU "
            f"({fmt_num(None if other is None else other / seconds, 2)} cores); {db.summary()}"
        )
    print(
        "drain CPU per job, while archiving / alone: "
        f"{(arch_cpu / arch_jobs) / (base_cpu / base_jobs):.2f}x (work the drain itself does)"
    )
    print(f"drain while archiving / drain alone: {arch_rate / base_rate:.2f}x (target >= 0.8x)")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_for_s3(endpoint: str) -> None:
    import urllib.request

    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(endpoint, timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise BenchError(f"moto's S3 not up at {endpoint}") from None
            time.sleep(0.2)


def _count(url: str, sql: str) -> int:
    with connect(url, autocommit=True) as conn:
        row = conn.execute(sql).fetchone()
    assert row is not None
    return int(next(iter(row.values())) if isinstance(row, dict) else row[0])


if __name__ == "__main__":
    main()
