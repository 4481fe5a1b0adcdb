"""``baton queues``: push to named queues and inspect them."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from baton_worker.cli.options import Subparsers, group, leaf
from baton_worker.cli.output import CELL_WIDTH, cell, fields, show, table, when

if TYPE_CHECKING:
    from baton_worker.client import BatonClient

STATS_KEYS = ["pending", "processing", "completed", "failed", "dead"]


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


def add_commands(commands: Subparsers) -> None:
    """Add ``queues``."""
    sub = group(commands, "queues", "push to named queues and inspect them")
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
