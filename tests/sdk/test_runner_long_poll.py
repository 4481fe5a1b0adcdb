"""The runner long-polls by default against ``baton dev``: an idle runner sends about one poll per
wait, a new job reaches its handler within milliseconds, and a stop ends an outstanding long-poll
with the worker's stop signal rather than waiting out its wait."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from baton_worker import BatonClient, InMemoryMetrics, JobContext, Registry, Runner, RunnerOptions

from tests.support.helpers import unique
from tests.support.helpers import wait_until as wait_for
from tests.support.servers import CheckedServer

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("e2e")]


class PollRecorder(httpx.HTTPTransport):
    """The real transport, recording the waitSeconds of every poll."""

    def __init__(self) -> None:
        super().__init__()
        self.waits: list[float] = []
        self.jobs: list[int] = []  # how many jobs each answered poll brought, in order

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path != "/v1/jobs/poll":
            return super().handle_request(request)
        self.waits.append(json.loads(request.content).get("waitSeconds", 0))
        response = super().handle_request(request)
        response.read()
        if response.status_code == 200:
            self.jobs.append(len(json.loads(response.content)["jobs"]))
        return response


@pytest.fixture
def recorder() -> PollRecorder:
    return PollRecorder()


@pytest.fixture
def client(baton_server: CheckedServer, recorder: PollRecorder) -> Iterator[BatonClient]:
    with BatonClient(baton_server.base_url, api_key=baton_server.api_key, transport=recorder) as c:
        yield c


def test_long_poll_is_the_default() -> None:
    assert RunnerOptions().long_poll_wait == 10.0
    with pytest.raises(ValueError, match="long_poll_wait"):
        RunnerOptions(long_poll_wait=21)


def test_an_idle_runner_long_polls_and_runs_a_new_job_within_milliseconds(
    client: BatonClient, recorder: PollRecorder
) -> None:
    job_type = unique("lp")
    client.register_definition(
        {"name": job_type, "steps": [{"id": "a", "type": "SERVICE_TASK", "jobType": job_type}]}
    )
    reached: list[float] = []
    registry = Registry()

    @registry.handler(job_type)
    def handle(ctx: JobContext) -> dict[str, Any]:
        reached.append(time.monotonic())
        return {}

    metrics = InMemoryMetrics()
    runner = Runner(
        registry, client=client, options=RunnerOptions(long_poll_wait=5), metrics=metrics
    )
    runner.start()
    try:
        # Idle: one short poll, then long-polls of 5 s, each answered empty when its wait ends.
        wait_for(lambda: len(recorder.jobs) >= 2, timeout=30)
        assert recorder.waits[0] == 0
        assert set(recorder.waits[1:]) == {5}
        assert recorder.jobs[:2] == [0, 0]
        assert metrics.poll_errors == 0
        # Start the job just after a long-poll went out (sent, not yet answered): the server
        # wakes that very poll, so the job comes in its answer, not in a later poll's after the
        # wait ran out (no clock is read: which poll brought it says how it came).
        answered = len(recorder.jobs)
        wait_for(lambda: len(recorder.jobs) > answered, timeout=30)
        wait_for(lambda: len(recorder.waits) == len(recorder.jobs) + 1, timeout=30)
        outstanding = len(recorder.waits) - 1
        client.start_instance(definition_name=job_type)
        wait_for(lambda: reached, timeout=30)
        assert recorder.jobs.index(1) == outstanding, (outstanding, recorder.jobs)
    finally:
        stopping = time.monotonic()
        assert runner.stop(timeout=5)
        assert time.monotonic() - stopping < 2.5  # not the rest of the 5 s wait


def test_a_stop_during_a_long_poll_ends_it_on_the_server(
    client: BatonClient, recorder: PollRecorder, baton_server: CheckedServer
) -> None:
    """The runner does not abandon its long-poll at stop (the answer may bring a job claimed for
    it): its stop signal ends the server's wait, which answers, and the runner returns long
    before the 20 s wait, with no poll left open."""
    job_type = unique("lp-stop")
    registry = Registry()

    @registry.handler(job_type)
    def handle(ctx: JobContext) -> dict[str, Any]:
        return {}

    runner = Runner(registry, client=client, options=RunnerOptions(long_poll_wait=20))
    runner.start()
    wait_for(lambda: baton_server.long_poll_waiting(job_type), timeout=10, what="the long-poll")
    assert runner.stop(timeout=10)
    assert recorder.waits[-1] == 20
    assert len(recorder.jobs) == len(recorder.waits)  # the held poll was answered, not left
    assert recorder.jobs[-1] == 0
    assert not any(t.name == "baton-poller" and t.is_alive() for t in threading.enumerate())


def test_a_stopped_runner_leaves_the_next_job_to_other_workers(
    client: BatonClient, baton_server: CheckedServer
) -> None:
    """The process goes on after stop(), its abandoned long-poll still open on the server: the
    runner's stop signal keeps that poll from claiming the job created next. (Without it the job
    sat leased to the stopped worker until the lease lapsed, then ran as attempt 2; behind API
    Gateway a wait cannot see its client go at all.)"""
    job_type = unique("lp-left")
    baton_server.register_one_step(job_type)
    ran: list[str] = []
    registry = Registry()

    @registry.handler(job_type)
    def handle(ctx: JobContext) -> dict[str, Any]:
        ran.append(ctx.job_id)
        return {}

    options = RunnerOptions(long_poll_wait=20, worker_id=unique("leaving"))
    runner = Runner(registry, client=client, options=options)
    runner.start()
    wait_for(lambda: baton_server.long_poll_waiting(job_type), timeout=10, what="the long-poll")
    assert runner.stop(timeout=5)

    started = client.start_instance(job_type)
    jobs = client.poll_jobs(worker_id="other", job_types=[job_type], max_jobs=1, wait_seconds=10)
    assert [j["instanceId"] for j in jobs] == [started["id"]]
    assert ran == []


def test_a_server_refusing_wait_seconds_gets_short_polls() -> None:
    """A server from before long-poll answers 422 on waitSeconds: the runner polls short."""
    waits: list[float] = []

    def handle(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        waits.append(body.get("waitSeconds", 0))
        if "waitSeconds" in body:
            problem = {
                "type": "x",
                "title": "Validation failed",
                "status": 422,
                "detail": "1 problem found",
                "errors": [{"path": "waitSeconds", "message": "extra inputs are not permitted"}],
            }
            return httpx.Response(
                422, json=problem, headers={"content-type": "application/problem+json"}
            )
        return httpx.Response(200, json={"jobs": []})

    registry = Registry()

    @registry.handler("t")
    def handle_job(ctx: JobContext) -> dict[str, Any]:
        return {}

    client = BatonClient("http://old", transport=httpx.MockTransport(handle))
    options = RunnerOptions(long_poll_wait=5, poll_interval=0.01, max_poll_interval=0.02)
    with Runner(registry, client=client, options=options):
        wait_for(lambda: len(waits) >= 6, timeout=5)
    assert waits[:2] == [0, 5]
    assert set(waits[2:]) == {0}
