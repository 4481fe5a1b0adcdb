"""EVENT ⇄ EVENT: the task's ``sink`` (a WorkflowTask field) and its inputParameters, the
message. ``conductor:<name>`` (Conductor's own queue, which its event handlers listen on) becomes
Baton's queue ``<name>`` (``queue:<name>``: a definition with a queue trigger on it starts an
instance per message, as an event handler's start_workflow action would); ``sqs:<queue>`` stays
SQS; ``conductor`` alone (Conductor's ``conductor:<workflow>:<task reference>``) is ``queue``
alone, the Baton queue ``<definition>-<step id>`` (characters a queue name cannot hold as ``-``).
Other sinks (kafka, amqp, nats…) are refused: Baton has no such broker. ``asyncComplete`` is
accepted without effect: the step completes once its message is published."""

from __future__ import annotations

from typing import Any

from baton.conductor.tasks.common import EXPR, base, fail, label, params_in, task_input
from baton.sinks import OWN_QUEUE, parse_sink

_CONDUCTOR = "conductor:"
_QUEUE = "queue:"


def to_step(task: dict[str, Any], path: str) -> dict[str, Any]:
    where = label(task, path)
    step = base(task, path)
    sink = task.get("sink")
    if not isinstance(sink, str) or not sink.strip():
        raise fail(where, "an EVENT task needs a sink (conductor:<queue> or sqs:<queue>)")
    if sink == "conductor":
        sink = OWN_QUEUE  # the queue named after the workflow and the task
    elif sink.startswith(_CONDUCTOR):
        sink = _QUEUE + sink[len(_CONDUCTOR) :]
    elif sink.startswith(_QUEUE):
        raise fail(where, f"sink {sink!r}: Conductor names its own queues conductor:<name>")
    if not EXPR.search(sink):
        try:
            parse_sink(sink)
        except ValueError as e:
            raise fail(where, str(e).replace(_QUEUE, _CONDUCTOR)) from None
    step.update(type="EVENT", sink=params_in(sink, where), input=task_input(task, path))
    return step


def back(s: dict[str, Any], task: dict[str, Any]) -> list[dict[str, Any]]:
    task["type"] = "EVENT"
    sink = str(s["sink"])
    if sink == OWN_QUEUE:
        task["sink"] = "conductor"
    else:
        task["sink"] = _CONDUCTOR + sink[len(_QUEUE) :] if sink.startswith(_QUEUE) else sink
    return [task]
