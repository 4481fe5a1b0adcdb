"""A worker process for the chaos test: polls, works a few milliseconds, completes with
``{"by": <worker id>, "job": <job id>}``, and records every HTTP exchange as one JSON line.

Each line is written with a single ``os.write`` on an ``O_APPEND`` descriptor, so it reaches the
file before the next request is sent and survives the SIGKILL the test may send at any moment.
On a 503 the worker waits ``Retry-After`` (capped) and tries again, as a well-behaved client
does; any other refusal of a completion is recorded and the job left to the engine.

Run: ``python -m tests.chaos.worker URL API_KEY JOB_TYPE WORKER_ID LOG_PATH MAX_JOBS SEED``.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import time
from typing import Any

import httpx

POLL_BATCH = 5
IDLE_SLEEP_SECONDS = 0.05
MAX_RETRY_AFTER_SECONDS = 1.0
COMPLETE_ATTEMPTS = 60
HTTP_TIMEOUT_SECONDS = 30.0


class Recorder:
    def __init__(self, path: str, worker_id: str) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._worker_id = worker_id

    def __call__(self, **fields: Any) -> None:
        line = json.dumps({"w": self._worker_id, "t": time.time(), **fields}) + "\n"
        os.write(self._fd, line.encode())


class Worker:
    def __init__(self, url: str, api_key: str, job_type: str, worker_id: str, log: str) -> None:
        self.client = httpx.Client(
            base_url=url, headers={"x-api-key": api_key}, timeout=HTTP_TIMEOUT_SECONDS
        )
        self.job_type = job_type
        self.worker_id = worker_id
        self.record = Recorder(log, worker_id)
        self.stopping = False

    def call(self, op: str, path: str, body: dict[str, Any], job: str | None = None) -> Any:
        """POST until the answer is not a 503; every answer is recorded. None if refused."""
        for _ in range(COMPLETE_ATTEMPTS):
            try:
                r = self.client.post(path, json=body)
            except httpx.TransportError as e:
                self.record(op=op, job=job, status=0, error=f"{type(e).__name__}: {e}")
                time.sleep(0.1)
                continue
            retry_after = r.headers.get("retry-after")
            entry: dict[str, Any] = {
                "op": op,
                "job": job,
                "status": r.status_code,
                "retry_after": retry_after,
                "ctype": r.headers.get("content-type"),
            }
            if r.status_code == 200 and op == "complete":
                answer = r.json()
                # The job the answer is about: another job's answer means crossed requests.
                entry["applied"], entry["answered_job"] = answer.get("applied"), answer.get("jobId")
            elif r.status_code >= 300:
                entry["body"] = r.text[:500]
            self.record(**entry)
            if r.status_code == 503:
                time.sleep(min(float(retry_after or 1), MAX_RETRY_AFTER_SECONDS))
                continue
            return r.json() if r.status_code == 200 else None
        return None

    def run(self, max_jobs: int, rng: random.Random) -> None:
        done = 0
        while done < max_jobs and not self.stopping:
            body = {"workerId": self.worker_id, "jobTypes": [self.job_type], "maxJobs": POLL_BATCH}
            answer = self.call("poll", "/v1/jobs/poll", body)
            jobs = (answer or {}).get("jobs", [])
            if not jobs:
                time.sleep(IDLE_SLEEP_SECONDS)
                continue
            self.record(op="claimed", jobs=[j["id"] for j in jobs])
            for job in jobs:
                time.sleep(rng.uniform(0.001, 0.005))  # the work
                self.record(op="complete-sent", job=job["id"])
                self.call(
                    "complete",
                    "/v1/jobs/complete",
                    {
                        "jobId": job["id"],
                        "workerId": self.worker_id,
                        "variablesToSet": {"by": self.worker_id, "job": job["id"]},
                    },
                    job=job["id"],
                )
                done += 1


def main(argv: list[str]) -> int:
    url, api_key, job_type, worker_id, log, max_jobs, seed = argv
    worker = Worker(url, api_key, job_type, worker_id, log)

    def stop(*_: object) -> None:
        worker.stopping = True

    signal.signal(signal.SIGTERM, stop)
    worker.record(op="started", pid=os.getpid())
    worker.run(int(max_jobs), random.Random(int(seed)))
    worker.record(op="exited")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
