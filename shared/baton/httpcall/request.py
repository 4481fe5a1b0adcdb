"""An HTTP step's request: the fields Conductor's ``http_request`` has, checked when a definition
is registered (:func:`request_problems`, literal values only: ``${…}`` is resolved later) and read
again when the call is made (:func:`parse_request`, on the resolved value)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

# The reserved job type of HTTP steps: the system-tasks function claims these jobs.
HTTP_JOB_TYPE = "baton:http"
# The reserved job type of EVENT steps (the system-tasks function publishes their messages), and
# where their job input carries the sink and the instance's fields (never shown in the input).
EVENT_JOB_TYPE = "baton:event"
EVENT_KEY = "baton:event"
# Where an HTTP_POLL step's job input carries how to poll (never shown in the step's input).
POLL_KEY = "baton:poll"
# Milliseconds: defaults when the request gives none, and the most a request may ask for.
DEFAULT_CONNECT_MS = 5_000
DEFAULT_READ_MS = 30_000
MAX_CONNECT_MS = 30_000
MAX_READ_MS = 60_000
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")
# The request's fields that mean something, in Conductor's order (its http_request's).
USED_FIELDS = (
    "uri",
    "method",
    "headers",
    "body",
    "accept",
    "contentType",
    "connectionTimeOut",
    "readTimeOut",
)
# With Conductor's fields Baton accepts and does not use (docs/architecture.md, Conductor).
FIELDS = frozenset((*USED_FIELDS, "vipAddress", "appName", "encode", "asyncComplete"))
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")


# Header values never stored or shown (a step's input, history, Conductor's inputData): the
# credentials a request carries. Matched case-insensitively: these names, and any name with one
# of the parts in it (X-Auth-Token, Client-Secret, X-Goog-Api-Key, X-Password, ...).
REDACTED = "[redacted]"
SENSITIVE_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie", "x-api-key"})
SENSITIVE_HEADER_PARTS = ("token", "secret", "key", "password")


def sensitive_header(name: str) -> bool:
    low = name.lower()
    return low in SENSITIVE_HEADERS or any(part in low for part in SENSITIVE_HEADER_PARTS)


def _redacted_headers(headers: Any) -> Any:
    if not isinstance(headers, dict) or not any(sensitive_header(str(k)) for k in headers):
        return headers
    return {
        k: REDACTED if v is not None and sensitive_header(str(k)) else v for k, v in headers.items()
    }


def redacted_input(value: Any) -> Any:
    """An HTTP step's resolved input as it is stored and shown: the values of sensitive headers
    (:func:`sensitive_header`) in ``request.headers`` and in a top-level ``headers`` (Conductor's
    top-level form) replaced by ``[redacted]``. A copy when anything was; else ``value`` itself.
    What is sent is the job's own input, never this."""
    if not isinstance(value, dict):
        return value
    out = value
    headers = _redacted_headers(value.get("headers"))
    if headers is not value.get("headers"):
        out = {**out, "headers": headers}
    request = value.get("request")
    if isinstance(request, dict):
        shown = _redacted_headers(request.get("headers"))
        if shown is not request.get("headers"):
            out = {**out, "request": {**request, "headers": shown}}
    return out


class RequestInvalid(ValueError):
    """A resolved request that cannot be sent (the message says which field and why)."""


@dataclass(frozen=True, slots=True)
class HttpRequest:
    uri: str
    method: str = "GET"
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None
    connect_ms: int = DEFAULT_CONNECT_MS
    read_ms: int = DEFAULT_READ_MS


_DIGITS = re.compile(r"[+-]?\d{1,10}")


def _is_expression(value: Any) -> bool:
    return isinstance(value, str) and "${" in value


def _uri_problem(uri: Any) -> str | None:
    if not isinstance(uri, str) or not uri:
        return "uri is a URL (http:// or https://)"
    try:
        parts = urlsplit(uri)
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError as e:
        return f"uri is not a URL: {e}"
    if parts.scheme.lower() not in ("http", "https"):
        return f"uri must be http:// or https://, not {parts.scheme or 'without a scheme'}"
    if not parts.hostname:
        return "uri has no host"
    return None


def milliseconds(value: Any) -> int | None:
    """A timeout as a whole number: an integer, or its digits as text ("3000", as Conductor's
    Jackson model coerces them); None when it is neither."""
    if isinstance(value, str) and _DIGITS.fullmatch(value):
        return int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def _timeout_problem(name: str, given: Any, cap: int) -> str | None:
    value = milliseconds(given)
    if value is None:
        return f"{name} is a whole number of milliseconds"
    if not 1 <= value <= cap:
        return f"{name} is 1 to {cap} milliseconds, not {value}"
    return None


def request_problems(request: Any) -> Iterator[tuple[str, str]]:
    """(field, message) for each problem of a request as registered; values with ``${…}`` are
    checked when resolved instead."""
    if isinstance(request, str):
        return
    if not isinstance(request, dict):
        yield "", "request is an object, or one ${…} expression giving one"
        return
    for name in request:
        if name not in FIELDS:
            yield name, f"unknown field {name!r} (fields: {', '.join(sorted(FIELDS))})"
    if "uri" not in request:
        yield "uri", "request.uri is required"
    for name, value in request.items():
        if name not in FIELDS or _is_expression(value):
            continue
        problem = _field_problem(name, value)
        if problem:
            yield name, problem


def _field_problem(name: str, value: Any) -> str | None:
    if name == "uri":
        return _uri_problem(value)
    if name == "method":
        if not isinstance(value, str) or value.upper() not in METHODS:
            return f"method is one of {', '.join(METHODS)}, not {value!r}"
    elif name == "headers":
        if not isinstance(value, dict):
            return "headers is an object of header names to values"
        for key in value:
            if not _TOKEN.match(key):
                return f"header name {key!r} is not a valid HTTP header name"
    elif name in ("accept", "contentType"):
        if value is not None and not isinstance(value, str):
            return f"{name} is a media type like application/json"
    elif name == "connectionTimeOut":
        return _timeout_problem(name, value, MAX_CONNECT_MS)
    elif name == "readTimeOut":
        return _timeout_problem(name, value, MAX_READ_MS)
    return None


def _header_value(name: str, value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
    if "\r" in text or "\n" in text:
        raise RequestInvalid(f"request.headers.{name} holds a line break")
    return text


def parse_request(resolved: Any) -> HttpRequest:
    """The request to send, from a step's resolved ``request``; :class:`RequestInvalid` says what
    is wrong with it."""
    if not isinstance(resolved, dict):
        raise RequestInvalid(f"request resolved to {type(resolved).__name__}, not an object")
    for name, value in resolved.items():
        if name in FIELDS:
            problem = _field_problem(name, value)
            if problem:
                raise RequestInvalid(f"request.{name}: {problem}")
    uri = resolved.get("uri")
    problem = _uri_problem(uri)
    if problem:
        raise RequestInvalid(f"request.uri: {problem}")
    assert isinstance(uri, str)
    method = str(resolved.get("method") or "GET").upper()
    headers: dict[str, str] = {}
    for key, value in (resolved.get("headers") or {}).items():
        if value is not None:
            headers[key] = _header_value(key, value)
    lower = {k.lower() for k in headers}
    accept = resolved.get("accept") or "application/json"
    if "accept" not in lower:
        headers["Accept"] = accept
    body: bytes | None = None
    given = resolved.get("body")
    if given is not None and method not in ("GET", "HEAD"):
        content_type = resolved.get("contentType") or "application/json"
        if isinstance(given, str):
            body = given.encode()  # a string is sent as it is (JSON already, or text)
        else:
            body = json.dumps(given, separators=(",", ":"), ensure_ascii=False).encode()
        if "content-type" not in lower:
            headers["Content-Type"] = content_type
    return HttpRequest(
        uri=uri,
        method=method,
        headers=headers,
        body=body,
        connect_ms=milliseconds(resolved.get("connectionTimeOut")) or DEFAULT_CONNECT_MS,
        read_ms=milliseconds(resolved.get("readTimeOut")) or DEFAULT_READ_MS,
    )
