"""Each RPC of the ``WorkflowEngine`` service and the REST operation it is answered by.

An RPC's request message holds the REST operation's path parameters (fields named as the path's
``{params}``), its query parameters (the other fields, for GET and DELETE) or its body (the other
fields, for POST and PUT; or one field's value, ``body=``, when the REST body is a whole message
such as PUT /v1/taskdefs/{name}'s task definition). A test checks this table against the proto's
service (each RPC's comment names its twin) and the route table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

_PARAM = re.compile(r"{(\w+)}")


@dataclass(frozen=True, slots=True)
class RestTwin:
    """The REST operation of an RPC: method and path template(s), the first whose parameters the
    request all has being taken (GetDefinition: a version given, or the latest)."""

    rpc: str
    method: str
    paths: tuple[str, ...]
    body: str | None = None  # a field whose value is the whole REST body; None: every other field

    def params(self, path: str) -> list[str]:
        return _PARAM.findall(path)


@dataclass(frozen=True, slots=True)
class RestCall:
    """One REST request made from an RPC's request message (as JSON, lowerCamelCase)."""

    method: str
    template: str  # the route's path template (API Gateway's ``resource``)
    path: str  # the concrete path, parameters percent-encoded
    path_parameters: dict[str, str]
    query: dict[str, str]
    body: Any  # JSON value, or None for GET and DELETE


def _t(rpc: str, method: str, *paths: str, body: str | None = None) -> RestTwin:
    return RestTwin(rpc, method, paths, body)


TWINS: tuple[RestTwin, ...] = (
    _t("GetConfig", "GET", "/v1/config"),
    _t("CreatePayload", "POST", "/v1/payloads"),
    _t("GetOpenApi", "GET", "/v1/openapi.json"),
    _t("GetHealth", "GET", "/v1/health"),
    _t("DeleteDefinition", "DELETE", "/v1/definitions/{name}/versions/{version}"),
    _t("DeleteInstance", "DELETE", "/v1/instances/{id}"),
    _t("RegisterDefinition", "POST", "/v1/definitions"),
    _t("ListDefinitions", "GET", "/v1/definitions"),
    _t(
        "GetDefinition",
        "GET",
        "/v1/definitions/{name}/versions/{version}",
        "/v1/definitions/{name}",
    ),
    _t("ListTaskDefs", "GET", "/v1/taskdefs"),
    _t("PutTaskDef", "PUT", "/v1/taskdefs/{name}", body="taskDef"),
    _t("GetTaskDef", "GET", "/v1/taskdefs/{name}"),
    _t("DeleteTaskDef", "DELETE", "/v1/taskdefs/{name}"),
    _t("StartInstance", "POST", "/v1/instances"),
    _t("StartInstances", "POST", "/v1/instances/batch"),
    _t("SearchInstances", "GET", "/v1/instances"),
    _t("GetInstance", "GET", "/v1/instances/{id}"),
    _t("ListSteps", "GET", "/v1/instances/{id}/steps"),
    _t("GetHistory", "GET", "/v1/instances/{id}/history"),
    _t("CancelInstance", "POST", "/v1/instances/{id}/cancel"),
    _t("CompleteUserTask", "POST", "/v1/instances/{id}/user-tasks/{stepId}/complete"),
    _t("Signal", "POST", "/v1/instances/{id}/signals/{stepId}"),
    _t("RetryInstance", "POST", "/v1/instances/{id}/retry"),
    _t("RerunInstance", "POST", "/v1/instances/{id}/rerun"),
    _t("RestartInstance", "POST", "/v1/instances/{id}/restart"),
    _t("PauseInstance", "POST", "/v1/instances/{id}/pause"),
    _t("ResumeInstance", "POST", "/v1/instances/{id}/resume"),
    _t("PollJobs", "POST", "/v1/jobs/poll"),
    _t("CompleteJob", "POST", "/v1/jobs/complete"),
    _t("CompleteBatch", "POST", "/v1/jobs/complete-batch"),
    _t("FailJob", "POST", "/v1/jobs/fail"),
    _t("Heartbeat", "POST", "/v1/jobs/heartbeat"),
    _t("ClaimJob", "POST", "/v1/jobs/{id}/claim"),
    _t("StopWorker", "POST", "/v1/workers/stop"),
    _t("Push", "POST", "/v1/queues/{name}/push"),
    _t("Stats", "GET", "/v1/queues/{name}/stats"),
    _t("Peek", "GET", "/v1/queues/{name}/peek"),
    _t("Purge", "DELETE", "/v1/queues/{name}"),
    _t("Dequeue", "POST", "/v1/queues/{name}/dequeue"),
    _t("Ack", "POST", "/v1/queues/{name}/tasks/{taskId}/ack"),
    _t("Nack", "POST", "/v1/queues/{name}/tasks/{taskId}/nack"),
    _t("ListQueues", "GET", "/v1/queues"),
    _t("ListQueueTasks", "GET", "/v1/queues/{name}/tasks"),
    _t("Redrive", "POST", "/v1/queues/{name}/redrive"),
    _t("CreateSchedule", "POST", "/v1/schedules"),
    _t("ListSchedules", "GET", "/v1/schedules"),
    _t("GetSchedule", "GET", "/v1/schedules/{id}"),
    _t("ReplaceSchedule", "PUT", "/v1/schedules/{id}"),
    _t("DeleteSchedule", "DELETE", "/v1/schedules/{id}"),
    _t("PauseSchedule", "POST", "/v1/schedules/{id}/pause"),
    _t("UnpauseSchedule", "POST", "/v1/schedules/{id}/unpause"),
    _t("TriggerSchedule", "POST", "/v1/schedules/{id}/trigger"),
    _t("BackfillSchedule", "POST", "/v1/schedules/{id}/backfill"),
)

BY_RPC: dict[str, RestTwin] = {t.rpc: t for t in TWINS}

# The worker's hot path (what a runner calls per job): answered by the REST view directly, the
# request's values validated as REST validates its body and the view's answer made into the
# response message, without JSON text between them. The others go through the REST handler.
DIRECT: frozenset[str] = frozenset(
    {"PollJobs", "CompleteJob", "CompleteBatch", "FailJob", "Heartbeat", "ClaimJob", "StopWorker"}
)


class MissingPathField(ValueError):
    """The request lacks a field its REST path needs (``id`` of GetInstance)."""

    def __init__(self, rpc: str, fields: list[str]) -> None:
        self.fields = fields
        super().__init__(f"{rpc} needs {' and '.join(fields)}: the REST path takes it")


def rest_call(twin: RestTwin, request: dict[str, Any]) -> RestCall:
    """The REST request for ``request`` (the RPC's message as REST JSON)."""
    template = next(
        (p for p in twin.paths if all(_given(request.get(k)) for k in twin.params(p))),
        None,
    )
    if template is None:
        last = twin.paths[-1]
        raise MissingPathField(
            twin.rpc, [k for k in twin.params(last) if not _given(request.get(k))]
        )
    names = twin.params(template)
    params = {k: str(request[k]) for k in names}
    path = _PARAM.sub(lambda m: quote(params[m.group(1)], safe=""), template)
    rest = {k: v for k, v in request.items() if k not in names}
    if twin.method in ("GET", "DELETE"):
        return RestCall(twin.method, template, path, params, _query(rest), None)
    body = rest.get(twin.body) if twin.body is not None else rest
    return RestCall(twin.method, template, path, params, {}, {} if body is None else body)


def _given(value: Any) -> bool:
    return value is not None and value != ""


def _query(fields: dict[str, Any]) -> dict[str, str]:
    query = {}
    for name, value in fields.items():
        if isinstance(value, bool):
            query[name] = "true" if value else "false"
        elif isinstance(value, str | int | float):
            query[name] = str(value)
        else:  # no query field of the proto is a list or message (the contract test checks)
            raise TypeError(f"query parameter {name} cannot be {type(value).__name__}")
    return query
