"""Conductor's batch poll waits up to ``timeout`` ms for a task (conductor-python sends 100): the
same long-poll as ``POST /v1/jobs/poll`` with ``waitSeconds``, answered as soon as a task is
claimable, empty at the deadline."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

from tests.support.helpers import unique
from tests.support.servers import LocalServer

pytestmark = [pytest.mark.e2e]


def _batch_poll(s: LocalServer, task_type: str, query: str) -> httpx.Response:
    return httpx.get(
        f"{s.base_url}/api/tasks/poll/batch/{task_type}?workerid=w&count=1{query}",
        headers={"X-Authorization": s.api_key or ""},
        timeout=30,
    )


def test_a_batch_poll_waits_for_a_task_and_answers_when_one_is_created(
    conductor_server: LocalServer,
) -> None:
    s = conductor_server
    name = unique("conductor-wait")
    s.register_one_step(name)
    started = time.monotonic()
    answered = s.waiting_in_background(name, lambda: _batch_poll(s, name, "&timeout=10000"))
    assert not answered.done()
    created = s.request("POST", "/v1/instances", json={"definitionName": name})
    assert created.status_code in (200, 201), created.text
    at_start = time.monotonic()
    response, at = answered.result(timeout=20)
    assert response.status_code == 200, response.text
    tasks: list[dict[str, Any]] = response.json()
    assert [t["taskType"] for t in tasks] == [name]
    assert at - at_start < 1.0  # woken by the start, not at the 10 s deadline
    assert at - started < 5.0


@pytest.mark.parametrize(("query", "least", "most"), [("&timeout=0", 0.0, 0.5), ("", 0.1, 1.0)])
def test_an_idle_batch_poll_answers_empty_at_its_timeout(
    conductor_server: LocalServer, query: str, least: float, most: float
) -> None:
    started = time.monotonic()
    r = _batch_poll(conductor_server, unique("idle"), query)
    took = time.monotonic() - started
    assert r.status_code == 200 and r.json() == [], r.text
    assert least <= took < most, took  # no timeout: Conductor's default of 100 ms


@pytest.mark.parametrize("timeout", ["-1", "soon", "99999999999999"])
def test_a_bad_timeout_is_a_400_in_conductors_shape(
    conductor_server: LocalServer, timeout: str
) -> None:
    r = _batch_poll(conductor_server, unique("bad"), f"&timeout={timeout}")
    assert r.status_code == 400, r.text
    body = r.json()
    assert body["status"] == 400 and "timeout" in body["message"]
