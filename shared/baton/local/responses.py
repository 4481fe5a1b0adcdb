"""HTTP responses of the local server: RFC 9457 problems for what the gateway itself refuses, and
Lambda proxy results turned back into HTTP the way API Gateway does it."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from baton.errors import BatonError

PROBLEM_JSON = "application/problem+json"
# Problem types shared with the handlers' (baton.api.problems) where the meaning is the same.
_SLUGS = {
    400: "malformed-request",
    404: "not-found",
    413: "payload-too-large",
    500: "internal",
}
# Set by the server on every response; a handler's values would only be wrong.
_SERVER_OWNED = frozenset({"content-length", "connection", "transfer-encoding", "keep-alive"})


@dataclass(frozen=True, slots=True)
class HttpResponse:
    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes = b""


class MalformedProxyResponse(BatonError):
    """A handler returned something that is not a Lambda proxy result (API Gateway: 502)."""

    title = "Malformed Lambda proxy response"


def problem(
    status: int,
    detail: str,
    *,
    title: str | None = None,
    headers: Iterable[tuple[str, str]] = (),
    instance: str | None = None,
) -> HttpResponse:
    """An ``application/problem+json`` response, typed like the API's own problems."""
    from baton.api.problems import problem as problem_body

    phrase = HTTPStatus(status).phrase
    slug = _SLUGS.get(status) or phrase.lower().replace(" ", "-")
    doc = problem_body(status, title or phrase, detail, slug=slug, instance=instance)
    return HttpResponse(
        status, (("Content-Type", PROBLEM_JSON), *headers), json.dumps(doc).encode()
    )


def _header_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    raise MalformedProxyResponse(f"header values must be strings or numbers, not {value!r}")


def _status(result: Mapping[str, Any]) -> int:
    raw = result.get("statusCode")
    if isinstance(raw, str) and raw.isdigit():
        raw = int(raw)
    if isinstance(raw, bool) or not isinstance(raw, int) or not 100 <= raw <= 599:
        raise MalformedProxyResponse(f"statusCode must be an HTTP status, not {raw!r}")
    return raw


def _headers(result: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``headers`` and ``multiValueHeaders`` merged; for a name in both the multi values win."""
    single = result.get("headers") or {}
    multi = result.get("multiValueHeaders") or {}
    if not isinstance(single, Mapping) or not isinstance(multi, Mapping):
        raise MalformedProxyResponse("headers and multiValueHeaders must be objects")
    out: list[tuple[str, str]] = []
    for name, values in multi.items():
        if not isinstance(values, list):
            raise MalformedProxyResponse(f"multiValueHeaders[{name!r}] must be a list")
        out.extend((str(name), _header_value(v)) for v in values)
    in_multi = {str(n).lower() for n in multi}
    out.extend(
        (str(n), _header_value(v)) for n, v in single.items() if str(n).lower() not in in_multi
    )
    return [(n, v) for n, v in out if n.lower() not in _SERVER_OWNED]


def _body(result: Mapping[str, Any]) -> bytes:
    body = result.get("body")
    if body is None:
        return b""
    if not isinstance(body, str):
        raise MalformedProxyResponse(f"body must be a string, not {type(body).__name__}")
    if result.get("isBase64Encoded"):
        try:
            return base64.b64decode(body, validate=True)
        except binascii.Error as e:
            raise MalformedProxyResponse(
                f"isBase64Encoded is set but body is not base64: {e}"
            ) from e
    return body.encode("utf-8")


def from_proxy_result(result: object) -> HttpResponse:
    """The HTTP response API Gateway makes of a handler's proxy result."""
    if not isinstance(result, Mapping):
        raise MalformedProxyResponse(f"a handler must return an object, not {type(result)}")
    status = _status(result)
    headers = _headers(result)
    if not any(n.lower() == "content-type" for n, _ in headers):
        headers.append(("Content-Type", "application/json"))  # API Gateway's default
    return HttpResponse(status, tuple(headers), _body(result))
