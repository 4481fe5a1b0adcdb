"""HTTP steps honour their task definition's limits (``concurrentExecLimit``,
``rateLimitPerFrequency``/``rateLimitFrequencyInSeconds``) on a real PostgreSQL: their jobs take
the type ``baton:http:<task definition>``, which the system tasks claim through the limited claim
every worker's limited job types go through, so the calls in flight and the calls per window stay
within the limits; a task definition that drops its limits lets the waiting calls through."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from baton.engine.service import Engine

from tests.support.helpers import wait_until
from tests.support.http_target import Target, http_target


@pytest.fixture
def target() -> Iterator[Target]:
    with http_target() as t:
        yield t


def _fan_out(engine: Engine, name: str, path: str, target: Target) -> str:
    """Three calls at once (a MAP of three items), each an HTTP step of task definition
    ``name``."""
    engine.register_definition(
        {
            "name": f"{name}_wf",
            "steps": [
                {
                    "id": "each",
                    "type": "MAP",
                    "items": "${workflow.input.items}",
                    "maxConcurrency": 3,
                    "steps": [
                        {
                            "id": "call",
                            "name": name,
                            "type": "HTTP",
                            "request": {"uri": target.url(path), "method": "GET"},
                        }
                    ],
                }
            ],
        }
    )
    inst, _ = engine.start_instance(definition_name=f"{name}_wf", input={"items": [1, 2, 3]})
    return str(inst["id"])


def _jobs(engine: Engine, iid: str) -> list[dict[str, Any]]:
    return engine.db.autocommit(
        lambda c: c.execute(
            "SELECT job_type, status FROM job WHERE instance_id = %(id)s ORDER BY status",
            {"id": iid},
        ).fetchall()
    )


def _statuses(engine: Engine, iid: str) -> list[str]:
    return sorted(j["status"] for j in _jobs(engine, iid))


def test_concurrent_exec_limit_holds_the_other_calls_while_one_is_in_flight(
    engine: Engine, target: Target
) -> None:
    engine.put_task_def("one_at_a_time", {"concurrentExecLimit": 1})
    iid = _fan_out(engine, "one_at_a_time", "/hold", target)
    assert {j["job_type"] for j in _jobs(engine, iid)} == {"baton:http:one_at_a_time"}

    stop = threading.Event()

    def passes() -> None:  # the system-tasks function's loop
        while not stop.is_set():
            engine.run_system_tasks(wait_seconds=0.2, claim_seconds=0.5)

    loop = threading.Thread(target=passes, daemon=True)
    loop.start()
    try:
        wait_until(lambda: target.hits.get("/hold") == 1, timeout=15, what="the first call")
        # One call in flight: its job LOCKED, the other two waiting, and no claim gets them.
        assert _statuses(engine, iid) == ["LOCKED", "UNLOCKED", "UNLOCKED"]
        assert engine.poll("probe", ["baton:http:one_at_a_time"], 5) == []
        assert target.hits.get("/hold") == 1
        target.release.set()
        wait_until(
            lambda: engine.get_instance(iid)["status"] == "COMPLETED",
            timeout=30,
            what="the three calls, one after the other",
        )
    finally:
        target.release.set()
        stop.set()
        loop.join(timeout=30)
    assert target.hits["/hold"] == 3


def test_a_rate_limit_lets_one_call_through_per_window_until_the_limit_is_dropped(
    engine: Engine, target: Target
) -> None:
    engine.put_task_def(
        "once_an_hour", {"rateLimitPerFrequency": 1, "rateLimitFrequencyInSeconds": 3600}
    )
    iid = _fan_out(engine, "once_an_hour", "/json", target)
    engine.run_system_tasks(wait_seconds=0.2, claim_seconds=0.3)
    engine.run_system_tasks(wait_seconds=0.2, claim_seconds=0.3)
    assert target.hits.get("/json") == 1
    assert _statuses(engine, iid) == ["COMPLETED", "UNLOCKED", "UNLOCKED"]

    # Without limits, the waiting calls (of the limited type still) go through.
    engine.put_task_def("once_an_hour", {})
    wait_until(
        lambda: (
            engine.run_system_tasks(wait_seconds=0.2, claim_seconds=0.3) is not None
            and engine.get_instance(iid)["status"] == "COMPLETED"
        ),
        timeout=30,
        what="the waiting calls",
    )
    assert target.hits["/json"] == 3


def test_an_http_step_without_limits_keeps_the_plain_type(engine: Engine, target: Target) -> None:
    engine.put_task_def("free_call", {"retryCount": 0})
    iid = _fan_out(engine, "free_call", "/json", target)
    assert {j["job_type"] for j in _jobs(engine, iid)} == {"baton:http"}
