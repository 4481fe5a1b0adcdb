"""pgqueuer's drain (run with the peer venv's python; see common.py for the protocol).

What it does: N jobs are enqueued with one batched ``Queries.enqueue`` per 1,000 (not timed);
then W processes each run a ``QueueManager`` on one psycopg ``AsyncConnection`` in drain mode
(``QueueExecutionMode.drain``: exit once the queue is empty), with a no-op async entrypoint.
pgqueuer's fastest idiomatic settings: ``batch_size=BATCH`` jobs per dequeue (one
``UPDATE ... FOR UPDATE SKIP LOCKED`` that also logs the pick), and its completions buffered and
acknowledged in batches (``JobStatusLogBuffer``: one statement moves up to ``batch_size`` finished
jobs from ``pgqueuer`` to ``pgqueuer_log``, flushed at least every 0.1 s), no concurrency cap, the
periodic log aggregation off (it would fold the log we check into statistics mid-run).

Why it is the comparison for Baton's drain: it is a queue job (enqueue, claim, ack), not a
workflow: no instance, no step execution, no audit row, no output stored. Baton's one-step
workflow does all of that per job, so pgqueuer is the "queue floor" of the same work.

Check: the queue table is empty and ``pgqueuer_log`` holds exactly one ``successful`` row per
enqueued job id.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from datetime import timedelta
from typing import Any

import common
import psycopg
from pgqueuer import Job, QueueManager
from pgqueuer.db import PsycopgDriver
from pgqueuer.queries import Queries
from pgqueuer.types import QueueExecutionMode

ENTRYPOINT = "bench"
BATCH = 32  # Baton's default --batch
ENQUEUE_CHUNK = 1000


async def _queries(url: str) -> tuple[psycopg.AsyncConnection, Queries]:
    conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
    return conn, Queries(PsycopgDriver(conn))


async def _install_and_enqueue(url: str, n: int) -> tuple[str, str]:
    conn, q = await _queries(url)
    try:
        await q.install()
        for start in range(0, n, ENQUEUE_CHUNK):
            size = min(ENQUEUE_CHUNK, n - start)
            await q.enqueue([ENTRYPOINT] * size, [None] * size, [0] * size)
        names = q.qbq.qualified
        return str(names.queue_table), str(names.queue_table_log)
    finally:
        await conn.close()


async def _work(url: str) -> None:
    conn, q = await _queries(url)
    qm = QueueManager(q)

    @qm.entrypoint(ENTRYPOINT)
    async def handle(job: Job) -> None:
        return None

    # Released at run()'s first dequeue, once its schema check, buffers and LISTEN are set up:
    # the drain is timed from there, not from the QueueManager's start-up.
    fetch_jobs = qm.fetch_jobs

    def gated(*args: Any, **kwargs: Any) -> AsyncGenerator[Job, None]:
        if not released:
            common.ready_then_wait()
            released.append(True)
        return fetch_jobs(*args, **kwargs)

    released: list[bool] = []
    qm.fetch_jobs = gated  # type: ignore[method-assign]
    await qm.run(
        batch_size=BATCH,
        mode=QueueExecutionMode.drain,
        dequeue_timeout=timedelta(seconds=0.2),
        log_aggregation_interval=timedelta(0),
    )
    await conn.close()


def worker(url: str, k: int) -> None:
    asyncio.run(_work(url))


if __name__ == "__main__":
    import functools
    import time

    from pgqueuer import __version__

    ARGS = common.parse_args()
    began = time.monotonic()
    table, log_table = asyncio.run(_install_and_enqueue(ARGS.url, ARGS.jobs))
    enqueue_seconds = time.monotonic() - began
    common.say(f"  pgqueuer {__version__}: {ARGS.jobs:,} jobs enqueued in {enqueue_seconds:.2f}s")
    ok = f"FROM {log_table} WHERE status = 'successful'"
    seconds, exit_seconds = common.drain(
        functools.partial(worker, ARGS.url),
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
        settings=f"batch_size={BATCH}, batched acks, drain mode, {ARGS.workers} processes",
    )
