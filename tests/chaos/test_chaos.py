"""Chaos over HTTP: 2,000 one-step instances worked by worker processes that are SIGKILLed at
random moments, while the database is stopped for five seconds and started again under load.

Afterwards every instance is COMPLETED, the audit log proves each job was completed exactly once
and each instance's output came from a completion its worker really sent, and every HTTP answer
anyone saw was a success, a 409 to a late completion, or a 503 with ``Retry-After``: never a 500.

``BATON_CHAOS_SEED`` replays a run's random choices (kill moments, work times); the seed is
printed. Progress is printed too (``pytest -s`` shows it live).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from tests.support.helpers import unique
from tests.support.postgres import ControlledPostgres
from tests.support.servers import ROOT, LocalServer

pytestmark = [pytest.mark.chaos]

INSTANCES = 2000
WORKERS = 5  # alive at a time
JOBS_PER_WORKER = 100  # then the process exits and a fresh one replaces it
KILL_EVERY = 8  # every 8th worker process started is SIGKILLed mid-run (~12%)
RETRY_COUNT = 20  # far above the lease expiries a job can meet here (see _definition)
LEASE_SECONDS = 2
OUTAGE_AFTER_COMPLETED = 500  # stop the database once this many instances completed
OUTAGE_SECONDS = 5.0
STARTERS = 4  # threads starting instances
RUN_DEADLINE_SECONDS = 150.0
RETRY_AFTER_CAP_SECONDS = 1.0
# A completion may meet a 409 when its lease expired and another worker completed the job first.
ALLOWED = {("poll", 200), ("complete", 200), ("complete", 409), ("start", 200), ("start", 201)}


def _say(message: str) -> None:
    print(f"[chaos {time.strftime('%H:%M:%S')}] {message}", flush=True)


@dataclass
class Outage:
    down_at: float | None = None
    up_at: float | None = None
    error: BaseException | None = None
    thread: threading.Thread | None = None

    def begin(self, pg: ControlledPostgres) -> None:
        def run() -> None:
            try:
                self.down_at = time.time()
                pg.stop()
                _say(f"database stopped in {time.time() - self.down_at:.1f} s")
                time.sleep(OUTAGE_SECONDS)  # the outage itself, not a wait for something
                pg.start()
                self.up_at = time.time()
                _say(f"database started again, {self.up_at - self.down_at:.1f} s after the stop")
            except BaseException as e:
                self.error = e
                raise

        self.thread = threading.Thread(target=run, name="chaos-outage", daemon=True)
        self.thread.start()

    @property
    def in_progress(self) -> bool:
        return self.down_at is not None and self.up_at is None


@dataclass
class WorkerProcess:
    worker_id: str
    process: subprocess.Popen[bytes]
    started_at: float
    kill_after: float | None  # seconds after its first claim, for the doomed ones
    log: Path


@dataclass
class Supervisor:
    """Keeps WORKERS worker processes running, replaces the ones that exit or are killed."""

    server: LocalServer
    job_type: str
    logs: Path
    rng: random.Random
    spawned: list[WorkerProcess] = field(default_factory=list)
    killed: list[str] = field(default_factory=list)

    def alive(self) -> list[WorkerProcess]:
        return [w for w in self.spawned if w.process.poll() is None]

    def tick(self) -> None:
        for w in self.alive():
            if w.kill_after is not None and self._claimed_since(w) >= w.kill_after:
                w.process.send_signal(signal.SIGKILL)
                w.process.wait()
                self.killed.append(w.worker_id)
        for _ in range(WORKERS - len(self.alive())):
            self._spawn()

    def _claimed_since(self, w: WorkerProcess) -> float:
        """Seconds since the worker's first claim (0 before it has claimed anything)."""
        try:
            with w.log.open() as f:
                for line in f:
                    if '"op": "claimed"' in line:
                        return time.time() - json.loads(line)["t"]
        except FileNotFoundError:
            pass
        return 0.0

    def _spawn(self) -> None:
        n = len(self.spawned)
        worker_id = f"w{n:03d}"
        log = self.logs / f"{worker_id}.jsonl"
        doomed = n % KILL_EVERY == KILL_EVERY // 2
        cmd = [
            sys.executable,
            "-m",
            "tests.chaos.worker",
            self.server.base_url,
            self.server.api_key,
            self.job_type,
            worker_id,
            str(log),
            str(JOBS_PER_WORKER),
            str(self.rng.randrange(2**32)),
        ]
        process = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL)
        kill_after = self.rng.uniform(0.05, 1.5) if doomed else None
        self.spawned.append(WorkerProcess(worker_id, process, time.time(), kill_after, log))

    def stop_all(self) -> None:
        for w in self.alive():
            w.process.send_signal(signal.SIGTERM)
        for w in self.spawned:
            try:
                w.process.wait(10)
            except subprocess.TimeoutExpired:
                w.process.kill()
                w.process.wait()


@dataclass
class Starter:
    """Starts the instances over HTTP (idempotency keys make a retry after a 503 safe)."""

    server: LocalServer
    definition: str
    records: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    client: httpx.Client = field(init=False)

    def __post_init__(self) -> None:
        # One client shared by the starter threads (httpx clients are thread-safe).
        self.client = httpx.Client(
            base_url=self.server.base_url,
            headers={"x-api-key": self.server.api_key},
            timeout=30,
            limits=httpx.Limits(max_connections=STARTERS),
        )

    def start(self, n: int) -> None:
        body = {"definitionName": self.definition, "idempotencyKey": f"{self.definition}-{n}"}
        for _ in range(60):
            try:
                r = self.client.post("/v1/instances", json=body)
            except httpx.TransportError as e:
                self._record(status=0, error=f"{type(e).__name__}: {e}")
                time.sleep(0.1)
                continue
            retry_after = r.headers.get("retry-after")
            self._record(
                status=r.status_code,
                retry_after=retry_after,
                ctype=r.headers.get("content-type"),
                body=r.text[:500] if r.status_code >= 300 else None,
            )
            if r.status_code != 503:
                return
            time.sleep(min(float(retry_after or 1), RETRY_AFTER_CAP_SECONDS))

    def _record(self, **fields: Any) -> None:
        with self.lock:
            self.records.append({"w": "test", "op": "start", "t": time.time(), **fields})


@pytest.fixture
def chaos_pg(tmp_path: Path) -> Iterator[ControlledPostgres]:
    with ControlledPostgres(tmp_path / "pg") as pg:
        with pg.connect() as conn:
            conn.execute("CREATE DATABASE baton")
        yield pg


@pytest.fixture
def chaos_server(chaos_pg: ControlledPostgres, start_server: Any, tmp_path: Path) -> LocalServer:
    # Depends on chaos_pg, so the server is stopped before its database is.
    server: LocalServer = start_server(
        data_dir=tmp_path / "server",
        functions_dir=None,
        database_url=make_conninfo(chaos_pg.uri, dbname="baton"),
    )
    return server


def _definition(name: str, job_type: str) -> dict[str, Any]:
    # Each lease expiry may consume a retry: a job meets at most one per kill of its holder and
    # one per outage, nowhere near RETRY_COUNT.
    return {
        "name": name,
        "steps": [
            {
                "id": "only",
                "type": "SERVICE_TASK",
                "jobType": job_type,
                "retryCount": RETRY_COUNT,
                "retryDelaySeconds": 0,
                "responseTimeoutSeconds": LEASE_SECONDS,
            }
        ],
    }


# Known defects on this branch, met at random under this load (strict=False: a passing run
# shows as XPASS; drop the mark once fixed).
def test_every_instance_completes_once_through_kills_and_a_database_restart(
    chaos_pg: ControlledPostgres, chaos_server: LocalServer, tmp_path: Path
) -> None:
    seed = int(os.environ.get("BATON_CHAOS_SEED") or random.randrange(2**32))
    _say(f"seed {seed} (BATON_CHAOS_SEED={seed} replays the random choices)")
    rng = random.Random(seed)
    server = chaos_server
    name, job_type = unique("chaos"), unique("chaos-job")
    r = server.request("POST", "/v1/definitions", json=_definition(name, job_type))
    assert r.status_code == 201, r.text

    logs = tmp_path / "workers"
    logs.mkdir()
    supervisor = Supervisor(server, job_type, logs, rng)
    starter = Starter(server, name)
    outage = Outage()
    progress = Progress(chaos_pg, name)
    began = time.time()
    starters = ThreadPoolExecutor(STARTERS, thread_name_prefix="chaos-start")
    started = [starters.submit(starter.start, n) for n in range(INSTANCES)]
    problems: list[str] = []
    try:
        completed = 0
        last_report = 0.0
        while True:
            if time.time() - began > RUN_DEADLINE_SECONDS:
                problems.append(
                    f"not done after {RUN_DEADLINE_SECONDS} s: {completed}/{INSTANCES} completed"
                )
                break
            supervisor.tick()
            if outage.error is not None:
                raise AssertionError("the outage could not be staged") from outage.error
            if not outage.in_progress:
                by_status = progress.counts()
                if by_status is None:  # the connection died with the outage
                    time.sleep(0.1)
                    continue
                completed = by_status.get("COMPLETED", 0)
                others = {k: v for k, v in by_status.items() if k not in ("RUNNING", "COMPLETED")}
                if others:
                    problems.append(f"instances ended otherwise than COMPLETED: {others}")
                    break
                if outage.down_at is None and completed >= OUTAGE_AFTER_COMPLETED:
                    outage.begin(chaos_pg)
                # A start refused for good (not a 503) leaves fewer than INSTANCES to wait for;
                # the checks below report it.
                if all(f.done() for f in started) and not by_status.get("RUNNING"):
                    break
            if time.time() - last_report > 2:
                last_report = time.time()
                _say(
                    f"{completed}/{INSTANCES} completed, "
                    f"{sum(f.done() for f in started)} started, "
                    f"{len(supervisor.spawned)} workers spawned, {len(supervisor.killed)} killed"
                    + (", database DOWN" if outage.in_progress else "")
                )
            time.sleep(0.1)
    finally:
        starters.shutdown(wait=False, cancel_futures=True)
        supervisor.stop_all()
        starter.client.close()
        if outage.thread is not None:
            outage.thread.join(30)
    _say(f"{completed}/{INSTANCES} completed after {time.time() - began:.1f} s")
    _say(f"{len(supervisor.killed)} workers killed: {supervisor.killed}")
    if outage.down_at is None or outage.up_at is None:
        problems.append("the database was never stopped and started again")
    if len(supervisor.killed) < 2:
        problems.append(f"only {len(supervisor.killed)} workers were killed")
    records = starter.records + _read_worker_logs(logs)
    # Every check runs and reports, so one run shows every kind of failure at once.
    with chaos_pg.connect("baton") as db:
        problems += _check_http_answers(records, outage) + _check_audit(db, name, records)
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems)


class Progress:
    """Instance counts by status, read straight from the database (None while it is away)."""

    def __init__(self, pg: ControlledPostgres, name: str) -> None:
        self.pg = pg
        self.name = name
        self.conn: Any = None

    def counts(self) -> dict[str, int] | None:
        try:
            if self.conn is None or self.conn.closed:
                self.conn = self.pg.connect("baton", connect_timeout=2)
            rows = self.conn.execute(
                "SELECT status, count(*) FROM instance WHERE definition_name = %s GROUP BY status",
                (self.name,),
            ).fetchall()
        except psycopg.OperationalError:
            if self.conn is not None:
                self.conn.close()
            self.conn = None
            return None
        return {status: n for status, n in rows}


def _read_worker_logs(folder: Path) -> list[dict[str, Any]]:
    records = []
    for path in sorted(folder.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            if line.strip():  # a SIGKILL cannot cut a line: each is one write()
                records.append(json.loads(line))
    return records


def _check_http_answers(records: list[dict[str, Any]], outage: Outage) -> list[str]:
    answers = [r for r in records if "status" in r]
    counts = Counter((r["op"], r["status"]) for r in answers)
    _say(f"HTTP answers: {dict(sorted(counts.items()))}")
    bad: dict[tuple[str, int], dict[str, Any]] = {}
    for r in answers:
        key = (r["op"], r["status"])
        if r["status"] == 503:
            ok = bool(r.get("retry_after")) and r.get("ctype") == "application/problem+json"
        else:
            ok = key in ALLOWED
        if not ok:
            bad.setdefault(key, r)
    problems = [
        f"{counts[key]} answers {key} (neither a success, a 409 to a completion, nor a 503 "
        f"with Retry-After), e.g. {json.dumps(example)[:800]}"
        for key, example in bad.items()
    ]
    crossed = [
        r for r in answers if r["op"] == "complete" and r.get("answered_job", r["job"]) != r["job"]
    ]
    if crossed:
        problems.append(
            f"{len(crossed)} completions answered about another job, e.g. {json.dumps(crossed[0])}"
        )
    down, up = outage.down_at or 0.0, outage.up_at or 0.0
    during = [r for r in answers if down <= r["t"] <= up + 1]
    if not any(r["status"] == 503 for r in during):
        problems.append("nobody saw the outage: it was not under load")
    return problems


def _check_audit(db: Any, name: str, records: list[dict[str, Any]]) -> list[str]:
    rows = db.execute(
        """
        SELECT i.id AS instance_id, i.status, i.variables, i.output AS instance_output,
               s.output AS step_output, s.status AS step_status,
               array_agg(DISTINCT j.id) AS jobs
          FROM instance i
          JOIN step_execution s ON s.instance_id = i.id
          JOIN job j ON j.instance_id = i.id
         WHERE i.definition_name = %s
         GROUP BY i.id, s.id
        """,
        (name,),
    ).fetchall()
    problems: list[str] = []
    if len(rows) != INSTANCES:
        problems.append(
            f"{len(rows)} instances (with their step) instead of {INSTANCES}: some starts "
            "were refused for good (their answers are listed above)"
        )
    completions = Counter(
        str(job_id)
        for (job_id,) in db.execute(
            """
            SELECT a.job_id FROM audit_log a JOIN instance i ON i.id = a.instance_id
             WHERE i.definition_name = %s AND a.event = 'JOB_COMPLETED'
            """,
            (name,),
        ).fetchall()
    )
    holders: dict[str, set[str]] = defaultdict(set)
    for job_id, worker in db.execute(
        """
        SELECT a.job_id, a.detail->>'workerId' FROM audit_log a
          JOIN instance i ON i.id = a.instance_id
         WHERE i.definition_name = %s AND a.event IN ('JOB_DISPATCHED', 'JOB_RECLAIMED')
        """,
        (name,),
    ).fetchall():
        holders[str(job_id)].add(worker)
    sent: dict[str, set[str]] = defaultdict(set)
    applied: dict[str, set[str]] = defaultdict(set)
    for r in records:
        if r.get("op") == "complete-sent":
            sent[r["job"]].add(r["w"])
        if r.get("op") == "complete" and r.get("status") == 200 and r.get("applied"):
            applied[r["job"]].add(r["w"])

    per_instance: list[str] = []
    for row in rows:
        iid = row[0]
        status, variables, instance_output, step_output, step_status, jobs = row[1:]
        jobs = [str(j) for j in jobs]
        done = [j for j in jobs if completions[j]]
        if status != "COMPLETED" or step_status != "COMPLETED":
            per_instance.append(f"{iid}: instance {status}, step {step_status}")
        if len(done) != 1 or completions[done[0]] != 1:
            per_instance.append(f"{iid}: JOB_COMPLETED per job {[completions[j] for j in jobs]}")
            continue
        job = done[0]
        by = (step_output or {}).get("by")
        if step_output != {"by": by, "job": job}:
            per_instance.append(
                f"{iid}: step output {step_output} is not a completion of job {job}"
            )
        if by not in holders[job] or by not in sent[job]:
            per_instance.append(
                f"{iid}: output by {by}, but the job was held by {sorted(holders[job])} "
                f"and completed by {sorted(sent[job])}"
            )
        if len(applied[job]) > 1 or (applied[job] and applied[job] != {by}):
            per_instance.append(
                f"{iid}: job {job} applied for {sorted(applied[job])}, output by {by}"
            )
        if {k: variables.get(k) for k in ("by", "job")} != step_output:
            per_instance.append(f"{iid}: variables {variables} differ from the step output")
        if instance_output and {k: instance_output.get(k) for k in ("by", "job")} != step_output:
            per_instance.append(f"{iid}: instance output {instance_output} is not the step output")
    if per_instance:
        problems.append(
            f"{len(per_instance)} instances not completed exactly once, e.g.:\n  "
            + "\n  ".join(per_instance[:10])
        )

    expiries = db.execute(
        """
        SELECT count(*) FROM audit_log a JOIN instance i ON i.id = a.instance_id
         WHERE i.definition_name = %s AND a.event IN ('JOB_LEASE_EXPIRED', 'JOB_RECLAIMED')
        """,
        (name,),
    ).fetchone()[0]
    _say(f"{expiries} lease expiries/reclaims recovered")
    if not expiries:
        problems.append("no lease ever expired: the kills and the outage stranded no job")
    return problems
