"""Conductor's own Java client (``org.conductoross:conductor-client``, pinned in
``clients/java/pom.xml``), unmodified, against ``baton dev``'s ``/api``: its MetadataClient
registers two task definitions (with the client's defaults) and a workflow, its WorkflowClient
starts and reads the workflow, and its TaskRunnerConfigurer runs two Workers (one failing its first
attempt, so the server retries it) until the workflow completes.

The Maven project is built once per session (``mvn -q -o`` first: offline after a first resolve;
online when something is missing). Without a JDK >= 17 or Maven the test is skipped, saying which.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.support.servers import LocalServer

pytestmark = [pytest.mark.e2e]

PROJECT = Path(__file__).resolve().parent / "clients" / "java"
BUILD_SECONDS = 600  # a first resolve from Maven Central on a busy 2-core machine
RUN_SECONDS = 180


def _toolchain_missing() -> str | None:
    if shutil.which("java") is None:
        return "the Conductor Java client test needs a JDK >= 17 (java not found on PATH)"
    if shutil.which("mvn") is None:
        return "the Conductor Java client test needs Maven >= 3.8 (mvn not found on PATH)"
    out = subprocess.run(
        ["java", "-XshowSettings:properties", "-version"],
        check=False,
        capture_output=True,
        text=True,
    )
    for line in out.stderr.splitlines():
        if "java.specification.version" in line:
            version = line.split("=", 1)[1].strip()
            if int(version.split(".")[0]) < 17:
                return f"the Conductor Java client test needs a JDK >= 17 (java is {version})"
    return None


def _mvn(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["mvn", "-q", "-B", "-ntp", *args, "process-classes"],
        check=False,
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=BUILD_SECONDS,
    )


@pytest.fixture(scope="session")
def java_client_classpath() -> str:
    """Builds the project (offline when ~/.m2 has everything); its runtime classpath."""
    missing = _toolchain_missing()
    if missing:
        pytest.skip(missing)
    built = _mvn("-o")
    if built.returncode != 0:
        built = _mvn()  # a first run: resolve from Maven Central
    assert built.returncode == 0, f"mvn failed:\n{built.stdout[-4000:]}{built.stderr[-4000:]}"
    deps = (PROJECT / "target" / "classpath.txt").read_text().strip()
    return f"{PROJECT / 'target' / 'classes'}{os.pathsep}{deps}"


def _run(classpath: str, server: LocalServer, prefix: str) -> dict[str, Any]:
    env = {
        **os.environ,
        "CONDUCTOR_SERVER_URL": f"{server.base_url}/api",
        "BATON_API_KEY": server.api_key or "",
        "CHECK_PREFIX": prefix,
        "CHECK_TIMEOUT_SECONDS": "120",
    }
    done = subprocess.run(
        ["java", "-cp", classpath, "dev.baton.conductorcheck.Main"],
        env=env,
        check=False,
        capture_output=True,
        text=True,
        timeout=RUN_SECONDS,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert lines, f"no JSON result (exit {done.returncode}):\n{done.stdout}\n{done.stderr[-6000:]}"
    result: dict[str, Any] = json.loads(lines[-1])
    result["exitCode"] = done.returncode
    result["stderr"] = done.stderr[-6000:]
    return result


def test_conductors_java_client_runs_a_workflow_to_completion(
    java_client_classpath: str, conductor_server: LocalServer
) -> None:
    prefix = f"j{uuid.uuid4().hex[:8]}"
    result = _run(java_client_classpath, conductor_server, prefix)

    assert result["status"] == "COMPLETED", result
    assert result["exitCode"] == 0, result["stderr"]
    assert result["registeredTasks"] == 2
    assert result["output"] == {"greeting": "Hello, Ada", "attempts": 2}
    rows = [(t["name"], t["status"], t["retryCount"]) for t in result["tasks"]]
    assert rows == [
        (f"{prefix}_greet", "COMPLETED", 0),
        (f"{prefix}_flaky", "FAILED", 0),
        (f"{prefix}_flaky", "COMPLETED", 1),
    ]
    assert all(t["workerId"] for t in result["tasks"]), "the worker id the client polled with"
