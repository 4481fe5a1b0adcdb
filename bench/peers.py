"""Baton next to its peers: the same drain of N jobs by W workers in procrastinate, pgqueuer and
DBOS, then in Baton (one-step workflows, per-commit and batched), each in a fresh database on the
same PostgreSQL server, and Baton's rate as a ratio of each peer's.

    .venv/bin/python bench/peers.py --best-only          # 20,000 jobs, 2 workers
    .venv/bin/python bench/peers.py --only pgqueuer,dbos --jobs 2000

Optional, not part of ``make test`` or ``make bench``: the peers are installed from PyPI (with
``uv``, pinned in PINS below) into a separate venv, ``bench/.peers-venv`` (git-ignored, reused
while the pins are unchanged), so that Baton's own environment never sees them. Each peer's
drain is a small script in ``bench/support/peers/`` run as a subprocess with that venv's python
(it does not import baton): it installs the peer's schema, enqueues N jobs (timed separately,
not part of the drain), starts W worker processes that connect (not timed), releases them
together, and times from the release to the last completion the database recorded; then it
checks that every job was done exactly once, as far as the peer lets us see. Each script's
docstring says what its drain does, with which settings, and why it is (or is not quite) the
equivalent of Baton's. Baton's drains are ``engine_throughput``'s, imported from it: instances
started (not timed), then W processes loop ``Engine.poll`` and ``Engine.complete_job`` (per
commit) or ``Engine.complete_batch`` (batched), polling as many jobs at a time as pgqueuer's best
configuration takes per batch (50; ``--batch``); every instance is checked COMPLETED once.

Baton's rows are a one-step workflow with full bookkeeping (instance, step execution, job,
audit log, stored output); pgqueuer's and procrastinate's are queue jobs without any of that,
so a ratio below 1 against them is the price of the workflow, not a like-for-like loss. DBOS
(a durable workflow with one checkpointed step) is the closest in what it records.

Each peer runs at its best documented configuration (the row named after it: pgqueuer on
asyncpg with 5 queue managers per process and batches of 50, as its own benchmark tool and
tuning guide do; DBOS with its queue's polling interval, worker concurrency and executor threads
set as its docs describe), then at the configurations earlier runs used, kept as extra rows, and
pgqueuer at batches of 100 (its tuning guide says to raise ``batch_size`` for short jobs: the row
to read next to Baton's drains at ``--batch 100``, its SDK runners' default; it drained 15%
faster than at 50 in one run). ``--best-only`` skips the extra rows. CONFIGS lists them; each
drain script's docstring says where its settings come from.

A peer that fails to install or run is reported with the reason and skipped; the others run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import engine_throughput
from support import ROOT, BenchError
from support.postgres import fresh_database, postgres_server, server_summary
from support.reporting import fmt_num, log, rate, table

PEERS_VENV = ROOT / "bench" / ".peers-venv"
SCRIPTS = ROOT / "bench" / "support" / "peers"
# What the peer venv holds: each peer alone (so one that fails to install leaves the others),
# with the driver it is run on, and the driver they share.
PINS: dict[str, tuple[str, ...]] = {
    "pgqueuer": ("pgqueuer==1.6.0", "asyncpg==0.32.0"),
    "procrastinate": ("procrastinate==3.10.0",),
    "dbos": ("dbos==3.4.0",),
}
DRIVER = "psycopg[binary]==3.3.9"


@dataclass(frozen=True, slots=True)
class Config:
    """One row: a peer's drain script run with these settings (its own options)."""

    row: str
    peer: str
    options: tuple[str, ...] = ()


# Each peer at its best documented configuration first (the row named after the peer), then
# the configurations earlier runs of this benchmark used, kept as extra rows. See each drain
# script's docstring for where its settings come from.
CONFIGS: tuple[Config, ...] = (
    Config("pgqueuer", "pgqueuer", ("--driver", "asyncpg", "--managers", "5", "--batch", "50")),
    Config(
        "pgqueuer (asyncpg, 5 managers, batch 100)",
        "pgqueuer",
        ("--driver", "asyncpg", "--managers", "5", "--batch", "100"),
    ),
    Config(
        "pgqueuer (psycopg, 1 manager, batch 32)",
        "pgqueuer",
        ("--driver", "psycopg", "--managers", "1", "--batch", "32"),
    ),
    Config("procrastinate", "procrastinate"),
    Config("dbos", "dbos", ("--poll", "0.01", "--worker-concurrency", "100")),
    Config(
        "dbos (poll 0.05 s, concurrency 100)",
        "dbos",
        ("--poll", "0.05", "--worker-concurrency", "100"),
    ),
)


# Jobs per Baton poll: the batch of pgqueuer's best configuration above, so that both drains
# spread each statement over the same number of jobs (Baton's SDK runners poll up to 100 at a
# time by default; engine_throughput's own default, 32, is kept there for its baselines).
BATON_BATCH = 50
FLOOR_ROW = "baton's rows by SQL (floor)"


@dataclass(slots=True)
class Row:
    system: str
    jobs: int = 0
    seconds: float = float("nan")
    enqueue_seconds: float | None = None
    settings: str = ""
    error: str | None = None

    @property
    def per_second(self) -> float:
        return rate(self.jobs, self.seconds) if self.error is None else float("nan")


# --- the peer venv ------------------------------------------------------------------------------


def _uv() -> str:
    uv = ROOT / ".venv" / "bin" / "uv"
    found = str(uv) if uv.exists() else shutil.which("uv")
    if not found:
        raise BenchError("no uv: run `make install` (it installs uv into .venv)")
    return found


def _python() -> Path:
    return PEERS_VENV / "bin" / "python"


def _run(cmd: Sequence[str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)


def peer_venv(peers: Sequence[str]) -> dict[str, str]:
    """Create (or reuse) the peer venv and install each peer's pin that is not there yet.
    Returns {peer: why it could not be installed} for the ones that failed."""
    uv, failed = _uv(), {}
    if not _python().exists():
        log(f"peers: creating {PEERS_VENV.relative_to(ROOT)} with uv ({sys.executable})")
        done = _run([uv, "venv", "--quiet", "--python", sys.executable, str(PEERS_VENV)])
        if done.returncode:
            raise BenchError(f"uv venv failed: {done.stderr.strip()}")
    for peer in peers:
        stamp = PEERS_VENV / f".installed-{peer}"
        want = " ".join([*PINS[peer], DRIVER])
        if stamp.exists() and stamp.read_text() == want:
            continue
        log(f"peers: installing {want}")
        done = _run([uv, "pip", "install", "--quiet", "--python", str(_python()), *want.split()])
        if done.returncode:
            failed[peer] = (done.stderr.strip().splitlines() or ["uv pip install failed"])[-1]
            stamp.unlink(missing_ok=True)
            continue
        stamp.write_text(want)
    listed = _run([uv, "pip", "list", "--python", str(_python()), "--format", "json"])
    versions = {p["name"].lower(): p["version"] for p in json.loads(listed.stdout or "[]")}
    names = [*peers, *(["asyncpg"] if "pgqueuer" in peers else []), "psycopg"]
    shown = ", ".join(f"{p} {versions.get(p, '?')}" for p in names)
    pinned = ", ".join(pin for p in peers for pin in PINS[p])
    log(f"peers: {PEERS_VENV.relative_to(ROOT)} holds {shown} (pinned: {pinned}, {DRIVER})")
    return failed


# --- drains -------------------------------------------------------------------------------------


def peer_drain(server: str, config: Config, args: argparse.Namespace) -> Row:
    """Run ``support/peers/drain_<peer>.py`` with the configuration's options against a fresh
    database; its progress lines are echoed, its last line (``RESULT {json}``) is the row."""
    peer = config.row
    log(f"{peer}: creating a fresh database, enqueueing {args.jobs:,} jobs, then the drain")
    label = f"peer_{config.peer}"
    with fresh_database(server, label, migrate=False, keep=args.keep_databases) as url:
        cmd = [
            str(_python()),
            str(SCRIPTS / f"drain_{config.peer}.py"),
            *("--url", url, "--jobs", str(args.jobs), "--workers", str(args.workers)),
            *("--timeout", str(args.timeout)),
            *config.options,
        ]
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=SCRIPTS
        )
        found: dict[str, Any] | None = None
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                if line.startswith("RESULT "):
                    found = json.loads(line[len("RESULT ") :])
                elif line.strip():
                    log(f"{peer}: {line.strip()}")
            err = proc.stderr.read() if proc.stderr else ""
            code = proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    if code or found is None:
        lines = [ln for ln in err.strip().splitlines() if ln.strip()]
        fails = [ln for ln in lines if ln.startswith("FAIL:")]
        why = (fails or lines or [f"exit status {code}, no result"])[-1]
        return Row(peer, error=why)
    row = Row(
        peer,
        int(found["jobs"]),
        float(found["seconds"]),
        float(found["enqueue_seconds"]),
        str(found["settings"]),
    )
    log(
        f"{peer}: drained in {row.seconds:.2f}s = {row.per_second:,.0f} jobs/s (workers "
        f"returned after {float(found['exit_seconds']):.2f}s); checked: each job done once"
    )
    return row


def baton_drains(server: str, args: argparse.Namespace) -> list[Row]:
    """engine_throughput's engine phase, per commit and batched (it verifies each drain)."""
    et_args = engine_throughput.parse_args(
        ["--jobs", str(args.jobs), "--workers", str(args.workers), "--timeout", str(args.timeout)]
        + ["--batch", str(args.batch)]
        + (["--keep-databases"] if args.keep_databases else [])
    )
    rows = []
    for batched in (False, True):
        starts, drain, _ = engine_throughput.engine_phase(server, et_args, batched=batched)
        how = "complete_batch per poll" if batched else "complete_job per job (one commit each)"
        rows.append(
            Row(
                "baton batched" if batched else "baton per-commit",
                drain.items,
                drain.seconds,
                starts.seconds,
                f"one-step workflow, poll batch {et_args.batch}, {how}, {args.workers} processes",
            )
        )
    if args.floor:
        starts, drain, _ = engine_throughput.engine_phase(server, et_args, batched=True, floor=True)
        rows.append(
            Row(
                FLOOR_ROW,
                drain.items,
                drain.seconds,
                starts.seconds,
                "the rows Baton writes for a one-step workflow (claim: job, step, audit row; "
                "completion: job, step, instance, two audit rows), written in batches of "
                f"{et_args.batch} by two hand-written statements with no decision and no read "
                "(engine_throughput's floor): what no engine keeping these rows can pass",
            )
        )
    return rows


# --- report -------------------------------------------------------------------------------------


def report(rows: list[Row]) -> None:
    baton = {r.system: r for r in rows if r.system.startswith("baton") and r.error is None}
    per_commit, batched = baton.get("baton per-commit"), baton.get("baton batched")

    def ratio(mine: Row | None, other: Row) -> str:
        if mine is None or other.error is not None or not other.per_second:
            return "-"
        return f"{mine.per_second / other.per_second:.2f}"

    body = []
    for r in rows:
        if r.error is not None:
            body.append([r.system, "-", "-", "-", "-", "failed", "failed"])
            continue
        body.append(
            [
                r.system,
                f"{r.jobs:,}",
                "-" if r.enqueue_seconds is None else f"{r.enqueue_seconds:.2f}",
                f"{r.seconds:.2f}",
                fmt_num(r.per_second),
                ratio(per_commit, r),
                ratio(batched, r),
            ]
        )
    print(flush=True)
    print("drains of the same N jobs on the same server (jobs/s: release to last completion):")
    headers = [
        "system",
        "jobs",
        "enqueue s",
        "seconds",
        "jobs/s",
        "baton per-commit / it",
        "baton batched / it",
    ]
    print(table(headers, body))
    print()
    for r in rows:
        print(f"{r.system}: {r.error if r.error is not None else r.settings}")
    print(
        "(enqueue s: enqueueing the jobs, or for baton starting the instances, not in the drain; "
        "baton's rows are one-step workflows with full bookkeeping, pgqueuer's and "
        "procrastinate's are queue jobs, DBOS's are workflows with one checkpointed step)",
        flush=True,
    )
    floor = baton.get(FLOOR_ROW)
    best = next((r for r in rows if r.system == "pgqueuer" and r.error is None), None)
    if floor is not None and best is not None and best.per_second:
        print(
            f"baton's rows by SQL (floor) / pgqueuer: {floor.per_second / best.per_second:.2f} "
            "(the most an engine writing Baton's rows could reach against pgqueuer in this run)",
            flush=True,
        )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--jobs", type=int, default=20_000, help="jobs per drain (default 20000)")
    p.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    p.add_argument(
        "--only",
        action="append",
        metavar="PEER[,PEER]",
        help=f"run only these peers (of {', '.join(PINS)}); may be repeated",
    )
    p.add_argument(
        "--best-only",
        dest="all_configs",
        action="store_false",
        help="run each peer at its best documented configuration only, not the earlier ones",
    )
    p.add_argument(
        "--batch",
        type=int,
        default=BATON_BATCH,
        help=f"jobs per Baton poll (default {BATON_BATCH}: pgqueuer's best configuration's batch)",
    )
    p.add_argument("--no-baton", action="store_true", help="skip Baton's drains")
    p.add_argument(
        "--no-floor",
        dest="floor",
        action="store_false",
        help="skip the drain of Baton's rows by hand-written SQL (its data model's floor)",
    )
    p.add_argument(
        "--database-url",
        default=os.environ.get("DATABASE_URL") or None,
        help="server to use (default: $DATABASE_URL, else an embedded PostgreSQL)",
    )
    p.add_argument("--timeout", type=float, default=600, help="per drain, seconds")
    p.add_argument("--keep-databases", action="store_true", help="don't drop them at the end")
    args = p.parse_args(argv)
    if args.jobs < 1 or args.workers < 1 or args.batch < 1:
        p.error("--jobs, --workers and --batch must be positive")
    only = [name.strip() for item in args.only or [] for name in item.split(",") if name.strip()]
    unknown = sorted(set(only) - set(PINS))
    if unknown:
        p.error(f"unknown peer(s) {', '.join(unknown)}: choose from {', '.join(PINS)}")
    args.peers = [p for p in PINS if p in only] if only else list(PINS)
    args.configs = [
        c for c in CONFIGS if c.peer in args.peers and (args.all_configs or c.row == c.peer)
    ]
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    log(
        f"peers: {args.jobs:,} jobs, {args.workers} worker processes; "
        f"{', '.join(args.peers)}{'' if args.no_baton else ', then baton'}"
    )
    rows: list[Row] = []
    began = time.monotonic()
    try:
        failed = peer_venv(args.peers) if args.peers else {}
        for peer, why in failed.items():
            log(f"{peer}: not installed ({why}); skipping it")
            rows.append(Row(peer, error=f"install failed: {why}"))
        with postgres_server(args.database_url) as server:
            log(server_summary(server))
            for config in args.configs:
                if config.peer in failed:
                    continue
                try:
                    row = peer_drain(server, config, args)
                except (OSError, subprocess.SubprocessError, BenchError) as e:
                    row = Row(config.row, error=f"{type(e).__name__}: {e}")
                if row.error is not None:
                    log(f"{config.row}: FAILED: {row.error}; going on with the others")
                rows.append(row)
            if not args.no_baton:
                rows += baton_drains(server, args)
    except KeyboardInterrupt:
        log("interrupted")
        return 130
    except BenchError as e:
        print(f"FAIL: {e}", file=sys.stderr, flush=True)
        return 1
    log(f"peers: done in {time.monotonic() - began:.0f}s")
    report(rows)
    load, cores = os.getloadavg()[1], os.cpu_count() or 1
    if load > cores:
        print(
            f"WARNING: load average {load:.1f} over the last 5 minutes on {cores} cores: other "
            "processes competed with the drains, whose rates are depressed and noisy (each "
            "peer and each drain unevenly); rerun on a quiet machine before comparing",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
