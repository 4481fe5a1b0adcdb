"""``baton queues``: push to named queues, inspect them, and redrive their dead letters."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from baton_worker.cli.options import EXIT_FAILED, EXIT_OK, Subparsers, group, leaf
from baton_worker.cli.output import CELL_WIDTH, cell, fields, show, table, when

if TYPE_CHECKING:
    from baton_worker.client import BatonClient

STATS_KEYS = ["pending", "processing", "completed", "failed", "dead"]
TASK_STATUSES = ("pending", "processing", "completed", "failed", "dead")


def _push(client: BatonClient, args: argparse.Namespace) -> None:
    pushed = client.push(
        args.name,
        title=args.title,
        body=args.body,
        priority=args.priority,
        max_retries=args.max_retries,
    )
    show(args, pushed, lambda p: fields(list(p.items())))


def _stats(client: BatonClient, args: argparse.Namespace) -> None:
    stats = client.queue_stats(args.name)
    show(args, stats, lambda s: table(STATS_KEYS, [[s.get(k) for k in STATS_KEYS]]))


def _peek(client: BatonClient, args: argparse.Namespace) -> None:
    tasks = client.peek(args.name, limit=args.limit)
    rows = [
        [
            t["id"],
            t["priority"],
            f"{t['retryCount']}/{t['maxRetries']}",
            cell(t["title"], CELL_WIDTH),
            when(t["createdAt"]),
        ]
        for t in tasks
    ]
    show(
        args,
        {"tasks": tasks},
        lambda _: table(["id", "priority", "retries", "title", "created"], rows),
    )


def _purge(client: BatonClient, args: argparse.Namespace) -> None:
    result = client.purge(args.name)
    show(args, result, lambda r: f"deleted {r['deleted']} task(s) from {args.name}")


def _list(client: BatonClient, args: argparse.Namespace) -> None:
    found = list(client.iter_queues())
    rows = [[q["name"], *(q.get(k) for k in STATS_KEYS)] for q in found]
    show(args, {"queues": found}, lambda _: table(["queue", *STATS_KEYS], rows))


def _tasks(client: BatonClient, args: argparse.Namespace) -> None:
    page = client.list_queue_tasks(
        args.name, status=args.status, limit=args.limit, page_token=args.page_token
    )

    def render(_: Any) -> str:
        rows = [
            [
                t["id"],
                t["status"],
                t["priority"],
                f"{t['retryCount']}/{t['maxRetries']}",
                cell(t["title"], 40),
                cell(t.get("lastError"), CELL_WIDTH),
                when(t["updatedAt"]),
            ]
            for t in page["tasks"]
        ]
        text = table(
            ["id", "status", "priority", "retries", "title", "last error", "updated"], rows
        )
        token = page.get("nextPageToken")
        return text + (f"\n(more: --page-token {token})" if token else "")

    show(args, page, render)


def _redrive(client: BatonClient, args: argparse.Namespace) -> int:
    if args.task:
        result = client.redrive(args.name, task_ids=args.task)
        results = [result]
    else:
        # A whole queue is redriven in batches; go on until none is left (or none moves).
        results = [client.redrive(args.name)]
        while results[-1]["remaining"] and results[-1]["redriven"]:
            results.append(client.redrive(args.name))
    moved = [i for r in results for i in r["taskIds"]]
    skipped = [s for r in results for s in r["skipped"]]
    merged = {
        "redriven": len(moved),
        "taskIds": moved,
        "skipped": skipped,
        "remaining": results[-1]["remaining"],
    }

    def render(_: Any) -> str:
        lines = [f"redrove {len(moved)} dead task(s) of {args.name} back to pending"]
        lines += [f"not redriven: {s['id']}: {s['reason']}" for s in skipped]
        if merged["remaining"]:
            lines.append(f"{merged['remaining']} dead task(s) left in {args.name}")
        return "\n".join(lines)

    show(args, merged, render)
    return EXIT_FAILED if skipped else EXIT_OK


def add_commands(commands: Subparsers) -> None:
    """Add ``queues``."""
    sub = group(commands, "queues", "push to named queues, inspect them, redrive dead letters")
    leaf(sub, "list", "list queues with their task counts by state", _list)
    p = leaf(
        sub, "tasks", "list a queue's tasks, oldest first, with retries and last error", _tasks
    )
    p.add_argument("name", metavar="NAME")
    p.add_argument("--status", choices=TASK_STATUSES, type=str.lower, help="only tasks in it")
    p.add_argument("--limit", type=int, default=50, help="at most this many (default 50, max 100)")
    p.add_argument("--page-token", metavar="TOKEN", help="continue a previous listing")
    p = leaf(
        sub,
        "redrive",
        "move dead tasks back to pending, retry count reset (all, or those named by --task); "
        "exits 1 if a named task was not redriven",
        _redrive,
    )
    p.add_argument("name", metavar="NAME")
    p.add_argument(
        "--task", action="append", metavar="ID", help="a dead task to redrive (repeatable)"
    )
    p = leaf(sub, "push", "push a task onto a queue", _push)
    p.add_argument("name", metavar="NAME")
    p.add_argument("--title", required=True)
    p.add_argument("--body", default="", help="the task's payload text (JSON or anything)")
    p.add_argument("--priority", type=int, default=0, help="higher first (default 0)")
    p.add_argument("--max-retries", type=int, help="attempts before dead letter (default 3)")
    p = leaf(sub, "stats", "task counts by state", _stats)
    p.add_argument("name", metavar="NAME")
    p = leaf(sub, "peek", "pending tasks, in dequeue order, not claimed", _peek)
    p.add_argument("name", metavar="NAME")
    p.add_argument("--limit", type=int, default=10, help="at most this many (default 10, max 100)")
    p = leaf(sub, "purge", "delete every task of a queue, whatever its state", _purge)
    p.add_argument("name", metavar="NAME")
