"""``baton worker run``: poll for jobs and run the handlers of a registry."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from baton_worker.cli.options import EXIT_OK, Subparsers, UsageError, group, leaf

if TYPE_CHECKING:
    from baton_worker.client import BatonClient
    from baton_worker.registry import Registry


def load_registry(spec: str) -> Registry:
    """The registry named by ``module:attribute`` (or ``path/to/file.py:attribute``).

    The attribute defaults to ``registry``; it may be a ``Registry`` or a ``Runner`` (whose
    registry is used). The current directory is importable, as with ``python -m``.
    """
    from baton_worker.registry import Registry
    from baton_worker.runner import Runner

    target, _, attribute = spec.partition(":")
    attribute = attribute or "registry"
    if not target:
        raise UsageError(f"{spec!r}: expected module:attribute, e.g. myapp.worker:registry")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        if target.endswith(".py") or os.sep in target:
            path = Path(target).resolve()
            module_spec = importlib.util.spec_from_file_location(path.stem, path)
            if module_spec is None or module_spec.loader is None:
                raise UsageError(f"cannot import {target}")
            module = importlib.util.module_from_spec(module_spec)
            sys.modules[path.stem] = module
            module_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(target)
    except (ImportError, FileNotFoundError) as e:
        raise UsageError(f"cannot import {target}: {e}") from None
    try:
        found = getattr(module, attribute)
    except AttributeError:
        raise UsageError(f"{target} has no attribute {attribute!r}") from None
    if isinstance(found, Runner):
        return found.registry
    if not isinstance(found, Registry):
        raise UsageError(f"{spec} is a {type(found).__name__}, not a baton_worker Registry")
    return found


def _run(client: BatonClient, args: argparse.Namespace) -> int:
    from baton_worker.logs import configure_logging
    from baton_worker.runner import Runner, RunnerOptions

    registry = load_registry(args.target)
    configure_logging(args.log_level.upper(), json_lines=args.json_logs)
    try:
        options = RunnerOptions(
            worker_id=args.worker_id,
            job_types=args.type,
            parallelism=args.parallelism,
            max_jobs_per_poll=args.max_jobs,
            poll_interval=args.poll_interval,
            max_poll_interval=max(args.poll_interval, args.max_poll_interval),
        )
        transport = None
        if args.transport == "sqs":
            from baton_worker.transports import SqsTransport

            transport = SqsTransport.from_env(client)
        runner = Runner(registry, client=client, options=options, transport=transport)
        runner.run()
    except (TypeError, ValueError, ImportError) as e:
        raise UsageError(str(e)) from None
    return EXIT_OK


def add_commands(commands: Subparsers) -> None:
    """Add ``worker``."""
    sub = group(commands, "worker", "run job handlers")
    p = leaf(
        sub,
        "run",
        "poll for jobs and run the handlers of a registry until SIGINT/SIGTERM (then drain)",
        _run,
    )
    p.add_argument(
        "target",
        metavar="MODULE:REGISTRY",
        help="where the handlers are, e.g. examples.order_fulfilment.worker:registry",
    )
    p.add_argument("--worker-id", metavar="ID", help="default: <host>-<pid>")
    p.add_argument(
        "--type", action="append", metavar="TYPE", help="poll only this job type (repeatable)"
    )
    p.add_argument("--parallelism", type=int, default=8, help="jobs at once (default 8)")
    p.add_argument("--max-jobs", type=int, default=100, help="jobs per poll at most (default 100)")
    p.add_argument(
        "--poll-interval", type=float, default=0.5, help="seconds after an empty poll (default 0.5)"
    )
    p.add_argument(
        "--max-poll-interval",
        type=float,
        default=2.0,
        help="the cap as empty polls back off (default 2)",
    )
    p.add_argument(
        "--transport",
        choices=("poll", "sqs"),
        default="poll",
        help="where jobs come from: poll (default: POST /v1/jobs/poll) or sqs (the engine's "
        "SQS FIFO dispatch queue when it runs with BATON_DISPATCH_MODE=outbox: the queue of "
        "BATON_DISPATCH_QUEUE_URL, else the one a local baton dev relays to; needs boto3)",
    )
    p.add_argument("--log-level", default="INFO", help="DEBUG, INFO (default), WARNING...")
    p.add_argument("--json-logs", action="store_true", help="one JSON object per log line")
