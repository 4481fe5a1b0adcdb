"""Queue throughput: push, and dequeue+ack, with several consumer processes, through the library,
next to a raw SKIP LOCKED loop on a minimal table of the same server in the same run.

The raw loop is the floor of what Postgres can do for this shape: one INSERT commit per push; one
claim statement per batch and one UPDATE commit per ack. The last line prints the ratio.
"""

from __future__ import annotations

import argparse
from typing import Any

from support import BenchError
from support.library import open_queues
from support.postgres import fresh_database, postgres_server, server_summary
from support.processes import run_together, wait_for, worker_entry
from support.reporting import fmt_num, log, rate, table

RAW_SCHEMA = """
CREATE TABLE raw_task (
    id bigserial PRIMARY KEY, queue_name text NOT NULL, title text NOT NULL,
    priority int NOT NULL DEFAULT 0, status text NOT NULL DEFAULT 'pending',
    receipt uuid, created_at timestamptz NOT NULL DEFAULT now());
CREATE INDEX raw_task_pending ON raw_task (queue_name, priority DESC, created_at, id)
    WHERE status = 'pending';
"""
RAW_CLAIM = """
UPDATE raw_task SET status = 'processing', receipt = gen_random_uuid()
 WHERE id IN (SELECT id FROM raw_task WHERE queue_name = 'q' AND status = 'pending'
               ORDER BY priority DESC, created_at, id LIMIT %s FOR UPDATE SKIP LOCKED)
RETURNING id, receipt
"""


def _push_worker(mode: str, url: str, n: int, start: Any, out: Any, k: int, ppid: int) -> None:
    def body() -> None:
        import psycopg

        wait_for(start, ppid)
        if mode == "baton":
            q = open_queues(url)
            for i in range(n):
                q.push("q", f"t{k}-{i}", priority=i % 5)
        else:
            with psycopg.connect(url, autocommit=True) as conn:
                for i in range(n):
                    conn.execute(
                        "INSERT INTO raw_task (queue_name, title, priority) VALUES ('q', %s, %s)",
                        (f"t{k}-{i}", i % 5),
                    )
        out.put(("done", k, n))

    worker_entry(body, out, k)


def _consume_worker(
    mode: str, url: str, batch: int, start: Any, out: Any, k: int, ppid: int
) -> None:
    def body() -> None:
        import psycopg

        wait_for(start, ppid)
        done = 0
        if mode == "baton":
            q = open_queues(url)
            while tasks := q.dequeue("q", f"c{k}", max_tasks=batch):
                for t in tasks:
                    q.ack("q", t["id"], t["receipt"])
                    done += 1
        else:
            with psycopg.connect(url, autocommit=True) as conn:
                while rows := conn.execute(RAW_CLAIM, (batch,)).fetchall():
                    for task_id, receipt in rows:
                        conn.execute(
                            "UPDATE raw_task SET status = 'completed'"
                            " WHERE id = %s AND receipt = %s",
                            (task_id, receipt),
                        )
                        done += 1
        out.put(("done", k, done))

    worker_entry(body, out, k)


def _run(target: Any, args: list[tuple[Any, ...]]) -> tuple[int, float]:
    counts, seconds = run_together(target, args, "queue-bench", timeout=600)
    return sum(counts), seconds


def main() -> None:
    parser = argparse.ArgumentParser(description="queue push / dequeue+ack throughput")
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--database-url", default=None)
    args = parser.parse_args()
    n, w = args.tasks, args.workers
    per = n // w
    rows: list[list[str]] = []
    rates: dict[tuple[str, str], float] = {}
    with postgres_server(args.database_url) as server:
        log(server_summary(server))
        for mode in ("raw", "baton"):
            with fresh_database(server, f"queue_{mode}", migrate=mode == "baton") as url:
                if mode == "raw":
                    import psycopg

                    with psycopg.connect(url, autocommit=True) as conn:
                        conn.execute(RAW_SCHEMA.encode())
                log(f"{mode}: {w} producers push {per * w} tasks")
                pushed, secs = _run(_push_worker, [(mode, url, per)] * w)
                rates[(mode, "push")] = rate(pushed, secs)
                log(f"{mode}: {w} consumers dequeue (batch {args.batch}) and ack each")
                consumed, secs2 = _run(_consume_worker, [(mode, url, args.batch)] * w)
                if consumed != pushed:
                    raise BenchError(f"{mode}: pushed {pushed} but consumed {consumed}")
                rates[(mode, "dequeue+ack")] = rate(consumed, secs2)
                rows.append(
                    [
                        mode,
                        fmt_num(rates[(mode, "push")]),
                        fmt_num(rates[(mode, "dequeue+ack")]),
                    ]
                )
    print()
    print(table(["loop", "push/s", "dequeue+ack/s"], rows))
    push_ratio = rates[("baton", "push")] / rates[("raw", "push")]
    print(f"push baton/raw ratio: {push_ratio:.2f}")
    ratio = rates[("baton", "dequeue+ack")] / rates[("raw", "dequeue+ack")]
    print(f"queue/raw ratio: {ratio:.2f}")


if __name__ == "__main__":
    main()
