"""Scheduled functions (EventBridge): a duty done once a second for as long as the invocation
is configured to loop (``BATON_DUTY_LOOP_SECONDS``), logged and measured.

EventBridge fires at most once a minute, and a timeout must fire within 2 s of its due time, so in
AWS one invocation keeps doing its duty about every second for most of a minute, stopping early
when its remaining time runs low. Locally the timer invokes every second and the loop is off.
Every wake-up is a row with a due time taken with row locks (SKIP LOCKED), so two overlapping
invocations never act twice on the same row.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from typing import Any, cast

from aws_lambda_powertools import Logger
from aws_lambda_powertools.metrics import EphemeralMetrics
from baton.engine.service import Engine

from baton_lambda import runtime
from baton_lambda.emf import EmfMetrics

PASS_INTERVAL_SECONDS = 1.0
# Stop looping while this much of the invocation's time is left (a pass, the metrics flush).
MARGIN_MILLIS = 5_000

Duty = Callable[[Engine], dict[str, int]]
ScheduledHandler = Callable[[dict[str, Any], Any], dict[str, int]]


def scheduled(function: str, duty: Duty) -> ScheduledHandler:
    """The Lambda entry point of a scheduled function doing ``duty``."""
    logger = Logger(service=f"baton-{function}")
    metrics = EphemeralMetrics(service=f"baton-{function}")
    sink = EmfMetrics(metrics)

    @logger.inject_lambda_context(clear_state=True)
    def handle(event: dict[str, Any], context: Any) -> dict[str, int]:
        engine = runtime.engine(sink)
        loop = runtime.settings().duty_loop_seconds
        started = time.monotonic()
        totals: Counter[str] = Counter()
        passes = 0
        while True:
            began = time.monotonic()
            try:
                result = duty(engine)
            finally:
                sink.publish()  # the pass's metrics, flushed by log_metrics at the end
            passes += 1
            totals.update(result)
            if any(result.values()):
                logger.info(f"{function} pass", extra=result)
            # A pass that ran long (the system tasks' calls) moves the next one to its end.
            next_pass = max(began + PASS_INTERVAL_SECONDS, time.monotonic())
            if next_pass - started > loop or not _time_left(context, next_pass):
                break
            time.sleep(max(0.0, next_pass - time.monotonic()))
        return {**totals, "passes": passes}

    return cast(ScheduledHandler, metrics.log_metrics(handle))


def _time_left(context: Any, at: float) -> bool:
    """Will the invocation still have its margin at monotonic time ``at``?"""
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    if remaining is None:
        return True
    return bool(remaining() - (at - time.monotonic()) * 1000 > MARGIN_MILLIS)
