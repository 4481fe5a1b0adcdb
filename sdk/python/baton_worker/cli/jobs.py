"""``baton jobs``: claim and settle jobs by hand, as a worker would (for debugging)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from baton_worker.cli.options import Subparsers, group, json_object_arg, leaf
from baton_worker.cli.output import CELL_WIDTH, cell, fields, show, table, when

if TYPE_CHECKING:
    from baton_worker.client import BatonClient

JOB_HEADERS = ["id", "type", "instance", "step", "attempt", "retries left", "lock expires", "input"]


def _poll(client: BatonClient, args: argparse.Namespace) -> None:
    from baton_worker.runner import default_worker_id

    worker = args.worker or default_worker_id()
    jobs = client.poll_jobs(worker_id=worker, job_types=args.type, max_jobs=args.max, retry=None)
    rows = [
        [
            j["id"],
            j["jobType"],
            j["instanceId"],
            j["stepId"],
            j["attempt"],
            j["retriesRemaining"],
            when(j["lockExpiresAt"]),
            cell(j.get("input"), CELL_WIDTH),
        ]
        for j in jobs
    ]

    def render(_: Any) -> str:
        return table(JOB_HEADERS, rows) + (f"\n(claimed by worker {worker})" if jobs else "")

    show(args, {"workerId": worker, "jobs": jobs}, render)


def _complete(client: BatonClient, args: argparse.Namespace) -> None:
    variables = json_object_arg(args.variables, "--variables")
    result = client.complete_job(args.job_id, worker_id=args.worker, variables=variables)
    show(args, result, lambda r: fields(list(r.items())))


def _fail(client: BatonClient, args: argparse.Namespace) -> None:
    result = client.fail_job(
        args.job_id,
        worker_id=args.worker,
        error_message=args.message,
        retryable=not args.non_retryable,
        next_retry_delay_seconds=args.next_retry_delay,
    )
    show(args, result, lambda r: fields(list(r.items())))


def add_commands(commands: Subparsers) -> None:
    """Add ``jobs``."""
    sub = group(commands, "jobs", "claim and settle jobs by hand (debugging)")
    p = leaf(sub, "poll", "claim jobs as a worker would (they stay locked)", _poll)
    p.add_argument(
        "--type", action="append", required=True, metavar="TYPE", help="a job type (repeatable)"
    )
    p.add_argument("--max", type=int, default=1, help="at most this many jobs (default 1)")
    p.add_argument("--worker", metavar="ID", help="the worker id (default: <host>-<pid>)")
    p = leaf(sub, "complete", "complete a claimed job", _complete)
    p.add_argument("job_id", metavar="JOB_ID")
    p.add_argument("--worker", required=True, metavar="ID", help="the worker that claimed it")
    p.add_argument("--variables", metavar="JSON", help="variables to set (or @file.json)")
    p = leaf(sub, "fail", "fail a claimed job", _fail)
    p.add_argument("job_id", metavar="JOB_ID")
    p.add_argument("--worker", required=True, metavar="ID", help="the worker that claimed it")
    p.add_argument("--message", required=True, help="the error message")
    p.add_argument("--non-retryable", action="store_true", help="skip the remaining retries")
    p.add_argument(
        "--next-retry-delay",
        type=float,
        metavar="SECONDS",
        help="wait this long before the retry, instead of the step's retry delay",
    )
