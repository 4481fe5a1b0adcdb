"""EVENT steps' sinks: ``queue:<name>`` (a Baton queue) or ``sqs:<queue name or URL>``."""

from __future__ import annotations

import re
from typing import Any

from baton.model import QUEUE_NAME_PATTERN, QUEUE_NAME_RULE

_QUEUE_NAME = re.compile(QUEUE_NAME_PATTERN)
KINDS = ("queue", "sqs")


def parse_sink(sink: Any) -> tuple[str, str]:
    """``(kind, target)`` of a sink; ValueError saying what is wrong with it."""
    if not isinstance(sink, str) or ":" not in sink:
        raise ValueError(
            f"sink {sink!r} is not one Baton publishes to: queue:<name> (a Baton queue) or "
            "sqs:<queue name or URL>"
        )
    kind, _, target = sink.partition(":")
    if kind not in KINDS:
        raise ValueError(
            f"sink {sink!r}: Baton publishes to queue:<name> (a Baton queue) and "
            f"sqs:<queue name or URL>, not {kind}:"
        )
    if kind == "queue" and not _QUEUE_NAME.fullmatch(target):
        raise ValueError(f"sink {sink!r}: {target!r} is no queue name ({QUEUE_NAME_RULE})")
    if kind == "sqs" and not target:
        raise ValueError(f"sink {sink!r} names no SQS queue")
    return kind, target
