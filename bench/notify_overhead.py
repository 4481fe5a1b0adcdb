"""What the long-poll NOTIFY triggers (migration 0008) cost the engine when nobody waits: blocks of
start → poll → complete, alternating between the triggers enabled and disabled on one database,
so the machine's noise hits both sides alike.

    .venv/bin/python bench/notify_overhead.py --blocks 6 --jobs 1000

Each block starts ``--jobs`` one-step instances (timed: the INSERT trigger fires here), then
drains them with one loop of ``Engine.poll(batch 10)`` + ``Engine.complete_job`` (timed: the
UPDATE trigger's WHEN clause is evaluated for every claimed and completed row). Blocks alternate
``ALTER TABLE job ENABLE/DISABLE TRIGGER``; ``job_waiter`` is empty throughout. Printed: the
median CPU µs per job (this process + its PostgreSQL backend: what other load on the machine
does not inflate) of each side for starts and drains, and their ratio (1.00 = no cost).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Sequence

import psycopg
from support import BenchError
from support.cpu import process_cpu_seconds
from support.library import open_engine
from support.postgres import fresh_database, postgres_server, server_summary
from support.reporting import log, table
from support.workload import one_step

TRIGGERS = ("job_notify_inserted", "job_notify_unlocked")


def _set_triggers(url: str, enabled: bool) -> None:
    verb = "ENABLE" if enabled else "DISABLE"
    with psycopg.connect(url, autocommit=True) as conn:
        for t in TRIGGERS:
            conn.execute(f"ALTER TABLE job {verb} TRIGGER {t}")


def block(url: str, n: int, name: str) -> tuple[float, float]:
    """CPU µs per job (this process + its backend, so other load on the machine does not count)
    to start ``n`` instances, then to drain them."""
    engine = open_engine(url)
    try:
        pid = engine.db.autocommit(lambda c: c.execute("SELECT pg_backend_pid() AS p").fetchone())
        assert pid is not None

        def cpu() -> float:
            return time.process_time() + (process_cpu_seconds(int(pid["p"])) or 0.0)

        c0 = cpu()
        for i in range(n):
            engine.start_instance(definition_name=name, input={"n": i})
        c1 = cpu()
        done = 0
        while done < n:
            jobs = engine.poll("bench", [name], 10)
            if not jobs:
                raise BenchError(f"{n - done} jobs missing")
            for j in jobs:
                engine.complete_job(j["id"], "bench", {"ok": True}, attempt=j["attempt"])
            done += len(jobs)
        c2 = cpu()
    finally:
        engine.db.close()
    return 1e6 * (c1 - c0) / n, 1e6 * (c2 - c1) / n


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--blocks", type=int, default=10, help="blocks per side (default 10)")
    p.add_argument("--jobs", type=int, default=1000, help="jobs per block (default 1000)")
    p.add_argument("--database-url", default=os.environ.get("DATABASE_URL") or None)
    args = p.parse_args(argv)
    results: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
    try:
        with postgres_server(args.database_url) as pg:
            log(server_summary(pg))
            with fresh_database(pg, "notify") as url:
                engine = open_engine(url)
                engine.register_definition(one_step("bench", "bench"))
                engine.db.close()
                block(url, args.jobs, "bench")  # warm-up
                for b in range(2 * args.blocks):
                    enabled = b % 2 == (b // 2) % 2  # on, off, off, on, on, off, ...
                    _set_triggers(url, enabled)
                    results[enabled].append(block(url, args.jobs, "bench"))
                    log(f"block {b + 1}/{2 * args.blocks} triggers {'on' if enabled else 'off'}")
    except BenchError as e:
        print(f"FAIL: {e}", file=sys.stderr, flush=True)
        return 1
    rows = []
    for label, k in (("start instance", 0), ("poll + complete", 1)):
        on = statistics.median(r[k] for r in results[True])
        off = statistics.median(r[k] for r in results[False])
        rows.append([label, f"{off:,.0f}", f"{on:,.0f}", f"{on / off:.3f}"])
    print()
    print(table(["path", "CPU µs/job triggers off", "CPU µs/job triggers on", "on/off"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
