"""One RPC answered by its REST twin: the request message becomes the REST request, the REST
answer becomes the response message or an error. Shared by the Connect function and the local
gRPC server, so both serve exactly what REST serves (same validation, engine calls and limits).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from google.protobuf import json_format
from google.protobuf.descriptor import MethodDescriptor
from google.protobuf.message import Message

from baton.routes import ROUTES
from baton.rpc import convert, methods, schema
from baton.rpc.connect import ConnectError, code_for
from baton.rpc.methods import MissingPathField, RestCall, RestTwin


@dataclass(frozen=True, slots=True)
class Rpc:
    """An RPC of the service: its descriptor, message classes and REST twin."""

    name: str
    descriptor: MethodDescriptor
    request: type[Message]
    response: type[Message]
    twin: RestTwin

    @property
    def procedure(self) -> str:
        return f"/{schema.SERVICE_NAME}/{self.name}"


def find(name: str) -> Rpc | None:
    """The RPC ``name`` (``PollJobs``), or None when the service has no such method. Each is
    made at its first call and kept (only the service's own names are: a name a client sends
    is never kept; message classes are made only for the RPCs called, for cold starts)."""
    rpc = _found.get(name)
    if rpc is None:
        descriptor = schema.method(name)
        twin = methods.BY_RPC.get(name)
        if descriptor is None or twin is None:
            return None
        rpc = Rpc(
            name,
            descriptor,
            schema.message_class(descriptor.input_type.full_name),
            schema.message_class(descriptor.output_type.full_name),
            twin,
        )
        _found[name] = rpc
    return rpc


_found: dict[str, Rpc] = {}


def unimplemented(name: str) -> ConnectError:
    return ConnectError(
        "unimplemented",
        f"{schema.SERVICE_NAME} has no method {name!r}",
        http_status=404,
    )


_FUNCTION_OF: dict[tuple[str, str], str] = {(r.method, r.path): r.function for r in ROUTES}


def rest_call(rpc: Rpc, request: Message) -> tuple[RestCall, str]:
    """The REST request of an RPC's request message, and the function serving its route."""
    try:
        call = methods.rest_call(rpc.twin, convert.to_json(request))
    except MissingPathField as e:
        raise ConnectError("invalid_argument", str(e)) from None
    except convert.NotJson as e:
        raise ConnectError("invalid_argument", f"the {rpc.request.DESCRIPTOR.name}: {e}") from None
    function = _FUNCTION_OF.get((call.method, call.template))
    if function is None:  # in the proto ahead of its REST operation
        raise ConnectError(
            "unimplemented", f"{rpc.name}: {call.method} {call.template} is not served yet"
        )
    return call, function


def answer(rpc: Rpc, status: int, headers: Mapping[str, str], body: bytes) -> Message:
    """The response message of a REST answer, or the ConnectError it amounts to."""
    try:
        data: Any = json.loads(body) if body else {}
    except ValueError:
        data = None
    if 200 <= status < 300 and data is not None:
        try:
            return convert.from_json(rpc.response, data)
        except json_format.ParseError as e:
            # REST's answer holds what the proto has no shape for (none is known: the proto's
            # Step once typed a step's input as a Struct, which a ${…} does not fit). The call
            # did what it asked; its answer is there to read over REST.
            raise ConnectError(
                "failed_precondition",
                f"{rpc.name}'s answer holds what {rpc.response.DESCRIPTOR.name} cannot carry "
                f"({e}); read it over REST: {rpc.twin.method} {rpc.twin.paths[0]}",
            ) from None
    raise error(rpc, status, headers, data)


def error(rpc: Rpc, status: int, headers: Mapping[str, str], data: Any) -> ConnectError:
    """A REST error answer as a Connect error; its problem (or, for a health check that fails,
    the Health message) travels in the details."""
    kept = {k: v for k, v in headers.items() if k.lower() == "retry-after"}
    if not isinstance(data, dict):
        return ConnectError(code_for(status), f"HTTP {status} from {rpc.twin.rpc}", headers=kept)
    detail_type = "workflow.v1.Problem" if "title" in data else rpc.response.DESCRIPTOR.full_name
    try:
        detail = convert.from_json(schema.message_class(detail_type), data)
    except json_format.ParseError:
        detail = None
    message = str(data.get("detail") or data.get("title") or f"HTTP {status}")
    errors = data.get("errors")
    if isinstance(errors, list) and errors:
        listed = "; ".join(
            f"{e.get('path')}: {e.get('message')}" for e in errors if isinstance(e, dict)
        )
        message = f"{message} ({listed})" if listed and listed not in message else message
    code = code_for(status, data.get("type") if isinstance(data.get("type"), str) else None)
    details = (detail,) if detail is not None else ()
    return ConnectError(code, message, details, headers=kept)
