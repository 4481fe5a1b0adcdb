"""Outbox relay (event-driven dispatch, docs/dispatch.md): drains due dispatch_outbox rows to the
SQS FIFO queue if elected (a transaction-level advisory lock), reports relay lag and outbox depth;
every second for as long as the invocation loops, like the sweeper.

Within each of those one-second passes it drains every ``DRAIN_INTERVAL_SECONDS`` when looping
(in AWS), so a job reaches the queue about a tenth of a second after it became claimable rather
than up to a second; each drain is one indexed probe when there is nothing to send.
"""

from __future__ import annotations

import time
from collections import Counter

from baton.engine.service import Engine
from baton_lambda import runtime
from baton_lambda.scheduled import PASS_INTERVAL_SECONDS, scheduled

DRAIN_INTERVAL_SECONDS = 0.1
COUNTS = ("relayed", "skipped", "pruned")


def _relay(engine: Engine) -> dict[str, int]:
    publisher = runtime.dispatch_publisher()
    if publisher is None:
        return {}  # no queue configured: nothing can have been written for one to drain
    looping = runtime.settings().duty_loop_seconds > 0
    until = time.monotonic() + (PASS_INTERVAL_SECONDS - DRAIN_INTERVAL_SECONDS if looping else 0)
    totals: Counter[str] = Counter()
    first = True
    while True:
        # Pruning and the lag/depth gauges once per pass (a second), not on every drain.
        result = engine.relay_outbox(publisher, report=first)
        first = False
        totals.update({k: result[k] for k in COUNTS})
        if time.monotonic() + DRAIN_INTERVAL_SECONDS > until:
            return {k: totals[k] for k in COUNTS}
        time.sleep(DRAIN_INTERVAL_SECONDS)


handler = scheduled("relay", _relay)
