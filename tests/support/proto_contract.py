"""The proto contract at test time: generate Python classes from engine.proto (grpcio-tools,
never committed) and check JSON bodies against their messages with unknown fields refused."""

from __future__ import annotations

import functools
import importlib
import json
import re
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import Message

ROOT = Path(__file__).resolve().parents[2]
PROTO = ROOT / "proto" / "workflow" / "v1" / "engine.proto"

# (method, route path) -> message of the success response body
RESPONSES: dict[tuple[str, str], str] = {
    ("GET", "/v1/openapi.json"): "google.protobuf.Struct",
    ("GET", "/v1/health"): "Health",
    ("GET", "/v1/config"): "ServerConfig",
    ("POST", "/v1/payloads"): "PayloadUpload",
    ("POST", "/v1/definitions"): "Definition",
    ("GET", "/v1/definitions"): "DefinitionPage",
    ("GET", "/v1/definitions/{name}"): "Definition",
    ("GET", "/v1/definitions/{name}/versions/{version}"): "Definition",
    ("DELETE", "/v1/definitions/{name}/versions/{version}"): "Definition",
    ("GET", "/v1/taskdefs"): "TaskDefPage",
    ("PUT", "/v1/taskdefs/{name}"): "TaskDef",
    ("GET", "/v1/taskdefs/{name}"): "TaskDef",
    ("DELETE", "/v1/taskdefs/{name}"): "TaskDef",
    ("DELETE", "/v1/instances/{id}"): "DeletedInstance",
    ("POST", "/v1/instances"): "Instance",
    ("POST", "/v1/instances/batch"): "StartInstancesResponse",
    ("GET", "/v1/instances"): "InstancePage",
    ("GET", "/v1/instances/{id}"): "Instance",
    ("GET", "/v1/instances/{id}/steps"): "StepExecutionPage",
    ("GET", "/v1/instances/{id}/history"): "HistoryPage",
    ("POST", "/v1/instances/{id}/cancel"): "Instance",
    ("POST", "/v1/instances/{id}/user-tasks/{stepId}/complete"): "Instance",
    ("POST", "/v1/instances/{id}/signals/{stepId}"): "Instance",
    ("POST", "/v1/instances/{id}/retry"): "Instance",
    ("POST", "/v1/instances/{id}/rerun"): "Instance",
    ("POST", "/v1/instances/{id}/restart"): "Instance",
    ("POST", "/v1/instances/{id}/pause"): "Instance",
    ("POST", "/v1/instances/{id}/resume"): "Instance",
    ("POST", "/v1/jobs/poll"): "PollJobsResponse",
    ("POST", "/v1/jobs/complete"): "CompleteJobResponse",
    ("POST", "/v1/jobs/complete-batch"): "CompleteBatchResponse",
    ("POST", "/v1/jobs/fail"): "FailJobResponse",
    ("POST", "/v1/jobs/heartbeat"): "HeartbeatResponse",
    ("POST", "/v1/jobs/{id}/claim"): "Job",
    ("POST", "/v1/workers/stop"): "StopWorkerResponse",
    ("POST", "/v1/queues/{name}/push"): "PushResponse",
    ("GET", "/v1/queues/{name}/stats"): "QueueStats",
    ("GET", "/v1/queues/{name}/peek"): "QueueTaskList",
    ("DELETE", "/v1/queues/{name}"): "PurgeResponse",
    ("POST", "/v1/queues/{name}/dequeue"): "QueueTaskList",
    ("POST", "/v1/queues/{name}/tasks/{taskId}/ack"): "SettleResponse",
    ("POST", "/v1/queues/{name}/tasks/{taskId}/nack"): "SettleResponse",
    ("GET", "/v1/queues"): "QueuePage",
    ("GET", "/v1/queues/{name}/tasks"): "QueueTaskPage",
    ("POST", "/v1/queues/{name}/redrive"): "RedriveResponse",
    ("POST", "/v1/schedules"): "Schedule",
    ("GET", "/v1/schedules"): "SchedulePage",
    ("GET", "/v1/schedules/{id}"): "Schedule",
    ("PUT", "/v1/schedules/{id}"): "Schedule",
    ("DELETE", "/v1/schedules/{id}"): "DeletedSchedule",
    ("POST", "/v1/schedules/{id}/pause"): "Schedule",
    ("POST", "/v1/schedules/{id}/unpause"): "Schedule",
    ("POST", "/v1/schedules/{id}/trigger"): "ScheduleTriggered",
    ("POST", "/v1/schedules/{id}/backfill"): "BackfillResponse",
}


# (method, route path) -> {error status: message} for errors whose body is not a Problem.
ERROR_RESPONSES: dict[tuple[str, str], dict[int, str]] = {
    ("GET", "/v1/health"): {503: "Health"},
}


def error_message(key: tuple[str, str] | None, status: int) -> str:
    """The message of an error response's body: a Problem unless the route says otherwise."""
    return ERROR_RESPONSES.get(key, {}).get(status, "Problem") if key else "Problem"


@functools.cache
def engine_pb2() -> ModuleType:
    from grpc_tools import protoc

    out = Path(tempfile.mkdtemp(prefix="baton-proto-"))
    include = Path(protoc.__file__).parent / "_proto"
    code = protoc.main(
        ["protoc", f"-I{ROOT / 'proto'}", f"-I{include}", f"--python_out={out}", str(PROTO)]
    )
    if code != 0:
        raise RuntimeError(f"protoc failed with {code}")
    sys.path.insert(0, str(out))
    try:
        return importlib.import_module("workflow.v1.engine_pb2")
    finally:
        sys.path.remove(str(out))


def message(name: str) -> Message:
    if name == "google.protobuf.Struct":
        from google.protobuf import struct_pb2

        return struct_pb2.Struct()
    cls = getattr(engine_pb2(), name)
    msg: Message = cls()
    return msg


def parse(name: str, body: Any) -> Message:
    """Parse a JSON body into message ``name``; unknown fields raise ParseError."""
    msg = message(name)
    json_format.Parse(json.dumps(body), msg, ignore_unknown_fields=False)
    return msg


def route_of(method: str, path: str) -> tuple[str, str] | None:
    """The route-table template matching a concrete path (e.g. /v1/instances/{id})."""
    path = path.split("?", 1)[0]
    for m, template in RESPONSES:
        if m != method:
            continue
        pattern = "^" + re.sub(r"\{[^}]+\}", "[^/]+", template) + "$"
        if re.match(pattern, path):
            return m, template
    return None


def check_response(method: str, path: str, status: int, body: Any) -> None:
    """Parse a response body into the message the contract names for it."""
    key = route_of(method, path)
    if status >= 400:
        parse(error_message(key, status), body)
        return
    if key is not None and body is not None:
        parse(RESPONSES[key], body)
