"""Each language's example (``examples/``) run as its README says, against a live server: the
walk-through registers ``examples/order_fulfilment/definition.json``, starts an order, runs the
four handlers (``charge-card`` fails its first attempt), approves the user task and prints the
finished instance. A walk-through that starts another definition than the one it registered,
or a handler that no longer builds, fails here, not at a new user's first try.

One file, so that one pytest process runs them in turn on its one server: the examples poll the
same job types, and a worker of one must not take another's jobs.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from tests.support.servers import CheckedServer

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
BUILD_SECONDS = 600.0  # a first Maven or npm install on a busy two-core machine
RUN_SECONDS = 180.0
EXPECTED_OUTPUT_KEYS = {"receipt", "tracking", "approvedBy", "reservation"}


@pytest.fixture
def example_env(baton_server: CheckedServer) -> dict[str, str]:
    return {
        **os.environ,
        "BATON_URL": baton_server.base_url,
        "BATON_API_KEY": baton_server.api_key or "",
    }


def _run(
    command: Sequence[str], cwd: Path, env: dict[str, str], timeout: float
) -> subprocess.CompletedProcess[str]:
    tool = command[0]
    if shutil.which(tool) is None and not Path(tool).exists():
        pytest.fail(f"the example needs {tool}, which is not on PATH")
    done = subprocess.run(
        list(command),
        check=False,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, (
        f"{' '.join(command)} (in {cwd.relative_to(ROOT)}) exited {done.returncode}:\n"
        f"{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    )
    return done


def _completed_output(text: str) -> dict[str, object]:
    """The finished instance's output the walk-through printed after its last COMPLETED (on
    that line, or as the indented JSON that follows it)."""
    _, found, after = text.rpartition("COMPLETED")
    assert found, f"the walk-through did not print COMPLETED:\n{text}"
    output = json.JSONDecoder().raw_decode(after.lstrip())[0]
    assert isinstance(output, dict)
    return output


def _check(output: dict[str, object]) -> None:
    assert output.keys() >= EXPECTED_OUTPUT_KEYS, output
    assert output["approvedBy"] == "ada"
    assert str(output["receipt"]).startswith("RCPT-")


def test_the_go_example_walks_through(example_env: dict[str, str]) -> None:
    done = _run(["go", "run", ".", "walkthrough"], EXAMPLES / "go", example_env, BUILD_SECONDS)
    _check(_completed_output(done.stdout))


def test_the_java_example_walks_through(example_env: dict[str, str]) -> None:
    done = _run([str(EXAMPLES / "java" / "run"), "walkthrough"], ROOT, example_env, BUILD_SECONDS)
    _check(_completed_output(done.stdout))


@pytest.fixture
def typescript_worker(example_env: dict[str, str]) -> Iterator[subprocess.Popen[str]]:
    here = EXAMPLES / "typescript"
    # The SDK's dist/, built as the conformance worker builds it (only when a source changed: a
    # rebuild under a worker of another test that is starting would pull dist/ from under it).
    _run(
        [str(ROOT / "tests" / "conformance" / "workers" / "typescript" / "run"), "--build-only"],
        ROOT,
        example_env,
        BUILD_SECONDS,
    )
    _run(
        ["npm", "ci", "--no-audit", "--no-fund", "--prefer-offline", "--loglevel=error"],
        here,
        example_env,
        BUILD_SECONDS,
    )
    _run(["npm", "run", "--silent", "build"], here, example_env, BUILD_SECONDS)
    worker = subprocess.Popen(
        ["node", "dist/worker.js"],
        cwd=here,
        env=example_env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []
    assert worker.stdout is not None
    threading.Thread(target=lambda: lines.extend(worker.stdout or ()), daemon=True).start()
    try:
        yield worker
    finally:
        worker.send_signal(signal.SIGTERM)  # the runner drains, then exits 0
        try:
            code = worker.wait(timeout=RUN_SECONDS)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()
            raise AssertionError(
                "the TypeScript example's worker did not stop:\n" + "".join(lines)
            ) from None
        assert code == 0, f"the worker exited {code}:\n" + "".join(lines)


def test_the_typescript_example_walks_through(
    example_env: dict[str, str], typescript_worker: subprocess.Popen[str]
) -> None:
    done = _run(
        ["npm", "run", "--silent", "walkthrough"],
        EXAMPLES / "typescript",
        example_env,
        RUN_SECONDS,
    )
    assert "charge COMPLETED after 2 attempts" in done.stdout, done.stdout
    _check(_completed_output(done.stdout))
