"""Outbox relay (event-driven dispatch, docs/dispatch.md): drains due dispatch_outbox rows to the
SQS FIFO queue if elected (a transaction-level advisory lock), reports relay lag and outbox depth;
every second for as long as the invocation loops, like the sweeper."""

from __future__ import annotations

from baton.engine.service import Engine
from baton_lambda import runtime
from baton_lambda.scheduled import scheduled


def _relay(engine: Engine) -> dict[str, int]:
    publisher = runtime.dispatch_publisher()
    if publisher is None:
        return {}  # no queue configured: nothing can have been written for one to drain
    result = engine.relay_outbox(publisher)
    return {k: result[k] for k in ("relayed", "skipped", "pruned")}


handler = scheduled("relay", _relay)
