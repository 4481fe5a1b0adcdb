"""procrastinate's drain (run with the peer venv's python; see common.py for the protocol).

What it does: N jobs of a no-op async task are deferred with ``batch_defer_async`` per 1,000 (not
timed); then W processes each run ``App.run_worker_async(wait=False, concurrency=CONCURRENCY)``
(exit once caught up with the queue) over a psycopg pool of CONCURRENCY + 2 connections, with
LISTEN/NOTIFY on (its default). procrastinate has no batched claim or ack: each job is one
``procrastinate_fetch_job`` call (claim) and one ``procrastinate_finish_job`` call (ack), each
its own transaction, so concurrency (jobs in flight per worker, on separate connections) is its
idiomatic lever for throughput. Jobs are kept (``delete_jobs="never"``, the default) so they can
be checked.

Why it is the comparison for Baton's drain: a queue job (defer, fetch, finish, with the
``procrastinate_events`` rows its triggers write), not a workflow: no instance, step execution
or stored output. Baton's per-commit drain (one transaction per completion) is the closer match.

Check: every job ``succeeded`` and has exactly one ``started`` event (delivered once).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time

import common
import procrastinate

QUEUE = "bench"
CONCURRENCY = 10
ENQUEUE_CHUNK = 1000


def make_app(url: str, pool_size: int) -> tuple[procrastinate.App, procrastinate.tasks.Task]:
    app = procrastinate.App(
        connector=procrastinate.PsycopgConnector(
            conninfo=url, min_size=pool_size, max_size=pool_size
        )
    )

    @app.task(name="noop", queue=QUEUE)
    async def noop() -> None:
        return None

    return app, noop


async def _install_and_defer(url: str, n: int) -> None:
    app, noop = make_app(url, 2)
    async with app.open_async():
        await app.schema_manager.apply_schema_async()
        for start in range(0, n, ENQUEUE_CHUNK):
            await noop.batch_defer_async(*({} for _ in range(min(ENQUEUE_CHUNK, n - start))))


async def _work(url: str, k: int) -> None:
    app, _ = make_app(url, CONCURRENCY + 2)
    async with app.open_async():
        await app.check_connection_async()
        common.ready_then_wait()
        await app.run_worker_async(
            queues=[QUEUE],
            wait=False,
            concurrency=CONCURRENCY,
            name=f"w{k}",
            install_signal_handlers=False,
            listen_notify=True,
        )


def worker(url: str, k: int) -> None:
    asyncio.run(_work(url, k))


if __name__ == "__main__":
    from importlib.metadata import version

    # "App is instantiated in the main Python module": on purpose here (tasks are found by name).
    logging.getLogger("procrastinate").setLevel(logging.ERROR)
    ARGS = common.parse_args()
    began = time.monotonic()
    asyncio.run(_install_and_defer(ARGS.url, ARGS.jobs))
    enqueue_seconds = time.monotonic() - began
    common.say(
        f"  procrastinate {version('procrastinate')}: {ARGS.jobs:,} jobs deferred in "
        f"{enqueue_seconds:.2f}s"
    )
    seconds, exit_seconds = common.drain(
        functools.partial(worker, ARGS.url),
        workers=ARGS.workers,
        jobs=ARGS.jobs,
        url=ARGS.url,
        done_sql="SELECT count(*) FROM procrastinate_jobs WHERE status = 'succeeded'",
        last_sql="SELECT extract(epoch FROM max(at)) FROM procrastinate_events"
        " WHERE type = 'succeeded'",
        timeout=ARGS.timeout,
    )
    succeeded = common.scalar(
        ARGS.url, "SELECT count(*) FROM procrastinate_jobs WHERE status = 'succeeded'"
    )
    total = common.scalar(ARGS.url, "SELECT count(*) FROM procrastinate_jobs")
    twice = common.scalar(
        ARGS.url,
        "SELECT count(*) FROM (SELECT job_id FROM procrastinate_events WHERE type = 'started'"
        " GROUP BY job_id HAVING count(*) <> 1) AS t",
    )
    verified = succeeded == total == ARGS.jobs and twice == 0
    if not verified:
        common.fail(f"{succeeded}/{total} jobs succeeded, {twice} started other than once")
    common.result(
        jobs=ARGS.jobs,
        seconds=seconds,
        exit_seconds=exit_seconds,
        enqueue_seconds=enqueue_seconds,
        verified=verified,
        settings=f"concurrency={CONCURRENCY} per process, pool {CONCURRENCY + 2}, "
        f"LISTEN/NOTIFY, one fetch + one finish per job, {ARGS.workers} processes",
    )
