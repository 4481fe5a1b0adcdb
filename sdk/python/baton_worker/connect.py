"""The Connect protocol as the client's wire (``protocol="connect"`` or ``BATON_PROTOCOL=connect``):
each REST call the client makes goes as the RPC that mirrors it, a binary protobuf POST to
``/rpc/workflow.v1.WorkflowEngine/<Method>``, and its answer comes back as the same JSON a REST
answer holds. Errors come back as the same exceptions (the problem travels in the error's
details). Needs ``protobuf`` (``pip install 'baton-worker[rpc]'``).

The messages come from ``engine.binpb``, the descriptor set compiled from the engine's proto (the
same bytes the engine ships; a test checks both against the proto).
"""

from __future__ import annotations

import base64
import functools
import math
import re
from dataclasses import dataclass
from importlib import resources
from typing import Any
from urllib.parse import unquote

SERVICE = "workflow.v1.WorkflowEngine"
PROTO = "application/proto"
PROTOCOLS = ("rest", "connect")
_PARAM = re.compile(r"{(\w+)}")

# Each REST operation and its RPC, as the engine's baton.rpc.methods lists them (a test checks
# the two agree): (method, path template, RPC, the field holding the whole body, if any).
_TWINS: tuple[tuple[str, str, str, str | None], ...] = (
    ("GET", "/v1/config", "GetConfig", None),
    ("POST", "/v1/payloads", "CreatePayload", None),
    ("GET", "/v1/openapi.json", "GetOpenApi", None),
    ("GET", "/v1/health", "GetHealth", None),
    ("DELETE", "/v1/definitions/{name}/versions/{version}", "DeleteDefinition", None),
    ("DELETE", "/v1/instances/{id}", "DeleteInstance", None),
    ("POST", "/v1/definitions", "RegisterDefinition", None),
    ("GET", "/v1/definitions", "ListDefinitions", None),
    ("GET", "/v1/definitions/{name}/versions/{version}", "GetDefinition", None),
    ("GET", "/v1/definitions/{name}", "GetDefinition", None),
    ("GET", "/v1/taskdefs", "ListTaskDefs", None),
    ("PUT", "/v1/taskdefs/{name}", "PutTaskDef", "taskDef"),
    ("GET", "/v1/taskdefs/{name}", "GetTaskDef", None),
    ("DELETE", "/v1/taskdefs/{name}", "DeleteTaskDef", None),
    ("POST", "/v1/instances", "StartInstance", None),
    ("POST", "/v1/instances/batch", "StartInstances", None),
    ("GET", "/v1/instances", "SearchInstances", None),
    ("GET", "/v1/instances/{id}", "GetInstance", None),
    ("GET", "/v1/instances/{id}/steps", "ListSteps", None),
    ("GET", "/v1/instances/{id}/history", "GetHistory", None),
    ("POST", "/v1/instances/{id}/cancel", "CancelInstance", None),
    ("POST", "/v1/instances/{id}/user-tasks/{stepId}/complete", "CompleteUserTask", None),
    ("POST", "/v1/instances/{id}/signals/{stepId}", "Signal", None),
    ("POST", "/v1/instances/{id}/retry", "RetryInstance", None),
    ("POST", "/v1/instances/{id}/rerun", "RerunInstance", None),
    ("POST", "/v1/instances/{id}/restart", "RestartInstance", None),
    ("POST", "/v1/instances/{id}/pause", "PauseInstance", None),
    ("POST", "/v1/instances/{id}/resume", "ResumeInstance", None),
    ("POST", "/v1/jobs/poll", "PollJobs", None),
    ("POST", "/v1/jobs/complete", "CompleteJob", None),
    ("POST", "/v1/jobs/complete-batch", "CompleteBatch", None),
    ("POST", "/v1/jobs/fail", "FailJob", None),
    ("POST", "/v1/jobs/heartbeat", "Heartbeat", None),
    ("POST", "/v1/jobs/{id}/claim", "ClaimJob", None),
    ("POST", "/v1/workers/stop", "StopWorker", None),
    ("POST", "/v1/queues/{name}/push", "Push", None),
    ("GET", "/v1/queues/{name}/stats", "Stats", None),
    ("GET", "/v1/queues/{name}/peek", "Peek", None),
    ("DELETE", "/v1/queues/{name}", "Purge", None),
    ("POST", "/v1/queues/{name}/dequeue", "Dequeue", None),
    ("POST", "/v1/queues/{name}/tasks/{taskId}/ack", "Ack", None),
    ("POST", "/v1/queues/{name}/tasks/{taskId}/nack", "Nack", None),
    ("GET", "/v1/queues", "ListQueues", None),
    ("GET", "/v1/queues/{name}/tasks", "ListQueueTasks", None),
    ("POST", "/v1/queues/{name}/redrive", "Redrive", None),
    ("POST", "/v1/schedules", "CreateSchedule", None),
    ("GET", "/v1/schedules", "ListSchedules", None),
    ("GET", "/v1/schedules/{id}", "GetSchedule", None),
    ("PUT", "/v1/schedules/{id}", "ReplaceSchedule", None),
    ("DELETE", "/v1/schedules/{id}", "DeleteSchedule", None),
    ("POST", "/v1/schedules/{id}/pause", "PauseSchedule", None),
    ("POST", "/v1/schedules/{id}/unpause", "UnpauseSchedule", None),
    ("POST", "/v1/schedules/{id}/trigger", "TriggerSchedule", None),
    ("POST", "/v1/schedules/{id}/backfill", "BackfillSchedule", None),
)


def _pattern(template: str) -> re.Pattern[str]:
    return re.compile("^" + _PARAM.sub(lambda m: f"(?P<{m.group(1)}>[^/]+)", template) + "$")


_MATCHERS = tuple((m, _pattern(t), rpc, body) for m, t, rpc, body in _TWINS)


@dataclass(frozen=True)
class RpcRequest:
    """One REST call as its RPC: the URL path, the binary body and how to read the answer."""

    rpc: str
    path: str
    body: bytes
    response_type: str


class UnknownOperation(ValueError):
    """A REST call with no RPC twin (cannot go over Connect)."""


class ConnectCodec:
    """REST calls to Connect requests and Connect answers back to REST JSON."""

    def __init__(self) -> None:
        try:
            from google.protobuf import (
                descriptor_pb2,
                descriptor_pool,
                json_format,
                message_factory,
                struct_pb2,
                timestamp_pb2,
            )
        except ImportError as e:  # pragma: no cover - the rpc extra
            raise ImportError(
                "protocol='connect' needs protobuf: pip install 'baton-worker[rpc]'"
            ) from e
        self._json_format = json_format
        self._factory = message_factory
        self._pool = descriptor_pool.DescriptorPool()
        for wkt in (struct_pb2.DESCRIPTOR, timestamp_pb2.DESCRIPTOR):
            proto = descriptor_pb2.FileDescriptorProto()
            wkt.CopyToProto(proto)
            self._pool.Add(proto)
        data = resources.files(__package__).joinpath("engine.binpb").read_bytes()
        for file in descriptor_pb2.FileDescriptorSet.FromString(data).file:
            self._pool.Add(file)
        self._service = self._pool.FindServiceByName(SERVICE)

    @functools.cache  # noqa: B019 - one codec per client, a handful of types
    def _class(self, full_name: str) -> Any:
        return self._factory.GetMessageClass(self._pool.FindMessageTypeByName(full_name))

    def request(
        self, method: str, path: str, body: Any, params: dict[str, Any] | None
    ) -> RpcRequest:
        """The Connect request of ``method path`` with its JSON ``body`` or query ``params``."""
        for verb, pattern, rpc, body_field in _MATCHERS:
            match = pattern.match(path) if verb == method else None
            if match is None:
                continue
            fields: dict[str, Any] = {k: unquote(v) for k, v in match.groupdict().items()}
            if body_field is not None:
                fields[body_field] = body
            elif isinstance(body, dict):
                fields.update(body)
            for name, value in (params or {}).items():
                fields[name] = _query_value(value)
            descriptor = self._service.methods_by_name[rpc]
            message = self._class(descriptor.input_type.full_name)()
            try:
                self._json_format.ParseDict(fields, message)
            except self._json_format.ParseError as e:
                raise ValueError(f"{method} {path} cannot go as {rpc}: {e}") from None
            return RpcRequest(
                rpc,
                f"/rpc/{SERVICE}/{rpc}",
                message.SerializeToString(),
                descriptor.output_type.full_name,
            )
        raise UnknownOperation(f"{method} {path} has no RPC twin")

    def response(self, request: RpcRequest, content: bytes) -> Any:
        """The answer's message as the JSON a REST answer holds."""
        message = self._class(request.response_type).FromString(content)
        return _to_json(message)

    def problem(self, status: int, body: Any) -> tuple[int, Any]:
        """A Connect error body as the REST status and problem it carries."""
        if not isinstance(body, dict):
            return status, body
        for detail in body.get("details") or []:
            if isinstance(detail, dict) and detail.get("type") == "workflow.v1.Problem":
                value = detail.get("value") or ""
                raw = base64.b64decode(value + "=" * (-len(value) % 4))
                problem = _to_json(self._class("workflow.v1.Problem").FromString(raw))
                return int(problem.get("status") or status), problem
        code = str(body.get("code") or "unknown")
        title = code.replace("_", " ").capitalize()
        return status, {"title": title, "status": status, "detail": body.get("message") or title}


def _query_value(value: Any) -> Any:
    if isinstance(value, str):
        if value in ("true", "false"):
            return value == "true"
        return value
    return value


_INT64 = {3, 4, 6, 16, 18}  # int64, uint64, fixed64, sfixed64, sint64
_MAX_SAFE = 2**53


def _to_json(message: Any) -> Any:
    """REST JSON of a message: 64-bit integers as numbers, whole Struct numbers as integers."""
    name = message.DESCRIPTOR.full_name
    if name == "google.protobuf.Struct":
        return {k: _value(v) for k, v in message.fields.items()}
    if name == "google.protobuf.Value":
        return _value(message)
    if name == "google.protobuf.ListValue":
        return [_value(v) for v in message.values]
    if name == "google.protobuf.Timestamp":
        return message.ToJsonString()
    # Numbers, booleans and lists are given at their defaults too (proto3 leaves defaults out: a
    # job with no retries left would lack retriesRemaining); texts only when not empty, and
    # fields with presence (optional, messages) only when set, as REST gives them or null.
    out: dict[str, Any] = {}
    for field in message.DESCRIPTOR.fields:
        repeated = getattr(field, "is_repeated", None)
        if repeated is None:
            repeated = field.label == 3
        if not repeated and field.has_presence and not message.HasField(field.name):
            continue
        value = getattr(message, field.name)
        if value == "" and not repeated:
            continue  # REST gives an unset text null or not at all; "" would read as given
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            value_field = field.message_type.fields_by_name["value"]
            out[field.json_name] = {k: _scalar(value_field, v) for k, v in value.items()}
        elif repeated:
            out[field.json_name] = [_scalar(field, v) for v in value]
        else:
            out[field.json_name] = _scalar(field, value)
    _fold_legacy(message.DESCRIPTOR, out)
    return out


def _fold_legacy(descriptor: Any, out: dict[str, Any]) -> None:
    """A deprecated ``legacy_<name>`` field (its old number and narrower type, kept for code
    generated from an older proto) never shows in REST JSON: its value stands for ``<name>``
    when that is unset (an engine older than this proto sets only the old field)."""
    for old, new in _legacy_pairs(descriptor):
        value = out.pop(old, None)
        if value is not None and new not in out:
            out[new] = value


@functools.cache
def _legacy_pairs(descriptor: Any) -> tuple[tuple[str, str], ...]:
    """The JSON names of a message type's legacy fields and of the fields they stand for (found
    once per type: most have none, and a poll's answer reads one per job)."""
    pairs = []
    for field in descriptor.fields:
        if field.name.startswith("legacy_") and field.GetOptions().deprecated:
            new = descriptor.fields_by_name.get(field.name.removeprefix("legacy_"))
            if new is not None:
                pairs.append((field.json_name, new.json_name))
    return tuple(pairs)


def _scalar(field: Any, value: Any) -> Any:
    if field.type == 11:  # message
        return _to_json(value)
    if field.type in _INT64:
        return int(value)
    if field.type == 14 and field.enum_type is not None:  # enum
        enum_value = field.enum_type.values_by_number.get(value)
        return enum_value.name if enum_value is not None else value
    if field.type == 12:  # bytes
        return base64.b64encode(value).decode("ascii")
    return value


def _value(value: Any) -> Any:
    kind = value.WhichOneof("kind")
    if kind is None or kind == "null_value":
        return None
    if kind == "number_value":
        number = value.number_value
        if math.isfinite(number) and number.is_integer() and abs(number) <= _MAX_SAFE:
            return int(number)
        return number
    if kind == "struct_value":
        return _to_json(value.struct_value)
    if kind == "list_value":
        return [_value(v) for v in value.list_value.values]
    return getattr(value, kind)
