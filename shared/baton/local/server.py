"""The local API: a threaded HTTP server standing in for API Gateway in front of the functions.

Per request, in API Gateway's order: the API key (401 without one, 403 with a wrong one; not
asked for on the route table's public routes), the size limit (413 before reading the body), the
route (404, 405 with ``Allow``), then the function's
handler with a REST proxy event; its proxy result becomes the HTTP response. The server's own
refusals are ``application/problem+json``. One JSON log line per request: method, path,
status, ``ms`` (wall) and ``cpu_ms`` (the request thread's CPU from its parsed headers to its
answer: what that request cost the server), request id, function.

At stop (:meth:`LocalApiServer.drain`) the server stops accepting connections, lets the requests
in flight finish (a long-poll waiting for jobs is told, as if its client had gone, and answers
its empty list within a second), closes each connection after its answer and the idle keep-alive
ones at once: only then may the runtime stop what the handlers use (the database).
"""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
import select
import socket
import socketserver
import threading
import time
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from baton.local.events import (
    API_KEY_HEADER,
    LocalRequest,
    MethodNotAllowed,
    NoRoute,
    RouteMatch,
    RouteResult,
    RouteTable,
    rest_api_event,
)
from baton.local.functions import (
    API_TIMEOUT_SECONDS,
    FunctionRegistry,
    FunctionThrottled,
    FunctionUnavailable,
)
from baton.local.responses import HttpResponse, MalformedProxyResponse, from_proxy_result
from baton.local.responses import problem as problem_response
from baton.local.usage import meter
from baton.rpc.connect import ConnectError

log = logging.getLogger("baton.local.http")

# API Gateway's payload limit for REST APIs.
MAX_BODY_BYTES = 10 * 1024 * 1024
# After refusing a body we did not read, keep reading (and dropping) it for a while so the client
# can finish sending and then read our answer: closing with unread data would reset the
# connection and lose the response. Bounded in bytes and time.
_LINGER_MAX_BYTES = 256 * 1024 * 1024
_LINGER_SECONDS = 10.0
_LINGER_IDLE_SECONDS = 0.5
_CHUNK = 64 * 1024


@dataclass(frozen=True, slots=True)
class ServerConfig:
    api_key: str
    max_body_bytes: int = MAX_BODY_BYTES
    stage: str = "local"


class LocalApiServer(ThreadingHTTPServer):
    """Serves the route table with the handlers of ``registry``; bind happens at construction."""

    daemon_threads = True
    allow_reuse_address = True
    # socketserver listens with a backlog of 5: a burst of connections (workers starting
    # together, a load test) overflowed it and the kernel reset the ones it could not queue.
    request_queue_size = 1024

    def __init__(
        self,
        address: tuple[str, int],
        *,
        config: ServerConfig,
        registry: FunctionRegistry,
        routes: RouteTable | None = None,
    ) -> None:
        self.config = config
        self.registry = registry
        self.routes = routes or RouteTable()
        self.stopping = threading.Event()
        # Every open connection, and whether a request on it is being served (else it waits
        # for the next request of a keep-alive client).
        self._connections: dict[socket.socket, bool] = {}
        self._changed = threading.Condition()
        super().__init__(address, _RequestHandler)

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        with self._changed:
            self._connections[request] = False
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._changed:
                self._connections.pop(request, None)
                self._changed.notify_all()

    def serving(self, connection: socket.socket, busy: bool) -> None:
        """A handler says it began (``busy``) or finished serving a request on ``connection``."""
        with self._changed:
            if connection in self._connections:
                self._connections[connection] = busy

    def drain(self, timeout: float) -> int:
        """Stop accepting, finish the requests in flight, close every connection; wait
        ``timeout`` seconds at most. How many connections were still open then."""
        self.stopping.set()
        self.shutdown()  # the accept loop ends...
        socketserver.TCPServer.server_close(self)  # ...and connections queued to it are refused
        deadline = time.monotonic() + timeout
        with self._changed:
            while self._connections and time.monotonic() < deadline:
                for connection, busy in self._connections.items():
                    if not busy and not _has_data(connection):
                        _stop_reading(connection)  # idle keep-alive: its handler sees the end
                self._changed.wait(min(0.1, max(0.0, deadline - time.monotonic())))
            return len(self._connections)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A bug in this module, not in a handler: the client sees its connection close.
        log.exception("error while serving a request", extra={"client": str(client_address)})


def _has_data(connection: socket.socket) -> bool:
    """Whether a request has begun to arrive on an idle connection (it is served, then closed)."""
    try:
        readable, _, _ = select.select([connection], [], [], 0)
    except (OSError, ValueError):
        return False
    return bool(readable)


def _stop_reading(connection: socket.socket) -> None:
    with contextlib.suppress(OSError):  # already closed by the client
        connection.shutdown(socket.SHUT_RD)


class _RequestHandler(BaseHTTPRequestHandler):
    # Small responses on keep-alive connections otherwise wait on Nagle + delayed ACK (~40 ms).
    disable_nagle_algorithm = True
    # The answer is written to a buffer and sent with one send at its end (_send flushes): the
    # status line and headers, then the body, went out as two sends and two TCP segments.
    wbufsize = 64 * 1024
    server: LocalApiServer
    protocol_version = "HTTP/1.1"  # keep-alive: workers poll in a loop
    timeout = 120  # idle keep-alive connections are dropped after this many seconds
    server_version = "baton-local"

    def __getattr__(self, name: str) -> Any:
        # Every method reaches the router, as at API Gateway: one the route table does not
        # declare for a path is a 405 naming the allowed ones (http.server would answer 501).
        if name.startswith("do_"):
            return self._serve
        raise AttributeError(name)

    # --- the request ---------------------------------------------------------------------------

    def _problem(self, status: int, detail: str, **kwargs: Any) -> HttpResponse:
        path = self.path.partition("?")[0]
        if path.startswith("/api/"):
            # Conductor's clients read Conductor's error body on /api, never problem+json.
            from baton.conductor.errors import error_body

            body = json.dumps(error_body(status, detail)).encode()
            extra = tuple(kwargs.get("headers") or ())
            return HttpResponse(status, (("Content-Type", "application/json"), *extra), body)
        if path.startswith("/rpc/"):
            # Connect clients read Connect's error body ({code, message}) on /rpc.
            from baton.rpc.connect import code_for, error_response

            code = code_for(status)
            headers = tuple(kwargs.get("headers") or ())
            _, base, body = error_response(ConnectError(code, detail, http_status=status))
            return HttpResponse(status, (*base.items(), *headers), body)
        return problem_response(status, detail, instance=path, **kwargs)

    def _serve(self) -> None:
        self.server.serving(self.connection, True)
        try:
            self._serve_one()
        finally:
            self.server.serving(self.connection, False)

    def _serve_one(self) -> None:
        started = time.perf_counter()
        cpu_started = time.thread_time()
        request_id = str(uuid.uuid4())
        raw_path, _, query = self.path.partition("?")
        function = None
        try:
            response = self._refusal()
            if response is not None:
                self._drop_body()
            else:
                body = self._read_body()
                if body is None:  # the client went away mid-body
                    self.close_connection = True
                    return
                if isinstance(body, HttpResponse):
                    response = body
                else:
                    response, function = self._dispatch(raw_path, query, body, request_id)
            if self.server.stopping.is_set():
                self.close_connection = True  # the last answer on this connection
            self._send(response, request_id)
        except (ConnectionError, TimeoutError):
            self.close_connection = True
            return
        if function is not None and (usage := meter()) is not None:
            usage.api_request(function)
        log.info(
            "request",
            extra={
                "method": self.command,
                "path": raw_path,
                "status": response.status,
                "ms": round((time.perf_counter() - started) * 1000, 2),
                "cpu_ms": round((time.thread_time() - cpu_started) * 1000, 3),
                "request_id": request_id,
                "function": function,
            },
        )
        self._linger_if_needed()

    def _refusal(self) -> HttpResponse | None:
        """What API Gateway refuses before looking at the body: credentials, then size."""
        if not self._public():
            key = self.headers.get(API_KEY_HEADER)
            if not key:
                return self._problem(
                    401,
                    f"this API requires an API key in the {API_KEY_HEADER} header",
                    headers=[("WWW-Authenticate", f'ApiKey header="{API_KEY_HEADER}"')],
                )
            if not hmac.compare_digest(key.encode(), self.server.config.api_key.encode()):
                return self._problem(403, "the API key is not valid")
        coding = self.headers.get("Transfer-Encoding")
        if coding is not None:
            if coding.strip().lower() != "chunked":
                return self._problem(
                    400,
                    f"Transfer-Encoding {coding!r} is not accepted: send the body with a "
                    "Content-Length, or chunked",
                )
            return None  # its size is known once read (_read_body)
        length = self._content_length()
        if length is None:
            return self._problem(400, "Content-Length is not a valid number")
        limit = self.server.config.max_body_bytes
        if length > limit:
            return self._problem(413, f"the body has {length} bytes; the limit is {limit} bytes")
        return None

    def _public(self) -> bool:
        """The request is for a route the table serves without credentials (``auth`` none)."""
        match = self._route(self.path.partition("?")[0])
        return isinstance(match, RouteMatch) and not match.route.gateway_auth

    _routed: tuple[str, str, RouteResult] | None = None

    def _route(self, raw_path: str) -> RouteResult:
        """The route of this request, matched once (the credentials check and the dispatch both
        ask; the handler object serves every request of its connection)."""
        routed = self._routed
        if routed is None or routed[0] != self.command or routed[1] != raw_path:
            routed = (self.command, raw_path, self.server.routes.match(self.command, raw_path))
            self._routed = routed
        return routed[2]

    def _content_length(self) -> int | None:
        raw = self.headers.get("Content-Length", "0").strip() or "0"
        return int(raw) if raw.isdigit() else None

    def _read_body(self) -> bytes | HttpResponse | None:
        """The request's body; None when the client went away mid-body; a refusal when a chunked
        body is malformed or grows past the limit (the connection is then closed)."""
        if self.headers.get("Transfer-Encoding"):
            return self._read_chunked()
        length = self._content_length() or 0
        body = self.rfile.read(length) if length else b""
        return body if len(body) == length else None

    def _read_chunked(self) -> bytes | HttpResponse | None:
        """A ``Transfer-Encoding: chunked`` body (as Node's fetch sends a stream), read up to the
        body limit: API Gateway buffers such a body whole before the function sees it."""
        limit = self.server.config.max_body_bytes
        parts: list[bytes] = []
        size = 0
        while True:
            line = self.rfile.readline(1026)
            if not line:
                return None
            digits = line.split(b";", 1)[0].strip()
            try:
                chunk = int(digits, 16)
            except ValueError:
                self.close_connection = True
                return self._problem(400, "the chunked body is malformed (a bad chunk size)")
            if chunk == 0:
                while True:  # trailers, up to the blank line
                    trailer = self.rfile.readline(8192)
                    if not trailer or trailer in (b"\r\n", b"\n"):
                        break
                return b"".join(parts)
            size += chunk
            if size > limit:
                self.close_connection = True
                self._must_linger = True
                return self._problem(
                    413, f"the body has over {limit} bytes; the limit is {limit} bytes"
                )
            data = self.rfile.read(chunk)
            if len(data) != chunk:
                return None
            parts.append(data)
            if self.rfile.readline(3) not in (b"\r\n", b"\n"):
                self.close_connection = True
                return self._problem(400, "the chunked body is malformed (no CRLF after a chunk)")

    def _drop_body(self) -> None:
        """After a refusal: read away a small body to keep the connection, else close it."""
        length = self._content_length()
        chunked = bool(self.headers.get("Transfer-Encoding"))
        if not chunked and length is not None and length <= self.server.config.max_body_bytes:
            while length > 0:
                chunk = self.rfile.read(min(length, _CHUNK))
                if not chunk:
                    break
                length -= len(chunk)
            return
        self.close_connection = True
        self._must_linger = True

    def _dispatch(
        self, raw_path: str, query: str, body: bytes, request_id: str
    ) -> tuple[HttpResponse, str | None]:
        match = self._route(raw_path)
        if isinstance(match, NoRoute):
            return self._problem(404, f"no route for {raw_path}"), None
        if isinstance(match, MethodNotAllowed):
            allowed = ", ".join(match.allowed)
            detail = f"{self.command} is not allowed on {match.resource} (allowed: {allowed})"
            return self._problem(405, detail, headers=[("Allow", allowed)]), None
        return self._invoke(match, raw_path, query, body, request_id), match.route.function

    def _invoke(
        self, match: RouteMatch, raw_path: str, query: str, body: bytes, request_id: str
    ) -> HttpResponse:
        host = self.client_address[0]
        request = LocalRequest(
            method=self.command,
            raw_path=raw_path,
            query_string=query,
            headers=tuple((k, v) for k, v in self.headers.items()),
            body=body,
            source_ip=str(host),
            protocol=self.request_version,
            server_port=self.server.port,
        )
        event = rest_api_event(
            request, match, request_id=request_id, stage=self.server.config.stage
        )
        name = match.route.function
        context = {"function": name, "request_id": request_id}
        try:
            result: Any = self.server.registry.invoke(
                name, event, timeout_seconds=API_TIMEOUT_SECONDS, client_gone=self._client_gone
            )
        except FunctionThrottled as e:
            log.warning("throttled: %s", e.detail, extra=context)
            return self._problem(429, e.detail, title=e.title, headers=[("Retry-After", "1")])
        except FunctionUnavailable as e:
            log.error("function unavailable: %s", e.reason, extra=context)
            return self._problem(500, str(e), title=e.title)
        except Exception as e:
            # A handler should map every error itself; a raise here is a bug to see in the log.
            log.exception("handler raised %s", type(e).__name__, extra=context)
            return self._problem(500, f"the {name} function raised {type(e).__name__}")
        try:
            return from_proxy_result(result)
        except MalformedProxyResponse as e:
            log.error("malformed proxy result: %s", e.detail, extra=context)
            return self._problem(502, e.detail, title=e.title)

    def _client_gone(self) -> bool:
        """Whether the client closed the connection while its request runs, or the server is
        stopping: a long-poll asks before claiming for it, and ends empty. Peeks without
        consuming: a request the client already sent next on this keep-alive connection stays
        for the next turn."""
        if self.server.stopping.is_set():
            return True
        try:
            # select first: the socket has a timeout, so recv itself would wait for data.
            readable, _, _ = select.select([self.connection], [], [], 0)
            if not readable:
                return False  # nothing to read: still there
            data: bytes = self.connection.recv(1, socket.MSG_PEEK)
        except (OSError, ValueError):
            return True  # reset, or already closed
        return data == b""  # closed: end of stream

    # --- the response --------------------------------------------------------------------------

    def _send(self, response: HttpResponse, request_id: str) -> None:
        self.send_response(response.status)
        for name, value in response.headers:
            self.send_header(name, value)
        self.send_header("x-amzn-RequestId", request_id)
        self.send_header("Content-Length", str(len(response.body)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD" and response.body:
            self.wfile.write(response.body)
        self.wfile.flush()

    _must_linger = False

    def _linger_if_needed(self) -> None:
        """Read and drop what the client is still sending, then let the connection close."""
        if not self._must_linger:
            return
        self._must_linger = False
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_WR)  # the client sees our answer end here
            self.connection.settimeout(_LINGER_IDLE_SECONDS)
            deadline = time.monotonic() + _LINGER_SECONDS
            dropped = 0
            while dropped < _LINGER_MAX_BYTES and time.monotonic() < deadline:
                chunk = self.rfile.read1(_CHUNK)
                if not chunk:
                    break
                dropped += len(chunk)
        except OSError:  # includes the idle timeout: the client has stopped sending
            pass

    def handle_expect_100(self) -> bool:
        """Refuse before the client sends the body (curl asks first for large bodies)."""
        response = self._refusal()
        if response is None:
            go_on = super().handle_expect_100()
            self.wfile.flush()  # the 100 Continue, now: the client waits for it to send the body
            return go_on
        self.close_connection = True
        try:
            self._send(response, str(uuid.uuid4()))
        except (ConnectionError, TimeoutError):
            return False
        self._must_linger = True
        self._linger_if_needed()
        log.info(
            "request refused before its body",
            extra={"method": self.command, "path": self.path, "status": response.status},
        )
        return False

    def log_message(self, format: str, *args: Any) -> None:
        # The stdlib's access log goes to stderr in its own format; ours is the JSON line above.
        log.debug(format, *args)
