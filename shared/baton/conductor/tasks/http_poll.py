"""HTTP_POLL ⇄ HTTP_POLL: the request of an HTTP task (``http_request``, or its fields at the top
of ``inputParameters``: :mod:`baton.conductor.http_task`) with the polling fields Conductor reads
beside them: ``terminationCondition`` (JavaScript, ``$.output``/``$.input``), ``pollingInterval``
(seconds), ``pollingStrategy`` and ``maxPollCount``, which become the step's own."""

from __future__ import annotations

from typing import Any

from baton.conductor import http_task
from baton.conductor.tasks.common import base, fail, label, script_text, task_input

# Conductor's polling fields → the step's.
FIELDS = {
    "terminationCondition": "terminationCondition",
    "pollingInterval": "pollingIntervalSeconds",
    "pollingStrategy": "pollingStrategy",
    "maxPollCount": "maxPollCount",
}
STRATEGIES = ("FIXED", "LINEAR_BACKOFF", "EXPONENTIAL_BACKOFF")


def _whole(value: Any, field: str, where: str, least: int) -> int:
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or value < least:
        raise fail(where, f"{field} must be a whole number, {least} or more (not {value!r})")
    return value


def to_step(task: dict[str, Any], path: str) -> dict[str, Any]:
    where = label(task, path)
    step = http_task.to_step(task, base(task, path), task_input(task, path), where)
    request = step["request"]
    if not isinstance(request, dict):
        raise fail(
            where,
            f"an HTTP_POLL's {http_task.REQUEST_PARAM} is an object holding its "
            "terminationCondition (not one ${…} expression)",
        )
    # In the top-level form the polling fields sit beside the request's, in the input.
    source = request if "terminationCondition" in request else step["input"]
    request = {k: v for k, v in request.items() if k not in FIELDS}
    given = source.get("terminationCondition")
    field = f"{http_task.REQUEST_PARAM}.terminationCondition"
    step.update(
        type="HTTP_POLL",
        request=request,
        terminationCondition=script_text(given, where, field),
    )
    if source.get("pollingInterval") is not None:
        step["pollingIntervalSeconds"] = _whole(
            source["pollingInterval"], "pollingInterval", where, 1
        )
    if source.get("maxPollCount") is not None:
        step["maxPollCount"] = _whole(source["maxPollCount"], "maxPollCount", where, 1)
    strategy = source.get("pollingStrategy")
    if strategy is not None:
        if strategy not in STRATEGIES:
            raise fail(where, f"pollingStrategy {strategy!r} is not one of {', '.join(STRATEGIES)}")
        step["pollingStrategy"] = strategy
    return step


def back(s: dict[str, Any], task: dict[str, Any], params_out: Any) -> list[dict[str, Any]]:
    http_task.to_task({**s, "type": "HTTP"}, task, params_out)
    task["type"] = "HTTP_POLL"
    polling = {c: s[b] for c, b in FIELDS.items() if s.get(b) is not None}
    params = dict(task["inputParameters"])
    request = params.get(http_task.REQUEST_PARAM)
    if isinstance(request, dict):
        params[http_task.REQUEST_PARAM] = {**request, **polling}
    else:
        params.update(polling)
    task["inputParameters"] = params
    return [task]
