"""Retry timing: jittered exponential backoff, shared by the client and the runner.

A :class:`RetryPolicy` says how long to wait before each retry and when to give up; a
:class:`Backoff` walks through those delays for one sequence of attempts (reset it after a
success). Jitter spreads the retries of many workers that failed together, so a recovering
server is not hit by all of them in the same instant.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """How to retry a failed call.

    The n-th retry (n = 0, 1, ...) waits ``min(maximum_interval, initial_interval *
    backoff_coefficient ** n)`` seconds, less a random share of up to ``jitter`` of it (0.5:
    anywhere between half and all of it). ``maximum_attempts`` counts the first call too
    (None: no limit); ``maximum_elapsed`` caps the total time spent retrying (None: no cap).
    """

    initial_interval: float = 0.1
    backoff_coefficient: float = 2.0
    maximum_interval: float = 5.0
    maximum_attempts: int | None = 4
    maximum_elapsed: float | None = None
    jitter: float = 0.5

    def __post_init__(self) -> None:
        if self.initial_interval <= 0:
            raise ValueError("initial_interval must be positive")
        if self.backoff_coefficient < 1:
            raise ValueError("backoff_coefficient must be at least 1")
        if self.maximum_interval < self.initial_interval:
            raise ValueError("maximum_interval must be at least initial_interval")
        if self.maximum_attempts is not None and self.maximum_attempts < 1:
            raise ValueError("maximum_attempts must be at least 1 (or None)")
        if self.maximum_elapsed is not None and self.maximum_elapsed < 0:
            raise ValueError("maximum_elapsed must not be negative")
        if not 0 <= self.jitter <= 1:
            raise ValueError("jitter must be between 0 and 1")

    def ceiling(self, retry: int) -> float:
        """The un-jittered delay before retry number ``retry`` (0-based)."""
        # Cap the exponent so a long outage cannot overflow the float.
        exponent = min(retry, 64)
        grown = self.initial_interval * self.backoff_coefficient**exponent
        return min(self.maximum_interval, grown)

    def delay(self, retry: int, rand: Callable[[], float] = random.random) -> float:
        """A jittered delay before retry number ``retry``: in ``[(1 - jitter) * c, c]``."""
        ceiling = self.ceiling(retry)
        return ceiling * (1.0 - self.jitter * rand())

    def allows(self, attempts_made: int, elapsed: float, next_delay: float) -> bool:
        """May another attempt follow ``attempts_made`` attempts and ``elapsed`` seconds?"""
        if self.maximum_attempts is not None and attempts_made >= self.maximum_attempts:
            return False
        return self.maximum_elapsed is None or elapsed + next_delay <= self.maximum_elapsed


NO_RETRY = RetryPolicy(maximum_attempts=1)


class Backoff:
    """The growing delays of one run of failures (or empty polls); ``reset()`` after success.

    Not thread-safe: each loop owns its own.
    """

    def __init__(self, policy: RetryPolicy, *, rand: Callable[[], float] = random.random) -> None:
        self.policy = policy
        self._rand = rand
        self.failures = 0

    def next_delay(self) -> float:
        """The delay to wait now; each call grows the next one (up to the policy's maximum)."""
        delay = self.policy.delay(self.failures, self._rand)
        self.failures += 1
        return delay

    def reset(self) -> None:
        self.failures = 0


__all__ = ["NO_RETRY", "Backoff", "RetryPolicy"]
