"""EVENT steps' sinks: ``queue:<name>`` (a Baton queue), ``queue`` alone (the queue named after
the definition and the step: :func:`own_queue`) or ``sqs:<queue name or URL>``."""

from __future__ import annotations

import re
from typing import Any

from baton.model import QUEUE_NAME_PATTERN, QUEUE_NAME_RULE

_QUEUE_NAME = re.compile(QUEUE_NAME_PATTERN)
_NOT_IN_QUEUE_NAMES = re.compile(r"[^A-Za-z0-9-]")
KINDS = ("queue", "sqs")
OWN_QUEUE = "queue"


def own_queue(definition: str, step_id: str) -> str:
    """The queue of a sink ``queue`` alone: ``<definition>-<step id>``, any character a queue
    name cannot hold as ``-``, at most 64 characters (Conductor's ``conductor`` sink publishes to
    ``conductor:<workflow>:<task reference>``)."""
    return _NOT_IN_QUEUE_NAMES.sub("-", f"{definition}-{step_id}")[:64]


def parse_sink(sink: Any) -> tuple[str, str]:
    """``(kind, target)`` of a sink (``queue`` alone: target ""); ValueError saying what is
    wrong with it."""
    if sink == OWN_QUEUE:
        return OWN_QUEUE, ""
    if not isinstance(sink, str) or ":" not in sink:
        raise ValueError(
            f"sink {sink!r} is not one Baton publishes to: queue:<name> (a Baton queue), queue "
            "(the definition's and step's own) or sqs:<queue name or URL>"
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
