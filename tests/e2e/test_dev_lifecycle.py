"""``baton dev`` started, crashed and stopped as real processes: an acknowledged payload survives a
``kill -9``, the next start takes over the PostgreSQL the crash left running (and stops it), one
server per data directory, two servers started at once on new data directories, a stop that
answers a waiting long-poll before the database goes, and the key file that always holds the key
the server accepts."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import psutil
import pytest
from baton import settings as env_names

from tests.support.helpers import wait_until
from tests.support.servers import LocalServer, free_port

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("e2e")]

StartServer = Callable[..., LocalServer]
# Above the 256 KB soft limit: the input travels through the local bucket.
BIG_INPUT = json.dumps({"blob": "x" * 600_000}).encode()
FLOW = {"name": "offloaded-flow", "steps": [{"id": "a", "type": "SERVICE_TASK", "jobType": "big"}]}


def _needs_embedded(database_url: str | None) -> None:
    if database_url:
        pytest.skip("about the embedded PostgreSQL (this run has DATABASE_URL)")


def _start_offloaded(server: LocalServer) -> tuple[str, str]:
    """Start FLOW with BIG_INPUT uploaded to the local bucket; (instance id, payload path)."""
    assert server.request("POST", "/v1/definitions", json=FLOW).status_code in (200, 201)
    grant = server.request(
        "POST", "/v1/payloads", json={"kind": "WORKFLOW_INPUT", "sizeBytes": len(BIG_INPUT)}
    )
    assert grant.status_code == 201, grant.text
    terms = grant.json()
    put = httpx.put(terms["uploadUrl"], content=BIG_INPUT, headers=terms["uploadHeaders"])
    assert put.status_code == 200, put.text
    body = {"definitionName": FLOW["name"], "inputPayloadPath": terms["path"]}
    started = server.request("POST", "/v1/instances", json=body)
    assert started.status_code == 201, started.text
    return str(started.json()["id"]), str(terms["path"])


def _postmaster_pid(data_dir: Path) -> int:
    return int((data_dir / "postgres" / "postmaster.pid").read_text().split("\n", 1)[0])


# --- item: a crash loses nothing acknowledged --------------------------------------------------


def test_a_payload_acknowledged_before_a_kill_9_survives_it(
    start_server: StartServer, e2e_database_url: str | None, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    first = start_server(data_dir=data_dir, functions_dir=None, database_url=e2e_database_url)
    iid, path = _start_offloaded(first)
    first.kill()  # SIGKILL: no clean stop, nothing saved at exit

    second = start_server(data_dir=data_dir, functions_dir=None, database_url=e2e_database_url)
    cancelled = second.request("POST", f"/v1/instances/{iid}/cancel", json={})
    assert cancelled.status_code == 200, cancelled.text
    restarted = second.request("POST", f"/v1/instances/{iid}/restart", json={})
    assert restarted.status_code == 200, restarted.text  # it reads the input: the object is there
    assert restarted.json()["run"] == 2
    view = second.request("GET", f"/v1/instances/{iid}")
    assert view.json()["input"]["$payload"] == path
    download = httpx.get(view.json()["input"]["downloadUrl"])
    assert download.status_code == 200
    assert download.content == BIG_INPUT
    assert second.stop() == 0, second.output()


def _gone(pid: int) -> bool:
    """The process has ended: no such pid, or a zombie its new parent has not reaped yet (a
    detached postmaster's parent is whichever process adopted it, not this test)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_the_next_start_after_a_kill_9_stops_the_database_left_running_and_owns_its_own(
    start_server: StartServer,
    fake_functions_dir: Path,
    e2e_database_url: str | None,
    tmp_path: Path,
) -> None:
    _needs_embedded(e2e_database_url)
    data_dir = tmp_path / "data"
    first = start_server(data_dir=data_dir, functions_dir=fake_functions_dir)
    orphan = _postmaster_pid(data_dir)
    first.kill()
    # pg_ctl detaches the postmaster: it outlives the server that started it.
    assert psutil.pid_exists(orphan)

    second = start_server(data_dir=data_dir, functions_dir=fake_functions_dir)
    assert f"PostgreSQL (pid {orphan}) was still running" in second.log()
    assert _gone(orphan)
    own = _postmaster_pid(data_dir)
    assert own != orphan
    assert second.stop() == 0, second.output()
    # The clean stop stops the database this start made.
    wait_until(lambda: _gone(own), timeout=30, what="PostgreSQL to stop")
    assert not (data_dir / "postgres" / "postmaster.pid").exists()


# --- one server per data directory; two at once ------------------------------------------------


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in env_names.ALL_ENV_VARS}
    env.update({env_names.ENV_TICK_SECONDS: "0.2", "PYTHONUNBUFFERED": "1", **extra})
    return env


def test_a_second_server_on_the_same_data_directory_is_refused_naming_the_first(
    start_server: StartServer,
    fake_functions_dir: Path,
    e2e_database_url: str | None,
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "data"
    first = start_server(
        data_dir=data_dir, functions_dir=fake_functions_dir, database_url=e2e_database_url
    )
    assert first.process is not None
    cmd = [sys.executable, "-m", "baton.cli", "dev", "--port", str(free_port())]
    cmd += ["--data-dir", str(data_dir), "--functions-dir", str(fake_functions_dir)]
    second = subprocess.run(
        cmd, cwd=ROOT, env=_clean_env(), capture_output=True, text=True, timeout=60, check=False
    )
    assert second.returncode == 1, second.stdout + second.stderr
    assert "in use by another baton dev" in second.stdout
    assert f"pid {first.process.pid}, port {first.port}" in second.stdout
    assert "Traceback" not in second.stdout + second.stderr
    # The first one is untouched.
    assert first.request("GET", "/v1/taskdefs/echo").status_code == 200
    assert first.stop() == 0, first.output()


@pytest.fixture
def new_system_user() -> Iterator[str]:
    """A system user that does not exist yet (removed afterwards): a new machine, as root."""
    if os.geteuid() != 0 or not shutil.which("useradd"):
        pytest.skip("the embedded PostgreSQL's setup as root (useradd)")
    name = f"baton-t{uuid.uuid4().hex[:8]}"
    yield name
    subprocess.run(["userdel", name], capture_output=True, check=False)


@pytest.mark.parametrize("setup", ["this machine", "a new machine"])
def test_two_servers_started_at_once_on_new_data_directories_both_come_up(
    setup: str,
    e2e_database_url: str | None,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    _needs_embedded(e2e_database_url)
    extra = {}
    if setup == "a new machine":
        extra[env_names.ENV_PG_SYSTEM_USER] = request.getfixturevalue("new_system_user")
    servers = [
        LocalServer(
            data_dir=tmp_path / f"data-{i}",
            functions_dir=None,
            log_path=tmp_path / f"server-{i}.log",
            extra_env=extra,
        )
        for i in range(2)
    ]
    try:
        with ThreadPoolExecutor(max_workers=2) as pool:
            started = list(pool.map(LocalServer.start, servers))  # a failed start fails the test
        for server in started:
            assert server.request("GET", "/v1/definitions").status_code == 200
            assert "Traceback" not in server.log()
    finally:
        codes = [s.stop() if s.process is not None else 0 for s in servers]
    assert codes == [0, 0], [s.output() for s in servers]


# --- a stop drains HTTP before the database goes -------------------------------------------------

_LOUD = re.compile(r'"level":\s*"(WARNING|ERROR|CRITICAL)"|psycopg|Traceback')


def test_a_stop_answers_a_waiting_long_poll_with_no_jobs_and_logs_no_database_error(
    start_server: StartServer, e2e_database_url: str | None, tmp_path: Path
) -> None:
    server = start_server(
        data_dir=tmp_path / "data", functions_dir=None, database_url=e2e_database_url
    )
    assert server.process is not None
    headers = {"x-api-key": server.api_key or ""}
    # A keep-alive connection left idle, and a worker's long-poll waiting for a job.
    idle = httpx.Client(base_url=server.base_url, headers=headers)
    assert idle.get("/v1/definitions").status_code == 200
    worker = httpx.Client(base_url=server.base_url, headers=headers, timeout=60)
    poll = {"workerId": "drained", "jobTypes": ["never-comes"], "maxJobs": 1, "waitSeconds": 20}
    answered = server.waiting_in_background(
        "never-comes", lambda: worker.post("/v1/jobs/poll", json=poll)
    )

    server.process.send_signal(signal.SIGINT)
    response, _ = answered.result(timeout=30)
    assert response.status_code == 200, response.text
    assert response.json() == {"jobs": []}
    assert server.process.wait(30) == 0
    log = server.log_path.read_text(errors="replace")
    after = log[log.index("baton: stopping") :]
    assert [line for line in after.splitlines() if _LOUD.search(line)] == []
    assert "baton: stopped" in after
    idle.close()
    worker.close()


# --- the key file holds the key the server accepts -----------------------------------------------


def test_a_key_chosen_with_baton_api_key_replaces_the_kept_one_in_the_key_file(
    start_server: StartServer,
    e2e_database_url: str | None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from baton_worker.client import BatonClient

    data_dir = tmp_path / "data"
    key_file = data_dir / "api-key"
    first = start_server(
        data_dir=data_dir, functions_dir=None, database_url=e2e_database_url, api_key=None
    )
    generated = first.api_key
    assert first.stop() == 0, first.output()

    second = start_server(
        data_dir=data_dir, functions_dir=None, database_url=e2e_database_url, api_key="dev-key"
    )
    assert key_file.read_text().strip() == "dev-key" != generated
    assert key_file.stat().st_mode & 0o777 == 0o600
    assert f"written to {key_file}" in second.log()  # the banner says so
    # A client given no key reads the file, and sends the key the server accepts.
    monkeypatch.delenv("BATON_API_KEY", raising=False)
    monkeypatch.setenv("BATON_URL", second.base_url)
    monkeypatch.setenv("BATON_DATA_DIR", str(data_dir))
    with BatonClient.from_env() as client:
        assert "definitions" in client.list_definitions()
