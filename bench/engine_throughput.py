"""Engine throughput: drain N one-step workflows with W worker processes through the library (no
HTTP), then the same drain with a raw SKIP LOCKED loop on the same server, and print the ratio.

    .venv/bin/python bench/engine_throughput.py --jobs 20000 --workers 4

Phases, each in a fresh database on the same server so neither sees the other's rows:

1. engine: register a one-step definition (one SERVICE_TASK), start N instances from W processes
   (timed separately: "instances started/s"), then time the drain: each process loops
   ``Engine.poll(worker, ["bench"], batch)`` and ``Engine.complete_job(...)`` per claimed job until
   every job is done. Afterwards a count query checks that all N instances are COMPLETED, no job
   is left UNLOCKED/LOCKED and none was delivered twice; otherwise the run fails (exit 1).
2. raw: a minimal ``raw_job`` table with N rows, drained by W processes that claim a batch with
   one ``UPDATE ... WHERE id IN (SELECT ... FOR UPDATE SKIP LOCKED LIMIT n) RETURNING`` and then
   complete each job with its own autocommit ``UPDATE`` (one commit per job).

Besides the rates it prints, per phase, the round trips per job/instance by statement (counted
by a thin psycopg patch in the workers, see ``support.wire``), the client and backend
CPU per item, and how busy the rest of the machine was (anything else running makes the numbers
noisy). ``--profile`` CPU-profiles worker 0's drain (slowing it); ``--explain`` runs EXPLAIN
ANALYZE on the claim and on the complete's lock/read against the full backlog.

3. limited types: the engine drain again (fewer jobs) for a type with a rate limit
   (``rateLimitPerFrequency``) and for one with a concurrency limit (``concurrentExecLimit``, with
   a handler that takes a few ms), each printed next to the ceiling its task definition sets.
   The unlimited phase above is what shows that a type without limits pays nothing for them.

4. fan-out / fan-in: the engine drain of 1,000 instances of a PARALLEL of 10 service tasks and of
   100 instances of a MAP over 100 items (``--fanout-jobs`` jobs each), one complete per job
   and one ``complete_batch`` per poll, printed as step executions completed per second next
   to the one-step drain's.

5. the engine's rows by hand-written SQL: instances started by the engine, then drained in
   batches by two hand-written statements that write exactly the rows the engine writes (claim:
   job, step, audit row; completion: job, step, instance with its version, two audit rows) on the
   engine's own schema, with no decision and no read: the floor of the data model, next to the
   raw batched loop and the engine batched; then the same statements completing one job per
   commit (the per-commit floor, next to the raw per-commit loop and the engine per commit).
   ``--no-floor`` skips both.

``--map-items N`` runs only this: N items of MAPs of 100 drained in batches (one
``complete_batch`` per poll) by one worker process, printing its client CPU per item, split
between the polls and the batch completions, and its ratio to the 60 µs target.
``--one-step-items N`` does the same for N one-step workflows (the 40 µs target).

The last line is ``engine/raw ratio: 0.NN`` (engine jobs/s over raw jobs/s, unlimited type).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import signal
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from baton.engine.batch_ops import BatchResult
from baton.engine.start_batch import StartItem
from support import BenchError
from support.cpu import postmaster_pid
from support.fleet import Member, PhaseResult, fleet
from support.library import connect, open_engine, raw_sql_text, sql_modules
from support.postgres import fresh_database, postgres_server, server_summary, settle
from support.reporting import fmt_num, log, rate, table
from support.wire import WIRE, count_round_trips, sql_labeler, wire_table
from support.workload import RESULT, drain_loop, one_step, outcome, register

JOB_TYPE = "bench"
DEFINITION = one_step(
    "bench-one-step", JOB_TYPE, description="engine_throughput benchmark: one SERVICE_TASK"
)


@dataclass(frozen=True, slots=True)
class Workload:
    """One job type to drain: its definition, its task definition, how long a handler takes,
    and the jobs/s its limits allow (None: unlimited)."""

    label: str
    definition: dict[str, Any]
    job_type: str
    task_def: dict[str, Any] | None = None
    handler_seconds: float = 0.0
    ceiling: float | None = None
    batch: int | None = None  # jobs per poll, if not --batch
    jobs_per_instance: int = 1
    steps_per_instance: int = 1  # step executions each instance completes
    input: dict[str, Any] | None = None

    def instances(self, jobs: int) -> int:
        return max(1, jobs // self.jobs_per_instance)


UNLIMITED = Workload("unlimited", DEFINITION, JOB_TYPE)


def _task(step_id: str, job_type: str, **extra: Any) -> dict[str, Any]:
    return {"id": step_id, "type": "SERVICE_TASK", "jobType": job_type, **extra}


# A MAP over 100 items, all at once, of one SERVICE_TASK reading its item.
MAP_100 = Workload(
    "MAP of 100",
    {
        "name": "bench-map-100",
        "steps": [
            {
                "id": "each",
                "type": "MAP",
                "items": "${workflow.input.items}",
                "maxConcurrency": 100,
                "steps": [_task("one", "bench-item", input={"item": "${map.item}"})],
            }
        ],
    },
    "bench-item",
    jobs_per_instance=100,
    steps_per_instance=101,
    input={"items": list(range(100))},
)
# Client CPU per batched MAP item and one-step job the engine aims at (issue 35), in one process.
MAP_ITEM_TARGET_US = 60.0
ONE_STEP_TARGET_US = 40.0
NOISY = 0.15  # warn when other processes took more than this share of the machine's CPU

RAW_SCHEMA = """
CREATE TABLE raw_job (
    id          bigserial   PRIMARY KEY,
    status      text        NOT NULL,
    worker_id   text,
    locked_at   timestamptz,
    payload     jsonb,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX raw_job_claimable ON raw_job (created_at) WHERE status = 'UNLOCKED';
"""
RAW_FILL = """
INSERT INTO raw_job (status, payload, created_at)
SELECT 'UNLOCKED', jsonb_build_object('n', g), clock_timestamp()
  FROM generate_series(1, %(n)s) AS g
"""
RAW_CLAIM = """
UPDATE raw_job
   SET status = 'LOCKED', worker_id = %(worker_id)s, locked_at = now()
 WHERE id IN (SELECT id FROM raw_job
               WHERE status = 'UNLOCKED'
               ORDER BY created_at
               LIMIT %(n)s
                 FOR UPDATE SKIP LOCKED)
RETURNING id, payload
"""
RAW_COMPLETE = "UPDATE raw_job SET status = 'COMPLETED' WHERE id = %(id)s"
# The batched raw loop: every job of a claim completed by one statement (one commit).
RAW_COMPLETE_MANY = "UPDATE raw_job SET status = 'COMPLETED' WHERE id = ANY(%(ids)s)"
RAW_OPEN = "SELECT count(*) AS n FROM raw_job WHERE status <> 'COMPLETED'"
ENGINE_OPEN = "SELECT count(*) AS n FROM job WHERE status IN ('UNLOCKED', 'LOCKED')"

# The floor of the engine's data model: the rows the engine writes for a one-step workflow (the
# claim: job, step, JOB_DISPATCHED; the completion: job, step, instance with its version, two
# audit rows), written by hand-written SQL on the engine's own schema (its indexes, constraints
# and triggers), with no decision, no read and no fence beyond the version trigger. Rows are
# found by primary key (``id = ANY(ARRAY(...))``, as the engine's set-based writes find them: a
# join to a CTE's rows can plan as a scan of the whole table). What a drain of these statements
# reaches is what no engine of this data model can pass.
FLOOR_CLAIM = """
WITH picked AS (
    SELECT id FROM job
     WHERE job_type = %(job_type)s AND status = 'UNLOCKED' AND run_at <= now()
     ORDER BY run_at
     LIMIT %(n)s
       FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE job j
       SET status = 'LOCKED', worker_id = %(worker_id)s, locked_at = now(),
           lock_expires_at = now() + make_interval(secs => j.lease_seconds),
           deliveries = j.deliveries + 1
     WHERE j.id = ANY(ARRAY(SELECT id FROM picked))
    RETURNING j.id, j.instance_id, j.step_execution_id, j.attempt
), started AS (
    UPDATE step_execution s
       SET status = 'IN_PROGRESS', started_at = now(), updated_at = now()
     WHERE s.id = ANY(ARRAY(SELECT step_execution_id FROM claimed))
), audited AS (
    INSERT INTO audit_log (instance_id, job_id, event, detail)
    SELECT instance_id, id, 'JOB_DISPATCHED',
           jsonb_build_object('attempt', attempt, 'workerId', %(worker_id)s::text)
      FROM claimed
)
SELECT id, instance_id, step_execution_id, attempt FROM claimed
"""
FLOOR_COMPLETE_MANY = """
WITH done AS (
    UPDATE job
       SET status = 'COMPLETED', completed_at = now(), lock_expires_at = NULL
     WHERE id = ANY(%(ids)s) AND worker_id = %(worker_id)s  -- (by the primary key: a status
                                                             -- here plans a scan of the leases)
    RETURNING id, instance_id, step_execution_id, attempt
), steps AS (
    UPDATE step_execution s
       SET status = 'COMPLETED', output = %(output)s, completed_at = now(), updated_at = now()
     WHERE s.id = ANY(ARRAY(SELECT step_execution_id FROM done))
), ended AS (
    UPDATE instance i
       SET status = 'COMPLETED', version = i.version + 1, variables = i.variables || %(output)s,
           output = i.variables || %(output)s, completed_at = now(), updated_at = now()
     WHERE i.id = ANY(ARRAY(SELECT instance_id FROM done))
), audited AS (
    INSERT INTO audit_log (instance_id, job_id, event, detail)
    SELECT instance_id, id, 'JOB_COMPLETED',
           jsonb_build_object('attempt', attempt, 'workerId', %(worker_id)s::text)
      FROM done
    UNION ALL
    SELECT instance_id, NULL, 'INSTANCE_COMPLETED', NULL FROM done
)
SELECT count(*) AS n FROM done
"""


@dataclass(frozen=True, slots=True)
class WorkerConfig:
    url: str
    jobs: int
    workers: int
    batch: int
    source: str  # "single" | "pooled"
    prepare: bool  # server-side prepared statements (psycopg's default; off behind RDS Proxy)
    profile: bool
    workload: Workload = UNLIMITED
    batched: bool = False  # complete each poll's jobs in one call / statement
    claimed_states: int | None = None  # the engine's claimed-state cache (0: off; None: default)
    floor: bool = False  # drain with FLOOR_CLAIM / FLOOR_COMPLETE_MANY instead of the engine
    start_batch: int = 1  # instances per start: one start_instance, or start_instances of N


def _share(total: int, workers: int, k: int) -> int:
    return total // workers + (1 if k < total % workers else 0)


def _labeler(*batches: int) -> Callable[[object], str]:
    """Statements named as the store names them; the claim, whose text carries the batch size
    (``job_sql.claim_sql``), by its constant's name for each of ``batches``."""
    jobs_sql = sql_modules()["jobs"]
    claims = {
        text(jobs_sql.claim_sql(b)): "job_sql.CLAIM_AS_JSON"
        for b in batches
        for text in (str, raw_sql_text)  # as written, and as sent ($n)
    }
    for write in ("WRITE_DECISIONS", "WRITE_UPDATES", "COMPLETE_ONE_STEPS", "START_DECISIONS"):
        claims[raw_sql_text(getattr(sql_modules()["batches"], write))] = f"batch_sql.{write}"
    return sql_labeler(
        *sql_modules().values(),
        extra={
            **claims,
            RAW_CLAIM: "raw.CLAIM",
            RAW_COMPLETE: "raw.COMPLETE",
            RAW_COMPLETE_MANY: "raw.COMPLETE_MANY",
            RAW_OPEN: "raw.OPEN",
            FLOOR_CLAIM: "floor.CLAIM",
            FLOOR_COMPLETE_MANY: "floor.COMPLETE_MANY",
            ENGINE_OPEN: "bench.ENGINE_OPEN",
        },
    )


def _count(row: dict[str, Any] | None) -> int | None:
    return None if row is None else int(row["n"])


def _open_jobs(conn: Any) -> int | None:
    return _count(conn.execute(ENGINE_OPEN).fetchone())


# --- workers ------------------------------------------------------------------------------------


def engine_worker(cfg: WorkerConfig, member: Member) -> None:
    member.run(lambda: _engine_worker(cfg, member))


def _engine_worker(cfg: WorkerConfig, m: Member) -> None:
    count_round_trips(_labeler(cfg.workload.batch or cfg.batch))
    engine = open_engine(
        cfg.url,
        pooled=cfg.source == "pooled",
        prepare=cfg.prepare,
        claimed_states=cfg.claimed_states,
    )
    worker_id = f"w{m.index}"
    # Connect now (outside the timing), and learn the backend's pid to meter its CPU: the
    # floor's own connection, which drains, where the drain is the floor's.
    floor = connect(cfg.url, autocommit=True, prepare=cfg.prepare) if cfg.floor else None
    if floor is not None:
        m.ready(floor.info.backend_pid)
    else:
        m.ready(engine.db.autocommit(lambda conn: conn.info.backend_pid))

    m.begin("start")  # this process's share of the instances
    load = cfg.workload
    mine = _share(load.instances(cfg.jobs), cfg.workers, m.index)
    if cfg.start_batch > 1:
        for first in range(0, mine, cfg.start_batch):
            items = [
                StartItem(
                    definition_name=load.definition["name"],
                    input={"worker": m.index, "n": i, **(load.input or {})},
                )
                for i in range(first, min(first + cfg.start_batch, mine))
            ]
            answers = engine.start_instances(items)
            if any(a.outcome != "STARTED" for a in answers):
                raise BenchError(f"a batch start answered {[a.outcome for a in answers]}")
            m.add("start", len(items))
    else:
        for i in range(mine):
            engine.start_instance(
                definition_name=load.definition["name"],
                input={"worker": m.index, "n": i, **(load.input or {})},
            )
            if (i + 1) % 50 == 0:
                m.add("start", 50)
        m.add("start", mine % 50)
    m.report("start", {"items": mine, "end": time.monotonic(), "wire": WIRE.snapshot()})

    m.begin("drain")
    # CPU time, not wall time: where the wall time goes (waiting) is what the round-trip
    # table shows; this shows what the worker's own CPU is spent on.
    profiler = cProfile.Profile(time.process_time) if cfg.profile and m.index == 0 else None
    if profiler is not None:
        profiler.enable()

    def complete(job: dict[str, Any]) -> bool:
        if load.handler_seconds:
            time.sleep(load.handler_seconds)
        return bool(engine.complete_job(job["id"], worker_id, RESULT)["applied"])

    # The drain's client CPU split between the polls and the batch completions (process CPU
    # around each call: the completions' share is what the decider and the write cost).
    split = {"poll": 0.0, "complete": 0.0}

    def poll() -> list[dict[str, Any]]:
        began = time.process_time()
        try:
            return engine.poll(worker_id, [load.job_type], load.batch or cfg.batch)
        finally:
            split["poll"] += time.process_time() - began

    def complete_many(jobs: Sequence[dict[str, Any]]) -> list[bool]:
        began = time.process_time()
        answers = engine.complete_batch(
            [BatchResult(j["id"], worker_id, j["attempt"], output=RESULT) for j in jobs]
        )
        split["complete"] += time.process_time() - began
        return [a["outcome"] == "APPLIED" for a in answers]

    if floor is not None:
        drained = _floor_drain(cfg, m, worker_id, floor)
    else:
        drained = drain_loop(
            poll,
            complete,
            total=cfg.jobs,
            shared=m.shared_count("drain"),
            left=lambda: engine.db.autocommit(_open_jobs),
            complete_many=complete_many if cfg.batched else None,
        )
    usage = m.usage()
    profile = _profile_text(profiler)
    engine.db.close()
    m.report("drain", {**drained.as_report(), "profile": profile, "split": split}, usage=usage)


def _floor_drain(cfg: WorkerConfig, m: Member, worker_id: str, conn: Any) -> Any:
    """The drain of the engine's rows by hand-written SQL (FLOOR_*), on ``conn``, set up as the
    raw loop's (closed at the end)."""
    output = json.dumps(RESULT)
    prepared = True if cfg.prepare else None  # at the first run, as the engine's claim and write

    def complete_many(rows: Sequence[dict[str, Any]]) -> list[bool]:
        params = {"ids": [r["id"] for r in rows], "worker_id": worker_id, "output": output}
        row = conn.execute(FLOOR_COMPLETE_MANY, params, prepare=prepared).fetchone()
        done = int(row["n"]) if row else 0
        return [True] * done + [False] * (len(rows) - done)

    claim = {"job_type": cfg.workload.job_type, "worker_id": worker_id, "n": cfg.batch}
    try:
        return drain_loop(
            lambda: conn.execute(FLOOR_CLAIM, claim, prepare=prepared).fetchall(),
            lambda row: complete_many([row])[0],
            total=cfg.jobs,
            shared=m.shared_count("drain"),
            left=lambda: _open_jobs(conn),
            complete_many=complete_many if cfg.batched else None,
        )
    finally:
        conn.close()


def _profile_text(profiler: cProfile.Profile | None) -> str | None:
    if profiler is None:
        return None
    profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("tottime").print_stats(20)
    stats.sort_stats("cumulative").print_stats(30)
    return out.getvalue()


def raw_worker(cfg: WorkerConfig, member: Member) -> None:
    member.run(lambda: _raw_worker(cfg, member))


def _raw_worker(cfg: WorkerConfig, m: Member) -> None:
    count_round_trips(_labeler())
    # The engine's driver settings, for a fair comparison: prepared as the engine's hot
    # statements are (at their first run), unless the engine runs unprepared (--no-prepare).
    conn = connect(cfg.url, autocommit=True, prepare=cfg.prepare)
    worker_id = f"r{m.index}"
    m.ready(conn.info.backend_pid)
    m.begin("drain")

    prepared = True if cfg.prepare else None

    def complete_many(rows: Sequence[dict[str, Any]]) -> list[bool]:
        ids = {"ids": [r["id"] for r in rows]}
        done = conn.execute(RAW_COMPLETE_MANY, ids, prepare=prepared).rowcount
        return [True] * done + [False] * (len(rows) - done)

    claim = {"worker_id": worker_id, "n": cfg.batch}
    drained = drain_loop(
        lambda: conn.execute(RAW_CLAIM, claim, prepare=prepared).fetchall(),
        lambda row: conn.execute(RAW_COMPLETE, {"id": row["id"]}, prepare=prepared).rowcount == 1,
        total=cfg.jobs,
        shared=m.shared_count("drain"),
        left=lambda: _count(conn.execute(RAW_OPEN).fetchone()),
        complete_many=complete_many if cfg.batched else None,
    )
    usage = m.usage()
    conn.close()
    m.report("drain", drained.as_report(), usage=usage)


# --- phases (parent) ----------------------------------------------------------------------------


def _config(
    url: str,
    args: argparse.Namespace,
    workload: Workload = UNLIMITED,
    jobs: int | None = None,
    batched: bool = False,
    floor: bool = False,
) -> WorkerConfig:
    return WorkerConfig(
        batched=batched,
        floor=floor,
        url=url,
        jobs=jobs or args.jobs,
        workers=args.workers,
        batch=args.batch,
        source=args.source,
        prepare=not args.no_prepare,
        profile=args.profile and (workload is UNLIMITED or bool(args.map_items)),
        workload=workload,
        claimed_states=0 if args.no_claimed_states else None,
        start_batch=args.start_batch,
    )


def engine_phase(
    server: str,
    args: argparse.Namespace,
    workload: Workload = UNLIMITED,
    jobs: int | None = None,
    batched: bool = False,
    floor: bool = False,
    inspect: Callable[[str], None] | None = None,
) -> tuple[PhaseResult, PhaseResult, int]:
    """Returns (starts, drain, instances COMPLETED); raises BenchError on lost/duplicated work.
    ``batched``: each poll's jobs are completed by one ``complete_batch`` call. ``floor``: the
    instances are started by the engine, and drained by hand-written SQL writing its rows.
    ``inspect``: called with the database's URL after the drain was checked, before it goes."""
    n, w = jobs or args.jobs, args.workers
    n = workload.instances(n) * workload.jobs_per_instance
    log(f"engine phase ({workload.label}): creating a fresh migrated database")
    with fresh_database(server, "engine", keep=args.keep_databases) as url:
        register(url, workload.definition, workload.task_def)
        postmaster = postmaster_pid(url)
        log(f"engine phase: spawning {w} worker processes ({args.source} connection each)")
        label = ("floor" if floor else "engine") + (" batched" if batched else "")
        with fleet(
            engine_worker,
            _config(url, args, workload, n, batched, floor),
            workers=w,
            name=f"engine ({workload.label})" if workload is not UNLIMITED else label,
            stages=("start", "drain"),
            postmaster=postmaster,
        ) as workers:
            log(f"engine phase: starting {workload.instances(n):,} instances from {w} processes")
            starts = workers.run(
                "start",
                "engine: start instances",
                progress="instances started",
                total=workload.instances(n),
                timeout=args.timeout,
            )
            log(
                f"engine phase: {starts.items:,} instances started in "
                f"{starts.seconds:.2f}s = {starts.per_second:,.0f} instances started/s"
            )
            settle(url, "instance", "step_execution", "job", "audit_log")
            if args.explain and workload is UNLIMITED:
                explain_claim(url, args.batch)
            log(f"engine phase: draining {n:,} jobs with {w} workers, batch {args.batch}")
            drain = workers.run(
                "drain", "engine: drain", progress="jobs completed", total=n, timeout=args.timeout
            )
        for figures in drain.reports:
            if figures["profile"]:
                log("engine phase: CPU profile of worker 0's drain (own, then cumulative)")
                print(figures["profile"], flush=True)
        polls, empty = drain.total("polls"), drain.total("empty_polls")
        log(
            f"engine phase: drained in {drain.seconds:.2f}s = {drain.per_second:,.0f} jobs/s "
            f"({polls:,} polls, {drain.items / max(polls, 1):.1f} jobs per poll, "
            f"{empty:,} empty polls)"
        )
        completed = verify_engine(url, n, drain, workload)
        if inspect is not None:
            inspect(url)
    return starts, drain, completed


@dataclass(frozen=True, slots=True)
class LimitSeen:
    """What a limited drain's rows show of its limit: the most jobs dispatched in one rate window
    (fixed windows from the epoch, as the engine counts them), or the most held at once."""

    what: str  # "in one window" | "at once"
    most: int
    limit: int


def limit_seen(url: str, workload: Workload) -> LimitSeen | None:
    """Read the drain's rows for its task definition's limit; None when it sets none. Each
    dispatch's audit row is stamped with the clock its grant was counted by (``JOB_DISPATCHED``)
    and each completion's with its transaction's start, before its commit frees the slot."""
    import psycopg

    limits = workload.task_def or {}
    with psycopg.connect(url) as conn:
        if "rateLimitPerFrequency" in limits:
            window = int(limits.get("rateLimitFrequencyInSeconds", 1))
            row = conn.execute(
                "SELECT count(*) FROM audit_log a JOIN job j ON j.id = a.job_id"
                " WHERE a.event = 'JOB_DISPATCHED' AND j.job_type = %s"
                " GROUP BY floor(extract(epoch FROM a.at) / %s) ORDER BY 1 DESC LIMIT 1",
                (workload.job_type, window),
            ).fetchone()
            return LimitSeen(
                f"in one {window} s window", row[0] if row else 0, limits["rateLimitPerFrequency"]
            )
        if "concurrentExecLimit" in limits:
            row = conn.execute(
                """
                WITH held AS (
                    SELECT a.at, CASE a.event WHEN 'JOB_DISPATCHED' THEN 1 ELSE -1 END AS d
                      FROM audit_log a JOIN job j ON j.id = a.job_id
                     WHERE j.job_type = %s AND a.event IN ('JOB_DISPATCHED', 'JOB_COMPLETED')
                )
                SELECT max(n) FROM (SELECT sum(d) OVER (ORDER BY at, d) AS n FROM held) x
                """,
                (workload.job_type,),
            ).fetchone()
            return LimitSeen(
                "at once", int(row[0] or 0) if row else 0, limits["concurrentExecLimit"]
            )
    return None


def limited_phases(
    server: str, args: argparse.Namespace
) -> list[tuple[Workload, PhaseResult, LimitSeen | None]]:
    """The drain of a rate-limited and of a concurrency-limited type, each next to its ceiling
    and to what its rows show of its limit (a limit the rows show exceeded fails the run)."""
    n = min(args.jobs, args.limited_jobs)
    rate, conc, handler = args.rate_limit, args.concurrency_limit, args.handler_ms / 1000
    workloads = [
        Workload(
            f"rateLimitPerFrequency {rate}/1s",
            one_step("bench-rate-limited", "bench-rated"),
            "bench-rated",
            {"rateLimitPerFrequency": rate, "rateLimitFrequencyInSeconds": 1},
            ceiling=float(rate),
        ),
        Workload(
            f"concurrentExecLimit {conc}, {args.handler_ms:g} ms handler",
            one_step("bench-concurrency-limited", "bench-capped"),
            "bench-capped",
            {"concurrentExecLimit": conc},
            handler_seconds=handler,
            ceiling=conc / handler if handler else None,
            # One job per poll: a worker that took several would run them one after the
            # other while holding every slot, and the type could never run N at once.
            batch=1,
        ),
    ]
    seen: dict[str, LimitSeen | None] = {}

    def read_limit(load: Workload) -> Callable[[str], None]:
        return lambda url: seen.update({load.label: limit_seen(url, load)})

    drains: list[tuple[Workload, PhaseResult, LimitSeen | None]] = []
    for load in workloads:
        drain = engine_phase(server, args, load, n, inspect=read_limit(load))[1]
        check = seen.get(load.label)
        if check is not None and check.most > check.limit:
            raise BenchError(
                f"{load.label}: {check.most} jobs {check.what}, above the limit of {check.limit}"
            )
        drains.append((load, drain, check))
    return drains


def fanout_phases(server: str, args: argparse.Namespace) -> list[tuple[str, Workload, PhaseResult]]:
    """Fan-out and fan-in: a PARALLEL of 10 branches and a MAP over 100 items, each a
    SERVICE_TASK, drained like the one-step workflows, one complete per job and (unless
    ``--no-batched``) one ``complete_batch`` per poll, as the SDK reports; the joins are
    decisions on the instance like any other, so every completion of one instance serialises on
    its row, and a batch decides one instance's results together."""

    workloads = [
        Workload(
            "PARALLEL of 10",
            {
                "name": "bench-parallel-10",
                "steps": [
                    {
                        "id": "fan",
                        "type": "PARALLEL",
                        "branches": [[_task(f"b{i}", "bench-branch")] for i in range(10)],
                    }
                ],
            },
            "bench-branch",
            jobs_per_instance=10,
            steps_per_instance=11,
        ),
        MAP_100,
    ]
    drains: list[tuple[str, Workload, PhaseResult]] = []
    for load in workloads:
        drains.append((load.label, load, engine_phase(server, args, load, args.fanout_jobs)[1]))
        if not args.no_batched:
            batched = engine_phase(server, args, load, args.fanout_jobs, batched=True)[1]
            drains.append((f"{load.label}, batched", load, batched))
    return drains


def map_items_phase(
    server: str, args: argparse.Namespace, workload: Workload = MAP_100, items: int = 0
) -> PhaseResult:
    """``--map-items``: the items of MAPs of 100 (or ``workload``'s jobs: ``--one-step-items``)
    drained in batches (one ``complete_batch`` per poll) by ONE worker process, so its client
    CPU per item is the engine's alone."""
    one = argparse.Namespace(**{**vars(args), "workers": 1})
    return engine_phase(server, one, workload, items or args.map_items, batched=True)[1]


def report_one_step_items(drain: PhaseResult, batch: int) -> None:
    report_map_items(drain, batch, "one-step jobs", ONE_STEP_TARGET_US)


def report_map_items(
    drain: PhaseResult, batch: int, what: str = "items of MAPs of 100", target: float = 0.0
) -> None:
    target = target or MAP_ITEM_TARGET_US
    items = max(drain.items, 1)
    client = 1e6 * drain.cpu / items
    split = [r["split"] for r in drain.reports]
    poll = 1e6 * sum(s["poll"] for s in split) / items
    complete = 1e6 * sum(s["complete"] for s in split) / items
    backend = "-" if drain.server_cpu is None else f"{1e6 * drain.server_cpu / items:,.0f}"
    print()
    print(f"batched, one process ({drain.items:,} {what}, batch {batch}):")
    print(
        table(
            ["items/s", "client CPU us/item", "poll", "complete_batch", "PostgreSQL us/item"],
            [
                [
                    fmt_num(drain.per_second),
                    f"{client:,.1f}",
                    f"{poll:,.1f}",
                    f"{complete:,.1f}",
                    backend,
                ]
            ],
        )
    )
    print(drain.cpu_line())
    print(
        f"client CPU per item / target ({target:g} us): {client / target:.2f}",
        flush=True,
    )


def verify_engine(url: str, n: int, drain: PhaseResult, workload: Workload = UNLIMITED) -> int:
    """Every instance COMPLETED exactly once, no job open or delivered twice. Returns the number
    of COMPLETED instances; raises BenchError otherwise."""
    import psycopg

    found = outcome(url, workload.definition["name"], workload.job_type)
    with psycopg.connect(url) as conn:
        span = conn.execute(
            "SELECT extract(epoch FROM max(i.completed_at) - min(j.locked_at))"
            "  FROM instance i JOIN job j ON j.instance_id = i.id"
        ).fetchone()
    applied, duplicates = drain.items, drain.total("duplicates")
    log(
        f"engine phase: check: instances {json.dumps(found.instances)}, "
        f"jobs {json.dumps(found.jobs)}; "
        f"database-side drain span {float(span[0]) if span and span[0] else 0:.2f}s"
    )
    problems = found.problems(workload.instances(n), n)
    if applied != n or duplicates:
        problems.append(f"workers applied {applied} completions and saw {duplicates} duplicates")
    if problems:
        raise BenchError("engine drain lost or duplicated work:\n  " + "\n  ".join(problems))
    return found.instances["COMPLETED"]


def explain_claim(url: str, batch: int) -> None:
    """EXPLAIN ANALYZE the engine's claim against the full backlog (rolled back)."""
    import psycopg

    jobs_sql = sql_modules()["jobs"]
    params = {
        "worker_id": "explain",
        "job_types": [JOB_TYPE],
        "max_bytes": 5_000_000,
        "state_max_bytes": jobs_sql.CLAIMED_STATE_MAX_BYTES,
    }
    explain = "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) "
    with psycopg.connect(url) as conn:
        claim = conn.execute(explain + jobs_sql.claim_sql(batch), params).fetchall()
        job = conn.execute("SELECT id FROM job WHERE worker_id = 'explain' LIMIT 1").fetchone()
        lock = conn.execute(
            explain + jobs_sql.LOCK_JOB_WITH_INSTANCE, {"job_id": job[0] if job else None}
        ).fetchall()
        conn.rollback()
    log("engine phase: EXPLAIN ANALYZE of the claim with the full backlog (rolled back)")
    print("\n".join(f"    {r[0]}" for r in claim), flush=True)
    log("engine phase: EXPLAIN ANALYZE of the complete's lock/read of one claimed job")
    print("\n".join(f"    {r[0]}" for r in lock), flush=True)


def raw_phase(server: str, args: argparse.Namespace, batched: bool = False) -> PhaseResult:
    """The raw SKIP LOCKED loop: one commit per job, or (``batched``) one per claim."""
    import psycopg

    n, w = args.jobs, args.workers
    log("raw phase: creating a fresh database with one raw_job table")
    with fresh_database(server, "raw", migrate=False, keep=args.keep_databases) as url:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(RAW_SCHEMA.encode())
            conn.execute(RAW_FILL, {"n": n})
        settle(url, "raw_job")
        with fleet(
            raw_worker,
            _config(url, args, batched=batched),
            workers=w,
            name="raw batched" if batched else "raw",
            stages=("drain",),
            postmaster=postmaster_pid(url),
        ) as workers:
            log(f"raw phase: draining {n:,} rows with {w} workers, batch {args.batch}")
            result = workers.run(
                "drain", "raw: drain", progress="jobs completed", total=n, timeout=args.timeout
            )
        with psycopg.connect(url) as conn:
            left = conn.execute(RAW_OPEN).fetchone()
    log(f"raw phase: drained in {result.seconds:.2f}s = {result.per_second:,.0f} jobs/s")
    if result.items != n or (left and left[0]):
        raise BenchError(f"raw drain completed {result.items} of {n} rows ({left} left)")
    return result


# --- report -------------------------------------------------------------------------------------


def report_limited(limited: list[tuple[Workload, PhaseResult, LimitSeen | None]]) -> None:
    rows = [
        [
            load.label,
            f"{drain.items:,}",
            fmt_num(drain.per_second),
            "-" if load.ceiling is None else fmt_num(load.ceiling),
            "-" if load.ceiling is None else f"{drain.per_second / load.ceiling:.2f}",
            "-" if seen is None else f"{seen.most:,} {seen.what} (limit {seen.limit:,})",
        ]
        for load, drain, seen in limited
    ]
    print()
    print("limited job types (the same engine drain, against the ceiling their limits set):")
    print(table(["limit", "jobs", "jobs/s", "ceiling jobs/s", "of ceiling", "most seen"], rows))
    print(
        "(a rate limit counts fixed windows from the epoch, as Conductor's does: a drain can start"
        " late in its first window and end early in its last, so its average may pass the rate;"
        " the busiest window, read from the audit log, is the limit's check)"
    )


def report_fanout(fanout: list[tuple[str, Workload, PhaseResult]], one_step: PhaseResult) -> None:
    base = one_step.per_second  # one step execution per job
    rows = [
        [
            "one step (above)",
            f"{one_step.items:,}",
            f"{one_step.items:,}",
            "-",
            fmt_num(one_step.per_second),
            fmt_num(base),
            "1.00",
        ]
    ]
    for label, load, drain in fanout:
        instances = load.instances(drain.items)
        steps = instances * load.steps_per_instance
        steps_per_second = rate(steps, drain.seconds)
        rows.append(
            [
                label,
                f"{instances:,}",
                f"{drain.items:,}",
                f"{steps:,}",
                fmt_num(drain.per_second),
                fmt_num(steps_per_second),
                f"{steps_per_second / base:.2f}" if base else "-",
            ]
        )
    print()
    print("fan-out / fan-in (step executions completed per second, next to the one-step drain):")
    headers = ["workload", "instances", "jobs", "steps", "jobs/s", "steps/s", "vs one step"]
    print(table(headers, rows))


def report(
    starts: PhaseResult, drain: PhaseResult, instances: int, raw: PhaseResult, batch: int
) -> None:
    print(flush=True)
    print(f"engine drain, round trips per job ({drain.items:,} jobs, batch {batch}):")
    print(wire_table(drain.wire, drain.items, "job"))
    print()
    print(f"engine starts, round trips per instance ({starts.items:,} instances):")
    print(wire_table(starts.wire, starts.items, "instance"))
    print()
    print(f"raw drain, round trips per job ({raw.items:,} jobs):")
    print(wire_table(raw.wire, raw.items, "job"))
    print()

    def row(r: PhaseResult, what: str, count: int) -> list[str]:
        return [
            r.name,
            f"{count:,}",
            f"{r.seconds:.2f}",
            fmt_num(rate(count, r.seconds)),
            what,
            f"{r.round_trips_per_item():.2f}",
            f"{1e6 * r.cpu / max(count, 1):,.0f}",
            "-" if r.server_cpu is None else f"{1e6 * r.server_cpu / max(count, 1):,.0f}",
        ]

    headers = [
        "phase",
        "count",
        "seconds",
        "rate",
        "unit",
        "RT/item",
        "client CPU us/item",
        "backend CPU us/item",
    ]
    print(
        table(
            headers,
            [
                row(starts, "instances started/s", starts.items),
                row(drain, "jobs/s", drain.items),
                row(drain, "instances/s (COMPLETED)", instances),
                row(raw, "jobs/s", raw.items),
            ],
        )
    )
    print()
    for r in (starts, drain, raw):
        print(r.cpu_line())
    for r in (drain, raw):
        rest = r.window.rest_fraction(r.cpu, r.server_cpu)
        if rest is not None and rest > NOISY:
            print(
                f"WARNING: other processes on this machine used {rest:.0%} of its CPU during "
                f"{r.name}: its rate is depressed; compare CPU per job instead"
            )
    if drain.server_cpu is not None and raw.server_cpu is not None:
        cores = os.cpu_count() or 1
        per_job = [(r.cpu + (r.server_cpu or 0.0)) / max(r.items, 1) for r in (drain, raw)]
        print(
            f"CPU per job (client + backend): engine {1e6 * per_job[0]:,.0f} us, raw "
            f"{1e6 * per_job[1]:,.0f} us; if CPU-bound on {cores} cores: engine <= "
            f"{cores / per_job[0]:,.0f} jobs/s, raw <= {cores / per_job[1]:,.0f} jobs/s "
            f"(ratio {per_job[1] / per_job[0]:.2f})"
        )
    print(
        "(round trips = awaited server responses on the worker's connection: each statement "
        "outside a pipeline, each COMMIT, and each pipeline Sync/flush, however many statements "
        "it carries; polls amortized over the batch)"
    )
    print(f"round trips per job (claim+complete+advance): {drain.round_trips_per_item():.2f}")
    ratio = drain.per_second / raw.per_second
    print(f"engine/raw ratio: {ratio:.2f}", flush=True)


def report_batched(
    engine: PhaseResult,
    raw: PhaseResult,
    engine_b: PhaseResult,
    raw_b: PhaseResult,
    *,
    floor: PhaseResult | None = None,
    floor_commit: PhaseResult | None = None,
) -> None:
    """The four drains side by side: per-commit and batched, engine (full bookkeeping) and raw;
    and the engine's rows written by hand-written SQL, in batches (``floor``) and one commit per
    job (``floor_commit``): the floor of its data model for each."""
    print()
    print(f"engine batched drain, round trips per job ({engine_b.items:,} jobs):")
    print(wire_table(engine_b.wire, engine_b.items, "job"))
    drains = [
        ("raw, per commit", raw),
        ("raw, batched", raw_b),
        ("engine, per commit", engine),
        ("engine, batched", engine_b),
    ]
    if floor_commit is not None:
        drains.append(("engine's rows by SQL, per commit", floor_commit))
    if floor is not None:
        drains.append(("engine's rows by SQL, batched", floor))
    rows = [
        [
            label,
            f"{r.items:,}",
            f"{r.seconds:.2f}",
            fmt_num(r.per_second),
            f"{r.round_trips_per_item():.2f}",
            f"{1e6 * r.cpu / max(r.items, 1):,.0f}",
            "-" if r.server_cpu is None else f"{1e6 * r.server_cpu / max(r.items, 1):,.0f}",
        ]
        for label, r in drains
    ]
    print()
    print("per-commit and batched drains (one-step workflows, full bookkeeping for the engine):")
    headers = ["drain", "jobs", "seconds", "jobs/s", "RT/job", "client CPU us/job"]
    print(table([*headers, "backend CPU us/job"], rows))
    print(f"engine per-commit / raw per-commit: {engine.per_second / raw.per_second:.2f}")
    print(f"engine batched / raw batched: {engine_b.per_second / raw_b.per_second:.2f}")
    print(f"engine batched / engine per-commit: {engine_b.per_second / engine.per_second:.2f}")
    if engine_b.server_cpu is not None and raw_b.server_cpu is not None:
        print(batched_budget(engine_b, raw_b))
    if floor is not None:
        print(
            "the engine's rows written in batches by hand-written SQL (no decision, no read: "
            f"its data model's floor) / raw batched: {floor.per_second / raw_b.per_second:.2f}; "
            f"engine batched / that floor: {engine_b.per_second / floor.per_second:.2f}"
        )
    if floor_commit is not None:
        print(
            "the engine's rows written one job per commit by hand-written SQL (the per-commit "
            f"floor) / raw per-commit: {floor_commit.per_second / raw.per_second:.2f}; "
            f"engine per-commit / that floor: {engine.per_second / floor_commit.per_second:.2f}"
        )


def batched_budget(engine_b: PhaseResult, raw_b: PhaseResult, target: float = 0.6) -> str:
    """What ``target`` times the raw batched rate asks of the engine's CPU per job: both batched
    drains are CPU-bound, so the engine must spend at most raw/target per job in all."""
    raw_job = (raw_b.cpu + (raw_b.server_cpu or 0.0)) / max(raw_b.items, 1)
    backend = (engine_b.server_cpu or 0.0) / max(engine_b.items, 1)
    client = engine_b.cpu / max(engine_b.items, 1)
    engine_job = client + backend
    return (
        f"batched CPU per job: raw {1e6 * raw_job:,.0f} us in all; engine {1e6 * engine_job:,.0f}"
        f" (PostgreSQL {1e6 * backend:,.0f}, client {1e6 * client:,.0f}). {target:g}x of the raw "
        f"rate needs <= {1e6 * raw_job / target:,.0f} us per job in all: the engine's PostgreSQL "
        f"side alone is {backend / (raw_job / target):.1f}x that budget"
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--jobs", type=int, default=20_000, help="instances/jobs (default 20000)")
    p.add_argument("--workers", type=int, default=4, help="worker processes (default 4)")
    p.add_argument("--batch", type=int, default=32, help="max jobs per poll (default 32)")
    p.add_argument(
        "--start-batch",
        type=int,
        default=1,
        help="start the instances N at a time (Engine.start_instances, at most 100); default 1:"
        " one start_instance each",
    )
    p.add_argument(
        "--database-url",
        default=os.environ.get("DATABASE_URL") or None,
        help="server to use (default: $DATABASE_URL, else an embedded PostgreSQL)",
    )
    p.add_argument(
        "--source",
        choices=("single", "pooled"),
        default="single",
        help="engine connection source per worker: Database.single (Lambda-like, default) or "
        "Database.pooled (psycopg_pool, max_size=1)",
    )
    p.add_argument(
        "--no-prepare",
        action="store_true",
        help="engine without server-side prepared statements, as behind RDS Proxy (the raw "
        "loops and the floor then run unprepared too)",
    )
    p.add_argument("--profile", action="store_true", help="CPU-profile worker 0's drain")
    p.add_argument("--explain", action="store_true", help="EXPLAIN ANALYZE the claim first")
    p.add_argument(
        "--limited-jobs", type=int, default=2000, help="jobs per limited-type drain (default 2000)"
    )
    p.add_argument(
        "--rate-limit",
        type=int,
        default=200,
        help="claims per 1 s window of the rate-limited type (default 200: with the default "
        "--limited-jobs the drain spans about 10 windows, so the burst a fixed window allows at "
        "its edge is small next to the whole)",
    )
    p.add_argument(
        "--concurrency-limit", type=int, default=4, help="concurrentExecLimit of the capped type"
    )
    p.add_argument(
        "--handler-ms", type=float, default=20.0, help="handler time of the capped type's jobs"
    )
    p.add_argument("--no-limited", action="store_true", help="skip the limited-type drains")
    p.add_argument(
        "--fanout-jobs",
        type=int,
        default=10_000,
        help="jobs per fan-out drain (default 10000: 1000 PARALLELs of 10, 100 MAPs of 100)",
    )
    p.add_argument("--no-fanout", action="store_true", help="skip the fan-out drains")
    p.add_argument(
        "--map-items",
        type=int,
        default=0,
        metavar="N",
        help="only drain N items of MAPs of 100 in batches with one worker process, and print "
        "its client CPU per item (poll and complete_batch) against the 60 us target",
    )
    p.add_argument(
        "--one-step-items",
        type=int,
        default=0,
        metavar="N",
        help="the same for N one-step workflows (against the 40 us target)",
    )
    p.add_argument(
        "--no-batched",
        action="store_true",
        help="skip the batched drains (engine complete_batch, raw one UPDATE per claim)",
    )
    p.add_argument(
        "--no-floor",
        action="store_true",
        help="skip the batched drain of the engine's rows by hand-written SQL (its data "
        "model's floor)",
    )
    p.add_argument(
        "--no-claimed-states",
        action="store_true",
        help="engine without its claimed-state cache (every completion reads its job and "
        "instance first, as a process that did not claim the job does)",
    )
    p.add_argument("--timeout", type=float, default=600, help="per stage, seconds")
    p.add_argument("--keep-databases", action="store_true", help="don't drop them at the end")
    args = p.parse_args(argv)
    if (
        args.jobs < 1
        or args.workers < 1
        or args.batch < 1
        or args.map_items < 0
        or args.one_step_items < 0
    ):
        p.error("--jobs, --workers and --batch must be positive, --map-items not negative")
    if not 1 <= args.start_batch <= 100:
        p.error("--start-batch takes 1 to 100 (a batch start's limit)")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    # SIGTERM unwinds like Ctrl-C, so the finally blocks reap workers and stop Postgres.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    log(
        f"engine throughput: {args.jobs:,} one-step workflows, {args.workers} worker processes, "
        f"batch {args.batch}"
    )
    try:
        with postgres_server(args.database_url) as server:
            log(server_summary(server))
            if args.map_items:
                map_items = map_items_phase(server, args)
                report_map_items(map_items, args.batch)
                return 0
            if args.one_step_items:
                one_steps = map_items_phase(server, args, UNLIMITED, args.one_step_items)
                report_one_step_items(one_steps, args.batch)
                return 0
            starts, drain, instances = engine_phase(server, args)
            raw = raw_phase(server, args)
            batched = None
            if not args.no_batched:
                batched = (
                    engine_phase(server, args, batched=True)[1],
                    raw_phase(server, args, True),
                )
            floor = floor_commit = None
            if not args.no_batched and not args.no_floor:
                floor = engine_phase(server, args, batched=True, floor=True)[1]
                floor_commit = engine_phase(server, args, floor=True)[1]
            limited = [] if args.no_limited else limited_phases(server, args)
            fanout = [] if args.no_fanout else fanout_phases(server, args)
    except KeyboardInterrupt:
        log("interrupted")
        return 130
    except BenchError as e:
        print(f"FAIL: {e}", file=sys.stderr, flush=True)
        return 1
    if limited:
        report_limited(limited)
    if fanout:
        report_fanout(fanout, drain)
    report(starts, drain, instances, raw, args.batch)
    if batched is not None:
        report_batched(drain, raw, *batched, floor=floor, floor_commit=floor_commit)
    return 0


if __name__ == "__main__":
    sys.exit(main())
