"""Payload offload: start and drain N workflows whose input and output are 1 MB each, through
``baton dev`` and the Python SDK, once with everything inline and once offloaded to the local S3.

    .venv/bin/python bench/payload_offload.py --instances 200

Each phase has its own database and its own ``baton dev``:

1. inline: the soft limits are raised to 3 MB, so 1 MB inputs and outputs travel in the API's
   bodies and the database's rows (polls then carry at most ~4 jobs: the 5 MB poll budget).
2. offloaded: the default 256 KB soft limits: ``start_instance`` uploads each input through a
   presigned PUT, the engine offloads each step input (the job carries a presigned GET), the
   runner downloads it and uploads its 1 MB output.

Printed per phase: instances started/s (N sequential starts from one client) and the drain time
of one ``Runner`` (parallelism 4) until all N are COMPLETED. The S3 here is moto in the server's
process, so the offloaded numbers include its CPU; against real S3 latency differs.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Any

from support import BenchError
from support.postgres import fresh_database, postgres_server, server_summary
from support.processes import DevServer, dev_server
from support.reporting import log, table

LIMIT_VARS = (
    "BATON_WORKFLOW_INPUT_SOFT_LIMIT_BYTES",
    "BATON_STEP_INPUT_SOFT_LIMIT_BYTES",
    "BATON_STEP_OUTPUT_SOFT_LIMIT_BYTES",
)
MB = 1_000_000


@contextlib.contextmanager
def soft_limits(value: str | None) -> Iterator[None]:
    """The soft limits ``baton dev`` starts with (it copies this process's environment)."""
    saved = {k: os.environ.get(k) for k in LIMIT_VARS}
    for k in LIMIT_VARS:
        if value is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = value
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def phase(name: str, server: DevServer, n: int, timeout: float) -> dict[str, Any]:
    from baton_worker import BatonClient, InMemoryMetrics, Registry, Runner, RunnerOptions

    job_type = f"bench-{name}"
    doc = "d" * MB
    out = "o" * MB
    with BatonClient(server.url, api_key=server.api_key) as client:
        client.register_definition(
            {
                "name": job_type,
                "steps": [
                    {
                        "id": "work",
                        "type": "SERVICE_TASK",
                        "jobType": job_type,
                        "input": {"doc": "${workflow.input.doc}"},
                    }
                ],
            }
        )
        started = time.perf_counter()
        ids = [client.start_instance(job_type, input={"doc": doc})["id"] for _ in range(n)]
        start_s = time.perf_counter() - started
        log(f"{name}: {n} instances started in {start_s:.1f}s")

        registry = Registry()

        @registry.handler(job_type)
        def work(ctx: Any) -> dict[str, Any]:
            if len(ctx.input["doc"]) != MB:
                raise ValueError("input did not round-trip")
            return {"result": out}

        metrics = InMemoryMetrics()
        runner = Runner(
            registry,
            url=server.url,
            api_key=server.api_key,
            metrics=metrics,
            options=RunnerOptions(
                worker_id=f"bench-{name}", parallelism=4, poll_interval=0.05, max_poll_interval=0.2
            ),
        )
        began = time.perf_counter()
        runner.start()
        try:
            while metrics.jobs_completed[job_type] < n:
                if metrics.jobs_failed[job_type] or metrics.outcomes_unreported[job_type]:
                    raise BenchError(f"{name}: failures: {metrics.snapshot()}")
                if time.perf_counter() - began > timeout:
                    raise BenchError(f"{name}: {metrics.jobs_completed[job_type]}/{n} in time")
                time.sleep(0.02)
            drain_s = time.perf_counter() - began
        finally:
            runner.stop(timeout=60)
        statuses = {client.get_instance(i, include_steps=False)["status"] for i in ids}
        if statuses != {"COMPLETED"}:
            raise BenchError(f"{name}: instances ended {statuses}")
    log(f"{name}: drained in {drain_s:.1f}s")
    return {"name": name, "start_s": start_s, "drain_s": drain_s, "n": n}


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--instances", type=int, default=200)
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("--database-url", default=os.environ.get("DATABASE_URL"))
    args = p.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    results = []
    try:
        with postgres_server(args.database_url) as pg:
            log(server_summary(pg))
            for name, limit in (("inline", str(3 * 1024 * 1024)), ("offloaded", None)):
                with soft_limits(limit), fresh_database(pg, name) as url, dev_server(url) as srv:
                    results.append(phase(name, srv, args.instances, args.timeout))
    except BenchError as e:
        print(f"FAIL: {e}", file=sys.stderr, flush=True)
        return 1
    rows = [
        [
            r["name"],
            f"{r['n'] / r['start_s']:.1f}",
            f"{r['drain_s']:.1f}",
            f"{r['n'] / r['drain_s']:.1f}",
        ]
        for r in results
    ]
    print(table(["phase", "starts/s", "drain s", "workflows/s drained"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
