"""The Connect protocol, unary calls (https://connectrpc.com/docs/protocol): what Baton serves at
``/rpc/workflow.v1.WorkflowEngine/<Method>``.

A call is a POST whose body is the request message, ``application/proto`` (binary) or
``application/json`` (the proto3 JSON mapping), optionally gzip-compressed (``Content-Encoding``),
with ``Connect-Protocol-Version: 1`` (checked when sent). A success is 200 with the response
message in the request's encoding. An error is a JSON body ``{code, message, details}`` with the
HTTP status of its code; Baton's details carry the problem (``workflow.v1.Problem``, its JSON in
``debug`` too), so a Connect client reads the same problem a REST client does.
"""

from __future__ import annotations

import base64
import json
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError, Message

from baton.rpc import convert

PROTO = "application/proto"
JSON = "application/json"
CONTENT_TYPES = (PROTO, JSON)
PROTOCOL_VERSION_HEADER = "connect-protocol-version"
PREFIX = "/rpc/"
# The most a gzip body may inflate to: the API's body limit (API Gateway's 10 MB).
MAX_DECOMPRESSED_BYTES = 10 * 1024 * 1024

# Connect's codes and the HTTP status each is sent with.
CODE_STATUS: dict[str, int] = {
    "canceled": 499,
    "unknown": 500,
    "invalid_argument": 400,
    "deadline_exceeded": 504,
    "not_found": 404,
    "already_exists": 409,
    "permission_denied": 403,
    "resource_exhausted": 429,
    "failed_precondition": 400,
    "aborted": 409,
    "out_of_range": 400,
    "unimplemented": 501,
    "internal": 500,
    "unavailable": 503,
    "data_loss": 500,
    "unauthenticated": 401,
}

# A REST problem's type (its slug) decides the code; failing that, its status.
_SLUG_CODE: dict[str, str] = {
    "malformed-request": "invalid_argument",
    "validation-failed": "invalid_argument",
    "invalid-value": "invalid_argument",
    "not-found": "not_found",
    "no-route": "unimplemented",
    "method-not-allowed": "unimplemented",
    "payload-missing": "failed_precondition",
    "conflict": "failed_precondition",
    "payload-too-large": "resource_exhausted",
    "throttled": "resource_exhausted",
    "unavailable": "unavailable",
    "internal": "internal",
}
_STATUS_CODE: dict[int, str] = {
    400: "invalid_argument",
    401: "unauthenticated",
    403: "unauthenticated",  # a wrong key: the credentials are not valid (API Gateway's 403)
    404: "not_found",
    405: "unimplemented",
    409: "failed_precondition",
    410: "not_found",
    411: "invalid_argument",
    413: "resource_exhausted",
    415: "invalid_argument",
    422: "invalid_argument",
    429: "resource_exhausted",
    501: "unimplemented",
    502: "unavailable",
    503: "unavailable",
    504: "deadline_exceeded",
}


def code_for(status: int, problem_type: str | None = None) -> str:
    """The Connect code of a REST answer (status and problem type)."""
    slug = (problem_type or "").rsplit("/", 1)[-1]
    if slug in _SLUG_CODE:
        return _SLUG_CODE[slug]
    return _STATUS_CODE.get(status, "internal" if status >= 500 else "unknown")


@dataclass(frozen=True, slots=True)
class ConnectError(Exception):
    """An error answer: its code, message and details (``(type name, message)`` pairs)."""

    code: str
    message: str
    details: tuple[Message, ...] = ()
    headers: Mapping[str, str] = field(default_factory=dict)
    http_status: int | None = None  # overrides the code's status (an unknown method: 404)

    @property
    def status(self) -> int:
        return self.http_status or CODE_STATUS[self.code]

    def body(self) -> bytes:
        out: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.details:
            out["details"] = [
                {
                    "type": d.DESCRIPTOR.full_name,
                    "value": base64.b64encode(d.SerializeToString()).decode("ascii").rstrip("="),
                    "debug": json_format.MessageToDict(d),
                }
                for d in self.details
            ]
        return json.dumps(out, separators=(",", ":")).encode()


def error_response(error: ConnectError) -> tuple[int, dict[str, str], bytes]:
    return error.status, {"Content-Type": JSON, **error.headers}, error.body()


def invalid(message: str) -> ConnectError:
    return ConnectError("invalid_argument", message)


def procedure(path: str, service: str) -> str | None:
    """The method name of ``/rpc/<service>/<Method>``, else None."""
    head = f"{PREFIX}{service}/"
    if not path.startswith(head):
        return None
    name = path[len(head) :]
    return name if name and "/" not in name else None


def content_type(headers: Mapping[str, str]) -> str:
    """The request's codec (``application/proto`` or ``application/json``), else an error."""
    raw = _header(headers, "content-type") or ""
    media = raw.split(";", 1)[0].strip().lower()
    if media in CONTENT_TYPES:
        return media
    if media in ("application/connect+proto", "application/connect+json"):
        raise ConnectError(
            "unimplemented", "streaming calls are not served: Baton's RPCs are all unary"
        )
    shown = media or "none"
    raise ConnectError(
        "invalid_argument",
        f"Content-Type {shown!r} is not served: send {PROTO} or {JSON}",
        http_status=415,
        headers={"Accept-Post": f"{PROTO}, {JSON}"},
    )


def check_protocol(headers: Mapping[str, str]) -> None:
    version = _header(headers, PROTOCOL_VERSION_HEADER)
    if version is not None and version.strip() != "1":
        raise invalid(f"Connect-Protocol-Version {version!r} is not served: send 1")


def decompress(headers: Mapping[str, str], body: bytes) -> bytes:
    encoding = (_header(headers, "content-encoding") or "identity").strip().lower()
    if encoding == "identity":
        return body
    if encoding != "gzip":
        raise ConnectError(
            "unimplemented", f"Content-Encoding {encoding!r} is not served: send gzip or identity"
        )
    try:
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        out = inflater.decompress(body, MAX_DECOMPRESSED_BYTES + 1)
    except zlib.error as e:
        raise invalid(f"the gzip body cannot be read: {e}") from None
    if len(out) > MAX_DECOMPRESSED_BYTES:
        raise ConnectError(
            "resource_exhausted", f"the body inflates past {MAX_DECOMPRESSED_BYTES} bytes"
        )
    return out


def decode(cls: type[Message], codec: str, body: bytes) -> Message:
    """The request message, or invalid_argument saying what is wrong with the body."""
    message = cls()
    name = message.DESCRIPTOR.full_name
    if codec == PROTO:
        try:
            message.ParseFromString(body)
        except DecodeError as e:
            raise invalid(f"the body is not a binary {name} message: {e}") from None
        return message
    try:
        text = body.decode("utf-8") if body else "{}"
        json_format.Parse(text, message, ignore_unknown_fields=False)
    except UnicodeDecodeError:
        raise invalid("the JSON body is not UTF-8") from None
    except json_format.ParseError as e:
        raise invalid(f"the body is not a JSON {name} message: {e}") from None
    return message


def encode(message: Message, codec: str) -> bytes:
    """The response body: binary, or the proto3 JSON mapping (64-bit integers as strings)."""
    if codec == PROTO:
        return message.SerializeToString()
    value = convert.to_json(message, int64_as_string=True)
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def _header(headers: Mapping[str, str], name: str) -> str | None:
    for key, value in headers.items():
        if key.lower() == name:
            return value
    return None
