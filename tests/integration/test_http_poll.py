"""HTTP_POLL steps on a real PostgreSQL, polled by the system tasks (``run_system_tasks``) against
a local server that answers how often it was called: polled until the condition holds, each poll
due the interval later (the job handed back, same attempt, the count kept); the poll count
bounded; a condition that throws or says -1 fails the step; a failing call fails the attempt."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from baton.engine import http_poll
from baton.engine.service import Engine

from tests.integration.test_control_flow import steps_of
from tests.integration.test_http_steps import _run_until_ended, _start
from tests.support.http_target import Target, http_target


@pytest.fixture
def target() -> Iterator[Target]:
    with http_target() as t:
        yield t


def _poll(target: Target, condition: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": "poll",
        "type": "HTTP_POLL",
        "request": {"uri": target.url("/count"), "method": "GET"},
        "input": {"want": "${workflow.input.want}"},
        "terminationCondition": condition,
        "pollingIntervalSeconds": 1,
        **extra,
    }


def test_a_poll_is_made_again_until_its_condition_holds(engine: Engine, target: Target) -> None:
    iid = _start(
        engine,
        "poller",
        [
            _poll(target, "$.output.response.body.n >= $.input.want"),
            {"id": "after", "type": "SET_VARIABLE", "variables": {"n": "${poll.output.pollCount}"}},
        ],
        {"want": 3},
    )
    # After the first call the job waits its interval, the count kept with its step, which
    # stays IN_PROGRESS between polls (as Conductor keeps a system task's).
    engine.run_system_tasks(wait_seconds=0.2, claim_seconds=0)
    (step,) = steps_of(engine, iid, "poll")
    assert target.hits["/count"] == 1
    assert step["status"] == "IN_PROGRESS"
    assert "baton:poll" not in step["input"]  # how to poll is the job's, never shown
    got = _run_until_ended(engine, iid)
    assert got["status"] == "COMPLETED", got.get("reason")
    assert target.hits["/count"] == 3
    (step,) = steps_of(engine, iid, "poll")
    assert step["output"]["response"]["body"] == {"n": 3}
    assert step["output"]["pollCount"] == 3
    assert step["attempt"] == 1  # polls are no retries
    assert got["variables"]["n"] == 3
    events = [e["type"] for e in engine.history(iid)["events"]]
    assert events.count("HTTP_POLLED") == 2


def test_a_condition_that_never_holds_fails_after_max_poll_count(
    engine: Engine, target: Target
) -> None:
    iid = _start(engine, "never", [_poll(target, "false", maxPollCount=2)], {"want": 1})
    got = _run_until_ended(engine, iid)
    assert got["status"] == "FAILED"
    assert target.hits["/count"] == 2
    assert "the terminationCondition did not hold after 2 polls" in got["reason"]


@pytest.mark.parametrize(
    ("condition", "says"),
    [
        ("throw new Error('job vanished')", "the terminationCondition threw Error: job vanished"),
        ("-1", "the terminationCondition gave -1 (fail)"),
    ],
)
def test_a_condition_that_throws_or_gives_minus_one_fails_the_step(
    engine: Engine, target: Target, condition: str, says: str
) -> None:
    iid = _start(engine, "bad", [_poll(target, condition, retryCount=3)], {"want": 1})
    got = _run_until_ended(engine, iid)
    assert got["status"] == "FAILED"
    assert says in got["reason"], got["reason"]
    assert target.hits["/count"] == 1  # not retried: the same answer decides the same way


def test_a_failing_call_fails_the_attempt_as_an_http_step_s(engine: Engine, target: Target) -> None:
    step = _poll(target, "true", retryCount=1, retryDelaySeconds=0)
    step["request"]["uri"] = target.url("/fail")
    iid = _start(engine, "failing", [step], {"want": 1})
    got = _run_until_ended(engine, iid)
    assert got["status"] == "FAILED"
    assert target.hits["/fail"] == 2
    assert "HTTP 500" in got["reason"]


def test_the_polling_strategies_space_the_polls() -> None:
    fixed = {"intervalSeconds": 10, "strategy": "FIXED"}
    linear = {"intervalSeconds": 10, "strategy": "LINEAR_BACKOFF"}
    exponential = {"intervalSeconds": 10, "strategy": "EXPONENTIAL_BACKOFF"}
    assert [http_poll.delay(fixed, n) for n in (1, 2, 3)] == [10, 10, 10]
    assert [http_poll.delay(linear, n) for n in (1, 2, 3)] == [10, 20, 30]
    assert [http_poll.delay(exponential, n) for n in (1, 2, 3, 4)] == [10, 20, 40, 80]
    assert http_poll.delay(exponential, 1000) == http_poll.MAX_DELAY_SECONDS
