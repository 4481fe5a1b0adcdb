"""What every peer drain script shares. These scripts run with the peer venv's python
(``bench/.peers-venv``, made by ``bench/peers.py``) and must not import baton or ``support``:
only the standard library, psycopg and the peer itself.

The protocol with ``bench/peers.py``: progress lines on stdout, then one last line
``RESULT {json}`` with ``jobs``, ``seconds`` (release of the workers to the last completion the
database recorded), ``enqueue_seconds``, ``exit_seconds`` (release to the last worker's return,
a sanity check), ``verified`` and ``settings``. A failure exits non-zero with the reason on
stderr.

A drain runs W spawned worker processes: each imports the peer, connects and signals ready (not
timed); the parent then releases them all at once and timestamps the release with the wall
clock, which the database's completion timestamps are compared with (same machine, same clock).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing as mp
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import psycopg

SPAWN = mp.get_context("spawn")


def parse_args(add: Callable[[argparse.ArgumentParser], None] | None = None) -> argparse.Namespace:
    """The protocol's arguments, and the peer's own settings that ``add`` declares (each
    configuration ``bench/peers.py`` runs passes them)."""
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True, help="conninfo of a fresh, empty database")
    p.add_argument("--jobs", type=int, required=True)
    p.add_argument("--workers", type=int, required=True)
    p.add_argument("--timeout", type=float, default=600)
    if add is not None:
        add(p)
    return p.parse_args()


def say(message: str) -> None:
    print(message, flush=True)


def fail(message: str) -> None:
    print(f"FAIL: {message}", file=sys.stderr, flush=True)
    raise SystemExit(1)


def scalar(url: str, sql: str) -> Any:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(sql.encode()).fetchone()
    return None if row is None else row[0]


# Set in each worker before its body runs: the ready/go pair of its fleet.
_GATE: dict[str, Any] = {}


def settle(url: str) -> None:
    """ANALYZE and CHECKPOINT (when allowed) after the enqueue, as Baton's benchmarks do before
    a timed drain, so it does not pay for the enqueue's dirty buffers."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ANALYZE")
        with contextlib.suppress(psycopg.errors.InsufficientPrivilege):
            conn.execute("CHECKPOINT")


def _entry(body: Callable[[int], None], k: int, ready: Any, go: Any, done: Any) -> None:
    _GATE.update(ready=ready, go=go)
    try:
        body(k)  # body calls ready_then_wait() once connected, then drains
    except BaseException as e:
        done.put((k, time.monotonic(), f"{type(e).__name__}: {e}"))
        raise
    done.put((k, time.monotonic(), None))


def ready_then_wait() -> None:
    """In a worker: say it is connected, and wait for the parent's release."""
    ready, go = _GATE["ready"], _GATE["go"]
    ready.put(os.getpid())
    if not go.wait(120):
        raise SystemExit("never released")


def drain(
    body: Callable[[int], None],
    *,
    workers: int,
    jobs: int,
    url: str,
    done_sql: str,
    last_sql: str,
    timeout: float,
    release: Callable[[], None] | None = None,
) -> tuple[float, float]:
    """Run ``body(k)`` in ``workers`` processes, released together (then ``release()``, if
    given); print progress from ``done_sql`` (completed jobs) every second. Returns (seconds to
    the last completion the database recorded, by ``last_sql`` as epoch seconds; seconds to the
    last worker's return)."""
    settle(url)
    ready, go, done = SPAWN.Queue(), SPAWN.Event(), SPAWN.Queue()
    procs = [
        SPAWN.Process(target=_entry, args=(body, k, ready, go, done), daemon=True)
        for k in range(workers)
    ]
    for p in procs:
        p.start()
    try:
        for _ in procs:
            ready.get(timeout=120)
        say(f"  {workers} workers connected; releasing them")
        wall0, mono0 = time.time(), time.monotonic()
        go.set()
        if release is not None:  # a peer whose workers start on their own: open the gate
            release()
        finished: dict[int, float] = {}
        next_step, last_print = 0.2, mono0
        with psycopg.connect(url, autocommit=True) as conn:
            while len(finished) < workers:
                try:
                    k, at, error = done.get(timeout=1.0)
                except Exception:
                    k = None
                if k is not None:
                    if error:
                        fail(f"worker {k}: {error}")
                    finished[k] = at
                now = time.monotonic()
                if now - mono0 > timeout:
                    fail(f"drain not finished after {timeout:.0f}s")
                if now - last_print >= 1.0 or len(finished) == workers:
                    last_print = now
                    row = conn.execute(done_sql.encode()).fetchone()
                    n = int(row[0]) if row else 0
                    if n / jobs + 1e-9 >= next_step or len(finished) == workers:
                        while next_step <= n / jobs + 1e-9:
                            next_step += 0.2
                        say(f"  jobs completed: {n:,}/{jobs:,} ({n / jobs:.0%})")
                dead = [
                    p.name for i, p in enumerate(procs) if i not in finished and not p.is_alive()
                ]
                if dead and done.empty():
                    fail(f"worker(s) died: {', '.join(dead)}")
        last = scalar(url, last_sql)
    finally:
        for p in procs:
            p.join(10)
            if p.is_alive():
                p.kill()
    exit_seconds = max(finished.values()) - mono0
    db_seconds = float(last) - wall0 if last is not None else exit_seconds
    return db_seconds, exit_seconds


def result(**fields: Any) -> None:
    print("RESULT " + json.dumps(fields), flush=True)
