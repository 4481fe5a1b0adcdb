"""The local stand-in for EventBridge schedules: a thread that invokes each scheduled function
with a "Scheduled Event" every tick.

A failing function is logged, never fatal, and an error that repeats tick after tick is logged
once (with its traceback) and then summarized, so a broken handler does not flood the console.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from baton.local.events import scheduled_event
from baton.local.functions import SCHEDULED_TIMEOUT_SECONDS, FunctionRegistry, FunctionUnavailable

log = logging.getLogger("baton.local.scheduler")

# While an error keeps repeating, say so again at most this often.
_REPEAT_REMINDER_SECONDS = 60.0


@dataclass(slots=True)
class _Failing:
    error: str
    since: float
    count: int = 1
    reminded_at: float = 0.0


class Ticker:
    """Invokes ``functions`` one after the other, every ``interval`` seconds, on one thread."""

    def __init__(
        self, registry: FunctionRegistry, functions: Sequence[str], *, interval: float
    ) -> None:
        if interval <= 0:
            raise ValueError(f"tick interval must be positive, not {interval}")
        self.registry = registry
        self.functions = tuple(functions)
        self.interval = interval
        self.ticks = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._failing: dict[str, _Failing] = {}

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="baton-ticker", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        """Stop after the invocation in progress (if any) returns."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                log.warning("a scheduled function is still running; not waiting for it")
            self._thread = None

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            self.tick()
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - started)))

    def tick(self) -> None:
        """Invoke every scheduled function once."""
        self.ticks += 1
        for name in self.functions:
            if self._stop.is_set():
                return
            self._invoke(name)

    def _invoke(self, name: str) -> None:
        try:
            self.registry.invoke(
                name, scheduled_event(name), timeout_seconds=SCHEDULED_TIMEOUT_SECONDS
            )
        except FunctionUnavailable as e:
            self._failed(name, str(e), with_traceback=False)
        except Exception as e:
            # Whatever a scheduled function raises, the next tick must still happen.
            self._failed(name, f"{type(e).__name__}: {e}", with_traceback=True)
        else:
            failing = self._failing.pop(name, None)
            if failing is not None:
                log.info(
                    "scheduled function recovered after %d failed invocations",
                    failing.count,
                    extra={"function": name},
                )

    def _failed(self, name: str, error: str, *, with_traceback: bool) -> None:
        now = time.monotonic()
        failing = self._failing.get(name)
        if failing is None or failing.error != error:
            self._failing[name] = _Failing(error, since=now, reminded_at=now)
            log.log(
                logging.ERROR if with_traceback else logging.WARNING,
                "scheduled function failed: %s",
                error,
                exc_info=with_traceback,
                extra={"function": name},
            )
            return
        failing.count += 1
        if now - failing.reminded_at >= _REPEAT_REMINDER_SECONDS:
            failing.reminded_at = now
            log.error(
                "scheduled function still failing (%d times in %.0f s): %s",
                failing.count,
                now - failing.since,
                error,
                extra={"function": name},
            )
