"""The OpenAPI 3.1 document, generated from the route table and the pydantic models."""

from __future__ import annotations

import functools
import re
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from baton import __version__
from baton.api import models as m
from baton.api import schedule_models as sm
from baton.routes import ROUTES

# (method, path) -> (request body model, success status, response model)
OPERATIONS: dict[tuple[str, str], tuple[type[BaseModel] | None, int, type[BaseModel] | None]] = {
    ("GET", "/v1/openapi.json"): (None, 200, None),
    ("GET", "/v1/health"): (None, 200, m.Health),
    ("GET", "/v1/config"): (None, 200, m.ServerConfig),
    ("POST", "/v1/payloads"): (m.CreatePayloadRequest, 201, m.PayloadUpload),
    ("POST", "/v1/definitions"): (m.Definition, 201, m.Definition),
    ("GET", "/v1/definitions"): (None, 200, m.DefinitionPage),
    ("GET", "/v1/definitions/{name}"): (None, 200, m.Definition),
    ("GET", "/v1/definitions/{name}/versions/{version}"): (None, 200, m.Definition),
    ("DELETE", "/v1/definitions/{name}/versions/{version}"): (None, 200, m.Definition),
    ("GET", "/v1/taskdefs"): (None, 200, m.TaskDefPage),
    ("PUT", "/v1/taskdefs/{name}"): (m.TaskDefinition, 200, m.TaskDefinition),
    ("GET", "/v1/taskdefs/{name}"): (None, 200, m.TaskDefinition),
    ("DELETE", "/v1/taskdefs/{name}"): (None, 200, m.TaskDefinition),
    ("DELETE", "/v1/instances/{id}"): (None, 200, m.DeletedInstance),
    ("POST", "/v1/instances"): (m.StartInstanceRequest, 201, m.Instance),
    ("POST", "/v1/instances/batch"): (m.StartInstancesRequest, 200, m.StartInstancesResponse),
    ("GET", "/v1/instances"): (None, 200, m.InstancePage),
    ("GET", "/v1/instances/{id}"): (None, 200, m.Instance),
    ("GET", "/v1/instances/{id}/steps"): (None, 200, m.StepExecutionPage),
    ("GET", "/v1/instances/{id}/history"): (None, 200, m.HistoryPage),
    ("POST", "/v1/instances/{id}/cancel"): (m.CancelInstanceRequest, 200, m.Instance),
    ("POST", "/v1/instances/{id}/user-tasks/{stepId}/complete"): (
        m.CompleteUserTaskRequest,
        200,
        m.Instance,
    ),
    ("POST", "/v1/instances/{id}/signals/{stepId}"): (m.SignalRequest, 200, m.Instance),
    ("POST", "/v1/instances/{id}/retry"): (m.InstanceOperationRequest, 200, m.Instance),
    ("POST", "/v1/instances/{id}/rerun"): (m.RerunInstanceRequest, 200, m.Instance),
    ("POST", "/v1/instances/{id}/restart"): (m.RestartInstanceRequest, 200, m.Instance),
    ("POST", "/v1/instances/{id}/pause"): (m.InstanceOperationRequest, 200, m.Instance),
    ("POST", "/v1/instances/{id}/resume"): (m.InstanceOperationRequest, 200, m.Instance),
    ("POST", "/v1/jobs/poll"): (m.PollRequest, 200, m.PollResponse),
    ("POST", "/v1/jobs/complete"): (m.CompleteJobRequest, 200, m.CompleteJobResponse),
    ("POST", "/v1/jobs/complete-batch"): (m.CompleteBatchRequest, 200, m.CompleteBatchResponse),
    ("POST", "/v1/jobs/fail"): (m.FailJobRequest, 200, m.FailJobResponse),
    ("POST", "/v1/jobs/heartbeat"): (m.HeartbeatRequest, 200, m.HeartbeatResponse),
    ("POST", "/v1/jobs/{id}/claim"): (m.ClaimJobRequest, 200, m.Job),
    ("POST", "/v1/workers/stop"): (m.StopWorkerRequest, 200, m.StopWorkerResponse),
    ("POST", "/v1/queues/{name}/push"): (m.PushRequest, 201, m.PushResponse),
    ("GET", "/v1/queues/{name}/stats"): (None, 200, m.QueueStats),
    ("GET", "/v1/queues/{name}/peek"): (None, 200, m.QueueTaskList),
    ("DELETE", "/v1/queues/{name}"): (None, 200, m.PurgeResponse),
    ("GET", "/v1/queues"): (None, 200, m.QueuePage),
    ("GET", "/v1/queues/{name}/tasks"): (None, 200, m.QueueTaskPage),
    ("POST", "/v1/queues/{name}/redrive"): (m.RedriveRequest, 200, m.RedriveResponse),
    ("POST", "/v1/queues/{name}/dequeue"): (m.DequeueRequest, 200, m.QueueTaskList),
    ("POST", "/v1/queues/{name}/tasks/{taskId}/ack"): (m.AckRequest, 200, m.SettleResponse),
    ("POST", "/v1/queues/{name}/tasks/{taskId}/nack"): (m.NackRequest, 200, m.SettleResponse),
    ("POST", "/v1/schedules"): (sm.ScheduleRequest, 201, sm.Schedule),
    ("GET", "/v1/schedules"): (None, 200, sm.SchedulePage),
    ("GET", "/v1/schedules/{id}"): (None, 200, sm.Schedule),
    ("PUT", "/v1/schedules/{id}"): (sm.ScheduleRequest, 200, sm.Schedule),
    ("DELETE", "/v1/schedules/{id}"): (None, 200, sm.DeletedSchedule),
    ("POST", "/v1/schedules/{id}/pause"): (sm.PauseScheduleRequest, 200, sm.Schedule),
    ("POST", "/v1/schedules/{id}/unpause"): (sm.ScheduleOperationRequest, 200, sm.Schedule),
    ("POST", "/v1/schedules/{id}/trigger"): (
        sm.ScheduleOperationRequest,
        202,
        sm.ScheduleTriggered,
    ),
    ("POST", "/v1/schedules/{id}/backfill"): (sm.BackfillRequest, 202, sm.BackfillResponse),
}

QUERY_PARAMETERS: dict[tuple[str, str], list[tuple[str, str]]] = {
    ("GET", "/v1/instances"): [
        ("status", "string"),
        ("definitionName", "string"),
        ("correlationId", "string"),
        ("createdAfter", "string"),
        ("createdBefore", "string"),
        ("archived", "boolean"),
        ("from", "string"),
        ("to", "string"),
        ("limit", "integer"),
        ("pageToken", "string"),
    ],
    ("GET", "/v1/instances/{id}"): [("includeSteps", "boolean"), ("resolvePayloads", "boolean")],
    ("GET", "/v1/instances/{id}/steps"): [("limit", "integer"), ("pageToken", "string")],
    ("GET", "/v1/instances/{id}/history"): [("limit", "integer"), ("pageToken", "string")],
    ("GET", "/v1/definitions"): [("limit", "integer"), ("pageToken", "string")],
    ("GET", "/v1/taskdefs"): [("limit", "integer"), ("pageToken", "string")],
    ("GET", "/v1/queues/{name}/peek"): [("limit", "integer")],
    ("GET", "/v1/queues"): [("limit", "integer"), ("pageToken", "string")],
    ("GET", "/v1/schedules"): [("limit", "integer"), ("pageToken", "string")],
    ("GET", "/v1/queues/{name}/tasks"): [
        ("status", "string"),
        ("limit", "integer"),
        ("pageToken", "string"),
    ],
}

# Second success statuses of an operation, with the same body as its first.
OTHER_SUCCESS: dict[tuple[str, str], dict[str, str]] = {
    ("POST", "/v1/schedules"): {"200": "A dry run (dryRun: true): the schedule as it would be"},
}

# Error statuses whose body is not a problem: health's 503 is its own report.
ERROR_BODIES: dict[tuple[str, str], dict[str, type[BaseModel]]] = {
    ("GET", "/v1/health"): {"503": m.Health},
}

_ERRORS = {
    "400": "Malformed JSON",
    "401": "Missing credentials",
    "403": "Bad credentials",
    "404": "Unknown id or route",
    "409": "Conflict with the current state",
    "413": "Payload too large",
    "422": "Validation failed: every problem is listed",
    "429": "Throttled (a job type at its limit, or the function's concurrency); retry after "
    "Retry-After seconds",
    "503": "Database unavailable; retry after Retry-After seconds",
}


def _ref(model: type[BaseModel]) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{model.__name__}"}


def _operation_id(method: str, path: str) -> str:
    words = re.sub(r"[{}]", "", path).replace("/v1/", "").replace("-", "/").split("/")
    return method.lower() + "".join(w[:1].upper() + w[1:] for w in words if w and w != "json")


def _error_response(method: str, path: str, code: str, text: str) -> dict[str, Any]:
    own = ERROR_BODIES.get((method, path), {}).get(code)
    if own is not None:
        return {"description": text, "content": {"application/json": {"schema": _ref(own)}}}
    return {
        "description": text,
        "content": {"application/problem+json": {"schema": _ref(m.ProblemDetails)}},
    }


@functools.cache
def document() -> dict[str, Any]:
    models: set[type[BaseModel]] = {m.ProblemDetails}
    for req, _, resp in OPERATIONS.values():
        models.update(x for x in (req, resp) if x is not None)
    for bodies in ERROR_BODIES.values():
        models.update(bodies.values())
    ordered = sorted(models, key=lambda c: c.__name__)
    _, schema = models_json_schema(
        [(c, "serialization") for c in ordered],
        by_alias=True,
        ref_template="#/components/schemas/{model}",
    )
    paths: dict[str, dict[str, Any]] = {}
    for route in ROUTES:
        req, status, resp = OPERATIONS[(route.method, route.path)]
        op: dict[str, Any] = {
            "operationId": _operation_id(route.method, route.path),
            "summary": route.summary,
            "tags": [route.function],
            "responses": {
                str(status): {
                    "description": "Success",
                    "content": {
                        "application/json": {"schema": _ref(resp) if resp else {"type": "object"}}
                    },
                },
                **{
                    code: {
                        "description": text,
                        "content": {
                            "application/json": {
                                "schema": _ref(resp) if resp else {"type": "object"}
                            }
                        },
                    }
                    for code, text in OTHER_SUCCESS.get((route.method, route.path), {}).items()
                },
                **{
                    code: _error_response(route.method, route.path, code, text)
                    for code, text in _ERRORS.items()
                    if not (route.public and code in ("401", "403"))
                },
            },
            # Public routes (health, this document) need no credentials.
            "security": [] if route.public else [{"apiKey": []}],
        }
        params = [
            {"name": p, "in": "path", "required": True, "schema": {"type": "string"}}
            for p in re.findall(r"{(\w+)}", route.path)
        ]
        params += [
            {"name": q, "in": "query", "required": False, "schema": {"type": t}}
            for q, t in QUERY_PARAMETERS.get((route.method, route.path), [])
        ]
        if params:
            op["parameters"] = params
        if req is not None:
            op["requestBody"] = {
                "required": True,
                "content": {"application/json": {"schema": _ref(req)}},
            }
        paths.setdefault(route.path, {})[route.method.lower()] = op
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Baton workflow engine",
            "version": __version__,
            "description": "Workflow definitions, instances and jobs. Errors are RFC 9457 "
            "problem details.",
        },
        "paths": paths,
        "components": {
            "schemas": schema.get("$defs", {}),
            "securitySchemes": {"apiKey": {"type": "apiKey", "in": "header", "name": "x-api-key"}},
        },
    }
