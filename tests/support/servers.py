"""Local servers for end-to-end tests: ``baton dev`` started as a real subprocess, driven over
HTTP. A pytest plugin (registered by ``tests/conftest.py``), so every suite can use its fixtures.

Some tests run the server on ``fake_functions/``, small handlers that exercise what the runtime
promises (events as API Gateway sends them, the database URL and S3 endpoint in the environment,
errors mapped, the timer ticking); the rest run it on the real functions.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self, TypeVar

import httpx
import psycopg
import pytest
from baton import settings as env_names
from psycopg.conninfo import make_conninfo

from tests.support.helpers import timed_in_background, wait_until

ROOT = Path(__file__).resolve().parents[2]
FAKE_FUNCTIONS = Path(__file__).resolve().parent / "fake_functions"
TEST_API_KEY = "e2e-test-key-0123456789"
START_TIMEOUT_SECONDS = 60.0
STOP_TIMEOUT_SECONDS = 30.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


R = TypeVar("R")


@dataclass
class LocalServer:
    """One ``baton dev`` subprocess."""

    data_dir: Path
    functions_dir: Path | None
    log_path: Path
    database_url: str | None = None
    # None: start without BATON_API_KEY, then use the key the server keeps in its data directory.
    api_key: str | None = TEST_API_KEY
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    client: httpx.Client | None = None
    # More environment for the server (e.g. BATON_DISPATCH_MODE), applied last.
    extra_env: dict[str, str] = field(default_factory=dict)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Self:
        ours = env_names.ALL_ENV_VARS
        env = {k: v for k, v in os.environ.items() if k not in ours}
        env.update({env_names.ENV_TICK_SECONDS: "0.2", "PYTHONUNBUFFERED": "1"})
        # No gRPC port unless a test asks for one (servers run side by side; 9090 is shared).
        env[env_names.ENV_GRPC_PORT] = "0"
        if self.api_key is not None:
            env[env_names.ENV_API_KEY] = self.api_key
        if self.database_url:
            env[env_names.ENV_DATABASE_URL] = self.database_url
        env.update(self.extra_env)
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
        if self.api_key is None:
            self.api_key = (self.data_dir / "api-key").read_text().strip()
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
        merged = {"x-api-key": self.api_key or "", **(headers or {})}
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
        """The log's last 5,000 characters: for a failed assertion's message."""
        return self.log_path.read_text(errors="replace")[-5000:]

    def log(self) -> str:
        """The whole log, to look for a line in (its start's banner precedes many more)."""
        return self.log_path.read_text(errors="replace")

    def register_one_step(self, name: str) -> None:
        """A definition ``name`` of one SERVICE_TASK whose jobs have type ``name``."""
        flow = {"name": name, "steps": [{"id": "a", "type": "SERVICE_TASK", "jobType": name}]}
        response = self.request("POST", "/v1/definitions", json=flow)
        assert response.status_code in (200, 201), response.text

    def connect_database(self) -> psycopg.Connection[Any]:
        """A connection to the server's database (``database_url``, else the embedded one)."""
        if self.database_url:
            return psycopg.connect(self.database_url, autocommit=True)
        lines = (self.data_dir / "postgres" / "postmaster.pid").read_text().splitlines()
        return psycopg.connect(
            host=lines[4].strip(), port=int(lines[3]), user="postgres", dbname="postgres"
        )

    def waiting_in_background(
        self, job_type: str, call: Callable[[], R]
    ) -> Future[tuple[R, float]]:
        """``call`` (a long-poll for ``job_type``) on a thread of its own, handed back once the
        server has it waiting: (its result, the time it returned)."""
        answered = timed_in_background(call)
        wait_until(
            lambda: self.long_poll_waiting(job_type),
            timeout=10,
            what=f"the long-poll for {job_type} to wait",
        )
        return answered

    def long_poll_waiting(self, job_type: str) -> bool:
        """Whether a long-poll for ``job_type`` is waiting (registered for its NOTIFY)."""
        with self.connect_database() as conn:
            row = conn.execute(
                "SELECT 1 FROM job_waiter WHERE job_type = %s AND expires_at > now()", (job_type,)
            ).fetchone()
        return row is not None


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


def copy_fake_functions(folder: Path) -> Path:
    """A ``functions/`` folder of the fake handlers; ``jobs`` is left without one on purpose."""
    shutil.copytree(FAKE_FUNCTIONS, folder, dirs_exist_ok=True)
    (folder / "jobs").mkdir(exist_ok=True)
    return folder


@pytest.fixture(scope="session")
def fake_functions_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_fake_functions(tmp_path_factory.mktemp("functions"))


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
        *,
        data_dir: Path,
        functions_dir: Path | None,
        database_url: str | None = None,
        api_key: str | None = TEST_API_KEY,
        extra_env: dict[str, str] | None = None,
    ) -> LocalServer:
        server = LocalServer(
            data_dir=data_dir,
            functions_dir=functions_dir,
            log_path=tmp_path / f"server-{len(started)}.log",
            database_url=database_url,
            api_key=api_key,
            extra_env=dict(extra_env or {}),
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
            from tests.support.proto_contract import check_response

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
