"""A ``baton dev`` on the real functions for the Conductor-compatibility tests."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator

import httpx
import pytest
from conductor.client.configuration.configuration import Configuration
from conductor.client.configuration.settings.authentication_settings import (
    AuthenticationSettings,
)
from conductor.client.orkes_clients import OrkesClients

from tests.support.servers import ROOT, LocalServer, _session_server


@pytest.fixture(scope="module")
def conductor_server(
    tmp_path_factory: pytest.TempPathFactory, e2e_database_url: str | None
) -> Iterator[LocalServer]:
    yield from _session_server(
        LocalServer, tmp_path_factory, "conductor-server", None, e2e_database_url
    )


@pytest.fixture(scope="module")
def prefix() -> str:
    return f"c{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def config(conductor_server: LocalServer) -> Configuration:
    return Configuration(
        server_api_url=f"{conductor_server.base_url}/api",
        authentication_settings=AuthenticationSettings(
            key_id="tests", key_secret=conductor_server.api_key or ""
        ),
    )


@pytest.fixture(scope="module")
def clients(config: Configuration) -> OrkesClients:
    return OrkesClients(config)


@pytest.fixture(scope="module")
def api(conductor_server: LocalServer) -> Iterator[httpx.Client]:
    """Plain HTTP to the server's ``/api``, with its key."""
    with httpx.Client(
        base_url=f"{conductor_server.base_url}/api",
        headers={"x-api-key": conductor_server.api_key or ""},
        timeout=30,
    ) as client:
        yield client


@pytest.fixture(scope="module")
def workers(
    conductor_server: LocalServer, prefix: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[subprocess.Popen[bytes]]:
    """The SDK's TaskHandler in its own process, configured by environment variables only."""
    markers = tmp_path_factory.mktemp("markers")
    log = tmp_path_factory.mktemp("workers") / "workers.log"
    env = {
        **os.environ,
        "CONDUCTOR_SERVER_URL": f"{conductor_server.base_url}/api",
        "CONDUCTOR_AUTH_KEY": "workers",
        "CONDUCTOR_AUTH_SECRET": conductor_server.api_key or "",
        "E2E_TASK_PREFIX": prefix,
        "E2E_MARKER_DIR": str(markers),
        "PYTHONPATH": str(ROOT),
    }
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.conductor.run_workers"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    yield proc
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
