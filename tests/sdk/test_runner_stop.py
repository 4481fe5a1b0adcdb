"""A stop while a long-poll is out, against a fake jobs API that holds that poll.

The defect this guards against: a stop that aborted the outstanding long-poll threw its answer
away, and with it a job the server had just claimed for this worker (the claim committed, the
answer on its way); the job sat leased until its lease lapsed, then ran again as a new attempt.
The runner now sends the worker's stop signal, takes the poll's answer and runs its jobs in the
drain; only a poll that stays unanswered past a grace is abandoned.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from baton_worker import BatonClient, JobContext, Registry, Runner, RunnerOptions
from baton_worker import runner as runner_module

from tests.sdk.test_runner import FakeApi, _iso, _ok, eventually


class HoldingApi(FakeApi):
    """The jobs API, whose long-polls (``waitSeconds`` > 0) wait on the server until the worker's
    stop signal comes; then, with ``claims_at_stop``, one job is claimed in that same poll (the
    race of the flaky CI run); without it, the poll is never answered (until the test ends)."""

    def __init__(self, *, claims_at_stop: bool) -> None:
        super().__init__()
        self.batch_route = True
        self.claims_at_stop = claims_at_stop
        self.stop_signals: list[str] = []
        self.stopped = threading.Event()
        self.held = threading.Event()  # a long-poll is waiting
        self.answered_long_polls = 0
        self.release = threading.Event()  # frees a never-answered poll at the end of the test
        self.claimed_at_stop: list[str] = []

    def handle(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content or b"{}")
        if request.url.path == "/v1/workers/stop":
            with self.lock:
                self.stop_signals.append(body["workerId"])
            self.stopped.set()
            return _ok({"workerId": body["workerId"], "stoppedAt": _iso(datetime.now(UTC))})
        if request.url.path == "/v1/jobs/poll" and body.get("waitSeconds"):
            self.held.set()
            if not self.claims_at_stop:
                self.release.wait(30)
                return _ok({"jobs": []})
            assert self.stopped.wait(30), "no stop signal while the long-poll was held"
            self.claimed_at_stop = self.add(1)  # made claimable just before: this poll claims it
            response = super().handle(request)
            with self.lock:
                self.answered_long_polls += 1
            return response
        return super().handle(request)


@pytest.fixture
def grace(monkeypatch: pytest.MonkeyPatch) -> float:
    monkeypatch.setattr(runner_module, "STOP_GRACE_SECONDS", 0.5)
    return 0.5


def _runner(api: HoldingApi, registry: Registry, **options: Any) -> Runner:
    client = BatonClient("http://fake", transport=api.transport())
    defaults: dict[str, Any] = {"worker_id": "w-stop", "long_poll_wait": 10, "parallelism": 2}
    return Runner(registry, client=client, options=RunnerOptions(**{**defaults, **options}))


def test_a_job_claimed_by_the_long_poll_out_at_the_stop_runs_in_the_drain() -> None:
    api = HoldingApi(claims_at_stop=True)
    ran: list[str] = []
    registry = Registry()

    @registry.handler("t")
    def handle(ctx: JobContext) -> dict[str, Any]:
        ran.append(ctx.job_id)
        return {"done": True}

    runner = _runner(api, registry)
    runner.start()
    assert api.held.wait(5), "the runner never long-polled"
    assert runner.stop(timeout=10), "the runner did not stop"
    # The stop signal went out while the poll was held, the poll's answer was taken, and the
    # job it claimed ran and was completed before stop() returned.
    assert api.stop_signals == ["w-stop"]
    assert api.answered_long_polls == 1
    assert ran == api.claimed_at_stop
    assert list(api.completed) == api.claimed_at_stop
    assert api.completed[api.claimed_at_stop[0]] == {"done": True}
    assert api.locked == {}
    # And nothing was polled after the stop.
    assert len(api.poll_sizes) == 2  # the first short poll, and the held long-poll


def test_a_long_poll_unanswered_after_the_stop_signal_is_abandoned_after_the_grace(
    grace: float, caplog: pytest.LogCaptureFixture
) -> None:
    api = HoldingApi(claims_at_stop=False)
    registry = Registry()
    registry.handler("t")(lambda ctx: None)
    runner = _runner(api, registry)
    # Other tests of this process may leave their own abandoned polls' threads behind.
    before = set(_long_poll_threads())
    runner.start()
    try:
        assert api.held.wait(5), "the runner never long-polled"
        caplog.set_level(logging.WARNING, logger="baton_worker.runner")
        stopping = time.monotonic()
        assert runner.stop(timeout=10), "the runner did not stop"
        waited = time.monotonic() - stopping
        assert api.stop_signals == ["w-stop"]
        assert not api.release.is_set()  # the poll was still held: the runner left it
        assert waited >= grace  # it gave the poll its grace before leaving it
        abandoned = [r for r in caplog.records if "abandoned" in r.getMessage()]
        assert len(abandoned) == 1
        assert abandoned[0].levelno == logging.WARNING
        assert getattr(abandoned[0], "worker_id", None) == "w-stop"
    finally:
        api.release.set()
    eventually(lambda: not (set(_long_poll_threads()) - before))


def _long_poll_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "baton-long-poll"]


def test_a_stop_with_no_poll_out_still_sends_the_stop_signal_once() -> None:
    api = HoldingApi(claims_at_stop=True)
    registry = Registry()
    registry.handler("t")(lambda ctx: None)
    runner = _runner(api, registry, worker_id="w-short", long_poll_wait=0, poll_interval=0.01)
    runner.start()
    eventually(lambda: len(api.poll_sizes) >= 2, what="short polls")
    assert runner.stop(timeout=10)
    assert api.stop_signals == ["w-short"]
