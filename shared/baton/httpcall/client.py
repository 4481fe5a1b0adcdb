"""The call of an HTTP step: connect to an address the guard checked (TLS with the request's host
name for SNI and certificate checks, the ``Host`` header kept), send, read the answer within the
request's timeouts and a size cap. Redirects are not followed: a 3xx is an answer outside 2xx
and fails the attempt (its ``Location`` in the reason), so a redirect can never lead to an
address the guard would refuse."""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from baton.httpcall.guard import AddressPolicy, Refused, checked_addresses
from baton.httpcall.request import HttpRequest

# The largest answer body kept inline in the step's output; a larger one fails the attempt.
DEFAULT_MAX_RESPONSE_BYTES = 1024 * 1024
_CHUNK = 64 * 1024
_SNIPPET = 500


class CallFailed(Exception):
    """The call did not give a 2xx answer: ``retryable`` says whether trying again may help."""

    def __init__(self, reason: str, *, retryable: bool = True) -> None:
        super().__init__(reason)
        self.retryable = retryable


@dataclass(frozen=True, slots=True)
class Limits:
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES


def call(
    request: HttpRequest, policy: AddressPolicy, limits: Limits | None = None
) -> dict[str, Any]:
    """Make the call; the step's output ``{"response": {...}}`` for a 2xx answer, else
    :class:`CallFailed` saying why (a refusal is not retryable)."""
    limits = limits or Limits()
    parts = urlsplit(request.uri)
    https = parts.scheme.lower() == "https"
    host = parts.hostname or ""
    port = parts.port or (443 if https else 80)
    what = f"{request.method} {request.uri}"
    try:
        addresses = checked_addresses(policy, host, port)
    except Refused as e:
        raise CallFailed(str(e), retryable=False) from None
    except OSError as e:
        raise CallFailed(f"{what}: {e}") from None
    deadline = time.monotonic() + (request.connect_ms + request.read_ms) / 1000
    sock = _connect(addresses, port, request.connect_ms / 1000, what)
    try:
        if https:
            context = ssl.create_default_context()
            try:
                sock = context.wrap_socket(sock, server_hostname=host)
            except (ssl.SSLError, OSError) as e:
                raise CallFailed(f"{what}: TLS handshake failed: {e}") from None
        return _exchange(
            request,
            sock,
            parts=parts,
            host=host,
            port=port,
            https=https,
            deadline=deadline,
            limits=limits,
            what=what,
        )
    finally:
        sock.close()


def _connect(addresses: list[Any], port: int, timeout: float, what: str) -> socket.socket:
    errors: list[str] = []
    for address in addresses:
        family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        try:
            sock.connect((str(address), port))
            return sock
        except TimeoutError:
            errors.append(f"{address}: no connection within {timeout * 1000:.0f} ms")
        except OSError as e:
            errors.append(f"{address}: {e.strerror or e}")
        sock.close()
    raise CallFailed(f"{what}: cannot connect ({'; '.join(errors)})")


def _exchange(
    request: HttpRequest,
    sock: socket.socket,
    *,
    parts: Any,
    host: str,
    port: int,
    https: bool,
    deadline: float,
    limits: Limits,
    what: str,
) -> dict[str, Any]:
    default_port = 443 if https else 80
    conn = http.client.HTTPConnection(host if port == default_port else f"{host}:{port}")
    conn.sock = sock  # connected to the checked address: http.client never resolves the name
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    try:
        sock.settimeout(max(0.001, deadline - time.monotonic()))
        conn.request(request.method, path, body=request.body, headers=request.headers)
        sock.settimeout(min(request.read_ms / 1000, max(0.001, deadline - time.monotonic())))
        answer = conn.getresponse()
        body = _read(
            answer,
            sock,
            deadline=deadline,
            read_timeout=request.read_ms / 1000,
            limits=limits,
            what=what,
        )
    except TimeoutError:
        raise CallFailed(f"{what}: no answer within readTimeOut {request.read_ms} ms") from None
    except (OSError, http.client.HTTPException) as e:
        raise CallFailed(f"{what}: {type(e).__name__}: {e}") from None
    headers: dict[str, list[str]] = {}
    for name, value in answer.getheaders():
        headers.setdefault(name, []).append(value)
    content_type = answer.getheader("Content-Type") or ""
    output = {
        "response": {
            "statusCode": answer.status,
            "reasonPhrase": answer.reason,
            "headers": headers,
            "body": _body(body, content_type),
        }
    }
    if not 200 <= answer.status < 300:
        said = f"HTTP {answer.status} {answer.reason}".rstrip()
        location = answer.getheader("Location")
        if location and 300 <= answer.status < 400:
            said += f" (redirects are not followed; Location: {location})"
        snippet = body[:_SNIPPET].decode("utf-8", "replace").strip()
        if snippet:
            said += f": {snippet}"
        raise CallFailed(f"{what}: {said}")
    return output


def _read(
    answer: http.client.HTTPResponse,
    sock: socket.socket,
    *,
    deadline: float,
    read_timeout: float,
    limits: Limits,
    what: str,
) -> bytes:
    declared = answer.getheader("Content-Length")
    if declared and declared.isdigit() and int(declared) > limits.max_response_bytes:
        raise CallFailed(
            f"{what}: the answer's body is {declared} bytes, above the limit of "
            f"{limits.max_response_bytes} bytes",
            retryable=False,
        )
    chunks: list[bytes] = []
    size = 0
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        sock.settimeout(min(read_timeout, left))
        chunk = answer.read1(_CHUNK) if hasattr(answer, "read1") else answer.read(_CHUNK)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > limits.max_response_bytes:
            raise CallFailed(
                f"{what}: the answer's body is above the limit of "
                f"{limits.max_response_bytes} bytes",
                retryable=False,
            )
        chunks.append(chunk)


def _body(raw: bytes, content_type: str) -> Any:
    text = raw.decode(_charset(content_type), "replace")
    if "json" in content_type.lower() and text.strip():
        try:
            return json.loads(text, parse_constant=_no_constant)
        except ValueError:
            return text
    return text


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _charset(content_type: str) -> str:
    for part in content_type.split(";")[1:]:
        key, _, value = part.strip().partition("=")
        if key.lower() == "charset" and value:
            try:
                "".encode(value.strip('"'))
                return value.strip('"')
            except LookupError:
                break
    return "utf-8"
