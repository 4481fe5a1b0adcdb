"""Metrics hooks: the runner reports what it does to an object you provide.

Implement :class:`MetricsHook` (or subclass :class:`NoopMetrics` and override what you need) to
feed Prometheus, StatsD, CloudWatch EMF or anything else. Hooks are called from the runner's
threads; they must be quick and thread-safe. An exception raised by a hook is logged and ignored.
:class:`InMemoryMetrics` keeps counters in memory (tests, benchmarks, a status page).
"""

from __future__ import annotations

import threading
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class MetricsHook(Protocol):
    """What the runner reports. Every argument is keyword-only, so hooks may add ``**_``."""

    def poll_completed(self, *, requested: int, received: int, seconds: float) -> None:
        """A poll returned ``received`` jobs of ``requested`` (0: an empty poll)."""

    def poll_failed(self, *, error: BaseException) -> None:
        """A poll failed (the runner backs off and polls again)."""

    def job_started(self, *, job_type: str) -> None:
        """A handler was called."""

    def job_completed(self, *, job_type: str, handler_seconds: float) -> None:
        """A job's handler returned and its completion was accepted."""

    def job_failed(self, *, job_type: str, handler_seconds: float, retryable: bool) -> None:
        """A job's handler raised and the failure was reported."""

    def outcome_unreported(self, *, job_type: str, error: BaseException) -> None:
        """The runner could not report a job's outcome; its lease will expire and another
        delivery will follow."""


class NoopMetrics:
    """A :class:`MetricsHook` that records nothing: subclass it and override what you need."""

    def poll_completed(self, *, requested: int, received: int, seconds: float) -> None:
        return None

    def poll_failed(self, *, error: BaseException) -> None:
        return None

    def job_started(self, *, job_type: str) -> None:
        return None

    def job_completed(self, *, job_type: str, handler_seconds: float) -> None:
        return None

    def job_failed(self, *, job_type: str, handler_seconds: float, retryable: bool) -> None:
        return None

    def outcome_unreported(self, *, job_type: str, error: BaseException) -> None:
        return None


@dataclass
class InMemoryMetrics(NoopMetrics):
    """Thread-safe counters and handler-time totals, per job type where it applies."""

    polls: int = 0
    empty_polls: int = 0
    poll_errors: int = 0
    jobs_started: defaultdict[str, int] = field(default_factory=lambda: defaultdict(int))
    jobs_completed: defaultdict[str, int] = field(default_factory=lambda: defaultdict(int))
    jobs_failed: defaultdict[str, int] = field(default_factory=lambda: defaultdict(int))
    jobs_failed_non_retryable: defaultdict[str, int] = field(
        default_factory=lambda: defaultdict(int)
    )
    outcomes_unreported: defaultdict[str, int] = field(default_factory=lambda: defaultdict(int))
    handler_seconds: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def poll_completed(self, *, requested: int, received: int, seconds: float) -> None:
        with self._lock:
            self.polls += 1
            if received == 0:
                self.empty_polls += 1

    def poll_failed(self, *, error: BaseException) -> None:
        with self._lock:
            self.poll_errors += 1

    def job_started(self, *, job_type: str) -> None:
        with self._lock:
            self.jobs_started[job_type] += 1

    def job_completed(self, *, job_type: str, handler_seconds: float) -> None:
        with self._lock:
            self.jobs_completed[job_type] += 1
            self.handler_seconds[job_type] += handler_seconds

    def job_failed(self, *, job_type: str, handler_seconds: float, retryable: bool) -> None:
        with self._lock:
            self.jobs_failed[job_type] += 1
            if not retryable:
                self.jobs_failed_non_retryable[job_type] += 1
            self.handler_seconds[job_type] += handler_seconds

    def outcome_unreported(self, *, job_type: str, error: BaseException) -> None:
        with self._lock:
            self.outcomes_unreported[job_type] += 1

    def snapshot(self) -> dict[str, Any]:
        """A plain copy of every counter."""
        with self._lock:
            return {
                "polls": self.polls,
                "emptyPolls": self.empty_polls,
                "pollErrors": self.poll_errors,
                "jobsStarted": dict(self.jobs_started),
                "jobsCompleted": dict(self.jobs_completed),
                "jobsFailed": dict(self.jobs_failed),
                "jobsFailedNonRetryable": dict(self.jobs_failed_non_retryable),
                "outcomesUnreported": dict(self.outcomes_unreported),
                "handlerSeconds": dict(self.handler_seconds),
            }


__all__ = ["InMemoryMetrics", "MetricsHook", "NoopMetrics"]
