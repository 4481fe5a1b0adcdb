"""A worker process for the late-completion races, on the engine over its own connections.

Roles:

- ``late``: claims jobs, lets their leases lapse (the job is claimed again or re-queued
  meanwhile), then completes them anyway: with its attempt number, or with its worker id only,
  one result at a time or in batches; sometimes it sends a result twice.
- ``current``: claims jobs (the poll's claim, or the claim by id as the outbox mode's workers
  do) and, for each, heartbeats, completes or fails (retryable) after a short while.
- ``reaper``: turns lapsed leases into new attempts, as the sweeper does.

Every answer is one JSON line ``{w, op, job, attempt, answer}`` (``answer`` the response, or
``{"refused": <error type>}`` for a 409), written with one ``os.write`` on an ``O_APPEND``
descriptor. Each completion's output is ``{"by": <worker>, "attempt": <attempt it ran>}``.

Run: ``python -m tests.races.late_worker DATABASE_URL ROLE WORKER_ID JOB_TYPE SECONDS SEED LOG
[claim]`` (``claim``: ``poll`` or ``by-id``).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import sys
import time
from datetime import datetime
from typing import Any

from baton.engine.batch_ops import BatchResult, Failure
from baton.engine.service import Engine
from baton.errors import Conflict
from baton.settings import EngineSettings
from baton.store.db import Database

FIND_CLAIMABLE = """
SELECT id, attempt FROM job
 WHERE job_type = %(job_type)s AND status = 'UNLOCKED' AND run_at <= now()
 ORDER BY random() LIMIT 4
"""


class Worker:
    def __init__(self, url: str, worker_id: str, job_type: str, seed: int, log: str) -> None:
        self.db = Database.pooled(url, min_size=1, max_size=2)
        # Half the workers keep their claims' states (engine.claimed), half decide on reads.
        self.engine = Engine(self.db, EngineSettings(claimed_states=4096 if seed % 2 else 0))
        self.worker_id = worker_id
        self.job_type = job_type
        self.rng = random.Random(seed)
        self._fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def record(self, op: str, job: str, attempt: int | None, answer: Any) -> None:
        line = {"w": self.worker_id, "op": op, "job": job, "attempt": attempt, "answer": answer}
        os.write(self._fd, (json.dumps(line) + "\n").encode())

    def call(self, op: str, job: dict[str, Any], attempt: int | None, fn: Any) -> Any:
        try:
            answer = fn()
        except Conflict as e:
            answer = {"refused": type(e).__name__, "detail": e.detail}
        self.record(op, job["id"], attempt, answer)
        return answer

    def output(self, job: dict[str, Any]) -> dict[str, Any]:
        return {"by": self.worker_id, "attempt": job["attempt"]}

    def claim(self, how: str, max_jobs: int) -> list[dict[str, Any]]:
        if how == "poll":
            return self.engine.poll(self.worker_id, [self.job_type], max_jobs)
        rows = self.db.autocommit(
            lambda c: c.execute(FIND_CLAIMABLE, {"job_type": self.job_type}).fetchall()
        )
        jobs = []
        for r in rows[:max_jobs]:
            with contextlib.suppress(Conflict):  # taken meanwhile, or done: a duplicate delivery
                jobs.append(
                    self.engine.claim_job(str(r["id"]), self.worker_id, attempt=r["attempt"])
                )
        return jobs

    # --- roles ---------------------------------------------------------------------------

    def late(self, until: float, how: str) -> None:
        while time.monotonic() < until:
            jobs = self.claim(how, 4)
            if not jobs:
                time.sleep(0.02)
                continue
            lapse = max(0.0, max(_epoch(j["lockExpiresAt"]) for j in jobs) - time.time())
            # Silent past the lease, then a little more: the job is claimed again, or waits.
            time.sleep(lapse + self.rng.uniform(0.0, 0.6))
            if self.rng.random() < 0.3:
                self.late_batch(jobs)
            else:
                for j in jobs:
                    self.late_single(j)

    def late_single(self, job: dict[str, Any]) -> None:
        attempt = job["attempt"] if self.rng.random() < 0.7 else None
        for _ in range(2 if self.rng.random() < 0.2 else 1):  # sometimes re-sent
            self.call(
                "complete",
                job,
                job["attempt"],
                lambda: self.engine.complete_job(
                    job["id"], self.worker_id, self.output(job), attempt=attempt
                ),
            )

    def late_batch(self, jobs: list[dict[str, Any]]) -> None:
        items = [
            BatchResult(j["id"], self.worker_id, j["attempt"], output=self.output(j)) for j in jobs
        ]
        answers = self.engine.complete_batch(items)
        for j, a in zip(jobs, answers, strict=True):
            self.record("complete-batch", j["id"], j["attempt"], a)

    def current(self, until: float, how: str) -> None:
        while time.monotonic() < until:
            jobs = self.claim(how, 2)
            if not jobs:
                time.sleep(0.01)
                continue
            results = [r for r in (self.work(j) for j in jobs) if r is not None]
            if len(results) > 1 and self.rng.random() < 0.3:
                answers = self.engine.complete_batch([item for _, item in results])
                for (job, item), a in zip(results, answers, strict=True):
                    op = "complete-batch" if item.failure is None else "fail-batch"
                    self.record(op, job["id"], job["attempt"], a)
                continue
            for job, item in results:
                self.send(job, item)

    def work(self, job: dict[str, Any]) -> tuple[dict[str, Any], BatchResult] | None:
        """Heartbeat a few times (stopping when refused), then the result to send."""
        jid, n = job["id"], job["attempt"]
        for _ in range(self.rng.randrange(3)):
            time.sleep(self.rng.uniform(0.0, 0.15))
            answer = self.call(
                "heartbeat", job, n, lambda: self.engine.heartbeat(jid, self.worker_id, attempt=n)
            )
            if "refused" in answer:
                return None  # superseded (or timed out): stop
        time.sleep(self.rng.uniform(0.0, 0.2))
        if self.rng.random() < 0.15:
            return job, BatchResult(jid, self.worker_id, n, failure=Failure("flaky", True))
        return job, BatchResult(jid, self.worker_id, n, output=self.output(job))

    def send(self, job: dict[str, Any], item: BatchResult) -> None:
        if item.failure is not None:
            self.call(
                "fail",
                job,
                item.attempt,
                lambda: self.engine.fail_job(
                    item.job_id, self.worker_id, "flaky", True, attempt=item.attempt
                ),
            )
            return
        self.call(
            "complete",
            job,
            item.attempt,
            lambda: self.engine.complete_job(
                item.job_id, self.worker_id, item.output, attempt=item.attempt
            ),
        )

    def reaper(self, until: float) -> None:
        while time.monotonic() < until:
            self.engine.reap_expired_leases()
            time.sleep(self.rng.uniform(0.0, 0.2))


def _epoch(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def main() -> None:
    url, role, worker_id, job_type, seconds, seed, log = sys.argv[1:8]
    how = sys.argv[8] if len(sys.argv) > 8 else "poll"
    worker = Worker(url, worker_id, job_type, int(seed), log)
    until = time.monotonic() + float(seconds)
    try:
        if role == "late":
            worker.late(until, how)
        elif role == "current":
            worker.current(until, how)
        else:
            worker.reaper(until)
    finally:
        worker.db.close()


if __name__ == "__main__":
    main()
