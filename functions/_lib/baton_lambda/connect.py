"""The Connect function's glue: a Connect call (an API Gateway proxy event for
``/rpc/{proxy+}``) answered by the REST function its RPC mirrors, run in this process.

The REST functions' handler modules are loaded from the folders next to this function's (the CDK
app ships them in its asset), once per container and only when an RPC first needs one.

The worker's hot RPCs (``methods.DIRECT``: poll, complete, complete-batch, fail, heartbeat, claim,
stop) are answered by the twin route's view itself (``Api.direct``): the request's values are
validated as REST validates its body, the view's answer becomes the response message, and no
JSON text is made either way; the key check, engine calls, limits, problems, logs and metrics
are REST's own code. Every other
call becomes the REST proxy event API Gateway would have sent for the twin route (same headers,
identity and request id), and its proxy result is turned back into the response message or a
Connect error.
"""

from __future__ import annotations

import base64
import binascii
import copy
import importlib.util
import json
import sys
import threading
import time
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import quote

from aws_lambda_powertools import Logger
from baton.rpc import bridge, connect, convert, methods, schema
from baton.rpc.connect import ConnectError
from baton.rpc.methods import RestCall
from google.protobuf.message import Message

from baton_lambda.http import Api, DirectCall

_DROPPED_HEADERS = frozenset({"content-type", "content-length", "content-encoding"})


class ConnectFunction:
    """The handler of the ``rpc`` function; ``functions_dir`` holds the REST functions."""

    def __init__(self, functions_dir: Path) -> None:
        self.functions_dir = functions_dir
        self.logger = Logger(service="baton-rpc")
        self._twins: dict[str, ModuleType] = {}
        self._lock = threading.Lock()

    def handler(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        started = time.perf_counter()
        request_id = (event.get("requestContext") or {}).get("requestId")
        name = ((event.get("pathParameters") or {}).get("proxy") or "").rpartition("/")[2]
        codec = connect.JSON
        try:
            codec, status, headers, body = self._serve(event, context)
        except ConnectError as e:
            status, headers, body = connect.error_response(e)
            self.logger.info(
                "rpc refused",
                extra={"rpc": name, "code": e.code, "status": status, "request_id": request_id},
            )
        else:
            # As REST's functions log: refusals at info, answers at debug (the access log, API
            # Gateway's or baton dev's, has every call with its status and time).
            self.logger.debug(
                "rpc",
                extra={
                    "rpc": name,
                    "status": status,
                    "codec": codec,
                    "request_id": request_id,
                    "ms": round((time.perf_counter() - started) * 1000, 2),
                },
            )
        binary = codec == connect.PROTO and status == 200
        return {
            "statusCode": status,
            "headers": headers,
            "body": base64.b64encode(body).decode("ascii") if binary else body.decode(),
            "isBase64Encoded": binary,
        }

    def _serve(self, event: dict[str, Any], context: Any) -> tuple[str, int, dict[str, str], bytes]:
        headers = event.get("headers") or {}
        if (event.get("httpMethod") or "").upper() != "POST":
            raise ConnectError(
                "unimplemented",
                "Connect calls are POSTs (GET is for side-effect-free RPCs, not served)",
                http_status=405,
                headers={"Allow": "POST"},
            )
        path = f"{connect.PREFIX}{(event.get('pathParameters') or {}).get('proxy') or ''}"
        name = connect.procedure(path, schema.SERVICE_NAME)
        rpc = bridge.find(name) if name else None
        if rpc is None:
            raise bridge.unimplemented(name or path)
        codec = connect.content_type(headers)
        connect.check_protocol(headers)
        raw = connect.decompress(headers, _body(event))
        request = connect.decode(rpc.request, codec, raw)
        call, function = bridge.rest_call(rpc, request)
        twin = self._twin(function)
        api = getattr(twin, "api", None)
        if rpc.name in methods.DIRECT and isinstance(api, Api):
            checked = codec == connect.PROTO and b"\x00" not in raw
            response = _direct(rpc, api, call, event, context, text_checked=checked)
        else:
            result = twin.handler(_rest_event(event, call), context)
            status, rest_headers, rest_body = _proxy_result(result)
            response = bridge.answer(rpc, status, rest_headers, rest_body)
        return codec, 200, {"Content-Type": codec}, connect.encode(response, codec)

    def _twin(self, function: str) -> ModuleType:
        with self._lock:
            module = self._twins.get(function)
            if module is None:
                module = self._load(function)
                self._twins[function] = module
            return module

    def _load(self, function: str) -> ModuleType:
        path = self.functions_dir / function / "handler.py"
        module_name = f"baton_rpc_twin_{function}_{id(self):x}"
        spec = importlib.util.spec_from_file_location(module_name, path)
        if spec is None or spec.loader is None:
            raise ConnectError("internal", f"the {function} function is not deployed with rpc")
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module  # dataclasses and pydantic look modules up by name
        try:
            spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(module_name, None)
            raise
        return module


def _direct(
    rpc: bridge.Rpc,
    api: Api,
    call: RestCall,
    event: dict[str, Any],
    context: Any,
    *,
    text_checked: bool,
) -> Message:
    """The response message of an RPC its twin's view answers directly, or its Connect error."""
    if not api.serves_directly(call.method, call.template):
        raise ConnectError("internal", f"{rpc.name}: {api.function} has no view of its route")
    # Path parameters as the router hands them to a view: percent-encoded, as in the path.
    params = {k: quote(v, safe="") for k, v in call.path_parameters.items()}
    direct = DirectCall(call.method, call.template, call.path, params, call.body, text_checked)
    answer = api.direct(direct, event, context)
    if 200 <= answer.status < 300 and isinstance(answer.body, dict):
        return convert.from_view(rpc.response, answer.body)
    raise bridge.error(rpc, answer.status, answer.headers, answer.body)


def _body(event: dict[str, Any]) -> bytes:
    body = event.get("body") or ""
    if event.get("isBase64Encoded"):
        try:
            return base64.b64decode(body, validate=True)
        except binascii.Error:
            raise connect.invalid("the body is not valid base64") from None
    return body.encode("utf-8", "surrogatepass") if isinstance(body, str) else bytes(body)


def _rest_event(event: dict[str, Any], call: RestCall) -> dict[str, Any]:
    """API Gateway's proxy event for the REST twin of this call."""

    rest = copy.copy(event)
    headers = {
        k: v for k, v in (event.get("headers") or {}).items() if k.lower() not in _DROPPED_HEADERS
    }
    headers["Content-Type"] = "application/json"
    multi = {
        k: v
        for k, v in (event.get("multiValueHeaders") or {}).items()
        if k.lower() not in _DROPPED_HEADERS
    }
    multi["Content-Type"] = ["application/json"]
    context = dict(event.get("requestContext") or {})
    stage = context.get("stage")
    context.update(
        {
            "httpMethod": call.method,
            "resourcePath": call.template,
            "path": f"/{stage}{call.path}" if stage else call.path,
        }
    )
    rest.update(
        {
            "resource": call.template,
            "path": call.path,
            "httpMethod": call.method,
            "headers": headers,
            "multiValueHeaders": multi,
            "queryStringParameters": call.query or None,
            "multiValueQueryStringParameters": {k: [v] for k, v in call.query.items()} or None,
            "pathParameters": call.path_parameters or None,
            "requestContext": context,
            "body": None if call.body is None else json.dumps(call.body, separators=(",", ":")),
            "isBase64Encoded": False,
        }
    )
    return rest


def _proxy_result(result: Any) -> tuple[int, dict[str, str], bytes]:
    if not isinstance(result, dict) or not isinstance(result.get("statusCode"), int):
        raise ConnectError("internal", "the REST function answered no proxy result")
    headers = {str(k): str(v) for k, v in (result.get("headers") or {}).items()}
    for k, values in (result.get("multiValueHeaders") or {}).items():
        if values:
            headers.setdefault(str(k), str(values[-1]))
    body = result.get("body") or ""
    raw = base64.b64decode(body) if result.get("isBase64Encoded") else str(body).encode()
    return int(result["statusCode"]), headers, raw
