"""Lambda events as AWS builds them: API Gateway REST (v1) proxy events and EventBridge scheduled
events, made from local requests so the handlers cannot tell the local server from AWS.

Routing follows API Gateway: the resource (path template) is chosen first, literal segments
winning over ``{param}`` segments, then the method; a known resource with an unknown method is a
405 naming the allowed methods. Like a REST API (and unlike an HTTP API), ``path`` stays
percent-encoded while path and query parameters arrive decoded; ``+`` is left as is.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import secrets
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote

from baton.routes import ROUTED, Route

STAGE = "local"
ACCOUNT_ID = "123456789012"  # AWS's documentation placeholder, also moto's default account
REGION = "us-east-1"
API_ID = "batonlocal"  # ten characters, like a real REST API id
API_KEY_HEADER = "x-api-key"

_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


@dataclass(frozen=True, slots=True)
class LocalRequest:
    """An HTTP request as the local server received it (headers in arrival order, repeats kept)."""

    method: str
    raw_path: str
    query_string: str = ""
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""
    source_ip: str = "127.0.0.1"
    protocol: str = "HTTP/1.1"
    server_port: int | None = None

    def header(self, name: str) -> str | None:
        """The first value of a header, by case-insensitive name."""
        wanted = name.lower()
        return next((v for k, v in self.headers if k.lower() == wanted), None)


@dataclass(frozen=True, slots=True)
class RouteMatch:
    route: Route
    path_parameters: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class MethodNotAllowed:
    resource: str
    allowed: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class NoRoute:
    path: str


RouteResult = RouteMatch | MethodNotAllowed | NoRoute


@dataclass(frozen=True, slots=True)
class _Resource:
    template: str
    segments: tuple[str, ...]
    methods: dict[str, Route]

    @property
    def greedy(self) -> bool:
        return bool(self.segments) and _is_greedy(self.segments[-1])

    def bind(self, segments: Sequence[str]) -> dict[str, str] | None:
        """Path parameters if the (still encoded) ``segments`` fit this template, else None."""
        if self.greedy:
            # ``{proxy+}``: one or more segments, none empty (as a ``{param}`` is never empty),
            # bound decoded and joined.
            head = len(self.segments) - 1
            tail = segments[head:]
            if not tail or not all(tail):
                return None
            rest = "/".join(unquote(x) for x in tail)
            params = self._bind(self.segments[:head], segments[:head])
            if params is not None:
                params[self.segments[-1][1:-2]] = rest
            return params
        return self._bind(self.segments, segments)

    @staticmethod
    def _bind(patterns: Sequence[str], segments: Sequence[str]) -> dict[str, str] | None:
        if len(segments) != len(patterns):
            return None
        params: dict[str, str] = {}
        for pattern, raw in zip(patterns, segments, strict=True):
            value = unquote(raw)
            if _is_param(pattern):
                if not value:
                    return None
                params[pattern[1:-1]] = value
            elif value != pattern:
                return None
        return params


def _is_param(segment: str) -> bool:
    return segment.startswith("{") and segment.endswith("}")


def _is_greedy(segment: str) -> bool:
    return segment.startswith("{") and segment.endswith("+}")


def _split(path: str) -> tuple[str, ...]:
    return tuple(path.split("/")[1:])


class RouteTable:
    """Resolves (method, path) against a route table, the way API Gateway picks a resource."""

    def __init__(self, routes: Iterable[Route] = ROUTED) -> None:
        by_template: dict[str, dict[str, Route]] = {}
        for route in routes:
            by_template.setdefault(route.path, {})[route.method] = route
        resources = [_Resource(t, _split(t), methods) for t, methods in by_template.items()]
        # Most specific first: at each depth a literal segment beats a {param}; a greedy
        # {proxy+} only takes what no other resource does.
        resources.sort(key=lambda r: (r.greedy, tuple(_is_param(s) for s in r.segments)))
        self._resources = tuple(resources)
        # A path spelled exactly as a template without parameters is that resource: a literal
        # segment beats a {param} at every depth, so no other resource is tried first.
        self._literal = {
            r.template: r for r in resources if not any(_is_param(s) for s in r.segments)
        }

    def match(self, method: str, raw_path: str) -> RouteResult:
        if not raw_path.startswith("/"):
            return NoRoute(raw_path)
        literal = self._literal.get(raw_path)
        if literal is not None:
            return self._answer(literal, method, {})
        return self._search(method, raw_path)

    def _search(self, method: str, raw_path: str) -> RouteResult:
        """Every resource tried, most specific first (what ``match`` answers for any path)."""
        if not raw_path.startswith("/"):
            return NoRoute(raw_path)
        result = self._match(method, _split(raw_path), raw_path)
        if isinstance(result, NoRoute) and len(raw_path) > 1 and raw_path.endswith("/"):
            # A directory route (the viewer's ``/ui``) is served at ``/ui/`` too.
            again = self._match(method, _split(raw_path[:-1]), raw_path)
            if isinstance(again, RouteMatch) and again.route.directory:
                return again
        return result

    def _match(self, method: str, segments: tuple[str, ...], raw_path: str) -> RouteResult:
        for resource in self._resources:
            params = resource.bind(segments)
            if params is not None:
                return self._answer(resource, method, params)
        return NoRoute(raw_path)

    @staticmethod
    def _answer(resource: _Resource, method: str, params: dict[str, str]) -> RouteResult:
        route = resource.methods.get(method.upper()) or resource.methods.get("ANY")
        if route is None:
            return MethodNotAllowed(resource.template, tuple(sorted(resource.methods)))
        return RouteMatch(route, params)


def parse_query(query_string: str) -> list[tuple[str, str]]:
    """Decoded (name, value) pairs in order; ``a`` and ``a=`` both give an empty value."""
    pairs = []
    for piece in query_string.split("&"):
        if piece:
            name, _, value = piece.partition("=")
            pairs.append((unquote(name), unquote(value)))
    return pairs


def _single_and_multi(
    pairs: Iterable[tuple[str, str]],
) -> tuple[dict[str, str] | None, dict[str, list[str]] | None]:
    """API Gateway's pair of maps: the last value of each name, and every value in order.

    Names group case-insensitively under the spelling seen first (headers); both maps are None
    when there is nothing, as API Gateway sends them.
    """
    multi: dict[str, list[str]] = {}
    spelling: dict[str, str] = {}
    for name, value in pairs:
        key = spelling.setdefault(name.lower(), name)
        multi.setdefault(key, []).append(value)
    if not multi:
        return None, None
    return {k: v[-1] for k, v in multi.items()}, multi


def _query_maps(
    pairs: Iterable[tuple[str, str]],
) -> tuple[dict[str, str] | None, dict[str, list[str]] | None]:
    multi: dict[str, list[str]] = {}
    for name, value in pairs:
        multi.setdefault(name, []).append(value)
    if not multi:
        return None, None
    return {k: v[-1] for k, v in multi.items()}, multi


def request_time(now: datetime) -> str:
    """API Gateway's ``requestTime`` (CLF format, English month names whatever the locale)."""
    t = now.astimezone(UTC)
    month = _MONTHS[t.month - 1]
    return f"{t.day:02d}/{month}/{t.year:04d}:{t.hour:02d}:{t.minute:02d}:{t.second:02d} +0000"


def _trace_id(now: datetime) -> str:
    return f"Root=1-{int(now.timestamp()):08x}-{secrets.token_hex(12)}"  # 96 random bits


def _first_values(headers: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Each header's first value by its lower-case name (what ``LocalRequest.header`` gives),
    in one pass: the event reads several."""
    first: dict[str, str] = {}
    for name, value in headers:
        first.setdefault(name.lower(), value)
    return first


def _with_gateway_headers(
    request: LocalRequest, now: datetime, present: dict[str, str]
) -> list[tuple[str, str]]:
    """The client's headers plus the ones API Gateway adds on the way to the integration
    (``present``: the client's, as :func:`_first_values` gives them)."""
    headers = list(request.headers)
    forwarded = present.get("x-forwarded-for")
    if "x-forwarded-for" in present:
        headers = [(k, v) for k, v in headers if k.lower() != "x-forwarded-for"]
    chain = f"{forwarded}, {request.source_ip}" if forwarded else request.source_ip
    headers.append(("X-Forwarded-For", chain))
    if "x-forwarded-proto" not in present:
        headers.append(("X-Forwarded-Proto", "http"))
    if "x-forwarded-port" not in present and request.server_port is not None:
        headers.append(("X-Forwarded-Port", str(request.server_port)))
    if "x-amzn-trace-id" not in present:
        headers.append(("X-Amzn-Trace-Id", _trace_id(now)))
    return headers


def encode_body(body: bytes) -> tuple[str | None, bool]:
    """The event's ``body`` and ``isBase64Encoded``: text as is, anything else base64."""
    if not body:
        return None, False
    try:
        return body.decode("utf-8"), False
    except UnicodeDecodeError:
        return base64.b64encode(body).decode("ascii"), True


@functools.lru_cache(maxsize=1024)
def _short_id(text: str, length: int) -> str:
    """A stable id derived from ``text`` (a route's resource id, an API key's id): the same few
    texts at every request, hashed once each."""
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def rest_api_event(
    request: LocalRequest,
    match: RouteMatch,
    *,
    request_id: str | None = None,
    now: datetime | None = None,
    stage: str = STAGE,
) -> dict[str, Any]:
    """The API Gateway REST (v1) Lambda proxy event for ``request`` routed to ``match``."""
    now = now or datetime.now(UTC)
    request_id = request_id or str(uuid.uuid4())
    present = _first_values(request.headers)
    headers, multi_headers = _single_and_multi(_with_gateway_headers(request, now, present))
    query, multi_query = _query_maps(parse_query(request.query_string))
    body, is_base64 = encode_body(request.body)
    api_key = present.get(API_KEY_HEADER)
    host = present.get("host") or f"{API_ID}.execute-api.{REGION}.amazonaws.com"
    template = match.route.path
    method = request.method.upper() if match.route.fallback else match.route.method
    return {
        "resource": template,
        "path": request.raw_path,
        "httpMethod": method,
        "headers": headers,
        "multiValueHeaders": multi_headers,
        "queryStringParameters": query,
        "multiValueQueryStringParameters": multi_query,
        "pathParameters": dict(match.path_parameters) or None,
        "stageVariables": None,
        "requestContext": {
            "accountId": ACCOUNT_ID,
            "apiId": API_ID,
            "domainName": host,
            "domainPrefix": host.split(".", 1)[0],
            "extendedRequestId": base64.b64encode(secrets.token_bytes(10)).decode("ascii"),
            "httpMethod": method,
            "identity": {
                "accessKey": None,
                "accountId": None,
                "apiKey": api_key,
                "apiKeyId": _short_id(api_key, 10) if api_key else None,
                "caller": None,
                "cognitoAuthenticationProvider": None,
                "cognitoAuthenticationType": None,
                "cognitoIdentityId": None,
                "cognitoIdentityPoolId": None,
                "principalOrgId": None,
                "sourceIp": request.source_ip,
                "user": None,
                "userAgent": present.get("user-agent"),
                "userArn": None,
                "clientCert": None,
            },
            "path": f"/{stage}{request.raw_path}",
            "protocol": request.protocol,
            "requestId": request_id,
            "requestTime": request_time(now),
            "requestTimeEpoch": int(now.timestamp() * 1000),
            "resourceId": _short_id(f"{method} {template}", 6),
            "resourcePath": template,
            "stage": stage,
        },
        "body": body,
        "isBase64Encoded": is_base64,
    }


def schedule_rule_arn(function: str) -> str:
    return f"arn:aws:events:{REGION}:{ACCOUNT_ID}:rule/baton-{function}-schedule"


def scheduled_event(function: str, *, now: datetime | None = None) -> dict[str, Any]:
    """The EventBridge "Scheduled Event" a schedule rule sends to ``function``."""
    now = (now or datetime.now(UTC)).astimezone(UTC)
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": ACCOUNT_ID,
        "time": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": REGION,
        "resources": [schedule_rule_arn(function)],
        "detail": {},
    }
