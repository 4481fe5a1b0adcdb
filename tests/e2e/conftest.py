"""End-to-end fixtures: ``baton dev`` started as a real subprocess and driven over HTTP.

Until the real handlers exist, most tests run the server on a folder of small fake functions
(written below) that exercise what the runtime promises: events as API Gateway sends them, the
database URL and S3 endpoint in the environment, errors mapped, the timer ticking.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self, TypeVar

import httpx
import psycopg
import pytest
from baton import settings as env_names
from psycopg.conninfo import make_conninfo

ROOT = Path(__file__).resolve().parents[2]
TEST_API_KEY = "e2e-test-key-0123456789"
START_TIMEOUT_SECONDS = 60.0
STOP_TIMEOUT_SECONDS = 30.0

FAKE_DEFINITIONS = '''
"""Fake definitions function: a Powertools REST resolver, like the real ones."""
from __future__ import annotations

import json
import os

import psycopg
from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response

from baton import settings

app = APIGatewayRestResolver()


def _db() -> psycopg.Connection:
    conn = psycopg.connect(os.environ[settings.ENV_DATABASE_URL], autocommit=True)
    conn.execute(
        "CREATE TABLE IF NOT EXISTS fake_definition (name text PRIMARY KEY, body jsonb NOT NULL)"
    )
    return conn


@app.post("/v1/definitions")
def register():
    body = app.current_event.json_body
    with _db() as conn:
        conn.execute(
            "INSERT INTO fake_definition VALUES (%s, %s) "
            "ON CONFLICT (name) DO UPDATE SET body = excluded.body",
            (body["name"], json.dumps(body)),
        )
    return Response(201, "application/json", json.dumps(body))


@app.get("/v1/definitions/<name>")
def latest(name: str):
    with _db() as conn:
        row = conn.execute("SELECT body FROM fake_definition WHERE name = %s", (name,)).fetchone()
    if row is None:
        return Response(404, "application/problem+json", json.dumps({"status": 404}))
    return row[0]


def _echo():
    ctx = app.lambda_context
    return {
        "event": app.current_event.raw_event,
        "context": {
            "function_name": ctx.function_name,
            "function_version": ctx.function_version,
            "invoked_function_arn": ctx.invoked_function_arn,
            "memory_limit_in_mb": ctx.memory_limit_in_mb,
            "aws_request_id": ctx.aws_request_id,
            "log_group_name": ctx.log_group_name,
            "log_stream_name": ctx.log_stream_name,
            "remaining_ms": ctx.get_remaining_time_in_millis(),
        },
        "env": {
            name: os.environ.get(name)
            for name in (
                settings.ENV_STAGE,
                settings.ENV_S3_ENDPOINT,
                settings.ENV_PAYLOAD_BUCKET,
                settings.ENV_DATABASE_URL,
            )
        },
        "module": __name__,
    }


app.get("/v1/taskdefs/<name>")(lambda name: _echo())
app.put("/v1/taskdefs/<name>")(lambda name: _echo())


@app.get("/v1/taskdefs")
def binary():
    return Response(200, "application/octet-stream", bytes(range(256)))


def handler(event, context):
    return app.resolve(event, context)
'''

FAKE_INSTANCES = '''
"""Fake instances function: a bare handler that misbehaves on purpose."""
from __future__ import annotations

import json
import time


def handler(event, context):
    route = (event["httpMethod"], event["resource"])
    if route == ("POST", "/v1/instances"):
        raise RuntimeError("this handler always raises")
    if route == ("GET", "/v1/instances"):
        return {"statusCode": 200, "body": {"not": "a string"}}
    if route == ("GET", "/v1/instances/{id}"):
        time.sleep(float(event["pathParameters"]["id"]))
        return {"statusCode": 200, "body": json.dumps({"module": __name__})}
    return {
        "statusCode": 200,
        "headers": {"X-Single": "one", "Content-Type": "text/plain"},
        "multiValueHeaders": {"X-Multi": ["a", "b"]},
        "body": event["body"] or "",
    }
'''

FAKE_TICK = '''
"""Fake scheduled function: records each scheduled event{extra_doc}."""
from __future__ import annotations

import json
import os

import psycopg

from baton import settings


def handler(event, context):
    with psycopg.connect(os.environ[settings.ENV_DATABASE_URL], autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS fake_tick (function text NOT NULL, event jsonb NOT NULL)"
        )
        conn.execute(
            "INSERT INTO fake_tick VALUES (%s, %s)", (context.function_name, json.dumps(event))
        )
    {extra_code}
'''


def write_fake_functions(folder: Path) -> Path:
    """The fake ``functions/`` folder. ``jobs`` is left without a handler on purpose."""
    sources = {
        "definitions": FAKE_DEFINITIONS,
        "instances": FAKE_INSTANCES,
        "reaper": FAKE_TICK.format(extra_doc="", extra_code="return None"),
        "sweeper": FAKE_TICK.format(
            extra_doc=" and then fails",
            extra_code='raise RuntimeError("the sweeper fails after recording")',
        ),
    }
    for name, source in sources.items():
        (folder / name).mkdir(parents=True, exist_ok=True)
        (folder / name / "handler.py").write_text(textwrap.dedent(source).lstrip())
    (folder / "jobs").mkdir(exist_ok=True)
    return folder


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class LocalServer:
    """One ``baton dev`` subprocess."""

    data_dir: Path
    functions_dir: Path | None
    log_path: Path
    database_url: str | None = None
    api_key: str = TEST_API_KEY
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    client: httpx.Client | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Self:
        ours = (*env_names.ALL_ENV_VARS, *env_names.LOCAL_ENV_VARS)
        env = {k: v for k, v in os.environ.items() if k not in ours}
        env.update(
            {
                env_names.ENV_API_KEY: self.api_key,
                env_names.ENV_TICK_SECONDS: "0.2",
                "PYTHONUNBUFFERED": "1",
            }
        )
        if self.database_url:
            env[env_names.ENV_DATABASE_URL] = self.database_url
        cmd = [sys.executable, "-m", "baton.cli", "dev", "--port", str(self.port)]
        cmd += ["--data-dir", str(self.data_dir)]
        if self.functions_dir is not None:
            cmd += ["--functions-dir", str(self.functions_dir)]
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
            )
        self.client = httpx.Client(base_url=self.base_url, timeout=30.0)
        self._wait_until_ready()
        return self

    def _wait_until_ready(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                pytest.fail(f"baton dev exited with {self.process.returncode}:\n{self.output()}")
            try:
                # Unauthenticated on purpose: a 401 proves the server is up without a handler.
                if httpx.get(self.base_url + "/v1/definitions", timeout=1.0).status_code == 401:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        self.kill()
        pytest.fail(f"baton dev not ready after {START_TIMEOUT_SECONDS} s:\n{self.output()}")

    def request(
        self,
        method: str,
        path: str,
        json: Any = None,
        headers: dict[str, str] | None = None,
        **kwargs: Any,
    ) -> httpx.Response:
        """A request with the test API key unless ``headers`` set ``x-api-key`` themselves."""
        assert self.client is not None
        merged = {"x-api-key": self.api_key, **(headers or {})}
        return self.client.request(method, path, json=json, headers=merged, **kwargs)

    def stop(self) -> int:
        """SIGINT, as Ctrl-C sends it; returns the exit code (kills and fails on a hang)."""
        if self.client is not None:
            self.client.close()
            self.client = None
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(STOP_TIMEOUT_SECONDS)
            except subprocess.TimeoutExpired:
                self.kill()
                pytest.fail(f"baton dev did not stop within {STOP_TIMEOUT_SECONDS} s")
        return self.process.returncode

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")[-5000:]


@pytest.fixture(scope="session")
def e2e_database_url() -> Iterator[str | None]:
    """A database of its own on the run's external server, if the run has one; else None
    (each server embeds PostgreSQL in its data directory)."""
    external = os.environ.get(env_names.ENV_DATABASE_URL)
    if not external:
        yield None
        return
    name = f"baton_e2e_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(external, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield make_conninfo(external, dbname=name)
    with psycopg.connect(external, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def fake_functions_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_fake_functions(tmp_path_factory.mktemp("functions"))


@pytest.fixture(scope="session")
def local_server(
    tmp_path_factory: pytest.TempPathFactory,
    fake_functions_dir: Path,
    e2e_database_url: str | None,
) -> Iterator[LocalServer]:
    """One server for the session, on the fake functions; stopping it must exit 0."""
    yield from _session_server(
        LocalServer, tmp_path_factory, "local-server", fake_functions_dir, e2e_database_url
    )


S = TypeVar("S", bound=LocalServer)


def _session_server(
    cls: type[S],
    tmp_path_factory: pytest.TempPathFactory,
    name: str,
    functions_dir: Path | None,
    database_url: str | None,
) -> Iterator[S]:
    base = tmp_path_factory.mktemp(name)
    server = cls(
        data_dir=base / "data",
        functions_dir=functions_dir,
        log_path=base / "server.log",
        database_url=database_url,
    ).start()
    yield server
    code = server.stop()
    assert code == 0, f"baton dev exited with {code}:\n{server.output()}"


@pytest.fixture
def start_server(tmp_path: Path) -> Iterator[Any]:
    """Start more servers within one test; any still running at the end are stopped."""
    started: list[LocalServer] = []

    def start(
        *, data_dir: Path, functions_dir: Path | None, database_url: str | None = None
    ) -> LocalServer:
        server = LocalServer(
            data_dir=data_dir,
            functions_dir=functions_dir,
            log_path=tmp_path / f"server-{len(started)}.log",
            database_url=database_url,
        )
        started.append(server)
        return server.start()

    yield start
    for server in started:
        if server.process is not None and server.process.poll() is None:
            server.stop()


class CheckedServer(LocalServer):
    """A server on the real functions whose every JSON response must parse into its proto
    message (unknown fields refused), so the JSON and the proto contract cannot drift."""

    def request(
        self,
        method: str,
        path: str,
        json: Any = None,
        headers: dict[str, str] | None = None,
        **kwargs: Any,
    ) -> httpx.Response:
        response = super().request(method, path, json=json, headers=headers, **kwargs)
        ctype = response.headers.get("content-type", "")
        if "json" in ctype and response.content:
            from tests.proto_contract import check_response

            check_response(method, path, response.status_code, response.json())
        return response


@pytest.fixture(scope="session")
def baton_server(
    tmp_path_factory: pytest.TempPathFactory, e2e_database_url: str | None
) -> Iterator[CheckedServer]:
    """One ``baton dev`` on the real functions for the session; stopping it must exit 0."""
    yield from _session_server(
        CheckedServer, tmp_path_factory, "baton-server", None, e2e_database_url
    )
