"""Queue triggers over HTTP against a real ``baton dev``: an instance that ends in the transaction
that starts it (no step waits for anything) settles its queue task like any other end."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.helpers import unique, wait_until
from tests.support.servers import CheckedServer

pytestmark = [pytest.mark.e2e]


def _stats(s: CheckedServer, queue: str) -> dict[str, int]:
    r = s.request("GET", f"/v1/queues/{queue}/stats")
    assert r.status_code == 200, r.text
    stats: dict[str, int] = r.json()
    return stats


def _instances(s: CheckedServer, name: str) -> list[dict[str, Any]]:
    r = s.request("GET", "/v1/instances", params={"definitionName": name, "limit": 100})
    assert r.status_code == 200, r.text
    found: list[dict[str, Any]] = r.json()["instances"]
    return found


def _register(s: CheckedServer, name: str, queue: str, steps: list[dict[str, Any]]) -> None:
    r = s.request(
        "POST",
        "/v1/definitions",
        json={
            "name": name,
            "steps": steps,
            # One at a time: a task left processing would block every later one.
            "trigger": {"type": "queue", "queueName": queue, "maxConcurrency": 1, "maxRetries": 2},
        },
    )
    assert r.status_code == 201, r.text


def test_set_variable_only_instances_complete_their_tasks_one_at_a_time(
    baton_server: CheckedServer,
) -> None:
    s = baton_server
    queue, name = unique("q2"), unique("notes")
    _register(
        s,
        name,
        queue,
        [{"id": "note", "type": "SET_VARIABLE", "variables": {"t": "${workflow.input.title}"}}],
    )
    for i in range(3):
        r = s.request("POST", f"/v1/queues/{queue}/push", json={"title": f"t{i}"})
        assert r.status_code == 201, r.text
    wait_until(
        lambda: _stats(s, queue)["completed"] == 3,
        timeout=30,
        what=f"three completed tasks (stats {_stats(s, queue)})",
    )
    assert _stats(s, queue) == {
        "pending": 0,
        "processing": 0,
        "completed": 3,
        "failed": 0,
        "dead": 0,
    }
    done = _instances(s, name)
    assert sorted(i["variables"]["t"] for i in done) == ["t0", "t1", "t2"]
    assert {i["status"] for i in done} == {"COMPLETED"}


def test_an_instance_that_fails_as_it_starts_retries_its_task_then_dead_letters_it(
    baton_server: CheckedServer,
) -> None:
    s = baton_server
    queue, name = unique("q-term"), unique("refuse")
    _register(
        s, name, queue, [{"id": "no", "type": "TERMINATE", "status": "FAILED", "reason": "no"}]
    )
    r = s.request("POST", f"/v1/queues/{queue}/push", json={"title": "t"})
    assert r.status_code == 201, r.text
    wait_until(lambda: _stats(s, queue)["dead"] == 1, timeout=30, what="the task to die")
    assert _stats(s, queue)["processing"] == 0
    ended = _instances(s, name)
    assert [i["status"] for i in ended] == ["FAILED", "FAILED"]  # one instance per try
    tasks = s.request("GET", f"/v1/queues/{queue}/tasks").json()["tasks"]
    assert [(t["status"], t["retryCount"]) for t in tasks] == [("dead", 2)]
