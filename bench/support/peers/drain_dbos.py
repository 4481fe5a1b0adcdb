"""DBOS's drain (run with the peer venv's python; see common.py for the protocol).

What it does: a workflow ``job(i)`` that runs one no-op step, the DBOS counterpart of Baton's
one-step workflow. The parent launches DBOS (listening to no user queue), registers the queue
closed (``worker_concurrency=0``: no executor may dequeue), enqueues N workflows with
``Queue.enqueue`` (not timed), and keeps DBOS up. W processes each launch DBOS with their own
executor id on the same system database (the fresh database, schema ``dbos``) and connect, then
the parent opens the queue (``set_worker_concurrency(--worker-concurrency)``) and the workers'
queue threads dequeue and run the workflows in their executor threads. The settings DBOS's docs
name for a queue's throughput: the queue's polling interval (``--poll`` seconds; default 1 s),
its worker concurrency (workflows claimed per poll and running per process) and the process's
executor threads (``max_executor_threads``; unbounded by default) over a system-database
pool (``sys_db_pool_size``, 20 by default), with LISTEN/NOTIFY on (its default).

The ``dbos`` row of ``bench/peers.py`` polls every 0.01 s with a worker concurrency of 100 and
DBOS's default threads and pool: of the settings tried on 2,000 jobs (polling 0.01-0.05 s,
worker concurrency 20-100, 20, 50 or unbounded threads, pools of 20 or 40; 2026-11-26, a
loaded machine) none drained measurably faster than the others, except that 20 threads halved
the rate, and a pool of 100 per process exceeded the server's connections. The
``dbos (poll 0.05 s, concurrency 100)`` row is the configuration this benchmark used before.

Why it is the comparison for Baton's drain: the closest peer, a durable workflow with a
checkpointed step (workflow status row, step output row, final status with output), like
Baton's instance, step execution and job; but the step runs in the process that dequeued the
workflow (no separate claim of a job by a worker), and there is no audit log.

Check: every workflow is ``SUCCESS``, each with exactly one recorded step output, none
recovered (``recovery_attempts`` 1: started once).
"""

from __future__ import annotations

import argparse
import functools
import logging
import time

import common
from dbos import DBOS, DBOSConfig
from psycopg.conninfo import conninfo_to_dict
from sqlalchemy.engine import URL

QUEUE = "bench"
APP_VERSION = "bench"


def _options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--poll", type=float, default=0.05, help="queue polling interval, seconds")
    p.add_argument("--worker-concurrency", type=int, default=100)
    p.add_argument(
        "--executor-threads", type=int, default=0, help="max_executor_threads (0: DBOS default)"
    )
    p.add_argument("--pool", type=int, default=0, help="sys_db_pool_size (0: DBOS default, 20)")


@DBOS.step(name="noop")
def noop(i: int) -> None:
    return None


@DBOS.workflow(name="job")
def job(i: int) -> None:
    noop(i)


def system_url(conninfo: str) -> str:
    """The fresh database's conninfo as the SQLAlchemy URL DBOS wants."""
    d = conninfo_to_dict(conninfo)
    host = str(d.get("host") or "")
    socket = host.startswith("/")
    url = URL.create(
        "postgresql",
        username=str(d.get("user") or "") or None,
        password=str(d.get("password") or "") or None,
        host=None if socket else host or None,
        port=int(str(d["port"])) if d.get("port") and not socket else None,
        database=str(d.get("dbname")),
        query={"host": host, **({"port": str(d["port"])} if d.get("port") else {})}
        if socket
        else {},
    )
    return url.render_as_string(hide_password=False)


def config(url: str, executor: str, threads: int = 0, pool: int = 0) -> DBOSConfig:
    c: DBOSConfig = {
        "name": "bench",
        "system_database_url": system_url(url),
        "application_version": APP_VERSION,
        "executor_id": executor,
        "log_level": "WARNING",
    }
    if threads:
        c["max_executor_threads"] = threads
    if pool:
        c["sys_db_pool_size"] = pool
    return c


def worker(url: str, threads: int, pool: int, k: int) -> None:
    DBOS(config=config(url, f"w{k}", threads, pool))
    DBOS.launch()
    common.ready_then_wait()
    # Drained when the queue has nothing ENQUEUED or PENDING left; the parent times the
    # drain from the database, this only decides when to exit.
    while common.scalar(
        url,
        "SELECT count(*) FROM dbos.workflow_status"
        f" WHERE queue_name = '{QUEUE}' AND status IN ('ENQUEUED', 'PENDING')",
    ):
        time.sleep(0.2)
    DBOS.destroy(workflow_completion_timeout_sec=5)


if __name__ == "__main__":
    from importlib.metadata import version

    logging.getLogger("dbos").setLevel(logging.WARNING)
    ARGS = common.parse_args(_options)
    DBOS(config=config(ARGS.url, "enqueuer"))
    DBOS.listen_queues([])  # this process only enqueues
    DBOS.launch()
    queue = DBOS.register_queue(QUEUE, worker_concurrency=0, polling_interval_sec=ARGS.poll)
    began = time.monotonic()
    for i in range(ARGS.jobs):
        queue.enqueue(job, i)
    enqueue_seconds = time.monotonic() - began
    common.say(
        f"  dbos {version('dbos')}: {ARGS.jobs:,} workflows enqueued in {enqueue_seconds:.2f}s"
    )

    def open_queue() -> None:
        queue.set_worker_concurrency(ARGS.worker_concurrency)

    done = "FROM dbos.workflow_status WHERE status = 'SUCCESS' AND queue_name = 'bench'"
    seconds, exit_seconds = common.drain(
        functools.partial(worker, ARGS.url, ARGS.executor_threads, ARGS.pool),
        workers=ARGS.workers,
        jobs=ARGS.jobs,
        url=ARGS.url,
        done_sql=f"SELECT count(*) {done}",
        last_sql=f"SELECT max(updated_at) / 1000.0 {done}",
        timeout=ARGS.timeout,
        release=open_queue,
    )
    DBOS.destroy()
    succeeded = common.scalar(ARGS.url, f"SELECT count(*) {done}")
    recovered = common.scalar(ARGS.url, f"SELECT count(*) {done} AND recovery_attempts <> 1")
    steps = common.scalar(
        ARGS.url,
        "SELECT count(*) FROM (SELECT workflow_uuid FROM dbos.operation_outputs"
        " GROUP BY workflow_uuid HAVING count(*) = 1) AS t",
    )
    verified = succeeded == steps == ARGS.jobs and recovered == 0
    if not verified:
        common.fail(
            f"{succeeded} workflows SUCCESS, {steps} with one step output, {recovered} recovered"
        )
    common.result(
        jobs=ARGS.jobs,
        seconds=seconds,
        exit_seconds=exit_seconds,
        enqueue_seconds=enqueue_seconds,
        verified=verified,
        settings=f"queue polling {ARGS.poll}s, worker_concurrency={ARGS.worker_concurrency}, "
        f"max_executor_threads={ARGS.executor_threads or 'default'}, "
        f"sys_db_pool_size={ARGS.pool or 'default'}, "
        f"workflow + 1 step, {ARGS.workers} processes",
    )
