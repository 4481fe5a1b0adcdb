"""A local HTTP server for HTTP steps to call (127.0.0.1, a free port): JSON and text answers, a
failing path that counts its hits, a path answering how often it was called, a path that holds
its answer until released, a large body, a redirect, the saga cookbook's services (``/saga/…``,
answering ``?status=`` when asked), and every request it got (method, path, headers, body)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Target:
    port: int
    requests: list[dict[str, Any]] = field(default_factory=list)
    hits: dict[str, int] = field(default_factory=dict)
    release: threading.Event = field(default_factory=threading.Event)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"


class _Quiet(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that hung up early (a size cap, a timeout) is what the tests do


@contextmanager
def http_target() -> Iterator[Target]:
    target = Target(port=0)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _answer(self, status: int, body: bytes, content_type: str, **headers: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for k, v in headers.items():
                self.send_header(k.replace("_", "-"), v)
            self.end_headers()
            self.wfile.write(body)

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            path = self.path.split("?")[0]
            target.requests.append(
                {
                    "method": self.command,
                    "path": self.path,
                    "headers": dict(self.headers.items()),
                    "body": body.decode(),
                }
            )
            target.hits[path] = target.hits.get(path, 0) + 1
            if path == "/json":
                echo = json.loads(body) if body else None
                out = {"ok": True, "method": self.command, "echo": echo}
                self._answer(200, json.dumps(out).encode(), "application/json", X_Trace="t-1")
            elif path == "/count":
                # How many times it was called, for HTTP_POLL's conditions.
                out = {"n": target.hits[path]}
                self._answer(200, json.dumps(out).encode(), "application/json")
            elif path == "/text":
                self._answer(200, b"plain words", "text/plain; charset=utf-8")
            elif path == "/fail":
                self._answer(500, b'{"error":"boom"}', "application/json")
            elif path == "/hold":
                target.release.wait(30)
                self._answer(200, b"{}", "application/json")
            elif path == "/big":
                self._answer(200, b"x" * (2 * 1024 * 1024), "text/plain")
            elif path.startswith("/saga/"):
                # The saga cookbook's stub services: 200 with an id, or the ``status`` asked.
                query = self.path.partition("?")[2]
                asked = dict(kv.partition("=")[::2] for kv in query.split("&") if kv)
                status = int(asked.get("status") or 200)
                out = {
                    "ok": status < 400,
                    "id": f"{path.rsplit('/', 1)[-1]}-{len(target.requests)}",
                }
                self._answer(status, json.dumps(out).encode(), "application/json")
            elif path == "/redirect":
                self._answer(302, b"", "text/plain", Location="http://169.254.169.254/")
            else:
                self._answer(404, b"no such path", "text/plain")

        do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _serve

    server = _Quiet(("127.0.0.1", 0), Handler)
    target.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield target
    finally:
        target.release.set()
        server.shutdown()
        server.server_close()
