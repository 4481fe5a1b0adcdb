"""Dispatch latency: from a job's creation (the commit of the instance start that creates it) to
the moment a worker's handler is called, p50/p99 per dispatch mode.

    .venv/bin/python bench/latency.py --jobs 200 --modes short,notify,reclaim

Set-up: one PostgreSQL server (``--database-url`` / ``$DATABASE_URL``, else an embedded one) and
a fresh migrated database on it. Each mode gets its own ``baton dev`` on that database and one
SDK ``Runner`` in this process, whose handler records when it is called. Jobs are created one at
a time through the engine library, each after the previous one reached its handler plus a random
pause (``--min-gap`` to ``--gap`` ms), so every job finds an idle worker: this measures how
quickly an idle fleet notices work, not throughput.

Modes:

- ``short``: short polling, the runner sleeping 500 ms after each empty poll (the SDK's
  short-polling default);
- ``notify``: long-poll, the server woken by LISTEN/NOTIFY (``BATON_LONG_POLL=notify``, the local
  default);
- ``reclaim``: long-poll as behind RDS Proxy: the server re-claims with jittered backoff
  (50 ms → 1 s) until a job is claimable (``BATON_LONG_POLL=reclaim``);
- ``outbox``: the event-driven mode (``BATON_DISPATCH_MODE=outbox``): the transaction that
  creates the job writes an outbox row, the relay (run by ``baton dev`` every 100 ms, or every
  ``--tick`` seconds if shorter) publishes it to an SQS FIFO queue on a moto server, and the
  worker (the SDK's ``SqsTransport``) receives it and claims the job by id.

Latency is measured on one clock (this process's monotonic clock): creation time is taken when
the instance start's commit has returned, handler time when the handler is entered.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import random
import signal
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from support import BenchError
from support.library import open_engine
from support.postgres import fresh_database, postgres_server, server_summary
from support.processes import dev_server
from support.reporting import Progress, log, table
from support.workload import one_step

# A handler call: the job's sequence number (from its input).
OnJob = Callable[[int], None]


@dataclass(frozen=True, slots=True)
class Mode:
    """One dispatch mode: ``workers(db_url, job_type, on_job)`` is a context manager that, while
    open, has a worker consuming ``job_type`` and calling ``on_job(n)`` from its handler."""

    name: str
    describe: str
    workers: Callable[[str, str, OnJob], contextlib.AbstractContextManager[None]]


@contextlib.contextmanager
def _runner_workers(
    db_url: str, job_type: str, on_job: OnJob, *, long_poll: str, long_poll_wait: float
) -> Iterator[None]:
    """``baton dev`` in the given long-poll mode and one SDK runner against it."""
    from baton_worker import JobContext, Registry, Runner, RunnerOptions

    with dev_server(db_url, env={"BATON_LONG_POLL": long_poll}) as server:
        registry = Registry()

        @registry.handler(job_type)
        def handle(ctx: JobContext) -> dict[str, Any]:
            on_job(int(ctx.input["n"]))
            return {}

        options = RunnerOptions(
            worker_id=f"latency-{job_type}",
            long_poll_wait=long_poll_wait,
            poll_interval=0.5,
            max_poll_interval=0.5,
        )
        runner = Runner(registry, url=server.url, api_key=server.api_key, options=options)
        runner.start()
        try:
            yield
        finally:
            runner.stop(timeout=30)


@contextlib.contextmanager
def _outbox_workers(db_url: str, job_type: str, on_job: OnJob) -> Iterator[None]:
    """A moto SQS server with a FIFO queue, ``baton dev`` in outbox mode relaying to it, and one
    SDK runner on the SQS transport."""
    import boto3
    from baton_worker import BatonClient, JobContext, Registry, Runner, RunnerOptions
    from baton_worker.transports import SqsTransport
    from moto.server import ThreadedMotoServer

    # Its request log (a line per SQS call) would bury the progress lines.
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    moto.start()
    host, port = moto.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    sqs = boto3.client(
        "sqs",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="bench",
        aws_secret_access_key="bench",
    )
    queue = sqs.create_queue(
        QueueName=f"baton-latency-{job_type}.fifo",
        Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "false"},
    )["QueueUrl"]
    env = {
        "BATON_DISPATCH_MODE": "outbox",
        "BATON_DISPATCH_QUEUE_URL": queue,
        "BATON_SQS_ENDPOINT": endpoint,
        "BATON_TICK_SECONDS": str(OUTBOX["tick"]),
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    try:
        with dev_server(db_url, env=env) as server:
            registry = Registry()

            @registry.handler(job_type)
            def handle(ctx: JobContext) -> dict[str, Any]:
                on_job(int(ctx.input["n"]))
                return {}

            client = BatonClient(server.url, api_key=server.api_key)
            transport = SqsTransport(client, queue, sqs=sqs, wait_seconds=1)
            runner = Runner(
                registry,
                client=client,
                options=RunnerOptions(worker_id=f"latency-{job_type}"),
                transport=transport,
            )
            runner.start()
            try:
                yield
            finally:
                runner.stop(timeout=30)
                client.close()
    finally:
        moto.stop()


# baton dev's scheduler tick (BATON_TICK_SECONDS); in outbox mode the relay runs every
# min(tick, 100 ms); --tick sets it.
OUTBOX = {"tick": 1.0}

MODES: dict[str, Mode] = {
    "short": Mode(
        "short",
        "short polling, 500 ms after an empty poll",
        lambda url, jt, on: _runner_workers(url, jt, on, long_poll="notify", long_poll_wait=0),
    ),
    "notify": Mode(
        "notify",
        "long-poll (20 s), woken by LISTEN/NOTIFY",
        lambda url, jt, on: _runner_workers(url, jt, on, long_poll="notify", long_poll_wait=20),
    ),
    "reclaim": Mode(
        "reclaim",
        "long-poll (20 s), re-claim loop 50 ms → 1 s",
        lambda url, jt, on: _runner_workers(url, jt, on, long_poll="reclaim", long_poll_wait=20),
    ),
    "outbox": Mode(
        "outbox",
        "outbox row -> relay (local tick) -> SQS FIFO (moto) -> claim by id",
        _outbox_workers,
    ),
}


@dataclass(frozen=True, slots=True)
class Result:
    mode: Mode
    latencies_ms: list[float]

    def pct(self, p: float) -> float:
        ordered = sorted(self.latencies_ms)
        k = min(len(ordered) - 1, max(0, round(p / 100 * len(ordered) + 0.5) - 1))
        return ordered[k]


def measure(mode: Mode, db_url: str, args: argparse.Namespace) -> Result:
    job_type = f"latency-{mode.name}"
    # Jobs remember the mode they were created in: the outbox mode's are created for it.
    engine = open_engine(db_url, dispatch_mode="outbox" if mode.name == "outbox" else "polling")
    reached: dict[int, float] = {}
    arrived = threading.Condition()

    def on_job(n: int) -> None:
        with arrived:
            reached[n] = time.monotonic()
            arrived.notify_all()

    created: dict[int, float] = {}
    try:
        definition = one_step(job_type, job_type)
        definition["steps"][0]["input"] = {"n": "${workflow.input.n}"}
        engine.register_definition(definition)
        with mode.workers(db_url, job_type, on_job):
            time.sleep(1.0)  # the runner has polled once and is idle (long-polling or sleeping)
            log(f"{mode.name}: {args.jobs} jobs, {mode.describe}")
            progress = Progress("jobs dispatched", args.jobs)
            for n in range(-args.warmup, args.jobs):
                engine.start_instance(definition_name=job_type, input={"n": n})
                created[n] = time.monotonic()
                with arrived:
                    if not arrived.wait_for(lambda n=n: n in reached, args.timeout):
                        raise BenchError(f"{mode.name}: job {n} not handled in {args.timeout}s")
                progress.update(max(n + 1, 0))
                time.sleep(random.uniform(args.min_gap, args.gap) / 1000)
    finally:
        engine.db.close()
    latencies = [1000 * (reached[n] - created[n]) for n in range(args.jobs)]
    result = Result(mode, latencies)
    log(f"{mode.name}: p50 {result.pct(50):.1f} ms, p99 {result.pct(99):.1f} ms")
    return result


def report(results: Sequence[Result]) -> None:
    print(flush=True)
    rows = [
        [
            r.mode.name,
            r.mode.describe,
            str(len(r.latencies_ms)),
            f"{r.pct(50):.1f}",
            f"{r.pct(99):.1f}",
            f"{max(r.latencies_ms):.1f}",
            f"{statistics.fmean(r.latencies_ms):.1f}",
        ]
        for r in results
    ]
    headers = ["mode", "how", "jobs", "p50 ms", "p99 ms", "max ms", "mean ms"]
    print(table(headers, rows))
    print("(job creation = the instance start's commit returned; dispatch = handler entered)")
    base = next((r for r in results if r.mode.name == "short"), None)
    for r in results:
        if base is not None and r is not base:
            print(f"p50 ratio {r.mode.name}/short: {r.pct(50) / base.pct(50):.3f}")
    sys.stdout.flush()


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--jobs", type=int, default=200, help="jobs measured per mode (default 200)")
    p.add_argument("--warmup", type=int, default=5, help="jobs not measured, per mode")
    p.add_argument(
        "--modes",
        default="short,notify,reclaim,outbox",
        help=f"comma-separated, from: {', '.join(MODES)} (default: all of them)",
    )
    p.add_argument("--gap", type=float, default=50, help="max random pause between jobs, ms")
    p.add_argument(
        "--min-gap",
        type=float,
        default=0,
        help="min pause between jobs, ms (0: a job may arrive while the worker still reports "
        "the previous one)",
    )
    p.add_argument(
        "--database-url",
        default=os.environ.get("DATABASE_URL") or None,
        help="server to use (default: $DATABASE_URL, else an embedded PostgreSQL)",
    )
    p.add_argument("--timeout", type=float, default=30, help="per job, seconds")
    p.add_argument(
        "--tick",
        type=float,
        default=1.0,
        help="outbox mode: baton dev's scheduler tick (default 1 s; the relay runs every "
        "min(tick, 100 ms))",
    )
    args = p.parse_args(argv)
    args.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = [m for m in args.modes if m not in MODES]
    if unknown or not args.modes:
        p.error(f"unknown mode(s) {', '.join(unknown)}; known: {', '.join(MODES)}")
    if args.jobs < 1 or not 0 <= args.min_gap <= args.gap:
        p.error("--jobs must be positive and 0 <= --min-gap <= --gap")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    OUTBOX["tick"] = args.tick
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        with postgres_server(args.database_url) as pg:
            log(server_summary(pg))
            with fresh_database(pg, "latency") as url:
                results = [measure(MODES[m], url, args) for m in args.modes]
    except KeyboardInterrupt:
        log("interrupted")
        return 130
    except BenchError as e:
        print(f"FAIL: {e}", file=sys.stderr, flush=True)
        return 1
    report(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
