"""pgqueuer's drain (run with the peer venv's python; see common.py for the protocol).

What it does: N jobs are enqueued with one batched ``Queries.enqueue`` per 1,000 (not timed);
then W processes each run ``--managers`` ``QueueManager``s (each on its own connection, by
``--driver``: asyncpg or psycopg's ``AsyncConnection``) in drain mode
(``QueueExecutionMode.drain``: exit once the queue is empty), with a no-op async entrypoint;
``--batch`` jobs per dequeue (one ``UPDATE ... FOR UPDATE SKIP LOCKED`` that also logs the
pick), completions buffered and acknowledged in batches (``JobStatusLogBuffer``: one statement
moves up to ``batch_size`` finished jobs from ``pgqueuer`` to ``pgqueuer_log``, flushed at least
every 0.1 s), no concurrency cap, the periodic log aggregation off (it would fold the log we
check into statistics mid-run).

pgqueuer's best documented configuration (the defaults of ``bench/peers.py``'s ``pgqueuer``
row): asyncpg, 5 queue managers per process and batches of 50. Its own benchmark tool
(``tools/benchmark.py``, drain strategy) runs 5 dequeue tasks, each a queue manager on its own
asyncpg connection, and its docs measure asyncpg at about twice psycopg; its tuning guide says to
raise ``batch_size`` for short jobs. The ``pgqueuer (psycopg, 1 manager, batch 32)`` row is the
configuration this benchmark used before: one manager per process on psycopg, Baton's batch.

Why it is the comparison for Baton's drain: it is a queue job (enqueue, claim, ack), not a
workflow: no instance, no step execution, no audit row, no output stored. Baton's one-step
workflow does all of that per job, so pgqueuer is the "queue floor" of the same work.

Check: the queue table is empty and ``pgqueuer_log`` holds exactly one ``successful`` row per
enqueued job id.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable
from datetime import timedelta
from typing import Any

import common
import psycopg
from pgqueuer import Job, QueueManager
from pgqueuer.db import AsyncpgDriver, PsycopgDriver
from pgqueuer.queries import Queries
from pgqueuer.types import QueueExecutionMode
from psycopg.conninfo import conninfo_to_dict

ENTRYPOINT = "bench"
ENQUEUE_CHUNK = 1000


def _options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--driver", choices=("asyncpg", "psycopg"), default="asyncpg")
    p.add_argument("--managers", type=int, default=5, help="queue managers per process")
    p.add_argument("--batch", type=int, default=50, help="jobs per dequeue (batch_size)")


async def _queries(url: str, driver: str) -> tuple[Callable[[], Awaitable[None]], Queries]:
    """A connection by ``driver`` and the Queries on it; returns (close, queries)."""
    if driver == "asyncpg":
        import asyncpg

        d = conninfo_to_dict(url)
        aconn = await asyncpg.connect(
            host=d.get("host"),
            port=int(str(d["port"])) if d.get("port") else None,
            user=d.get("user"),
            password=d.get("password"),
            database=d.get("dbname"),
        )
        return aconn.close, Queries(AsyncpgDriver(aconn))
    pconn = await psycopg.AsyncConnection.connect(url, autocommit=True)
    return pconn.close, Queries(PsycopgDriver(pconn))


async def _install_and_enqueue(url: str, n: int) -> tuple[str, str]:
    close, q = await _queries(url, "psycopg")
    try:
        await q.install()
        for start in range(0, n, ENQUEUE_CHUNK):
            size = min(ENQUEUE_CHUNK, n - start)
            await q.enqueue([ENTRYPOINT] * size, [None] * size, [0] * size)
        names = q.qbq.qualified
        return str(names.queue_table), str(names.queue_table_log)
    finally:
        await close()


async def _manager(
    url: str, opts: argparse.Namespace, arrived: list[int], gate: asyncio.Event
) -> None:
    close, q = await _queries(url, opts.driver)
    qm = QueueManager(q)

    @qm.entrypoint(ENTRYPOINT)
    async def handle(job: Job) -> None:
        return None

    # Released at run()'s first dequeue, once every manager of the process has its schema
    # check, buffers and LISTEN set up: the drain is timed from there, not from start-up.
    fetch_jobs = qm.fetch_jobs

    async def gated(*args: Any, **kwargs: Any) -> AsyncGenerator[Job, None]:
        if not gate.is_set():
            arrived.append(1)
            if len(arrived) == opts.managers:
                await asyncio.to_thread(common.ready_then_wait)
                gate.set()
            await gate.wait()
        async for job in fetch_jobs(*args, **kwargs):
            yield job

    qm.fetch_jobs = gated  # type: ignore[method-assign]
    try:
        await qm.run(
            batch_size=opts.batch,
            mode=QueueExecutionMode.drain,
            dequeue_timeout=timedelta(seconds=0.2),
            log_aggregation_interval=timedelta(0),
        )
    finally:
        await close()


async def _work(url: str, opts: argparse.Namespace) -> None:
    arrived: list[int] = []
    gate = asyncio.Event()
    await asyncio.gather(*(_manager(url, opts, arrived, gate) for _ in range(opts.managers)))


def worker(url: str, opts: argparse.Namespace, k: int) -> None:
    asyncio.run(_work(url, opts))


if __name__ == "__main__":
    import functools
    import time

    from pgqueuer import __version__

    ARGS = common.parse_args(_options)
    began = time.monotonic()
    table, log_table = asyncio.run(_install_and_enqueue(ARGS.url, ARGS.jobs))
    enqueue_seconds = time.monotonic() - began
    common.say(f"  pgqueuer {__version__}: {ARGS.jobs:,} jobs enqueued in {enqueue_seconds:.2f}s")
    ok = f"FROM {log_table} WHERE status = 'successful'"
    seconds, exit_seconds = common.drain(
        functools.partial(worker, ARGS.url, ARGS),
        workers=ARGS.workers,
        jobs=ARGS.jobs,
        url=ARGS.url,
        done_sql=f"SELECT count(*) {ok}",
        last_sql=f"SELECT extract(epoch FROM max(created)) {ok}",
        timeout=ARGS.timeout,
    )
    left = common.scalar(ARGS.url, f"SELECT count(*) FROM {table}")
    once = common.scalar(ARGS.url, f"SELECT count(DISTINCT job_id) {ok}")
    rows = common.scalar(ARGS.url, f"SELECT count(*) {ok}")
    verified = left == 0 and once == rows == ARGS.jobs
    if not verified:
        common.fail(f"{left} jobs left, {rows} successful log rows for {once} distinct jobs")
    common.result(
        jobs=ARGS.jobs,
        seconds=seconds,
        exit_seconds=exit_seconds,
        enqueue_seconds=enqueue_seconds,
        verified=verified,
        settings=f"{ARGS.driver}, {ARGS.managers} queue manager(s) per process, "
        f"batch_size={ARGS.batch}, batched acks, drain mode, {ARGS.workers} processes",
    )
