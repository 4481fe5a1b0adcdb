"""Processes a benchmark starts, none of which outlives it: spawned workers and the local API
server (``baton dev``). However the run ends (normally, on an error, on Ctrl-C or SIGTERM), the
parent stops and reaps them, and a worker whose parent was killed hard gives up on its own.
Workers report over a queue as ``(kind, worker, payload)`` messages; a failure in a worker comes
back as an ``error`` message with its traceback and fails the run, rather than leaving the
parent waiting for a message that never comes."""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import queue
import secrets
import signal
import socket
import subprocess
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from multiprocessing.context import SpawnProcess
from multiprocessing.sharedctypes import Synchronized
from pathlib import Path
from typing import Any

from support import ROOT, BenchError
from support.cpu import process_cpu_seconds
from support.library import dev_server_command
from support.reporting import log

SPAWN = mp.get_context("spawn")


@contextlib.contextmanager
def spawned(
    target: Callable[..., None], args_per_process: Sequence[tuple[Any, ...]], name: str
) -> Iterator[list[SpawnProcess]]:
    """Start one spawned process per argument tuple; on exit (normal, error or Ctrl-C) terminate
    whichever are still alive and reap them all, so nothing outlives the benchmark."""
    procs = [
        SPAWN.Process(target=target, args=a, name=f"{name}-{k}", daemon=True)
        for k, a in enumerate(args_per_process)
    ]
    started: list[SpawnProcess] = []
    try:
        for p in procs:
            p.start()
            started.append(p)
        yield procs
    finally:
        for p in started:
            if p.is_alive():
                p.terminate()
        for p in started:
            p.join(5)
            if p.is_alive():
                p.kill()
                p.join()


def add(count: Synchronized[int], n: int) -> None:
    """Add to a counter shared between processes (``+=`` alone is not atomic across them)."""
    with count.get_lock():
        count.value += n


def wait_for(event: Any, parent_pid: int) -> None:
    """Block on a start signal, but give up if the parent process is gone (killed hard)."""
    while not event.wait(1.0):
        if os.getppid() != parent_pid:
            raise SystemExit("parent process is gone")


def worker_entry(body: Callable[[], None], outbox: Any, worker: int) -> None:
    """Run a worker's body in a child: ignore Ctrl-C (the parent decides when children stop) and
    turn any failure into an ``("error", worker, traceback)`` message before exiting non-zero."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        body()
    except BaseException:
        outbox.put(("error", worker, traceback.format_exc()))
        raise SystemExit(1) from None


def collect(
    inbox: Any,
    procs: Sequence[SpawnProcess],
    kind: str,
    *,
    timeout: float,
    tick: Callable[[], None] | None = None,
    tick_every: float = 0.25,
) -> dict[int, Any]:
    """Wait for one ``(kind, worker, payload)`` message from every process; return payloads by
    worker. Raises BenchError on a worker's error message, a dead worker, or the timeout."""
    got: dict[int, Any] = {}
    deadline = time.monotonic() + timeout
    while len(got) < len(procs):
        try:
            msg_kind, worker, payload = inbox.get(timeout=tick_every)
        except queue.Empty:
            if tick is not None:
                tick()
            dead = [p.name for k, p in enumerate(procs) if k not in got and not p.is_alive()]
            if dead:
                raise BenchError(f"worker process(es) died: {', '.join(dead)}") from None
            if time.monotonic() > deadline:
                raise BenchError(f"timed out after {timeout:.0f}s waiting for '{kind}'") from None
            continue
        if msg_kind == "error":
            raise BenchError(f"worker {worker} failed:\n{payload}")
        if msg_kind != kind:
            raise BenchError(f"worker {worker} sent {msg_kind!r} while waiting for {kind!r}")
        got[worker] = payload
    if tick is not None:
        tick()
    return got


def run_together(
    target: Callable[..., None],
    args_per_process: Sequence[tuple[Any, ...]],
    name: str,
    *,
    timeout: float,
) -> tuple[list[Any], float]:
    """Spawn one process per argument tuple, called as ``target(*args, start, outbox, k,
    parent_pid)``; give them half a second to import, set ``start``, and wait for one ``("done",
    k, payload)`` from each. Returns the payloads and the seconds from ``start`` to the last."""
    start, outbox = SPAWN.Event(), SPAWN.Queue()
    argv = [(*a, start, outbox, k, os.getpid()) for k, a in enumerate(args_per_process)]
    with spawned(target, argv, name) as procs:
        time.sleep(0.5)  # let the children import before the clock starts (not a correctness wait)
        t0 = time.perf_counter()
        start.set()
        done = collect(outbox, procs, "done", timeout=timeout)
        return list(done.values()), time.perf_counter() - t0


# --- the local API server ---------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(slots=True)
class DevServer:
    """A running ``baton dev``: the whole API in one local process, as the SDK sees it."""

    url: str
    api_key: str
    process: subprocess.Popen[bytes]
    log_path: Path

    def cpu_seconds(self) -> float | None:
        return process_cpu_seconds(self.process.pid)


@contextlib.contextmanager
def dev_server(
    database_url: str, timeout: float = 60.0, *, env: dict[str, str] | None = None
) -> Iterator[DevServer]:
    """``baton dev`` on ``database_url`` (its own data dir for the local S3), stopped on exit;
    ``env`` adds to its environment (e.g. ``BATON_LONG_POLL``)."""
    import httpx

    port, api_key = _free_port(), secrets.token_hex(12)
    with tempfile.TemporaryDirectory(prefix="baton-bench-dev-") as data_dir:
        env = {
            **os.environ,
            "DATABASE_URL": database_url,
            "BATON_API_KEY": api_key,
            "BATON_TICK_SECONDS": "1",
            "PYTHONUNBUFFERED": "1",
            **(env or {}),
        }
        cmd = dev_server_command(port, data_dir)
        log_path = Path(data_dir) / "server.log"
        with log_path.open("wb") as out:
            process = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
        server = DevServer(f"http://127.0.0.1:{port}", api_key, process, log_path)
        try:
            deadline = time.monotonic() + timeout
            while True:
                if process.poll() is not None:
                    raise BenchError(f"baton dev exited:\n{log_path.read_text()[-3000:]}")
                with contextlib.suppress(httpx.TransportError):
                    if httpx.get(server.url + "/v1/definitions", timeout=1).status_code == 401:
                        break
                if time.monotonic() > deadline:
                    raise BenchError(f"baton dev not ready after {timeout:.0f}s")
                time.sleep(0.1)
            log(f"baton dev serving {server.url} (pid {process.pid})")
            yield server
        finally:
            if process.poll() is None:
                process.send_signal(signal.SIGINT)
                try:
                    process.wait(30)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
