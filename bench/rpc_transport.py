"""The RPC transport against REST on one ``baton dev``, in one run: pollers that poll and complete
each poll's jobs with one complete-batch, over the Connect protocol (binary protobuf) and over
REST JSON. Prints request bytes per job, jobs/s and the server's CPU per job for each, their
ratios; then the cold import of the rpc function next to the jobs function's (fresh interpreters,
median of several) and the Lambda layer's unzipped size (with protobuf's share).

Usage: ``python bench/rpc_transport.py [--jobs 3000] [--pollers 4] [--batch 32] [--rounds 2]``
Each wire drains ``--jobs`` jobs ``--rounds`` times, the wires in turns, after a warm-up drain
over each. ``--layer-dir``: a built layer, default ``layers/build`` (``make layer`` builds it).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from support import BenchError
from support.postgres import fresh_database, postgres_server
from support.processes import dev_server, run_together, wait_for, worker_entry
from support.reporting import fmt_num, log, rate, table
from support.workload import start_instances, verify

ROOT = Path(__file__).resolve().parent.parent
SERVICE = "/rpc/workflow.v1.WorkflowEngine/"


def _poller(
    url: str,
    key: str,
    job_type: str,
    batch: int,
    wire: str,
    start: Any,
    out: Any,
    k: int,
    ppid: int,
) -> None:
    def body() -> None:
        import json

        import httpx
        from baton.rpc import schema

        poll_req = schema.message_class("workflow.v1.PollJobsRequest")
        poll_resp = schema.message_class("workflow.v1.PollJobsResponse")
        batch_req = schema.message_class("workflow.v1.CompleteBatchRequest")
        batch_resp = schema.message_class("workflow.v1.CompleteBatchResponse")
        worker = f"{wire}{k}"
        proto = {"content-type": "application/proto", "accept": "application/proto"}
        plain = {"content-type": "application/json"}
        sent = done = 0

        def poll(client: httpx.Client) -> list[tuple[str, int]]:
            nonlocal sent
            if wire == "rpc":
                msg = poll_req(worker_id=worker, job_types=[job_type], max_jobs=batch)
                data = msg.SerializeToString()
                r = client.post(SERVICE + "PollJobs", content=data, headers=proto)
                sent += len(data)
                jobs = poll_resp.FromString(r.content).jobs
                return [(j.id, j.attempt) for j in jobs]
            body = {"workerId": worker, "jobTypes": [job_type], "maxJobs": batch}
            data = json.dumps(body).encode()
            r = client.post("/v1/jobs/poll", content=data, headers=plain)
            sent += len(data)
            return [(j["id"], j["attempt"]) for j in r.json()["jobs"]]

        def complete(client: httpx.Client, jobs: list[tuple[str, int]]) -> int:
            nonlocal sent
            if wire == "rpc":
                msg = batch_req()
                for job_id, attempt in jobs:
                    item = msg.results.add(job_id=job_id, worker_id=worker, attempt=attempt)
                    item.variables_to_set.update({"ok": True})
                data = msg.SerializeToString()
                r = client.post(SERVICE + "CompleteBatch", content=data, headers=proto)
                sent += len(data)
                if r.status_code != 200:
                    raise BenchError(f"CompleteBatch: {r.status_code} {r.text}")
                results = batch_resp.FromString(r.content).results
                return sum(1 for x in results if x.outcome == "APPLIED")
            results_json = [
                {"jobId": j, "workerId": worker, "attempt": a, "variablesToSet": {"ok": True}}
                for j, a in jobs
            ]
            data = json.dumps({"results": results_json}).encode()
            r = client.post(
                "/v1/jobs/complete-batch",
                content=data,
                headers=plain,
            )
            sent += len(data)
            if r.status_code != 200:
                raise BenchError(f"complete-batch: {r.status_code} {r.text}")
            return sum(1 for x in r.json()["results"] if x["outcome"] == "APPLIED")

        wait_for(start, ppid)
        with httpx.Client(base_url=url, headers={"x-api-key": key}, timeout=30) as client:
            empty = 0
            while empty < 5:
                jobs = poll(client)
                if not jobs:
                    empty += 1
                    time.sleep(0.01)
                    continue
                empty = 0
                done += complete(client, jobs)
        out.put(("done", k, (done, sent)))

    worker_entry(body, out, k)


def _drain(
    dev: Any, url: str, wire: str, jobs: int, pollers: int, batch: int, tag: str = ""
) -> dict[str, float]:
    name = job_type = f"bench-rpc-{wire}{tag}"
    start_instances(url, name, job_type, jobs)
    log(f"{pollers} {wire} pollers drain {jobs:,} jobs (poll + complete-batch)")
    cpu_before = dev.cpu_seconds() or 0.0
    args = (dev.url, dev.api_key, job_type, batch, wire)
    results, seconds = run_together(_poller, [args] * pollers, f"{wire}-poller", timeout=900)
    cpu = (dev.cpu_seconds() or 0.0) - cpu_before
    verify(url, name, job_type, jobs)
    done = sum(r[0] for r in results)
    sent = sum(r[1] for r in results)
    result = {
        "jobs": done,
        "per_second": rate(done, seconds - 5 * 0.01),
        "bytes_per_job": sent / max(done, 1),
        "server_cpu_ms_per_job": 1000 * cpu / max(done, 1),
    }
    log(
        f"  {wire}: {result['per_second']:.0f} jobs/s, "
        f"{result['server_cpu_ms_per_job']:.3f} ms server CPU per job"
    )
    return result


def _combined(runs: list[dict[str, float]]) -> dict[str, float]:
    """Several drains of one wire as one: jobs summed, rates and costs weighted by jobs."""
    jobs = sum(r["jobs"] for r in runs)
    seconds = sum(r["jobs"] / r["per_second"] for r in runs)
    return {
        "jobs": jobs,
        "per_second": jobs / seconds,
        "bytes_per_job": sum(r["bytes_per_job"] * r["jobs"] for r in runs) / jobs,
        "server_cpu_ms_per_job": sum(r["server_cpu_ms_per_job"] * r["jobs"] for r in runs) / jobs,
    }


_IMPORT = """
import sys, time
sys.path[:0] = [{shared!r}, {lib!r}]
import importlib.util
t, cpu = time.perf_counter(), time.process_time()
spec = importlib.util.spec_from_file_location("h", {path!r})
m = importlib.util.module_from_spec(spec); sys.modules["h"] = m; spec.loader.exec_module(m)
if {twin!r}:  # what the first call of a twin's RPC adds: the twin and the message types
    m.function._load({twin!r})
    from baton.rpc import bridge
    bridge.find("PollJobs")  # every RPC's message classes, made at the first call
print(time.process_time() - cpu, time.perf_counter() - t)
"""


def _cold_import(function: str, twin: str | None, runs: int) -> tuple[float, float]:
    """Median CPU and wall seconds to import a function's handler in a fresh interpreter
    (bytecode cached). CPU is the figure to compare on a loaded machine."""
    path = ROOT / "functions" / function / "handler.py"
    code = _IMPORT.format(
        shared=str(ROOT / "shared"),
        lib=str(ROOT / "functions" / "_lib"),
        path=str(path),
        twin=twin or "",
    )
    env = {"BATON_STAGE": "dev", "POWERTOOLS_METRICS_NAMESPACE": "Bench", "PATH": "/usr/bin"}
    times: list[tuple[float, float]] = []
    for _ in range(runs + 1):  # the first run writes the bytecode caches: not counted
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False
        )
        if done.returncode != 0:
            raise BenchError(f"importing {function} failed:\n{done.stderr[-2000:]}")
        cpu, wall = done.stdout.strip().splitlines()[-1].split()
        times.append((float(cpu), float(wall)))
    kept = times[1:]
    return statistics.median(c for c, _ in kept), statistics.median(w for _, w in kept)


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description="RPC (Connect, binary) against REST JSON")
    parser.add_argument("--jobs", type=int, default=3000)
    parser.add_argument("--pollers", type=int, default=4)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--import-runs", type=int, default=7)
    parser.add_argument("--rounds", type=int, default=2, help="drains per wire, in turns")
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--layer-dir", type=Path, default=ROOT / "layers" / "build")
    args = parser.parse_args()
    with (
        postgres_server(args.database_url) as server,
        fresh_database(server, "rpc") as url,
        dev_server(url, env={"BATON_GRPC_PORT": "0"}) as dev,
    ):
        # A short drain over each wire warms the server's containers (the rpc function's first
        # call loads its REST twin and the message types: a cold start, not a cost per job);
        # then RPC and REST in turns, so a drift of the machine's load falls on both.
        for wire in ("rest", "rpc"):
            _drain(dev, url, wire, min(args.jobs, 500), args.pollers, args.batch, "-warm")
        runs: dict[str, list[dict[str, float]]] = {"rpc": [], "rest": []}
        for n in range(args.rounds):
            for wire in ("rpc", "rest") if n % 2 == 0 else ("rest", "rpc"):
                runs[wire].append(
                    _drain(dev, url, wire, args.jobs, args.pollers, args.batch, f"-{n}")
                )
        results = {wire: _combined(r) for wire, r in runs.items()}
    log("cold imports (fresh interpreters, median)")
    jobs_import = _cold_import("jobs", None, args.import_runs)
    rpc_alone = _cold_import("rpc", None, args.import_runs)
    rpc_jobs = _cold_import("rpc", "jobs", args.import_runs)
    print()
    rows = [
        [
            wire,
            f"{int(r['jobs']):,}",
            f"{r['bytes_per_job']:.1f}",
            fmt_num(r["per_second"]),
            f"{r['server_cpu_ms_per_job']:.3f}",
        ]
        for wire, r in (("RPC, Connect binary", results["rpc"]), ("REST JSON", results["rest"]))
    ]
    print(table(["wire", "jobs", "request bytes/job", "jobs/s", "server CPU ms/job"], rows))
    rpc, rest = results["rpc"], results["rest"]
    print(f"request bytes per job, rpc/rest: {rpc['bytes_per_job'] / rest['bytes_per_job']:.2f}")
    print(f"jobs/s, rpc/rest: {rpc['per_second'] / rest['per_second']:.2f}")
    cpu_ratio = rpc["server_cpu_ms_per_job"] / rest["server_cpu_ms_per_job"]
    print(f"server CPU per job, rpc/rest: {cpu_ratio:.2f}")
    print()
    print(
        table(
            ["cold import", "CPU ms", "wall ms"],
            [
                [label, f"{cpu * 1000:.0f}", f"{wall * 1000:.0f}"]
                for label, (cpu, wall) in (
                    ("jobs function", jobs_import),
                    ("rpc function", rpc_alone),
                    ("rpc function + its jobs twin and messages", rpc_jobs),
                )
            ],
        )
    )
    extra = (rpc_jobs[0] - jobs_import[0]) * 1000
    print(f"rpc + twin minus jobs: {extra:+.0f} ms CPU (budget +100 ms)")
    layer = args.layer_dir / "python"
    if layer.is_dir():
        total = _size(layer)
        protobuf = _size(layer / "google") if (layer / "google").is_dir() else 0
        print(
            f"layer {layer}: {total / 1e6:.1f} MB unzipped (limit 40 MB), "
            f"of which protobuf {protobuf / 1e6:.1f} MB"
        )
    else:
        print(f"no layer at {layer}: make layer, then run again for its size")


if __name__ == "__main__":
    main()
