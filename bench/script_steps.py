"""What a SCRIPT (JavaScript) step and a JQ step cost next to a SET_VARIABLE step: each runs
within the decision (no worker), the first two in the script sandbox's child processes.

    .venv/bin/python bench/script_steps.py --instances 400 --steps 10

Three definitions of ``--steps`` steps each, all SET_VARIABLE, all SCRIPT or all JQ, over the same
small order (10 line items; each step totals it). Instances of the three are started in turn
(round robin, so the machine's noise hits all three alike) through the engine library on a real
PostgreSQL; ``Engine.start_instance`` runs every step in its first decision, so its wall time is
the instance's whole cost. Printed per kind: the median and p99 of that time divided by the steps,
and what a step adds over SET_VARIABLE at the median and at p99 (target: at most 2 ms at p99);
then the CPU time per step, the engine's (this process) and the sandbox children's, and what a
step adds in CPU: the machine's load stretches wall time (every sandbox call waits for its child
to be scheduled), never CPU time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any

from support import BenchError
from support.library import open_engine
from support.postgres import fresh_database, postgres_server, server_summary
from support.reporting import Progress, log, table

ORDER = {
    "items": [{"sku": f"sku-{i}", "price": 3 + i, "qty": 1 + i % 3} for i in range(10)],
}
KINDS: dict[str, dict[str, Any]] = {
    "SET_VARIABLE": {"type": "SET_VARIABLE", "variables": {"items": "${workflow.input.items}"}},
    "SCRIPT": {
        "type": "SCRIPT",
        "script": "$.items.reduce(function (t, i) { return t + i.price * i.qty; }, 0)",
        "input": {"items": "${workflow.input.items}"},
    },
    "JQ": {
        "type": "JQ",
        "query": ".items | map(.price * .qty) | add",
        "input": {"items": "${workflow.input.items}"},
    },
}


def definition(kind: str, steps: int) -> dict[str, Any]:
    return {
        "name": f"bench-{kind.lower()}",
        "steps": [{"id": f"s{i}", **KINDS[kind]} for i in range(steps)],
    }


_TICK = os.sysconf("SC_CLK_TCK")


def sandbox_cpu_seconds(engine: Any) -> float:
    """CPU time (user + system) the engine's sandbox children have used so far, from
    ``/proc/<pid>/stat`` (clock ticks: coarse per call, exact in sum over a run)."""
    pool = engine.sandbox
    children = list(pool._idle.queue)  # between starts every child is idle
    total = 0
    for child in children:
        try:
            with open(f"/proc/{child.process.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)
    return total / _TICK


def p99(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--instances", type=int, default=400, help="instances per kind (default 400)")
    p.add_argument("--steps", type=int, default=10, help="steps per instance (default 10)")
    p.add_argument("--database-url", default=os.environ.get("DATABASE_URL") or None)
    args = p.parse_args(argv)
    per_step: dict[str, list[float]] = {k: [] for k in KINDS}
    # CPU per kind: this process's (the engine: decision, JSON, pipes) and the sandbox's
    # children's. Unlike wall time it does not grow with the machine's load.
    engine_cpu: dict[str, float] = dict.fromkeys(KINDS, 0.0)
    sandbox_cpu: dict[str, float] = dict.fromkeys(KINDS, 0.0)
    try:
        with postgres_server(args.database_url) as pg:
            log(server_summary(pg))
            with fresh_database(pg, "scripts") as url:
                engine = open_engine(url)
                try:
                    for kind in KINDS:
                        engine.register_definition(definition(kind, args.steps))
                    for _ in range(20):  # warm-up: plans, prepared statements, sandbox children
                        for kind in KINDS:
                            engine.start_instance(definition_name=definition(kind, 1)["name"])
                    progress = Progress("instances", args.instances * len(KINDS))
                    for n in range(args.instances):
                        for kind in KINDS:
                            s0 = sandbox_cpu_seconds(engine)
                            c0 = time.process_time()
                            t0 = time.perf_counter()
                            inst, _ = engine.start_instance(
                                definition_name=f"bench-{kind.lower()}", input=ORDER
                            )
                            elapsed = time.perf_counter() - t0
                            engine_cpu[kind] += time.process_time() - c0
                            sandbox_cpu[kind] += sandbox_cpu_seconds(engine) - s0
                            if inst["status"] != "COMPLETED":
                                raise BenchError(f"{kind}: {inst['status']} {inst.get('reason')}")
                            per_step[kind].append(1e3 * elapsed / args.steps)
                        progress.update((n + 1) * len(KINDS))
                finally:
                    engine.db.close()
    except BenchError as e:
        print(f"FAIL: {e}", file=sys.stderr, flush=True)
        return 1
    steps_run = args.instances * args.steps
    cpu = {k: 1e3 * (engine_cpu[k] + sandbox_cpu[k]) / steps_run for k in KINDS}
    base_median = statistics.median(per_step["SET_VARIABLE"])
    base_p99 = p99(per_step["SET_VARIABLE"])
    rows = []
    for kind, values in per_step.items():
        median, tail = statistics.median(values), p99(values)
        rows.append(
            [
                kind,
                f"{median:.3f}",
                f"{tail:.3f}",
                "" if kind == "SET_VARIABLE" else f"{median - base_median:+.3f}",
                "" if kind == "SET_VARIABLE" else f"{tail - base_p99:+.3f}",
                f"{1e3 * engine_cpu[kind] / steps_run:.3f}",
                f"{1e3 * sandbox_cpu[kind] / steps_run:.3f}",
                "" if kind == "SET_VARIABLE" else f"{cpu[kind] - cpu['SET_VARIABLE']:+.3f}",
            ]
        )
    print()
    print(f"{args.instances} instances per kind, {args.steps} steps each (ms per step)")
    print(
        table(
            [
                "step",
                "median",
                "p99",
                "added at median",
                "added at p99 (target <= 2)",
                "engine CPU",
                "sandbox CPU",
                "added CPU",
            ],
            rows,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
