"""Conductor's own JavaScript client (npm ``@io-orkes/conductor-javascript``, unmodified) against
Baton's ``/api``: it registers a task definition and a workflow, starts the workflow, and a legacy
``TaskManager`` worker polls, runs and completes its task until the workflow completes.

The npm project is ``tests/conductor/clients/js`` (its ``package-lock.json`` pins the client);
``npm ci`` runs once, again only when the lock file changes. Skipped when node/npm is missing.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.support.servers import LocalServer

PROJECT = Path(__file__).parent / "clients" / "js"
RUN_SECONDS = 120  # a cold node start and the whole walk-through on a busy 2-core machine


def _node_and_npm() -> str | None:
    """Why the check cannot run here, or None."""
    node = shutil.which("node")
    if node is None or shutil.which("npm") is None:
        return "Conductor's JavaScript client needs Node.js >= 20 and npm (not found on PATH)"
    major = subprocess.run(
        [node, "-p", "process.versions.node.split('.')[0]"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    if not major.isdigit() or int(major) < 20:
        return f"Conductor's JavaScript client needs Node.js >= 20 (found {major or 'none'})"
    return None


@pytest.fixture(scope="module")
def js_client_project() -> Path:
    """The npm project with its dependencies installed (``npm ci`` when the lock changed)."""
    missing = _node_and_npm()
    if missing is not None:
        pytest.skip(missing)
    lock = PROJECT / "package-lock.json"
    installed = PROJECT / "node_modules" / ".package-lock.json"
    # One installer at a time (pytest-xdist workers share the directory).
    with (PROJECT / ".npm-ci.lock").open("w") as guard:
        fcntl.flock(guard, fcntl.LOCK_EX)
        if not installed.exists() or installed.stat().st_mtime < lock.stat().st_mtime:
            done = subprocess.run(
                ["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"],
                cwd=PROJECT,
                capture_output=True,
                text=True,
                timeout=600,
                check=False,
            )
            assert done.returncode == 0, f"npm ci failed:\n{done.stdout}\n{done.stderr}"
    return PROJECT


def _run(
    project: Path, server: LocalServer, prefix: str, extra_env: dict[str, str]
) -> tuple[dict[str, Any], str]:
    env = {
        **os.environ,
        "CONDUCTOR_SERVER_URL": f"{server.base_url}/api",
        "CONDUCTOR_AUTH_KEY": "js-client",
        "CONDUCTOR_AUTH_SECRET": server.api_key or "",
        "E2E_DEADLINE_MS": str((RUN_SECONDS - 30) * 1000),
        **extra_env,
    }
    done = subprocess.run(
        ["node", "run.mjs", prefix],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=RUN_SECONDS,
        check=False,
    )
    lines = done.stdout.strip().splitlines()
    assert lines, f"run.mjs printed no result (exit {done.returncode}):\n{done.stderr}"
    return json.loads(lines[-1]), done.stderr


@pytest.mark.parametrize(
    "fetch",
    [
        # The client's own default on Node: an undici Agent streaming every body chunked.
        "default",
        # Node's global fetch through the client's documented customFetch argument: bodies go
        # with a Content-Length.
        "node",
    ],
)
def test_a_task_manager_worker_completes_a_workflow_registered_through_the_client(
    js_client_project: Path, conductor_server: LocalServer, fetch: str
) -> None:
    prefix = f"js{uuid.uuid4().hex[:8]}"
    # The client retries its first token request 8 times over ~2 minutes: 30 s says enough.
    extra = {"CONDUCTOR_JS_FETCH": fetch, "E2E_CONNECT_MS": "30000"}
    result, log = _run(js_client_project, conductor_server, prefix, extra)
    assert result["ok"], (result, log)
    assert result["status"] == "COMPLETED"
    assert result["output"] == {"greeting": "Hello Baton"}
    assert result["correlationId"] == f"{prefix}-corr"
    assert result["task"] == {
        "taskType": f"{prefix}_greet",
        "status": "COMPLETED",
        "referenceTaskName": "greet_ref",
        "workerId": f"{prefix}-worker",
        "outputData": {"greeting": "Hello Baton"},
    }
    assert result["executed"] == 1, "the worker ran the task exactly once"

    # What the client registered reads back through Baton's own API.
    definition = conductor_server.request("GET", f"/api/metadata/workflow/{prefix}_greetings")
    assert [t["name"] for t in definition.json()["tasks"]] == [f"{prefix}_greet"]
    task_def = conductor_server.request("GET", f"/api/metadata/taskdefs/{prefix}_greet").json()
    assert task_def["retryCount"] == 1
