"""Small test helpers: waiting on conditions with deadlines (never sleep-and-hope)."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")


def wait_until(
    probe: Callable[[], T | None], *, timeout: float = 30.0, interval: float = 0.02, what: str = ""
) -> T:
    """Call ``probe`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or probe}")
        time.sleep(interval)


def service_step(step_id: str, job_type: str, **extra: Any) -> dict[str, Any]:
    return {"id": step_id, "type": "SERVICE_TASK", "jobType": job_type, **extra}


def one_step(name: str, job_type: str = "work", **extra: Any) -> dict[str, Any]:
    return {"name": name, "steps": [service_step("only", job_type, **extra)]}


def unique(prefix: str) -> str:
    """A name no other test of this run uses (the e2e servers are shared by a session)."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def timed_in_background(call: Callable[[], T]) -> Future[tuple[T, float]]:
    """Run ``call`` on a daemon thread; its result with the monotonic time it came back."""
    done: Future[tuple[T, float]] = Future()

    def run() -> None:
        try:
            done.set_result((call(), time.monotonic()))
        except BaseException as e:
            done.set_exception(e)

    threading.Thread(target=run, daemon=True).start()
    return done
