"""The local HTTP server's own I/O, in process: an answer leaves in one send, and a client that
asks ``Expect: 100-continue`` hears the 100 before it sends its body."""

from __future__ import annotations

import http.client
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from baton.local.functions import FunctionRegistry
from baton.local.server import LocalApiServer, ServerConfig

KEY = "test-key-0123456789"
HANDLER = """
import json

def handler(event, context):
    body = event.get("body") or ""
    return {"statusCode": 200, "headers": {"Content-Type": "application/json"},
            "body": json.dumps({"got": len(body), "pad": "x" * 2000})}
"""


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LocalApiServer]:
    functions = tmp_path / "functions"
    (functions / "definitions").mkdir(parents=True)
    (functions / "definitions" / "handler.py").write_text(HANDLER)
    api = LocalApiServer(
        ("127.0.0.1", 0), config=ServerConfig(api_key=KEY), registry=FunctionRegistry(functions)
    )
    thread = threading.Thread(target=api.serve_forever, daemon=True)
    thread.start()
    try:
        yield api
    finally:
        api.drain(5)
        thread.join(5)


def test_an_answer_leaves_in_one_send(
    server: LocalApiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Headers and body went out as two sends (two TCP segments, two reads for the client).
    sends: list[int] = []

    def counting(name: str) -> Any:
        original = getattr(socket.socket, name)

        def counted(self: socket.socket, data: Any, *args: Any) -> Any:
            if threading.current_thread() is not threading.main_thread():
                sends.append(len(data))
            return original(self, data, *args)

        return counted

    for name in ("send", "sendall"):
        monkeypatch.setattr(socket.socket, name, counting(name))
    client = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    for _ in range(3):  # keep-alive: each answer alike
        sends.clear()
        client.request("GET", "/v1/definitions", headers={"x-api-key": KEY})
        response = client.getresponse()
        body = response.read()
        assert response.status == 200 and len(body) > 2000
        assert len(sends) == 1, sends
    client.close()


def test_expect_100_continue_is_answered_before_the_body_is_sent(server: LocalApiServer) -> None:
    body = b'{"name": "x"}'
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        head = (
            "POST /v1/definitions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"x-api-key: {KEY}\r\nContent-Length: {len(body)}\r\nExpect: 100-continue\r\n\r\n"
        )
        sock.sendall(head.encode())
        interim = sock.recv(4096)  # the server must send this without the body
        assert interim.startswith(b"HTTP/1.1 100"), interim
        sock.sendall(body)
        answer = b""
        while b'"pad"' not in answer or not answer.rstrip().endswith(b"}"):
            chunk = sock.recv(65536)
            assert chunk, answer
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 200"), answer[:100]
    assert b'"got": 13' in answer
