"""Long-poll over HTTP: ``baton dev`` holds ``POST /v1/jobs/poll`` with ``waitSeconds`` until a job
is claimable (woken by NOTIFY) or the wait is over, and validates the wait."""

from __future__ import annotations

import json
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from tests.support.helpers import unique
from tests.support.helpers import wait_until as wait_for
from tests.support.servers import CheckedServer

pytestmark = [pytest.mark.e2e]


def _poll(s: CheckedServer, job_type: str, wait: Any) -> httpx.Response:
    body = {"workerId": "w", "jobTypes": [job_type], "waitSeconds": wait}
    return s.request("POST", "/v1/jobs/poll", json=body, timeout=30)


@pytest.mark.parametrize("wait", [-1, 20.5, 60, "soon"])
def test_wait_seconds_outside_0_to_20_is_refused_with_a_problem(
    baton_server: CheckedServer, wait: Any
) -> None:
    r = _poll(baton_server, "any", wait)
    assert r.status_code == 422, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    assert [e["path"] for e in r.json()["errors"]] == ["waitSeconds"], r.text


def test_idle_long_poll_answers_empty_at_its_deadline(baton_server: CheckedServer) -> None:
    started = time.monotonic()
    r = _poll(baton_server, unique("idle"), 1)
    took = time.monotonic() - started
    assert r.status_code == 200 and r.json() == {"jobs": []}
    # At its deadline, far from the 20 s cap (through HTTP on a loaded machine a response can
    # take most of a second more; test_long_poll bounds the engine's own wait more tightly).
    assert 1.0 <= took < 2.5, took


def test_long_poll_answers_as_soon_as_an_instance_creates_a_job(
    baton_server: CheckedServer,
) -> None:
    s = baton_server
    name = unique("long-poll")
    s.register_one_step(name)
    # Waiting once the server registered its job type for NOTIFY.
    answered = s.waiting_in_background(name, lambda: _poll(s, name, 15))
    time.sleep(0.1)
    r = s.request("POST", "/v1/instances", json={"definitionName": name})
    started = time.monotonic()
    assert r.status_code in (200, 201), r.text
    response, at = answered.result(timeout=20)
    assert [j["jobType"] for j in response.json()["jobs"]] == [name]
    # Woken by the start's NOTIFY, not by the wait's end (15 s) nor its once-a-second backstop
    # read: typically within 10-100 ms over HTTP; the bound leaves room for a loaded machine (a
    # clean-clone run next to another test suite answered in 256 ms). bench/latency.py measures.
    assert at - started < 0.5


def test_idle_long_polls_do_not_hold_up_other_calls_of_the_jobs_function(
    baton_server: CheckedServer,
) -> None:
    """Eight workers long-polling an empty queue each hold a jobs-function container while they
    wait; a poll (or a complete) of another worker still answers at once."""
    s = baton_server
    idle = unique("idle")
    with ThreadPoolExecutor(8) as pool:
        waits = [pool.submit(_poll, s, idle, 5) for _ in range(8)]
        wait_for(lambda: s.long_poll_waiting(idle), timeout=10, what="the long-polls to wait")
        started = time.monotonic()
        r = _poll(s, unique("busy"), 0)
        took = time.monotonic() - started
        assert r.status_code == 200 and r.json() == {"jobs": []}, r.text
        assert not any(w.done() for w in waits)  # they were all still waiting
        assert took < 1.0, took  # with 4 containers it waited for one of the 5 s long-polls
        assert all(w.result().status_code == 200 for w in waits)


def test_a_long_poll_whose_client_hung_up_claims_nothing(baton_server: CheckedServer) -> None:
    """A worker stopped (Ctrl-C) while its long-poll waited: the job created next goes to the
    next poll, not to the wait of the worker that is gone (which held it until its lease lapsed
    and then ran it as attempt 2, counted against its retries)."""
    s = baton_server
    name = unique("hung-up")
    s.register_one_step(name)
    body = json.dumps({"workerId": "gone", "jobTypes": [name], "waitSeconds": 15}).encode()
    request = (
        f"POST /v1/jobs/poll HTTP/1.1\r\nHost: 127.0.0.1\r\nx-api-key: {s.api_key}\r\n"
        f"content-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
    ).encode() + body
    with socket.create_connection(("127.0.0.1", s.port)) as sock:
        sock.sendall(request)
        wait_for(lambda: s.long_poll_waiting(name), timeout=10, what="the long-poll to wait")
    # The connection is closed; its wait is still registered on the server.
    created = s.request("POST", "/v1/instances", json={"definitionName": name})
    assert created.status_code in (200, 201), created.text
    r = _poll(s, name, 5)
    assert [j["jobType"] for j in r.json()["jobs"]] == [name], r.text
    steps = s.request("GET", f"/v1/instances/{created.json()['id']}/steps").json()["steps"]
    assert steps[0]["workerId"] == "w" and steps[0]["attempt"] == 1, steps


def test_a_workers_stop_signal_ends_its_waiting_long_poll_without_a_claim(
    baton_server: CheckedServer,
) -> None:
    """POST /v1/workers/stop over HTTP while the worker's long-poll waits on an open connection
    (as behind API Gateway, where the wait cannot see its client go): the job created next is
    not claimed for it."""
    s = baton_server
    name = unique("stop-signal")
    worker = unique("leaving")
    s.register_one_step(name)
    body = {"workerId": worker, "jobTypes": [name], "waitSeconds": 15}
    answered = s.waiting_in_background(
        name, lambda: s.request("POST", "/v1/jobs/poll", json=body, timeout=30)
    )
    r = s.request("POST", "/v1/workers/stop", json={"workerId": worker})
    assert r.status_code == 200, r.text
    assert r.json()["workerId"] == worker and r.json()["stoppedAt"].endswith("Z")
    started = s.request("POST", "/v1/instances", json={"definitionName": name})
    assert started.status_code in (200, 201), started.text
    response, _ = answered.result(timeout=20)
    assert response.status_code == 200 and response.json() == {"jobs": []}
    other = {"workerId": "other", "jobTypes": [name], "waitSeconds": 5}
    jobs = s.request("POST", "/v1/jobs/poll", json=other, timeout=30).json()["jobs"]
    assert [j["instanceId"] for j in jobs] == [started.json()["id"]]


@pytest.mark.parametrize(
    "body", [{}, {"workerId": ""}, {"workerId": "w\u0000"}, {"workerId": "w", "extra": 1}]
)
def test_a_bad_stop_signal_is_refused_with_a_problem(
    baton_server: CheckedServer, body: dict[str, Any]
) -> None:
    r = baton_server.request("POST", "/v1/workers/stop", json=body)
    assert r.status_code == 422, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
