"""Jobs/s through the local HTTP server (``baton dev``), next to the same drain in-process through
the engine library, on the same database server in one run.

Three HTTP drains: plain HTTP pollers in separate processes (keep-alive, ``maxJobs`` 32, one
complete per job: the server side alone), and the Python SDK's ``Runner`` in separate processes as
a user runs it (results flushed in batches through ``POST /v1/jobs/complete-batch``, polls
prefetching beyond the running jobs), on one-step workflows and on the items of MAPs of 100. Then
two in-process drains through the library with one worker and prepared statements: one complete per
job, and ``complete_batch`` per claim. The last lines print each HTTP drain's ratio to the in-
process drain that does the same work.
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

MAP_ITEMS = 100


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


def _sdk_worker(
    url: str, key: str, job_type: str, db_url: str, start: Any, out: Any, k: int, ppid: int
) -> None:
    def body() -> None:
        import psycopg
        from baton_worker import BatonClient, InMemoryMetrics, Registry, Runner, RunnerOptions

        registry = Registry()
        registry.handler(job_type)(lambda ctx: {"ok": True})
        metrics = InMemoryMetrics()
        client = BatonClient(url, api_key=key, max_connections=40)
        options = RunnerOptions(
            worker_id=f"sdk{k}",
            parallelism=16,
            max_jobs_per_poll=32,
            poll_interval=0.01,
            max_poll_interval=0.05,
        )
        runner = Runner(registry, client=client, options=options, metrics=metrics)
        wait_for(start, ppid)
        runner.start()
        with psycopg.connect(db_url, autocommit=True) as conn:
            while True:
                time.sleep(0.02)
                # Is any job still open? One probe of the claim's and the reaper's partial
                # indexes: counting the jobs (the whole table, or even just the open ones)
                # every 20 ms cost Postgres a good part of the CPU of the drain it watched.
                row = conn.execute(
                    "SELECT EXISTS (SELECT 1 FROM job"
                    " WHERE job_type = %s AND status IN ('UNLOCKED', 'LOCKED'))",
                    (job_type,),
                ).fetchone()
                if row is not None and not row[0]:
                    break
        runner.stop(timeout=60)
        client.close()
        out.put(("done", k, metrics.jobs_completed[job_type]))

    worker_entry(body, out, k)


def main() -> None:
    parser = argparse.ArgumentParser(description="jobs/s through the local HTTP server")
    parser.add_argument("--jobs", type=int, default=3000)
    parser.add_argument("--pollers", type=int, default=4)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--sdk-workers", type=int, default=2, help="SDK runner processes")
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
            sdk_type = sdk_name = "bench-http-sdk"
            start_instances(url, sdk_name, sdk_type, args.jobs)
            log(f"{args.sdk_workers} SDK runner processes drain {args.jobs:,} jobs")
            sdk = (dev.url, dev.api_key, sdk_type, url)
            sdk_counts, sdk_seconds = run_together(
                _sdk_worker, [sdk] * args.sdk_workers, "sdk-runner", timeout=900
            )
            verify(url, sdk_name, sdk_type, args.jobs)
            sdk_total = sum(sdk_counts)
            # Each runner notices the end within 20 ms (its check interval).
            sdk_rate = rate(sdk_total, sdk_seconds - 0.02)
            # Fan-out: the same runners on the items of MAPs of 100 (a batch of results is
            # mostly one instance's, decided together).
            map_type = map_name = "bench-http-map"
            maps = max(1, args.jobs // MAP_ITEMS)
            start_instances(url, map_name, map_type, maps, items=MAP_ITEMS)
            log(f"{args.sdk_workers} SDK runner processes drain {maps} MAPs of {MAP_ITEMS}")
            fan = (dev.url, dev.api_key, map_type, url)
            map_counts, map_seconds = run_together(
                _sdk_worker, [fan] * args.sdk_workers, "sdk-runner-map", timeout=900
            )
            verify(url, map_name, map_type, maps, jobs=maps * MAP_ITEMS)
            map_total = sum(map_counts)
            map_rate = rate(map_total, map_seconds - 0.02)
        engine = drain_in_process(url, args.jobs, batch=args.batch, timeout=600)
        batched = drain_in_process(url, args.jobs, batch=args.batch, timeout=600, batched=True)
    print()
    print(
        table(
            ["path", "jobs", "jobs/s"],
            [
                [f"HTTP, {args.pollers} pollers", f"{total:,}", fmt_num(http_rate)],
                [
                    f"HTTP, SDK runner x{args.sdk_workers} (batched results, prefetch)",
                    f"{sdk_total:,}",
                    fmt_num(sdk_rate),
                ],
                [
                    f"HTTP, SDK runner x{args.sdk_workers}, items of MAPs of {MAP_ITEMS}",
                    f"{map_total:,}",
                    fmt_num(map_rate),
                ],
                ["in-process engine, 1 worker", f"{args.jobs:,}", fmt_num(engine.per_second)],
                [
                    "in-process engine, 1 worker, complete_batch",
                    f"{args.jobs:,}",
                    fmt_num(batched.per_second),
                ],
            ],
        )
    )
    print(f"http/in-process ratio: {http_rate / engine.per_second:.2f}")
    print(f"sdk-over-http/in-process batched ratio: {sdk_rate / batched.per_second:.2f}")


if __name__ == "__main__":
    main()
