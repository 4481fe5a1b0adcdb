"""What a workflow costs on AWS, measured locally: real workloads through ``baton dev`` with real
SDK workers, every cost driver counted, priced with ``bench/prices.json`` (its date and region are
printed with every result), next to Step Functions Standard and Express.

    .venv/bin/python bench/cost.py            # about 3 minutes
    .venv/bin/python bench/cost.py --scale 0.2 --idle-seconds 10   # a quick look

``baton dev`` runs with ``BATON_USAGE_FILE`` (``baton.local.usage``), which counts at the seams the
local runtime has: API requests routed to a function, each Lambda invocation's duration rounded up
to 1 ms (billed at the memory the CDK app gives that function), and every S3/SQS call of its boto3
clients. The workers' own SQS calls (outbox mode) are counted on their client. PostgreSQL's CPU is
read from /proc (the postmaster, its live children and its reaped ones) and turned into Aurora
Serverless v2 ACU-seconds by the assumption stated in the price table. Scheduled functions loop
every minute whatever the load: they are in the fixed monthly floor, not in the per-workflow
figures. Workloads (each on its own definition):

- one-step, batched: starts in batches of 100 (``POST /v1/instances/batch``), results in batches
  (the SDK's default); the headline figure, priced behind the REST API and the HTTP API;
- one-step, unbatched: one start and one complete call per workflow (the baseline);
- PARALLEL of 10 and MAP of 100 (batched starts, batched results);
- a user task: batched starts, one ``user-tasks/.../complete`` call per workflow;
- outbox mode: one-step workflows dispatched through SQS FIFO (``BATON_DISPATCH_MODE=outbox``);
- an idle worker for ``--idle-seconds``: short polls, long polls (20 s), and the outbox mode's
  SQS long poll, scaled to a month.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from support import BenchError
from support.cost_model import (
    OUTBOX_ONLY,
    SECONDS_PER_MONTH,
    Usage,
    bill,
    fixed_floor,
    function_memory_mb,
    load_prices,
    step_functions,
)
from support.cpu import postmaster_pid, server_cpu_seconds
from support.postgres import fresh_database, postgres_server
from support.processes import DevServer, dev_server
from support.reporting import Progress, log, table

ROOT = Path(__file__).resolve().parents[1]
# jsii (the CDK app's configuration is read for each function's memory) prints an end-of-life
# banner under Node 20; it is noise here.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")


@dataclass(frozen=True, slots=True)
class Workload:
    name: str
    steps: list[dict[str, Any]]
    workflows: int
    jobs_each: int  # SERVICE_TASK jobs per workflow
    transitions: int  # Step Functions Standard states entered by the same workflow
    input: dict[str, Any]
    batched: bool = True
    user_task: bool = False
    outbox: bool = False


def _task(job_type: str, step_id: str = "work") -> dict[str, Any]:
    return {"id": step_id, "type": "SERVICE_TASK", "jobType": job_type}


def workloads(scale: float, job_type: str) -> list[Workload]:
    def n(x: int) -> int:
        return max(10, int(x * scale))

    parallel = {
        "id": "fan",
        "type": "PARALLEL",
        "branches": [[_task(job_type, f"b{i}")] for i in range(10)],
    }
    each = {"id": "each", "type": "MAP", "items": "${workflow.input.rows}", "maxConcurrency": 100}
    each["steps"] = [_task(job_type, "row")]
    return [
        Workload("one-step (batched)", [_task(job_type)], n(1000), 1, 2, {}),
        Workload("one-step (unbatched)", [_task(job_type)], n(300), 1, 2, {}, batched=False),
        Workload("PARALLEL of 10", [parallel], n(100), 10, 12, {}),
        Workload("MAP of 100", [each], n(10), 100, 102, {"rows": list(range(100))}),
        Workload(
            "user task", [{"id": "approve", "type": "USER_TASK"}], n(300), 0, 2, {}, user_task=True
        ),
        Workload("one-step, outbox mode", [_task(job_type)], n(500), 1, 2, {}, outbox=True),
    ]


# --- measuring ---------------------------------------------------------------------------------


def pg_cpu_seconds(postmaster: int) -> float:
    """CPU of the PostgreSQL server: the postmaster, its children alive now, and (cutime,
    cstime) the children it has reaped, so closed connections still count."""
    stat = Path(f"/proc/{postmaster}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    reaped = (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")
    return (server_cpu_seconds(postmaster) or 0.0) + reaped


class Meter:
    """Reads the server's usage file and PostgreSQL's CPU around a measured window."""

    def __init__(self, usage_file: Path, postmaster: int) -> None:
        self.usage_file, self.postmaster = usage_file, postmaster
        self.client_calls: Counter[str] = Counter()

    def read(self, newer_than: float = 0.0) -> dict[str, Any]:
        deadline = time.monotonic() + 10
        while True:
            try:
                doc: dict[str, Any] = json.loads(self.usage_file.read_text())
                if doc["at"] > newer_than:
                    return doc
            except (OSError, ValueError, KeyError):
                pass
            if time.monotonic() > deadline:
                raise BenchError(f"no usage written to {self.usage_file} (BATON_USAGE_FILE)")
            time.sleep(0.05)

    @contextmanager
    def window(self) -> Iterator[list[Usage]]:
        out: list[Usage] = []
        before, cpu0 = self.read(), pg_cpu_seconds(self.postmaster)
        calls0 = Counter(self.client_calls)
        yield out
        end = time.time()
        after, cpu1 = self.read(newer_than=end), pg_cpu_seconds(self.postmaster)
        calls = {k: v - calls0.get(k, 0) for k, v in self.client_calls.items()}
        out.append(Usage.between(before, after, cpu1 - cpu0).plus_client_calls(calls))

    def count_client(self, client: Any) -> None:
        def before_call(model: Any, **_: Any) -> None:
            self.client_calls[f"{model.service_model.service_name}.{model.name}"] += 1

        client.meta.events.register("before-call", before_call)


@contextmanager
def server(db_url: str, usage_file: Path, *, outbox: bool) -> Iterator[DevServer]:
    env = {"BATON_USAGE_FILE": str(usage_file), "BATON_DISPATCH_MODE": "outbox" if outbox else ""}
    with dev_server(db_url, env=env) as s:
        yield s


def _sqs(server: DevServer, meter: Meter) -> tuple[Any, str]:
    import boto3

    kept = json.loads((server.log_path.parent / "dispatch-queue.json").read_text())
    client = boto3.client(
        "sqs",
        endpoint_url=kept["endpoint"],
        region_name=kept.get("region") or "us-east-1",
        aws_access_key_id="baton-bench",
        aws_secret_access_key="baton-bench",
    )
    meter.count_client(client)
    return client, str(kept["queueUrl"])


def _runner(
    server: DevServer,
    meter: Meter,
    job_type: str,
    *,
    batched: bool,
    outbox: bool,
    long_poll_wait: float = 20.0,
) -> Any:
    from baton_worker import (
        BatonClient,
        InMemoryMetrics,
        Registry,
        Runner,
        RunnerOptions,
        SqsTransport,
    )

    registry = Registry()
    registry.handler(job_type)(lambda ctx: {"ok": True})
    client = BatonClient(server.url, api_key=server.api_key, max_connections=24)
    transport = None
    if outbox:
        sqs, queue = _sqs(server, meter)
        transport = SqsTransport(client, queue, sqs=sqs, wait_seconds=20)
    options = RunnerOptions(
        worker_id=f"cost-{uuid.uuid4().hex[:6]}",
        parallelism=16,
        max_jobs_per_poll=10,
        batch_results=batched,
        long_poll_wait=long_poll_wait,
    )
    metrics = InMemoryMetrics()
    return Runner(registry, client=client, options=options, metrics=metrics, transport=transport)


def run_workload(server: DevServer, meter: Meter, w: Workload, timeout: float) -> Usage:
    from baton_worker import BatonClient

    job_type = f"cost-{uuid.uuid4().hex[:8]}"
    slug = "".join(c if c.isalnum() else "-" for c in w.name.lower())
    name = f"cost-{slug}-{uuid.uuid4().hex[:6]}"
    steps = json.loads(json.dumps(w.steps).replace("JOBTYPE", job_type))
    for step in _walk(steps):
        if step.get("type") == "SERVICE_TASK":
            step["jobType"] = job_type
    client = BatonClient(server.url, api_key=server.api_key)
    client.register_definition({"name": name, "steps": steps})
    runner = _runner(server, meter, job_type, batched=w.batched, outbox=w.outbox)
    jobs = w.workflows * w.jobs_each
    log(f"{w.name}: {w.workflows:,} workflows ({jobs:,} jobs)")
    runner.start()
    try:
        with meter.window() as measured:
            ids = _start_all(client, name, w)
            if w.user_task:
                progress = Progress("user tasks completed", len(ids))
                for k, iid in enumerate(ids, 1):
                    client.complete_user_task(iid, "approve", variables={"ok": True})
                    progress.update(k)
            else:
                _wait(lambda: runner.metrics.jobs_completed[job_type], jobs, timeout, w.name)
    finally:
        runner.stop(timeout=30)
    done = client.search_instances(definition_name=name, status="COMPLETED", limit=1)
    if w.workflows and not done["instances"]:
        raise BenchError(f"{w.name}: no instance COMPLETED")
    client.close()
    return measured[0]


def _walk(steps: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for s in steps:
        yield s
        for branch in s.get("branches", []):
            yield from _walk(branch)
        yield from _walk(s.get("steps", []))


def _start_all(client: Any, name: str, w: Workload) -> list[str]:
    progress = Progress("workflows started", w.workflows)
    ids: list[str] = []
    if not w.batched:
        for k in range(w.workflows):
            ids.append(client.start_instance(name, input=w.input)["id"])
            progress.update(k + 1)
        return ids
    for k in range(0, w.workflows, 100):
        items = [
            client.start_request(name, input=w.input) for _ in range(min(100, w.workflows - k))
        ]
        results = client.start_instances(items)
        if bad := [r for r in results if r["outcome"] != "STARTED"]:
            raise BenchError(f"{w.name}: batch start refused {bad[:1]}")
        ids += [r["instance"]["id"] for r in results]
        progress.update(len(ids))
    return ids


def _wait(done: Callable[[], int], total: int, timeout: float, what: str) -> None:
    progress, deadline = Progress("jobs completed", total), time.monotonic() + timeout
    while (n := done()) < total:
        if time.monotonic() > deadline:
            raise BenchError(f"{what}: {n}/{total} jobs after {timeout:.0f}s")
        progress.update(n)
        time.sleep(0.05)
    progress.update(total)


def run_idle(server: DevServer, meter: Meter, mode: str, seconds: float) -> Usage:
    """A worker with nothing to do for ``seconds``: ``short`` polls, ``long`` polls or the
    outbox mode's SQS long poll."""
    job_type = f"idle-{uuid.uuid4().hex[:8]}"
    wait = 0.0 if mode == "short" else 20.0
    runner = _runner(
        server, meter, job_type, batched=True, outbox=mode == "outbox", long_poll_wait=wait
    )
    log(f"idle worker ({mode} polling) for {seconds:.0f}s")
    with meter.window() as measured:
        runner.start()
        stop = threading.Event()
        stop.wait(seconds)
        runner.stop(timeout=30)
    return measured[0]


# --- report ------------------------------------------------------------------------------------


def report(
    results: list[tuple[Workload, Usage, float]],
    idle: dict[str, tuple[Usage, float]],
    prices: dict[str, Any],
    memory: dict[str, int],
    context: dict[str, Any],
) -> None:
    from baton.routes import api_functions

    per_request = frozenset(api_functions())
    stamp = f"prices of {prices['date']}, {prices['region']} (bench/prices.json)"
    print(f"\n$ per million workflows, {stamp}")
    rows, parts = [], []
    for w, usage, _seconds in results:
        m = 1e6 / w.workflows
        rest = bill(usage, prices, memory, api_type="rest", per_request_functions=per_request)
        http = bill(usage, prices, memory, api_type="http", per_request_functions=per_request)
        # Express at its minimum duration (100 ms): a lower bound, whatever the workers take.
        standard, express = step_functions(w.transitions, 0.0, prices)
        calls = sum(usage.api_requests.values()) / w.workflows
        rows.append(
            [
                w.name,
                f"{calls:.2f}",
                f"{usage.pg_cpu_seconds * 1e6 / w.workflows:,.0f}",
                f"{rest.total * m:.2f}",
                f"{http.total * m:.2f}",
                f"{standard * 1e6:.2f}",
                f"{express * 1e6:.2f}",
            ]
        )
        parts.append((w.name, http, m, usage))
    print(
        table(
            [
                "workload",
                "API calls/wf",
                "PG CPU us/wf",
                "Baton REST",
                "Baton HTTP API",
                "SFN Standard",
                "SFN Express",
            ],
            rows,
        )
    )
    print(f"\nparts of the HTTP API figure ($ per million workflows; {stamp})")
    names = list(parts[0][1].lines)
    print(
        table(
            ["workload", *names],
            [[n, *(f"{v * m:.3f}" for v in b.lines.values())] for n, b, m, _ in parts],
        )
    )
    print("\ncounts per workflow (API requests by function; Lambda billed ms; SQS/S3 calls)")
    for n, _, m, u in parts:
        per = {f: round(v / (1e6 / m), 3) for f, v in u.api_requests.items()}
        ms = {f: round(v / (1e6 / m), 2) for f, v in u.billed_ms.items() if f in per_request}
        aws = {k: round(v / (1e6 / m), 3) for k, v in u.aws_requests.items()}
        print(f"  {n}: requests {per}; billed ms {ms}; aws {aws}")
    print(f"\nan idle worker, per month ({stamp})")
    idle_rows = []
    for mode, (usage, seconds) in idle.items():
        scale = SECONDS_PER_MONTH / seconds
        for api_type in ("rest", "http"):
            b = bill(usage, prices, memory, api_type=api_type, per_request_functions=per_request)
            marginal = b.total - b.lines["Aurora ACU"]
            idle_rows.append(
                [
                    f"{mode} polling",
                    api_type.upper(),
                    f"{sum(usage.api_requests.values()) * scale:,.0f}",
                    f"{_sqs_calls(usage) * scale:,.0f}",
                    f"{marginal * scale:.2f}",
                ]
            )
    print(
        table(
            [
                "worker",
                "API",
                "API requests/month",
                "SQS requests/month",
                "$/month (besides the floor)",
            ],
            idle_rows,
        )
    )
    floor = fixed_floor(prices, context)
    print(f"\nfixed monthly floor (no traffic; cdk.json context; {stamp})")
    base = sum(v for k, v in floor.items() if not k.startswith(OUTBOX_ONLY))
    rows = [[k, f"{v:.2f}"] for k, v in floor.items()]
    rows.append(["total, polling mode", f"{base:.2f}"])
    rows.append(["total, outbox mode", f"{sum(floor.values()):.2f}"])
    print(table(["item", "$/month"], rows))
    sys.stdout.flush()


def _sqs_calls(usage: Usage) -> int:
    return sum(v for k, v in usage.aws_requests.items() if k.startswith("sqs."))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--scale", type=float, default=1.0, help="workflows per workload x this")
    p.add_argument("--idle-seconds", type=float, default=30.0, help="each idle phase's length")
    p.add_argument("--timeout", type=float, default=600.0, help="per workload")
    p.add_argument("--database-url", default=None, help="a PostgreSQL server (default: embedded)")
    args = p.parse_args(argv)
    prices = load_prices()
    log(f"price table: {prices['date']}, {prices['region']}")
    memory = function_memory_mb()
    context = json.loads((ROOT / "cdk.json").read_text())["context"]
    results: list[tuple[Workload, Usage, float]] = []
    idle: dict[str, tuple[Usage, float]] = {}
    with postgres_server(args.database_url) as pg_url, tempfile.TemporaryDirectory() as tmp:
        postmaster = postmaster_pid(pg_url)
        if postmaster is None:
            raise BenchError("PostgreSQL must run on this machine (its CPU is read from /proc)")
        for outbox in (False, True):
            with fresh_database(pg_url, "cost") as db_url:
                usage_file = Path(tmp) / f"usage-{outbox}.json"
                with server(db_url, usage_file, outbox=outbox) as s:
                    meter = Meter(usage_file, postmaster)
                    for w in workloads(args.scale, "JOBTYPE"):
                        if w.outbox != outbox:
                            continue
                        t0 = time.perf_counter()
                        usage = run_workload(s, meter, w, args.timeout)
                        results.append((w, usage, time.perf_counter() - t0))
                    for mode in ("outbox",) if outbox else ("short", "long"):
                        idle[mode] = (
                            run_idle(s, meter, mode, args.idle_seconds),
                            args.idle_seconds,
                        )
    report(results, idle, prices, memory, context)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
