"""The work the benchmarks measure, defined once: one-step workflows (a single SERVICE_TASK whose
job returns at once), so that a figure is the engine's own cost per job; starting them through
the library outside any timing; one drain loop (claim a batch, complete each job) for every
worker, engine or raw, including the in-process engine drain that the HTTP and SDK figures are
compared with; and the check, after a drain, that each instance COMPLETED and each job was
delivered exactly once. A benchmark that lost or repeated work has no trustworthy rate, so the
check fails the run instead of printing one."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from multiprocessing.sharedctypes import Synchronized
from typing import Any, TypeVar

import psycopg

from support import BenchError
from support.cpu import Stopwatch
from support.library import open_engine
from support.postgres import settle
from support.processes import add
from support.reporting import log, rate
from support.wire import WIRE

Job = TypeVar("Job")

# What every benchmark job returns: small, so the figures are about the engine, not payloads.
RESULT: dict[str, Any] = {"ok": True}
# After this long without work, a drain loop asks the database whether any is left.
IDLE_CHECK_SECONDS = 1.0


def one_step(name: str, job_type: str, *, description: str | None = None) -> dict[str, Any]:
    """A definition with one SERVICE_TASK step whose jobs have type ``job_type``."""
    definition: dict[str, Any] = {"name": name}
    if description is not None:
        definition["description"] = description
    definition["steps"] = [{"id": "work", "type": "SERVICE_TASK", "jobType": job_type}]
    return definition


def register(url: str, definition: dict[str, Any], task_def: dict[str, Any] | None = None) -> None:
    """Register ``definition`` (and the task definition of its job type) on a connection of its
    own (not timed)."""
    engine = open_engine(url)
    try:
        if task_def is not None:
            engine.put_task_def(definition["steps"][0]["jobType"], task_def)
        engine.register_definition(definition)
    finally:
        engine.db.close()


def map_of(name: str, job_type: str, items: int) -> dict[str, Any]:
    """A definition with one MAP over ``workflow.input.items`` (all at once) of a SERVICE_TASK
    whose jobs have type ``job_type``; instances of it take ``{"items": list(range(items))}``."""
    task = {"id": "item", "type": "SERVICE_TASK", "jobType": job_type}
    task["input"] = {"n": "${map.item}"}
    each = {"id": "each", "type": "MAP", "items": "${workflow.input.items}", "steps": [task]}
    return {"name": name, "steps": [{**each, "maxConcurrency": items}]}


def start_instances(url: str, name: str, job_type: str, n: int, *, items: int = 0) -> None:
    """Register a one-step definition (``items``: a MAP of that many items, ``map_of``) and
    start ``n`` instances of it (library, not timed)."""
    engine = open_engine(url)
    try:
        definition = map_of(name, job_type, items) if items else one_step(name, job_type)
        engine.register_definition(definition)
        began = time.monotonic()
        for i in range(n):
            given: dict[str, Any] = {"items": list(range(items))} if items else {"n": i}
            engine.start_instance(definition_name=name, input=given)
        log(f"  {n:,} instances of {name} started in {time.monotonic() - began:.1f}s")
    finally:
        engine.db.close()
    settle(url, "instance", "step_execution", "job", "audit_log")


@dataclass(frozen=True, slots=True)
class Outcome:
    """What the database holds after a drain: instances and jobs by status, and how many jobs
    were delivered more than once."""

    instances: dict[str, int]
    jobs: dict[str, int]
    redelivered: int

    def problems(self, n: int, jobs: int | None = None) -> list[str]:
        """Everything that says work was lost or done twice, if ``n`` instances were started
        (with ``jobs`` jobs in all; one each by default)."""
        found = []
        jobs = n if jobs is None else jobs
        if self.instances != {"COMPLETED": n}:
            found.append(f"expected {n} instances, all COMPLETED; found {self.instances}")
        if self.jobs != {"COMPLETED": jobs}:
            found.append(f"expected {jobs} jobs, all COMPLETED; found {self.jobs}")
        if self.jobs.get("UNLOCKED", 0) or self.jobs.get("LOCKED", 0):
            found.append("jobs are still UNLOCKED/LOCKED: work was lost")
        if self.redelivered:
            found.append(f"{self.redelivered} jobs were delivered more than once")
        return found


def outcome(url: str, name: str, job_type: str) -> Outcome:
    """The outcome for the instances of definition ``name`` and the jobs of ``job_type``."""
    with psycopg.connect(url) as conn:
        instances: dict[str, int] = dict(
            conn.execute(
                "SELECT status, count(*) FROM instance WHERE definition_name = %s GROUP BY 1",
                (name,),
            ).fetchall()
        )
        jobs: dict[str, int] = dict(
            conn.execute(
                "SELECT status, count(*) FROM job WHERE job_type = %s GROUP BY 1", (job_type,)
            ).fetchall()
        )
        twice = conn.execute(
            "SELECT count(*) FROM job WHERE job_type = %s AND deliveries <> 1", (job_type,)
        ).fetchone()
    return Outcome(instances, jobs, int(twice[0]) if twice else 0)


def verify(url: str, name: str, job_type: str, n: int, *, jobs: int | None = None) -> None:
    """All ``n`` instances COMPLETED, all jobs (``jobs``, default one each) COMPLETED, each
    delivered exactly once; raises BenchError otherwise."""
    problems = outcome(url, name, job_type).problems(n, jobs)
    if problems:
        raise BenchError(f"{name} lost or duplicated work:\n  " + "\n  ".join(problems))


@dataclass(slots=True)
class Drained:
    """What one drain loop did."""

    applied: int = 0  # completions the store applied
    duplicates: int = 0  # completions it refused (the job was no longer this worker's)
    polls: int = 0  # up to the last poll that claimed work: trailing empty polls are not work
    empty_polls: int = 0
    last: float = 0.0  # monotonic time of the last completion (0: none)
    wire: dict[str, dict[str, float]] = field(default_factory=dict)  # round trips until then

    def as_report(self) -> dict[str, Any]:
        """The payload a fleet worker reports for its drain stage."""
        return {
            "items": self.applied,
            "end": self.last,
            "wire": self.wire,
            "duplicates": self.duplicates,
            "polls": self.polls,
            "empty_polls": self.empty_polls,
        }


def drain_loop(
    claim: Callable[[], Sequence[Job]],
    complete: Callable[[Job], bool],
    *,
    total: int,
    shared: Synchronized[int] | None = None,
    left: Callable[[], int | None] | None = None,
    timeout: float | None = None,
    name: str = "drain",
    complete_many: Callable[[Sequence[Job]], list[bool]] | None = None,
) -> Drained:
    """Claim a batch, complete each job (``complete`` says whether it was applied; or the whole
    batch in one call with ``complete_many``, one answer per job), until
    ``total`` jobs are done: by all the loops adding to ``shared``, else by this one. After
    ``IDLE_CHECK_SECONDS`` without work, ``left()`` asks the database how many jobs are still
    open, so a loop whose peers died does not wait forever; ``timeout`` fails the drain."""
    drained = Drained()
    counting = WIRE.installed
    if counting:
        drained.wire = WIRE.snapshot()
    began = time.monotonic()
    idle_since: float | None = None
    polls = 0

    def finished() -> bool:
        done = shared.value if shared is not None else drained.applied + drained.duplicates
        return done >= total

    while not finished():
        claimed = claim()
        polls += 1
        if not claimed:
            drained.empty_polls += 1
            if finished():
                break
            now = time.monotonic()
            if timeout is not None and now - began > timeout:
                done = drained.applied + drained.duplicates
                raise BenchError(f"{name}: {done}/{total} after {timeout:.0f}s")
            if left is not None:
                idle_since = idle_since or now
                if now - idle_since > IDLE_CHECK_SECONDS:
                    with WIRE.pause():
                        if left() == 0:
                            break  # nothing left to do, whatever the shared count says
                    idle_since = now
            time.sleep(0.001)
            continue
        idle_since = None
        applied = complete_many(claimed) if complete_many else [complete(job) for job in claimed]
        drained.applied += sum(applied)
        drained.duplicates += len(applied) - sum(applied)
        if shared is not None:
            add(shared, len(claimed))
        drained.last, drained.polls = time.monotonic(), polls
        if counting:
            drained.wire = WIRE.snapshot()
    return drained


@dataclass(slots=True)
class InProcessDrain:
    jobs: int
    polls: int
    watch: Stopwatch

    @property
    def per_second(self) -> float:
        return rate(self.jobs, self.watch.seconds)


def drain_in_process(
    url: str, n: int, *, batch: int, timeout: float, batched: bool = False
) -> InProcessDrain:
    """Start ``n`` one-step instances, then time one loop of ``Engine.poll(batch)`` and
    ``Engine.complete_job`` (``batched``: ``Engine.complete_batch`` for the whole claim) on one
    connection with prepared statements, as a single worker process would without HTTP (and as
    the local server's pool does)."""
    from baton.engine.batch_ops import BatchResult

    job_type = name = "bench-engine-inprocess" + ("-batched" if batched else "")
    log(f"engine in-process{' (batched)' if batched else ''}: {n:,} one-step instances")
    start_instances(url, name, job_type, n)
    engine = open_engine(url, prepare=True)
    engine.db.autocommit(lambda conn: conn.execute("SELECT 1"))  # connect outside the timing
    worker = "bench-engine"

    def complete_many(jobs: Sequence[dict[str, Any]]) -> list[bool]:
        answers = engine.complete_batch(
            [BatchResult(j["id"], worker, j["attempt"], output=RESULT) for j in jobs]
        )
        return [a["outcome"] == "APPLIED" for a in answers]

    watch = Stopwatch()
    watch.start()
    try:
        drained = drain_loop(
            lambda: engine.poll(worker, [job_type], batch),
            lambda job: bool(engine.complete_job(job["id"], worker, RESULT)["applied"]),
            total=n,
            timeout=timeout,
            name="engine in-process",
            complete_many=complete_many if batched else None,
        )
        watch.stop()
    finally:
        engine.db.close()
    verify(url, name, job_type, n)
    result = InProcessDrain(n, drained.polls, watch)
    log(f"engine in-process: {result.per_second:,.0f} jobs/s")
    return result
