"""Jobs/s through the local HTTP server (``baton dev``) with several concurrent pollers, next to
the same drain in-process through the engine library, on the same database server in one run.

Pollers are plain HTTP clients in separate processes (keep-alive, ``maxJobs`` 32, one complete per
job), so the figure measures the server side: HTTP, the API Gateway event, the Lambda handler and
the engine. The last line prints the ratio.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from support import BenchError
from support.postgres import fresh_database, postgres_server
from support.processes import dev_server, run_together, wait_for, worker_entry
from support.reporting import fmt_num, log, rate, table
from support.workload import drain_in_process, start_instances, verify


def _poller(
    url: str, key: str, job_type: str, batch: int, start: Any, out: Any, k: int, ppid: int
) -> None:
    def body() -> None:
        import httpx

        wait_for(start, ppid)
        done = 0
        with httpx.Client(base_url=url, headers={"x-api-key": key}, timeout=30) as client:
            empty = 0
            while empty < 5:
                jobs = client.post(
                    "/v1/jobs/poll",
                    json={"workerId": f"p{k}", "jobTypes": [job_type], "maxJobs": batch},
                ).json()["jobs"]
                if not jobs:
                    empty += 1
                    time.sleep(0.01)
                    continue
                empty = 0
                for j in jobs:
                    r = client.post(
                        "/v1/jobs/complete", json={"jobId": j["id"], "workerId": f"p{k}"}
                    )
                    if r.status_code != 200 or not r.json()["applied"]:
                        raise BenchError(f"complete failed: {r.status_code} {r.text}")
                    done += 1
        out.put(("done", k, done))

    worker_entry(body, out, k)


def main() -> None:
    parser = argparse.ArgumentParser(description="jobs/s through the local HTTP server")
    parser.add_argument("--jobs", type=int, default=3000)
    parser.add_argument("--pollers", type=int, default=4)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--database-url", default=None)
    args = parser.parse_args()
    with postgres_server(args.database_url) as server, fresh_database(server, "http") as url:
        with dev_server(url) as dev:
            job_type = name = "bench-http"
            start_instances(url, name, job_type, args.jobs)
            log(f"{args.pollers} HTTP pollers drain {args.jobs:,} jobs")
            poller = (dev.url, dev.api_key, job_type, args.batch)
            counts, seconds = run_together(
                _poller, [poller] * args.pollers, "http-poller", timeout=900
            )
            total = sum(counts)
            verify(url, name, job_type, args.jobs)
            # The pollers stop after 5 empty polls: their sleeps are taken off the time.
            http_rate = rate(total, seconds - 5 * 0.01)
        engine = drain_in_process(url, args.jobs, batch=args.batch, timeout=600)
    print()
    print(
        table(
            ["path", "jobs", "jobs/s"],
            [
                [f"HTTP, {args.pollers} pollers", f"{total:,}", fmt_num(http_rate)],
                ["in-process engine, 1 worker", f"{args.jobs:,}", fmt_num(engine.per_second)],
            ],
        )
    )
    print(f"http/in-process ratio: {http_rate / engine.per_second:.2f}")


if __name__ == "__main__":
    main()
