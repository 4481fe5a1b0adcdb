"""Conductor's HTTP task ⇄ Baton's HTTP step.

Conductor gives the request as ``inputParameters.http_request`` (uri, method, headers, body,
accept, contentType, connectionTimeOut, readTimeOut), or, in its newer form, as those fields at
the top of ``inputParameters``. Either becomes the step's ``request``; the other input parameters
stay its ``input``. In the top-level form the fields stay in the input as well, which is how the
definition reads back in the form it was sent. Retries and timeouts: the task's ``retryCount``
and an inline ``taskDefinition``'s settings, over those of the TaskDef registered under the
task's ``name`` (applied when an instance starts), as a SIMPLE task's. The output is Conductor's
(``response.statusCode/headers/body/reasonPhrase``); a failed call's reason is the step's error,
shown as the task's ``reasonForIncompletion``.
"""

from __future__ import annotations

from typing import Any

from baton.conductor.errors import Untranslatable
from baton.errors import Problem
from baton.httpcall.request import FIELDS, USED_FIELDS

REQUEST_PARAM = "http_request"
# Fields of the top-level form (Conductor reads the request from these when http_request is
# absent); ``uri`` marks it.
TOP_LEVEL_FIELDS = USED_FIELDS
# Settings an inline taskDefinition (or the task's own retryCount) may give the step.
SETTINGS = (
    "retryCount",
    "retryLogic",
    "retryDelaySeconds",
    "maxRetryDelaySeconds",
    "backoffScaleFactor",
    "backoffJitterMs",
    "totalTimeoutSeconds",
    "timeoutSeconds",
    "responseTimeoutSeconds",
    "timeoutPolicy",
)


def to_step(
    task: dict[str, Any], step: dict[str, Any], params: dict[str, Any], label: str
) -> dict[str, Any]:
    """The HTTP step for ``task``; ``step`` is its base (id, name), ``params`` its input
    parameters with expressions already mapped to Baton's."""
    params = dict(params)
    if REQUEST_PARAM in params:
        request = params.pop(REQUEST_PARAM)
        if not isinstance(request, dict | str):
            raise _fail(label, f"inputParameters.{REQUEST_PARAM} must be an object")
    elif "uri" in params:
        request = {k: params[k] for k in TOP_LEVEL_FIELDS if k in params}
    else:
        raise _fail(label, f"an HTTP task needs inputParameters.{REQUEST_PARAM} (or uri)")
    step.update(type="HTTP", request=request, input=params)
    inline = task.get("taskDefinition")
    if isinstance(inline, dict):
        step.update({k: inline[k] for k in SETTINGS if inline.get(k) is not None})
        if step.get("responseTimeoutSeconds") == 0:
            del step["responseTimeoutSeconds"]
    if task.get("retryCount") is not None:
        step["retryCount"] = task["retryCount"]
    if step.get("timeoutPolicy") == "RETRY":
        raise _fail(label, "timeoutPolicy RETRY is not supported by Baton")
    return step


def to_task(step: dict[str, Any], task: dict[str, Any], params_out: Any) -> None:
    """Fill ``task`` (name, reference and input parameters already set) from an HTTP step."""
    task["type"] = "HTTP"
    request = step.get("request")
    given = dict(step.get("input") or {})
    top_level = isinstance(request, dict) and request == {
        k: given[k] for k in TOP_LEVEL_FIELDS if k in given
    }
    if not top_level:
        task["inputParameters"] = {**params_out(given), REQUEST_PARAM: params_out(request)}
    if step.get("retryCount") is not None:
        task["retryCount"] = step["retryCount"]
    inline = {k: step[k] for k in SETTINGS if k != "retryCount" and k in step}
    if inline:
        task["taskDefinition"] = {"name": task["name"], **inline}


def _fail(label: str, message: str) -> Untranslatable:
    return Untranslatable([Problem(label, message)])


__all__ = ["FIELDS", "REQUEST_PARAM", "to_step", "to_task"]
