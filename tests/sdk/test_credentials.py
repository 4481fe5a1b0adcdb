"""A refused key (401/403) says where the key sent came from (``--api-key``/``api_key=``,
``$BATON_API_KEY``, or the key file's path) and how to set it; an unreachable server names
``--url``/``$BATON_URL``. A key read from a local ``baton dev``'s key file is read again when
refused. A runner refused at its first poll stops with that error; one refused later backs off,
logging it, and recovers."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from baton_worker import BatonClient, Registry, Runner, RunnerOptions
from baton_worker.backoff import RetryPolicy
from baton_worker.env import ENV_API_KEY, ENV_DATA_DIR, ENV_URL
from baton_worker.errors import AuthenticationError, PermissionDeniedError

from tests.support.helpers import wait_until

URL = "http://127.0.0.1:9"  # on this machine: the key file of a local baton dev applies
GOOD = "good-key-0123456789"
FAST = RetryPolicy(initial_interval=0.01, maximum_interval=0.02, maximum_attempts=None)


class KeyedApi:
    """A fake API accepting one key: polls answer no jobs (or ``jobs``), anything else {}."""

    def __init__(self, key: str = GOOD) -> None:
        self.key = key
        self.seen: list[str | None] = []
        self.refuse_next = 0  # answer 403 to this many polls even with the right key
        self.jobs: list[dict[str, Any]] = []
        self.completed: list[str] = []
        self.lock = threading.Lock()

    def handle(self, request: httpx.Request) -> httpx.Response:
        sent = request.headers.get("x-api-key")
        with self.lock:
            self.seen.append(sent)
            if sent is None:
                return _problem(401, "this API requires an API key in the x-api-key header")
            if sent != self.key or self.refuse_next:
                self.refuse_next = max(0, self.refuse_next - 1)
                return _problem(403, "the API key is not valid")
            if request.url.path == "/v1/jobs/poll":
                jobs, self.jobs = self.jobs, []
                return httpx.Response(200, json={"jobs": jobs})
            if request.url.path == "/v1/jobs/complete-batch":
                import json

                results = json.loads(request.content)["results"]
                self.completed += [r["jobId"] for r in results]
                answers = [{"jobId": r["jobId"], "outcome": "APPLIED"} for r in results]
                return httpx.Response(200, json={"results": answers})
            return httpx.Response(200, json={})

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)


def _problem(status: int, detail: str) -> httpx.Response:
    body = {"type": "about:blank", "title": "Refused", "status": status, "detail": detail}
    return httpx.Response(status, json=body, headers={"content-type": "application/problem+json"})


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No URL or key in the environment; the data directory (for the key file) is empty."""
    monkeypatch.delenv(ENV_URL, raising=False)
    monkeypatch.delenv(ENV_API_KEY, raising=False)
    data = tmp_path / "data"
    data.mkdir()
    monkeypatch.setenv(ENV_DATA_DIR, str(data))
    return data / "api-key"


def _refused(client: BatonClient) -> str:
    with pytest.raises((AuthenticationError, PermissionDeniedError)) as refused:
        client.list_definitions()
    return str(refused.value)


def test_a_refused_argument_key_is_named(env: Path) -> None:
    api = KeyedApi()
    client = BatonClient.from_env(url=URL, api_key="wrong-key-000", transport=api.transport())
    message = _refused(client)
    assert message.startswith("403 Refused: the API key is not valid. The API key sent came ")
    assert "from the api_key= argument; pass api_key= or set $BATON_API_KEY" in message
    assert f"keeps it in {env}" in message


def test_a_refused_environment_key_is_named(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_API_KEY, "wrong-key-000")
    client = BatonClient.from_env(url=URL, transport=KeyedApi().transport())
    assert "The API key sent came from $BATON_API_KEY;" in _refused(client)


def test_a_stale_key_file_is_named_by_its_path(env: Path) -> None:
    env.write_text("stale-key-000\n")
    client = BatonClient.from_env(url=URL, transport=KeyedApi().transport())
    message = _refused(client)
    assert f"came from the key file {env} ($BATON_API_KEY unset)" in message


def test_no_key_at_all_says_how_to_give_one(env: Path) -> None:
    client = BatonClient.from_env(url=URL, transport=KeyedApi().transport())
    message = _refused(client)
    assert message.startswith("401 Refused: this API requires an API key")
    assert "No API key was sent: pass api_key= or set $BATON_API_KEY" in message


def test_other_credentials_are_named_when_refused(env: Path) -> None:
    class Bearer(httpx.Auth):
        def auth_flow(self, request: httpx.Request) -> Any:
            request.headers["authorization"] = "Bearer x"
            yield request

        def __repr__(self) -> str:
            return "Bearer()"

    client = BatonClient(URL, auth=Bearer(), transport=KeyedApi().transport())
    assert "The request carried the credentials of Bearer()" in _refused(client)


def test_a_key_from_the_key_file_is_read_again_when_refused(env: Path) -> None:
    """A local baton dev restarted with another key rewrites its file: the client follows."""
    api = KeyedApi()
    env.write_text("old-key-0000000\n")
    client = BatonClient.from_env(url=URL, transport=api.transport())
    env.write_text(GOOD + "\n")
    assert client.list_definitions() == {}
    assert api.seen == ["old-key-0000000", GOOD]
    assert client.list_definitions() == {}  # the new key is kept
    assert api.seen[-1] == GOOD


def test_a_key_given_explicitly_is_not_replaced_by_the_file(env: Path) -> None:
    api = KeyedApi()
    env.write_text(GOOD)
    client = BatonClient.from_env(url=URL, api_key="wrong-key-000", transport=api.transport())
    _refused(client)
    assert api.seen == ["wrong-key-000"]


def test_an_unreachable_server_names_where_the_url_came_from(
    env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_URL, URL)
    client = BatonClient.from_env(api_key=GOOD, retry=None)
    with pytest.raises(Exception) as failed:
        client.list_definitions()
    message = str(failed.value)
    assert message.startswith(f"cannot reach {URL}: ")
    assert message.endswith(
        "(the URL comes from $BATON_URL; is a server running there? "
        "Set another with url= or $BATON_URL)"
    )


# --- the runner ---------------------------------------------------------------------------------


def _runner(api: KeyedApi, key: str, registry: Registry | None = None) -> Runner:
    if registry is None:
        registry = Registry()
        registry.register("t", lambda ctx: {"ok": True})
    client = BatonClient(URL, api_key=key, transport=api.transport(), retry=None)
    options = RunnerOptions(
        poll_interval=0.01, max_poll_interval=0.02, poll_errors=FAST, long_poll_wait=0
    )
    return Runner(registry, client=client, options=options)


def _in_background(run: Callable[[], None]) -> tuple[threading.Thread, list[BaseException]]:
    raised: list[BaseException] = []

    def target() -> None:
        try:
            run()
        except BaseException as e:
            raised.append(e)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, raised


def test_a_runner_refused_at_its_first_poll_stops_with_the_error(
    env: Path, caplog: pytest.LogCaptureFixture
) -> None:
    runner = _runner(KeyedApi(), "wrong-key-000")
    thread, raised = _in_background(lambda: runner.run(handle_signals=False))
    thread.join(timeout=30)
    assert not thread.is_alive(), "the runner kept polling with a refused key"
    [error] = raised
    assert isinstance(error, PermissionDeniedError)
    assert "The API key sent came from the api_key= argument" in str(error)
    assert runner.error is error
    logged = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert any("refused this worker's credentials" in r.getMessage() for r in logged)


def test_a_runner_refused_after_being_let_in_backs_off_logs_and_recovers(
    env: Path, caplog: pytest.LogCaptureFixture
) -> None:
    api = KeyedApi()
    runner = _runner(api, GOOD)
    runner.start()
    try:
        wait_until(lambda: len(api.seen) >= 2, timeout=10, what="two polls")
        with api.lock:
            api.refuse_next = 3  # the key was rotated, then put back
        wait_until(lambda: api.refuse_next == 0, timeout=10, what="the refusals")
        with api.lock:
            api.jobs = [_job("j1")]
        wait_until(lambda: "j1" in api.completed, timeout=10, what="the job after recovery")
        assert runner.running
    finally:
        assert runner.stop(timeout=10)
    refusals = [r for r in caplog.records if r.getMessage() == "poll refused; backing off"]
    assert len(refusals) >= 3
    assert all(r.levelno == logging.ERROR for r in refusals)
    assert "The API key sent came from the api_key= argument" in refusals[0].error


def _job(job_id: str) -> dict[str, Any]:
    return {
        "id": job_id,
        "instanceId": "i1",
        "stepId": "s1",
        "stepExecutionId": "e1",
        "jobType": "t",
        "attempt": 1,
        "retriesRemaining": 0,
        "lockExpiresAt": "2099-01-01T00:00:00Z",
        "input": {},
    }
