"""Handler overhead and cold import cost of the Lambda functions.

1. Warm handler time per poll and per complete, in process (API Gateway event in, response out),
   minus the time spent waiting on the database, next to the same engine calls made directly.
   The difference is the glue: Powertools routing, body validation, JSON, logging, metrics.
2. Cold import time of each function module with .pyc present (``python -X importtime``).

Targets (issue 3): <= 1.5 ms handler overhead per request; <= 350 ms cold import for ``jobs``.
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import importlib.util
import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from support import ROOT
from support.library import open_engine
from support.postgres import fresh_database, postgres_server
from support.reporting import log, table
from support.workload import one_step

FUNCTIONS = ("definitions", "instances", "jobs", "queues", "reaper", "sweeper", "queue_dispatcher")


class DbClock:
    """Accumulates the time psycopg spends waiting on the server (all round trips)."""

    def __init__(self) -> None:
        import psycopg

        self.seconds = 0.0
        original = psycopg.Connection.wait
        clock = self

        def wait(conn: Any, gen: Any, *args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return original(conn, gen, *args, **kwargs)
            finally:
                clock.seconds += time.perf_counter() - t0

        psycopg.Connection.wait = wait  # type: ignore[method-assign]


def load(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(
        f"fn_{name}", ROOT / "functions" / name / "handler.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def event(path: str, body: dict[str, Any]) -> dict[str, Any]:
    ev: dict[str, Any] = json.loads((ROOT / "tests" / "events" / "rest_api_proxy.json").read_text())
    ev.update(
        resource=path, path=path, httpMethod="POST", pathParameters=None, body=json.dumps(body)
    )
    ev["requestContext"].update(httpMethod="POST", resourcePath=path)
    return ev


class Ctx:
    function_name = "bench"
    function_version = "$LATEST"
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:bench"
    memory_limit_in_mb = 512
    aws_request_id = "bench"
    log_group_name = "bench"
    log_stream_name = "bench"

    def get_remaining_time_in_millis(self) -> int:
        return 30_000


def timed(clock: DbClock, call: Callable[[], Any]) -> tuple[float, float]:
    db0 = clock.seconds
    t0 = time.perf_counter()
    call()
    total = time.perf_counter() - t0
    return total, clock.seconds - db0


def measure_overhead(n: int) -> list[list[str]]:
    os.environ["POWERTOOLS_METRICS_NAMESPACE"] = "BatonBench"
    os.environ["POWERTOOLS_LOG_LEVEL"] = "WARNING"
    clock = DbClock()
    with postgres_server(None) as server, fresh_database(server, "handler") as url:
        os.environ["DATABASE_URL"] = url
        engine = open_engine(url)
        engine.register_definition(one_step("b", "b"))
        log(f"starting {2 * n} instances")
        for _ in range(2 * n):
            engine.start_instance(definition_name="b", input={"order": 1, "sku": "A-1"})
        jobs = load("jobs")
        samples: dict[str, list[tuple[float, float]]] = {
            k: [] for k in ("engine poll", "engine complete", "handler poll", "handler complete")
        }
        log(f"measuring {n} poll+complete pairs each way")
        for i in range(n):
            holder: dict[str, Any] = {}

            def direct_poll(h: dict[str, Any] = holder) -> None:
                h["job"] = engine.poll("direct", ["b"], 1)[0]

            samples["engine poll"].append(timed(clock, direct_poll))
            job_id = holder["job"]["id"]
            samples["engine complete"].append(
                timed(clock, lambda j=job_id: engine.complete_job(j, "direct", {"ok": True}))
            )

            def handler_poll(h: dict[str, Any] = holder) -> None:
                r = jobs.handler(
                    event("/v1/jobs/poll", {"workerId": "h", "jobTypes": ["b"]}), Ctx()
                )
                h["job"] = json.loads(r["body"])["jobs"][0]

            samples["handler poll"].append(timed(clock, handler_poll))
            job_id = holder["job"]["id"]
            body = {"jobId": job_id, "workerId": "h", "variablesToSet": {"ok": True}}
            samples["handler complete"].append(
                timed(clock, lambda b=body: jobs.handler(event("/v1/jobs/complete", b), Ctx()))
            )
            if i and i % max(1, n // 5) == 0:
                log(f"  {i}/{n}")
        engine.db.close()
    rows = []
    med = {k: statistics.median(t - db for t, db in v) * 1000 for k, v in samples.items()}
    for k, v in samples.items():
        rows.append(
            [
                k,
                f"{statistics.median(t for t, _ in v) * 1000:.3f}",
                f"{statistics.median(db for _, db in v) * 1000:.3f}",
                f"{med[k]:.3f}",
            ]
        )
    rows.append(["glue overhead poll", "", "", f"{med['handler poll'] - med['engine poll']:.3f}"])
    rows.append(
        [
            "glue overhead complete",
            "",
            "",
            f"{med['handler complete'] - med['engine complete']:.3f}",
        ]
    )
    return rows


def cold_imports() -> list[list[str]]:
    compileall.compile_dir(ROOT / "shared", quiet=1)
    compileall.compile_dir(ROOT / "functions", quiet=1)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    rows = []
    for name in FUNCTIONS:
        code = f"import sys; sys.path.insert(0, {str(ROOT / 'functions' / name)!r}); import handler"
        best = None
        for _ in range(3):
            out = subprocess.run(
                [sys.executable, "-X", "importtime", "-c", code],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            ).stderr
            m = re.search(r"\|\s+(\d+)\s+\|\s+handler\s*$", out, re.M)
            assert m, out[-500:]
            us = int(m.group(1))
            best = us if best is None else min(best, us)
        assert best is not None
        rows.append([name, f"{best / 1000:.0f}"])
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300)
    args = parser.parse_args()
    # EMF metric lines go to stdout in Lambda; here they would drown the table.
    with open(os.devnull, "w") as devnull, contextlib.redirect_stdout(devnull):
        overhead = measure_overhead(args.requests)
    print()
    print(table(["median per request", "total ms", "db wait ms", "python ms"], overhead))
    print()
    log("cold imports (best of 3, .pyc present)")
    print(table(["function", "cold import ms"], cold_imports()))


if __name__ == "__main__":
    main()
