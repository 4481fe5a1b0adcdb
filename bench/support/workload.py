"""The work the benchmarks measure, defined once: one-step workflows (a single SERVICE_TASK whose
job returns at once), so that a figure is the engine's own cost per job; starting them through
the library outside any timing; draining them in this process with one engine loop (the
baseline the HTTP and SDK figures are compared with); and the check, after every drain, that
each instance COMPLETED and each job was delivered exactly once. A benchmark that lost or
repeated work has no trustworthy rate, so the check fails the run instead of printing one."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import psycopg

from support import BenchError
from support.cpu import CpuWindow
from support.library import open_engine
from support.postgres import settle
from support.reporting import log, rate

# What every benchmark job returns: small, so the figures are about the engine, not payloads.
RESULT: dict[str, Any] = {"ok": True}


def one_step(name: str, job_type: str, *, description: str | None = None) -> dict[str, Any]:
    """A definition with one SERVICE_TASK step whose jobs have type ``job_type``."""
    definition: dict[str, Any] = {"name": name}
    if description is not None:
        definition["description"] = description
    definition["steps"] = [{"id": "work", "type": "SERVICE_TASK", "jobType": job_type}]
    return definition


def register(url: str, definition: dict[str, Any]) -> None:
    engine = open_engine(url)
    try:
        engine.register_definition(definition)
    finally:
        engine.db.close()


def start_instances(url: str, name: str, job_type: str, n: int) -> None:
    """Register a one-step definition and start ``n`` instances of it (library, not timed)."""
    engine = open_engine(url)
    try:
        engine.register_definition(one_step(name, job_type))
        began = time.monotonic()
        for i in range(n):
            engine.start_instance(definition_name=name, input={"n": i})
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

    def problems(self, n: int) -> list[str]:
        """Everything that says work was lost or done twice, if ``n`` instances were started."""
        found = []
        if self.instances != {"COMPLETED": n}:
            found.append(f"expected {n} instances, all COMPLETED; found {self.instances}")
        if self.jobs != {"COMPLETED": n}:
            found.append(f"expected {n} jobs, all COMPLETED; found {self.jobs}")
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


def verify(url: str, name: str, job_type: str, n: int) -> None:
    """All ``n`` instances COMPLETED, all jobs COMPLETED, each delivered exactly once; raises
    BenchError otherwise."""
    problems = outcome(url, name, job_type).problems(n)
    if problems:
        raise BenchError(f"{name} lost or duplicated work:\n  " + "\n  ".join(problems))


@dataclass(slots=True)
class InProcessDrain:
    jobs: int
    polls: int
    seconds: float
    cpu: float  # this process's CPU seconds
    window: CpuWindow

    @property
    def per_second(self) -> float:
        return rate(self.jobs, self.seconds)


def drain_in_process(url: str, n: int, *, batch: int, timeout: float) -> InProcessDrain:
    """Start ``n`` one-step instances, then time one loop of ``Engine.poll(batch)`` and
    ``Engine.complete_job`` on one connection, as a single worker process would without HTTP."""
    job_type = name = "bench-engine-inprocess"
    log(f"engine in-process: {n:,} one-step instances")
    start_instances(url, name, job_type, n)
    engine = open_engine(url)
    engine.db.autocommit(lambda conn: conn.execute("SELECT 1"))  # connect outside the timing
    window = CpuWindow()
    window.start()
    cpu0 = time.process_time()
    t0 = time.monotonic()
    done = polls = 0
    try:
        while done < n:
            claimed = engine.poll("bench-engine", [job_type], batch)
            polls += 1
            if not claimed:
                if time.monotonic() - t0 > timeout:
                    raise BenchError(f"engine in-process: {done}/{n} after {timeout:.0f}s")
                time.sleep(0.001)
                continue
            for job in claimed:
                engine.complete_job(job["id"], "bench-engine", RESULT)
            done += len(claimed)
        seconds = time.monotonic() - t0
        cpu = time.process_time() - cpu0
        window.stop()
    finally:
        engine.db.close()
    verify(url, name, job_type, n)
    result = InProcessDrain(n, polls, seconds, cpu, window)
    log(f"engine in-process: {result.per_second:,.0f} jobs/s")
    return result
