"""Native gRPC (HTTP/2) for ``baton dev``: the proto's ``WorkflowEngine`` service on its own port
(``BATON_GRPC_PORT``), so unmodified gRPC clients and ``grpcurl`` work against a laptop.

Each call is answered as the Connect function answers it (``baton.rpc.bridge``): the request
message becomes the REST twin's API Gateway event, run by the same local function registry the
HTTP server uses, with the same API key (``x-api-key`` metadata). A REST error becomes the gRPC
status of its Connect code; its problem (``workflow.v1.Problem``, binary) rides in the trailing
metadata ``baton-problem-bin``. Server reflection is on (grpcurl needs no proto file).
"""

from __future__ import annotations

import hmac
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlencode

import grpc
from google.protobuf.message import Message

from baton.local.events import API_KEY_HEADER, LocalRequest, RouteMatch, rest_api_event
from baton.local.functions import API_TIMEOUT_SECONDS, FunctionRegistry, FunctionThrottled
from baton.local.responses import from_proxy_result
from baton.routes import ROUTES, Route
from baton.rpc import bridge, connect, schema
from baton.rpc.bridge import Rpc
from baton.rpc.connect import ConnectError

log = logging.getLogger("baton.local.grpc")

PROBLEM_METADATA = "baton-problem-bin"
MAX_WORKERS = 128  # concurrent calls (each long-poll holds one while it waits)
MAX_MESSAGE_BYTES = 10 * 1024 * 1024  # the HTTP API's body limit
_ROUTE: dict[tuple[str, str], Route] = {(r.method, r.path): r for r in ROUTES}


class GrpcServer:
    """The gRPC server; :meth:`start` binds ``host:port`` (0 asks the OS for a port)."""

    def __init__(
        self, registry: FunctionRegistry, *, api_key: str, host: str, port: int, stage: str
    ) -> None:
        self.registry = registry
        self.api_key = api_key
        self.stage = stage
        self._stopping = threading.Event()
        self._server = grpc.server(
            ThreadPoolExecutor(max_workers=MAX_WORKERS, thread_name_prefix="baton-grpc"),
            options=[
                ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                ("grpc.so_reuseport", 0),
            ],
        )
        handlers: dict[str, grpc.RpcMethodHandler[Any, Any]] = {}
        for name in schema.service().methods_by_name:
            rpc = bridge.find(name)
            if rpc is not None:
                # Bytes in: a body that is not the message is INVALID_ARGUMENT saying why
                # (gRPC's own deserializer would answer INTERNAL).
                handlers[name] = grpc.unary_unary_rpc_method_handler(
                    self._handler(rpc), response_serializer=rpc.response.SerializeToString
                )
        self._server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(schema.SERVICE_NAME, handlers),)
        )
        _reflection(self._server)
        self.port = self._server.add_insecure_port(f"{host}:{port}")
        if self.port == 0:
            raise OSError(f"cannot listen on {host}:{port} for gRPC")

    def start(self) -> None:
        self._server.start()

    def stop(self, grace_seconds: float) -> None:
        """No new calls; those in flight get ``grace_seconds`` (a waiting long-poll is told the
        client is gone and ends empty)."""
        self._stopping.set()
        self._server.stop(grace_seconds).wait(grace_seconds + 1)

    def _handler(self, rpc: Rpc) -> Callable[[bytes, grpc.ServicerContext], Message]:
        def handle(body: bytes, context: grpc.ServicerContext) -> Message:
            started = time.perf_counter()
            request_id = str(uuid.uuid4())
            code = "ok"
            try:
                request = connect.decode(rpc.request, connect.PROTO, body)
                return self._call(rpc, request, context, request_id)
            except ConnectError as e:
                code = e.code
                if e.details:
                    context.set_trailing_metadata(
                        ((PROBLEM_METADATA, e.details[0].SerializeToString()),)
                    )
                context.abort(grpc.StatusCode[e.code.upper()], e.message)
            finally:
                log.info(
                    "rpc",
                    extra={
                        "rpc": rpc.name,
                        "code": code,
                        "ms": round((time.perf_counter() - started) * 1000, 2),
                        "request_id": request_id,
                        "transport": "grpc",
                    },
                )

        return handle

    def _call(
        self, rpc: Rpc, request: Message, context: grpc.ServicerContext, request_id: str
    ) -> Message:
        metadata = {k.lower(): v for k, v in context.invocation_metadata()}
        key = metadata.get(API_KEY_HEADER)
        if not isinstance(key, str) or not key:
            raise ConnectError(
                "unauthenticated", f"this API requires an API key in the {API_KEY_HEADER} metadata"
            )
        if not hmac.compare_digest(key.encode(), self.api_key.encode()):
            raise ConnectError("unauthenticated", "the API key is not valid")
        call, function = bridge.rest_call(rpc, request)
        local = LocalRequest(
            method=call.method,
            raw_path=call.path,
            query_string=urlencode(call.query),
            headers=(
                (API_KEY_HEADER, key),
                ("Content-Type", "application/json"),
                ("User-Agent", str(metadata.get("user-agent") or "grpc")),
            ),
            body=b"" if call.body is None else json.dumps(call.body).encode(),
            source_ip=_peer_ip(context.peer()),
            protocol="HTTP/2.0",
        )
        match = RouteMatch(_ROUTE[(call.method, call.template)], call.path_parameters)
        event = rest_api_event(local, match, request_id=request_id, stage=self.stage)
        try:
            result: Any = self.registry.invoke(
                function,
                event,
                timeout_seconds=API_TIMEOUT_SECONDS,
                client_gone=lambda: self._stopping.is_set() or not context.is_active(),
            )
        except FunctionThrottled as e:
            raise ConnectError("resource_exhausted", e.detail) from None
        response = from_proxy_result(result)
        headers = dict(response.headers)
        return bridge.answer(rpc, response.status, headers, response.body)


def _peer_ip(peer: str) -> str:
    """``ipv4:127.0.0.1:5555`` or ``ipv6:[::1]:5555`` → the address."""
    _, _, rest = peer.partition(":")
    host = rest.rpartition(":")[0] or rest
    return host.strip("[]") or "127.0.0.1"


def _reflection(server: grpc.Server) -> None:
    """Server reflection (grpcurl list/describe), from the same descriptor pool."""
    try:
        from grpc_reflection.v1alpha import reflection
    except ImportError:  # optional: gRPC works without it
        log.info("grpcio-reflection is not installed: gRPC server reflection is off")
        return
    names = (schema.SERVICE_NAME, reflection.SERVICE_NAME)
    reflection.enable_server_reflection(names, server, pool=schema.pool())
