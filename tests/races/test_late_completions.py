"""Late completions with real concurrent workers: separate processes, each on its own connections
(``late_worker.py``). Late workers let their leases lapse and complete anyway, while other workers
claim the same jobs again (by poll, or by id as the outbox mode's workers do), heartbeat, complete
and fail them, and a reaper re-queues lapsed leases. Whatever interleaving happens, every job's
step is applied exactly once, by the completion the audit log names, the instance's output is that
completion's, no completion is ever refused, and nothing deadlocks."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import psycopg
import pytest
from baton.engine.service import Engine
from baton.store.db import Database

from tests.races.conftest import deadlocks
from tests.support.helpers import one_step, wait_until

ROOT = Path(__file__).resolve().parents[2]
RUN_SECONDS = 8.0
LATE_WORKERS, CURRENT_WORKERS = 3, 3
STARTS_PER_SECOND = 12


def _spawn(
    url: str, role: str, worker_id: str, job_type: str, seed: int, log: Path, how: str
) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "tests.races.late_worker", url, role, worker_id, job_type]
    cmd += [str(RUN_SECONDS), str(seed), str(log), how]
    return subprocess.Popen(cmd, cwd=ROOT, stderr=subprocess.PIPE)


def _applied(entry: dict[str, Any]) -> bool:
    a = entry["answer"]
    return a.get("applied") is True or a.get("outcome") == "APPLIED"


def _refused(entry: dict[str, Any]) -> bool:
    a = entry["answer"]
    return "refused" in a or a.get("outcome") == "CONFLICT"


@pytest.mark.parametrize("how", ["poll", "by-id"])
def test_late_completions_racing_reclaims_the_reaper_and_the_holders(
    database_url: str, tmp_path: Path, how: str
) -> None:
    before = deadlocks(database_url)
    job_type = f"late-{how}"
    db = Database.pooled(database_url, min_size=1, max_size=4)
    engine = Engine(db)
    engine.register_definition(
        one_step("late-race", job_type, responseTimeoutSeconds=1, retryCount=100)
    )
    started: list[str] = []
    stop = threading.Event()

    def start() -> None:  # a steady stream of fresh jobs for the whole run
        while not stop.is_set():
            started.append(engine.start_instance(definition_name="late-race")[0]["id"])
            stop.wait(1 / STARTS_PER_SECOND)

    starter = threading.Thread(target=start, name="starter")
    starter.start()
    logs = [tmp_path / f"w{k}.jsonl" for k in range(LATE_WORKERS + CURRENT_WORKERS + 1)]
    roles = ["late"] * LATE_WORKERS + ["current"] * CURRENT_WORKERS + ["reaper"]
    try:
        procs = [
            _spawn(database_url, role, f"{role}{k}", job_type, k, logs[k], how)
            for k, role in enumerate(roles)
        ]
        for p in procs:
            _, err = p.communicate(timeout=RUN_SECONDS + 60)
            assert p.returncode == 0, err.decode()[-3000:]
    finally:
        stop.set()
        starter.join()
    # What is left open is finished here, by a closer (its completions are recorded too).
    entries = [json.loads(line) for log in logs if log.exists() for line in log.open()]

    def close() -> bool:
        for j in engine.poll("closer", [job_type], 50):
            answer = engine.complete_job(
                j["id"], "closer", {"by": "closer", "attempt": j["attempt"]}, attempt=j["attempt"]
            )
            entries.append(
                {"w": "closer", "op": "complete", "job": j["id"], "attempt": j["attempt"]}
                | {"answer": answer}
            )
        with psycopg.connect(database_url) as conn:
            row = conn.execute("SELECT count(*) FROM instance WHERE status <> 'COMPLETED'")
            return row.fetchone() == (0,)

    wait_until(close, timeout=60, interval=0.2, what="every instance to complete")
    db.close()

    with psycopg.connect(database_url) as conn:
        completions = conn.execute(
            "SELECT job_id::text, count(*), min(detail::text)::jsonb FROM audit_log"
            " WHERE event = 'JOB_COMPLETED' GROUP BY job_id"
        ).fetchall()
        failed = Counter(
            dict(
                conn.execute(
                    "SELECT job_id::text, count(*) FROM audit_log WHERE event = 'JOB_FAILED'"
                    " GROUP BY job_id"
                ).fetchall()
            )
        )
        variables = dict(
            conn.execute(
                "SELECT j.id::text, i.variables FROM job j JOIN instance i ON i.id = j.instance_id"
            ).fetchall()
        )
    # Every job's step applied exactly once, with the output of the completion the audit names.
    assert len(variables) == len(started) > 0
    assert {job for job, _, _ in completions} == set(variables)
    assert [c for c in completions if c[1] != 1] == []
    by_job = {job: detail for job, _, detail in completions}
    for job, detail in by_job.items():
        assert variables[job] == {"by": detail["workerId"], "attempt": detail["attempt"]}, detail

    applied: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for e in entries:
        if e["op"] in ("complete", "complete-batch"):
            # A completion is applied or a repeat, never refused: late or not, the work counts.
            assert not _refused(e), e
            if _applied(e):
                applied[e["job"]].append(e)
        elif e["op"] == "heartbeat" and _refused(e):
            assert e["answer"]["refused"] in ("LeaseNotHeld", "AttemptNotCurrent"), e
    # A failure lands only when its answer says so (a refused one changes nothing).
    failures_applied = Counter(
        e["job"] for e in entries if e["op"] in ("fail", "fail-batch") and _applied(e)
    )
    assert failures_applied == failed
    # The one applied answer per job is the completion the audit log names.
    assert sorted(applied) == sorted(by_job)
    for job, answers in applied.items():
        assert len(answers) == 1, answers
        (e,) = answers
        assert (e["w"], e["attempt"]) == (by_job[job]["workerId"], by_job[job]["attempt"])
    late = [d for d in by_job.values() if d.get("late")]
    assert late, "no late completion happened: the race did not run"
    assert all(d["attempt"] < d["supersededAttempt"] for d in late)
    kinds = Counter(
        "late, superseding " + ("a holder" if d["supersededWorkerId"] else "a re-queued job")
        if d.get("late")
        else "on time"
        for d in by_job.values()
    )
    print(f"{len(by_job)} jobs: {dict(kinds)}; {len(entries)} answers")
    assert deadlocks(database_url) == before, "the race caused a deadlock"
