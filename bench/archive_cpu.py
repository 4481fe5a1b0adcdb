"""Archive CPU by part: where the archiver's CPU per archived instance goes.

    .venv/bin/python bench/archive_cpu.py --terminal 3000

N terminal instances past their retention (``archive_drain.seed_terminal``: a step execution, a
job and history rows each) are archived by the sweeper's pass (``archive_expired`` with its
defaults, passes run back to back) to a moto S3 server in its own niced process, after one
warm-up batch (the S3 client made). Nothing else runs. Each part of a batch is timed with
``time.process_time`` (this process, all its threads), so the parts add up to the whole:

- claim, release and the rest: the claim statement, releasing the claims, metrics and logs;
- read rows: the batch's rows (one query per table) and grouping them by instance;
- views: the instance, steps and history as the API shows them;
- payload references: pointing moved payload objects into the archive;
- encode: JSON and gzip;
- S3 calls: the PUTs (and payload copies), ``ArchiveStore.THREADS`` at a time;
- delete transaction: locking the claimed instances, index rows in, rows out;
- tidy: deleting moved originals and stale documents.

Also printed: the CPU per instance of the archiver's database backend and of moto's S3 (not
Baton's cost: S3 is another service in AWS), and the machine's load.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

from archive_drain import RETENTION, _free_port, _wait_for_s3, seed_terminal
from support.cpu import process_cpu_seconds
from support.library import open_archiving_engine
from support.postgres import fresh_database, postgres_server, settle
from support.reporting import fmt_num, log, table

PARTS = (
    "claim, release and the rest",
    "read rows",
    "views",
    "payload references",
    "encode (JSON, gzip)",
    "S3 calls",
    "delete transaction",
    "tidy",
)


class Timer:
    """CPU seconds spent inside each wrapped function (this process, every thread)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def wrap(self, owner: Any, name: str, label: str, *, static: bool = False) -> None:
        inner: Callable[..., Any] = getattr(owner, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.process_time()
            try:
                return inner(*args, **kwargs)
            finally:
                self.seconds[label] = self.seconds.get(label, 0.0) + time.process_time() - t0

        setattr(owner, name, staticmethod(timed) if static else timed)


def instrument(timer: Timer) -> None:
    from baton.engine import archive_ops, views
    from baton.engine.archive_ops import ArchiveOps
    from baton.engine.archive_store import ArchiveStore

    timer.wrap(ArchiveOps, "archive_expired", "total")
    timer.wrap(ArchiveOps, "_write_documents", "write")
    timer.wrap(ArchiveOps, "_delete_rows", "delete transaction")
    timer.wrap(ArchiveOps, "_tidy", "tidy")
    timer.wrap(ArchiveStore, "parallel", "S3 calls", static=True)
    timer.wrap(archive_ops, "encode", "encode (JSON, gzip)")
    timer.wrap(archive_ops, "rewrite_refs", "payload references")
    for name in ("instance", "step", "history_event"):
        timer.wrap(views, name, "views")


def by_part(seconds: dict[str, float]) -> dict[str, float]:
    """The wrapped functions' seconds as disjoint parts that add up to the total."""
    inner = ("views", "payload references", "encode (JSON, gzip)", "S3 calls")
    parts = {k: seconds.get(k, 0.0) for k in PARTS}
    parts["read rows"] = seconds.get("write", 0.0) - sum(parts[k] for k in inner)
    outer = ("write", "delete transaction", "tidy")
    parts["claim, release and the rest"] = seconds.get("total", 0.0) - sum(
        seconds.get(k, 0.0) for k in outer
    )
    return parts


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--terminal", type=int, default=3000, help="terminal instances to archive")
    p.add_argument("--database-url")
    args = p.parse_args()
    for name, value in (("AWS_ACCESS_KEY_ID", "bench"), ("AWS_SECRET_ACCESS_KEY", "bench")):
        os.environ.setdefault(name, value)
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    port = _free_port()
    moto = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=lambda: os.nice(19),  # noqa: PLW1509 (no threads started yet)
    )
    endpoint = f"http://127.0.0.1:{port}"
    _wait_for_s3(endpoint)
    bucket = f"bench-archive-{uuid.uuid4().hex[:8]}"
    import boto3

    boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=bucket)
    timer = Timer()
    try:
        with postgres_server(args.database_url) as server, fresh_database(server, "cpu") as url:
            seed_terminal(url, args.terminal)
            settle(url, "instance", "step_execution", "job", "audit_log")
            engine = open_archiving_engine(url, endpoint, bucket, RETENTION)
            backend = engine.db.autocommit(lambda c: c.info.backend_pid)
            engine.archive_expired(max_batches=1)  # warm: the S3 client made, statements prepared
            instrument(timer)
            backend0, moto0 = process_cpu_seconds(backend), process_cpu_seconds(moto.pid)
            cpu0, wall0 = time.process_time(), time.perf_counter()
            archived = 0
            while n := engine.archive_expired():
                archived += n
                log(f"archived {archived:,}")
            cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
            backend_cpu = (process_cpu_seconds(backend) or 0.0) - (backend0 or 0.0)
            moto_cpu = (process_cpu_seconds(moto.pid) or 0.0) - (moto0 or 0.0)
    finally:
        moto.terminate()
        moto.wait(10)
    per = 1000 / max(archived, 1)
    parts = by_part(timer.seconds)
    rows = [[k, fmt_num(v * per, 3), f"{100 * v / max(cpu, 1e-9):.0f}%"] for k, v in parts.items()]
    rows.append(["archiver process, all", fmt_num(cpu * per, 3), "100%"])
    print(table(["part", "CPU ms per instance", "share"], rows))
    print(
        f"{archived:,} instances in {wall:.1f} s ({archived / wall:.0f}/s); its backend "
        f"{backend_cpu * per:.2f} ms per instance; moto's S3 {moto_cpu * per:.2f} ms per "
        f"instance (niced); machine load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )


if __name__ == "__main__":
    main()
