"""The worker runner against an in-memory fake of the jobs API: outcomes, the slot logic,
backoff, heartbeats, stopping. (The same behaviours against the real server: test_runner_e2e.py.)"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from baton_worker import (
    BatonClient,
    InMemoryMetrics,
    JobContext,
    JobError,
    NonRetryableError,
    NoopMetrics,
    Registry,
    RetryPolicy,
    Runner,
    RunnerOptions,
)
from baton_worker._execution import _storable
from baton_worker.registry import is_async_callable
from baton_worker.runner import default_worker_id

FAST = RetryPolicy(initial_interval=0.01, maximum_interval=0.02, maximum_attempts=None, jitter=0)


def eventually(predicate: Callable[[], bool], timeout: float = 5.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.005)
    raise AssertionError(f"not true within {timeout}s: {what or predicate}")


def _iso(at: datetime) -> str:
    return at.isoformat().replace("+00:00", "Z")


class FakeApi:
    """Just enough of the jobs API: a queue of jobs, leases, and a record of every call."""

    def __init__(self, lease_seconds: float = 30.0) -> None:
        self.lease = lease_seconds
        self.lock = threading.Lock()
        self.pending: list[dict[str, Any]] = []
        self.locked: dict[str, dict[str, Any]] = {}
        self.completed: dict[str, Any] = {}
        self.failed: dict[str, tuple[str, bool]] = {}
        self.fail_bodies: dict[str, dict[str, Any]] = {}
        self.poll_sizes: list[int] = []
        self.poll_times: list[float] = []
        self.heartbeats: list[str] = []
        self.unavailable_polls = 0
        self.heartbeat_status = 200
        self.complete_status = 200
        self.complete_script: list[int] = []  # statuses answered first, one per call
        self.complete_calls = 0
        self.fail_status = 200
        self.problem_detail = "fake"
        self.problem_errors: list[dict[str, str]] = []
        # POST /v1/jobs/complete-batch (off: a server without it, answered 404).
        self.batch_route = False
        self.batch_calls = 0
        self.batch_script: list[int] = []  # statuses answered to whole batches first
        self.invalid_jobs: set[str] = set()  # completions answered INVALID
        self.refuse_outputs = False  # answer 422 to a failure that carries an output
        self.refused_outputs = 0

    def add(self, n: int = 1, job_type: str = "t", input: Any = None) -> list[str]:
        ids = []
        with self.lock:
            for _ in range(n):
                job_id = str(uuid.uuid4())
                self.pending.append(
                    {
                        "id": job_id,
                        "instanceId": str(uuid.uuid4()),
                        "stepId": "s",
                        "stepExecutionId": str(uuid.uuid4()),
                        "jobType": job_type,
                        "attempt": 1,
                        "retriesRemaining": 2,
                        "input": {} if input is None else input,
                    }
                )
                ids.append(job_id)
        return ids

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)

    def handle(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content or b"{}")
        path = request.url.path
        with self.lock:
            if path == "/v1/jobs/poll":
                return self._poll(body)
            if path == "/v1/jobs/complete":
                self.complete_calls += 1
                status = self.complete_script.pop(0) if self.complete_script else None
                status = status or self.complete_status
                if status != 200:
                    return _problem(status, detail=self.problem_detail, errors=self.problem_errors)
                self.locked.pop(body["jobId"], None)
                self.completed[body["jobId"]] = body.get("variablesToSet")
                return _ok({"jobId": body["jobId"], "status": "COMPLETED", "applied": True})
            if path == "/v1/jobs/fail":
                if self.fail_status != 200:
                    return _problem(self.fail_status, detail=self.problem_detail)
                if self.refuse_outputs and "output" in body:
                    self.refused_outputs += 1
                    return _problem(422, detail="output: not this one")
                self.locked.pop(body["jobId"], None)
                self.failed[body["jobId"]] = (body["errorMessage"], body["retryable"])
                self.fail_bodies[body["jobId"]] = body
                return _ok({"jobId": body["jobId"], "status": "FAILED", "applied": True})
            if path == "/v1/jobs/complete-batch" and self.batch_route:
                return self._batch(body)
            if path == "/v1/jobs/heartbeat":
                self.heartbeats.append(body["jobId"])
                if self.heartbeat_status != 200:
                    return _problem(self.heartbeat_status)
                expires = _iso(datetime.now(UTC) + timedelta(seconds=self.lease))
                return _ok({"jobId": body["jobId"], "lockExpiresAt": expires})
        return _problem(404)

    def _batch(self, body: dict[str, Any]) -> httpx.Response:
        self.batch_calls += 1
        if self.batch_script:
            return _problem(self.batch_script.pop(0), detail=self.problem_detail)
        answers = []
        for item in body["results"]:
            job_id = item["jobId"]
            if job_id in self.invalid_jobs and "failure" not in item:
                answers.append({"jobId": job_id, "outcome": "INVALID", "error": "bad item"})
            elif "failure" in item:
                self.locked.pop(job_id, None)
                f = item["failure"]
                self.failed[job_id] = (f["errorMessage"], f.get("retryable", True))
                answers.append({"jobId": job_id, "outcome": "APPLIED", "status": "FAILED"})
            else:
                self.locked.pop(job_id, None)
                self.completed[job_id] = item.get("variablesToSet")
                answers.append({"jobId": job_id, "outcome": "APPLIED", "status": "COMPLETED"})
        return _ok({"results": answers})

    def _poll(self, body: dict[str, Any]) -> httpx.Response:
        self.poll_sizes.append(body["maxJobs"])
        self.poll_times.append(time.monotonic())
        if self.unavailable_polls:
            self.unavailable_polls -= 1
            return _problem(503, {"retry-after": "0"})
        wanted = [j for j in self.pending if j["jobType"] in body["jobTypes"]]
        claimed = wanted[: body["maxJobs"]]
        expires = _iso(datetime.now(UTC) + timedelta(seconds=self.lease))
        for job in claimed:
            self.pending.remove(job)
            self.locked[job["id"]] = job
        return _ok({"jobs": [{**j, "lockExpiresAt": expires} for j in claimed]})


def _ok(body: Any) -> httpx.Response:
    return httpx.Response(200, json=body)


def _problem(
    status: int,
    headers: dict[str, str] | None = None,
    detail: str = "fake",
    errors: list[dict[str, str]] | None = None,
) -> httpx.Response:
    doc = {
        "type": "x",
        "title": f"status {status}",
        "status": status,
        "detail": detail,
        "errors": errors or [],
    }
    return httpx.Response(
        status, json=doc, headers={"content-type": "application/problem+json", **(headers or {})}
    )


@pytest.fixture
def api() -> FakeApi:
    return FakeApi()


@pytest.fixture
def make_runner(api: FakeApi) -> Iterator[Callable[..., Runner]]:
    runners: list[Runner] = []

    def make(registry: Registry, metrics: Any = None, **options: Any) -> Runner:
        client = BatonClient("http://fake", transport=api.transport(), retry=FAST)
        defaults: dict[str, Any] = {
            "poll_interval": 0.01,
            "max_poll_interval": 0.02,
            "poll_errors": FAST,
            "report_retry": FAST,
        }
        runner = Runner(
            registry,
            client=client,
            options=RunnerOptions(**{**defaults, **options}),
            metrics=metrics,
        )
        runners.append(runner)
        return runner

    yield make
    for runner in runners:
        assert runner.stop(timeout=10), "a runner did not stop"


# --- outcomes -------------------------------------------------------------------------------------


def test_handler_result_completes_the_job_with_its_variables(
    api: FakeApi, make_runner: Any
) -> None:
    registry = Registry()
    registry.handler("t")(lambda ctx: {"doubled": ctx.input["n"] * 2})
    [job_id] = api.add(input={"n": 21})
    make_runner(registry).start()
    eventually(lambda: job_id in api.completed)
    assert api.completed[job_id] == {"doubled": 42}


def test_none_result_completes_without_variables(api: FakeApi, make_runner: Any) -> None:
    registry = Registry()
    registry.handler("t")(lambda ctx: None)
    [job_id] = api.add()
    make_runner(registry).start()
    eventually(lambda: job_id in api.completed)
    assert api.completed[job_id] is None


def test_plain_exception_fails_the_job_as_retryable(api: FakeApi, make_runner: Any) -> None:
    registry = Registry()

    @registry.handler("t")
    def boom(ctx: JobContext) -> None:
        raise KeyError("sku")

    [job_id] = api.add()
    make_runner(registry).start()
    eventually(lambda: job_id in api.failed)
    assert api.failed[job_id] == ("KeyError: 'sku'", True)


def test_non_retryable_error_fails_the_job_for_good(api: FakeApi, make_runner: Any) -> None:
    registry = Registry()

    @registry.handler("t")
    def refuse(ctx: JobContext) -> None:
        raise NonRetryableError("card declined")

    [job_id] = api.add()
    make_runner(registry).start()
    eventually(lambda: job_id in api.failed)
    assert api.failed[job_id] == ("card declined", False)


def test_job_error_carries_its_own_retry_semantics(api: FakeApi, make_runner: Any) -> None:
    registry = Registry()
    registry.handler("a")(lambda ctx: (_ for _ in ()).throw(JobError("later")))
    registry.handler("b")(lambda ctx: (_ for _ in ()).throw(JobError("never", non_retryable=True)))
    [a] = api.add(job_type="a")
    [b] = api.add(job_type="b")
    make_runner(registry).start()
    eventually(lambda: a in api.failed and b in api.failed)
    assert api.failed[a] == ("later", True)
    assert api.failed[b] == ("never", False)


def test_job_error_sends_its_next_retry_delay(api: FakeApi, make_runner: Any) -> None:
    registry = Registry()
    registry.handler("soon")(
        lambda ctx: (_ for _ in ()).throw(JobError("rate limited", next_retry_delay=timedelta(0)))
    )
    registry.handler("later")(
        lambda ctx: (_ for _ in ()).throw(JobError("busy", next_retry_delay=90))
    )
    registry.handler("never")(
        lambda ctx: (_ for _ in ()).throw(JobError("no", non_retryable=True, next_retry_delay=5))
    )
    registry.handler("plain")(lambda ctx: (_ for _ in ()).throw(RuntimeError("boom")))
    ids = {t: api.add(job_type=t)[0] for t in ("soon", "later", "never", "plain")}
    make_runner(registry).start()
    eventually(lambda: all(i in api.failed for i in ids.values()))
    delays = {t: api.fail_bodies[i].get("nextRetryDelaySeconds") for t, i in ids.items()}
    # A non-retryable failure has no retry to delay; a plain exception keeps the step's delay.
    assert delays == {"soon": 0.0, "later": 90.0, "never": None, "plain": None}


def test_a_job_error_sends_its_output_when_it_can(api: FakeApi, make_runner: Any) -> None:
    registry = Registry()
    outputs: dict[str, Any] = {
        "kept": {"code": 42, "detail": ["a", "b"]},
        "not-json": {"ratio": float("nan")},
        "too-big": {"blob": "x" * (300 * 1024)},
    }
    for name, output in outputs.items():
        registry.handler(name)(
            lambda ctx, o=output: (_ for _ in ()).throw(NonRetryableError("no", output=o))
        )
    registry.handler("none")(lambda ctx: (_ for _ in ()).throw(JobError("no")))
    ids = {t: api.add(job_type=t)[0] for t in (*outputs, "none")}
    make_runner(registry).start()
    eventually(lambda: all(i in api.failed for i in ids.values()))
    sent = {t: api.fail_bodies[i].get("output") for t, i in ids.items()}
    # The failure goes whatever its output; one the server could not take is left out.
    assert sent == {"kept": outputs["kept"], "not-json": None, "too-big": None, "none": None}
    # A failure the server refuses with its output goes again without it.
    api.refuse_outputs = True
    (again,) = api.add(job_type="kept")
    eventually(lambda: again in api.failed)
    assert api.refused_outputs == 1 and "output" not in api.fail_bodies[again]
    with pytest.raises(TypeError, match="output is an object"):
        JobError("no", output=["not", "an", "object"])  # type: ignore[arg-type]


def test_a_result_that_is_not_a_mapping_fails_non_retryable(api: FakeApi, make_runner: Any) -> None:
    registry = Registry()
    registry.handler("t")(lambda ctx: ["not", "a", "dict"])  # type: ignore[arg-type,return-value]
    [job_id] = api.add()
    make_runner(registry).start()
    eventually(lambda: job_id in api.failed)
    message, retryable = api.failed[job_id]
    assert "returned list" in message
    assert retryable is False


def test_a_result_that_is_not_json_fails_non_retryable(api: FakeApi, make_runner: Any) -> None:
    registry = Registry()
    registry.handler("t")(lambda ctx: {"when": object()})
    [job_id] = api.add()
    make_runner(registry).start()
    eventually(lambda: job_id in api.failed)
    message, retryable = api.failed[job_id]
    assert "not JSON" in message
    assert retryable is False


@pytest.mark.parametrize(
    ("result", "problem"),
    [
        ({"ratio": float("nan")}, "$.ratio is NaN, which is not JSON"),
        ({"a": [1, {"b": float("inf")}]}, "$.a[1].b is Infinity, which is not JSON"),
        ({"when": datetime(2026, 1, 1)}, "$.when is a datetime, which is not JSON"),
        ({"note": "a\x00b"}, "$.note contains a NUL character"),
        ({(1, 2): "tuple key"}, "$ has a key of type tuple, which is not JSON"),
    ],
)
def test_a_result_that_cannot_be_sent_fails_at_once_without_being_sent(
    api: FakeApi, make_runner: Any, result: dict[Any, Any], problem: str
) -> None:
    registry = Registry()
    registry.handler("t")(lambda ctx: result)
    [job_id] = api.add()
    make_runner(registry).start()
    eventually(lambda: job_id in api.failed)
    message, retryable = api.failed[job_id]
    assert message.startswith("the handler's result cannot be sent: ")
    assert problem in message
    assert retryable is False
    assert api.complete_calls == 0


@pytest.mark.parametrize("status", [400, 413, 422])
def test_a_completion_refused_with_a_4xx_fails_the_job_at_once_with_the_reason(
    api: FakeApi, make_runner: Any, status: int
) -> None:
    api.complete_status = status
    api.problem_detail = "variablesToSet.big: too large"
    registry = Registry()
    registry.handler("t")(lambda ctx: {"big": "x"})
    [job_id] = api.add()
    metrics = InMemoryMetrics()
    make_runner(registry, metrics=metrics).start()
    eventually(lambda: job_id in api.failed)
    message, retryable = api.failed[job_id]
    assert message == (
        f"the server refused the handler's result: {status} status {status}: "
        "variablesToSet.big: too large"
    )
    assert retryable is False
    assert api.complete_calls == 1  # a refusal is final: never repeated
    # The metric follows the fail call's answer, a moment after the fake API recorded it.
    eventually(lambda: metrics.jobs_failed_non_retryable["t"] == 1)


def test_a_refusal_names_the_first_listed_problem(api: FakeApi, make_runner: Any) -> None:
    api.complete_status = 422
    api.problem_detail = "1 problem"
    api.problem_errors = [{"path": "variablesToSet.x", "message": "is not allowed"}]
    registry = Registry()
    registry.handler("t")(lambda ctx: {"x": 1})
    [job_id] = api.add()
    make_runner(registry).start()
    eventually(lambda: job_id in api.failed)
    assert "variablesToSet.x: is not allowed" in api.failed[job_id][0]


@pytest.mark.parametrize("status", [404, 409])
def test_a_completion_answered_404_or_409_is_dropped_not_failed(
    api: FakeApi, make_runner: Any, status: int, caplog: pytest.LogCaptureFixture
) -> None:
    api.complete_status = status
    registry = Registry()
    registry.handler("t")(lambda ctx: {"late": True})
    api.add()
    metrics = InMemoryMetrics()
    caplog.set_level(logging.WARNING, logger="baton_worker")
    make_runner(registry, metrics=metrics).start()
    eventually(
        lambda: any("no longer this worker's" in r.getMessage() for r in caplog.records),
        what="the warning",
    )
    assert metrics.outcomes_unreported["t"] == 1
    assert api.complete_calls == 1
    assert api.failed == {}


def test_server_errors_on_complete_are_retried_until_it_succeeds(
    api: FakeApi, make_runner: Any
) -> None:
    api.complete_script = [500, 502, 429, 503]
    registry = Registry()
    registry.handler("t")(lambda ctx: {"ok": True})
    [job_id] = api.add()
    make_runner(registry).start()
    eventually(lambda: job_id in api.completed)
    assert api.complete_calls == 5
    assert api.failed == {}


def test_an_error_message_with_a_nul_character_is_spelled_out(
    api: FakeApi, make_runner: Any
) -> None:
    registry = Registry()
    registry.handler("t")(lambda ctx: (_ for _ in ()).throw(RuntimeError("bad\x00byte")))
    [job_id] = api.add()
    make_runner(registry).start()
    eventually(lambda: job_id in api.failed)
    assert api.failed[job_id] == ("RuntimeError: bad\\x00byte", True)


def test_error_messages_are_made_storable() -> None:
    # A lone surrogate cannot even be logged under xdist, so this one is checked directly.
    assert _storable("nul \x00 and surrogate \ud800") == "nul \\x00 and surrogate \\ud800"


def test_a_refused_failure_is_logged_and_dropped(
    api: FakeApi, make_runner: Any, caplog: pytest.LogCaptureFixture
) -> None:
    api.fail_status = 422
    registry = Registry()
    registry.handler("t")(lambda ctx: (_ for _ in ()).throw(RuntimeError("boom")))
    [job_id] = api.add()
    metrics = InMemoryMetrics()
    caplog.set_level(logging.ERROR, logger="baton_worker")
    make_runner(registry, metrics=metrics).start()
    eventually(
        lambda: any("refused the job's outcome" in r.getMessage() for r in caplog.records),
        what="the error",
    )
    assert metrics.outcomes_unreported["t"] == 1
    assert job_id not in api.failed


def test_async_handlers_run_concurrently_on_the_runners_event_loop(
    api: FakeApi, make_runner: Any
) -> None:
    registry = Registry()
    threads: list[str] = []
    together = 0

    @registry.handler("t")
    async def gather(ctx: JobContext) -> dict[str, Any]:
        nonlocal together
        threads.append(threading.current_thread().name)
        together += 1
        deadline = time.monotonic() + 5
        while together < 4 and time.monotonic() < deadline:  # all four are in here at once
            await asyncio.sleep(0.005)
        return {"together": together}

    ids = api.add(4)
    make_runner(registry, parallelism=4).start()
    eventually(lambda: all(i in api.completed for i in ids))
    assert set(threads) == {"baton-asyncio"}
    assert all(api.completed[i] == {"together": 4} for i in ids)


def test_sync_handler_returning_a_coroutine_is_awaited(api: FakeApi, make_runner: Any) -> None:
    async def work(ctx: JobContext) -> dict[str, Any]:
        return {"via": "loop"}

    def sync_wrapper(ctx: JobContext) -> Any:
        return work(ctx)  # a plain function handing back a coroutine

    registry = Registry()
    registry.handler("t")(sync_wrapper)
    [job_id] = api.add()
    make_runner(registry).start()
    eventually(lambda: job_id in api.completed)
    assert api.completed[job_id] == {"via": "loop"}


def test_job_logger_carries_the_job_ids(
    api: FakeApi, make_runner: Any, caplog: pytest.LogCaptureFixture
) -> None:
    registry = Registry()
    registry.handler("t")(lambda ctx: ctx.logger.info("working", extra={"n": 1}))
    [job_id] = api.add()
    caplog.set_level(logging.INFO, logger="baton_worker")
    make_runner(registry, worker_id="w-1").start()
    eventually(lambda: job_id in api.completed)
    [record] = [r for r in caplog.records if r.getMessage() == "working"]
    assert record.__dict__["job_id"] == job_id
    assert record.__dict__["worker_id"] == "w-1"
    assert record.__dict__["n"] == 1
    assert record.__dict__["instance_id"]


# --- slots and polling ----------------------------------------------------------------------------


@pytest.mark.parametrize("prefetch", [0, 2])
def test_poll_never_asks_for_more_jobs_than_free_slots(
    api: FakeApi, make_runner: Any, prefetch: int
) -> None:
    release = threading.Event()
    running = 0
    peak = 0
    lock = threading.Lock()

    def hold(ctx: JobContext) -> None:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        release.wait(10)
        with lock:
            running -= 1

    registry = Registry()
    registry.handler("t")(hold)
    ids = api.add(10)
    make_runner(registry, parallelism=3, max_jobs_per_poll=10, prefetch=prefetch).start()
    eventually(lambda: running == 3, what="three handlers running")
    eventually(lambda: sum(api.poll_sizes) >= 3 + prefetch, what="the prefetched jobs claimed")
    polls_while_full = len(api.poll_sizes)
    time.sleep(0.1)  # every slot (running or prefetched) is busy: no poll meanwhile
    assert len(api.poll_sizes) == polls_while_full
    assert api.poll_sizes[0] == 3 + prefetch
    release.set()
    eventually(lambda: all(i in api.completed for i in ids))
    assert peak == 3  # prefetched jobs wait for a job thread: never more than 3 run at once
    assert max(api.poll_sizes) <= 3 + prefetch


def test_max_jobs_per_poll_caps_each_poll(api: FakeApi, make_runner: Any) -> None:
    registry = Registry()
    registry.handler("t")(lambda ctx: None)
    ids = api.add(9)
    make_runner(registry, parallelism=8, max_jobs_per_poll=2).start()
    eventually(lambda: all(i in api.completed for i in ids))
    assert max(api.poll_sizes) == 2


def test_failed_polls_back_off_and_the_runner_carries_on(api: FakeApi, make_runner: Any) -> None:
    registry = Registry()
    registry.handler("t")(lambda ctx: {"ok": True})
    api.unavailable_polls = 4
    [job_id] = api.add()
    metrics = InMemoryMetrics()
    runner = make_runner(registry, metrics=metrics)
    runner.start()
    eventually(lambda: job_id in api.completed)
    assert metrics.poll_errors == 4
    assert runner.running


def test_empty_polls_slow_down_to_the_cap(api: FakeApi, make_runner: Any) -> None:
    registry = Registry()
    registry.handler("t")(lambda ctx: None)
    make_runner(registry, poll_interval=0.02, max_poll_interval=0.1).start()
    eventually(lambda: len(api.poll_times) >= 8, timeout=10)
    gaps = [b - a for a, b in zip(api.poll_times, api.poll_times[1:], strict=False)]
    # Empty polls double the 0.02 s pause up to the 0.1 s cap (less up to a fifth of jitter).
    assert min(gaps[4:7]) >= 0.1 * 0.8 - 0.005


def test_a_full_batch_is_followed_by_another_poll_at_once(api: FakeApi, make_runner: Any) -> None:
    registry = Registry()
    registry.handler("t")(lambda ctx: None)
    ids = api.add(6)
    make_runner(
        registry, parallelism=2, max_jobs_per_poll=2, poll_interval=5.0, max_poll_interval=5.0
    ).start()
    # With a 5 s pause after partial or empty polls, only back-to-back full polls finish in time.
    eventually(lambda: all(i in api.completed for i in ids), timeout=3)


# --- leases ---------------------------------------------------------------------------------------


def test_a_long_handler_gets_heartbeats_at_half_its_lease(make_runner: Any) -> None:
    api = FakeApi(lease_seconds=0.4)
    registry = Registry()
    registry.handler("t")(lambda ctx: time.sleep(1.0))
    [job_id] = api.add()
    client = BatonClient("http://fake", transport=api.transport(), retry=FAST)
    runner = Runner(registry, client=client, options=RunnerOptions(poll_interval=0.01))
    runner.start()
    try:
        eventually(lambda: job_id in api.completed, timeout=5)
    finally:
        runner.stop(timeout=5)
    # 1 s at a heartbeat every ~0.2 s.
    assert 2 <= api.heartbeats.count(job_id) <= 7


def test_handler_heartbeat_returns_the_new_lease_end(api: FakeApi, make_runner: Any) -> None:
    seen: list[datetime] = []

    def beat(ctx: JobContext) -> None:
        seen.append(ctx.heartbeat())

    registry = Registry()
    registry.handler("t")(beat)
    [job_id] = api.add()
    make_runner(registry).start()
    eventually(lambda: job_id in api.completed)
    assert api.heartbeats == [job_id]
    assert seen[0] > datetime.now(UTC) + timedelta(seconds=20)


def test_a_lost_lease_is_visible_to_the_handler_and_its_result_dropped(make_runner: Any) -> None:
    api = FakeApi(lease_seconds=0.2)
    api.heartbeat_status = 409
    api.complete_status = 409
    lost: list[bool] = []

    def wait_for_loss(ctx: JobContext) -> dict[str, Any]:
        deadline = time.monotonic() + 5
        while not ctx.lease_lost and time.monotonic() < deadline:
            time.sleep(0.01)
        lost.append(ctx.lease_lost)
        return {"late": True}

    registry = Registry()
    registry.handler("t")(wait_for_loss)
    api.add()
    metrics = InMemoryMetrics()
    client = BatonClient("http://fake", transport=api.transport(), retry=FAST)
    runner = Runner(
        registry,
        client=client,
        metrics=metrics,
        options=RunnerOptions(poll_interval=0.01, report_retry=FAST),
    )
    runner.start()
    try:
        eventually(lambda: metrics.outcomes_unreported["t"] == 1)
    finally:
        runner.stop(timeout=5)
    assert lost == [True]
    assert api.completed == {}


# --- stopping -------------------------------------------------------------------------------------


@pytest.mark.parametrize("prefetch", [0, 2])
def test_stop_waits_for_in_flight_jobs_and_polls_no_more(
    api: FakeApi, make_runner: Any, prefetch: int
) -> None:
    release = threading.Event()
    entered = threading.Semaphore(0)

    def hold(ctx: JobContext) -> dict[str, Any]:
        entered.release()
        release.wait(10)
        return {"finished": True}

    registry = Registry()
    registry.handler("t")(hold)
    ids = api.add(5)
    runner = make_runner(registry, parallelism=2, max_jobs_per_poll=2, prefetch=prefetch)
    runner.start()
    assert entered.acquire(timeout=5) and entered.acquire(timeout=5)
    eventually(lambda: sum(api.poll_sizes) >= 2 + prefetch, what="the prefetched jobs claimed")
    stopped = threading.Event()
    threading.Thread(target=lambda: runner.stop() and stopped.set()).start()
    polls_at_stop = len(api.poll_sizes)
    time.sleep(0.1)
    assert not stopped.is_set(), "stop returned while handlers were running"
    assert runner.in_flight == 2
    release.set()
    assert stopped.wait(5)
    assert len(api.poll_sizes) == polls_at_stop
    # The claimed jobs (running and prefetched) all ran before the stop returned.
    assert sorted(api.completed) == sorted(ids[: 2 + prefetch])
    assert api.locked == {}
    assert len(api.pending) == 3 - prefetch  # never claimed, still there for another worker


def test_stop_before_start_is_harmless() -> None:
    registry = Registry()
    registry.handler("t")(lambda ctx: None)
    assert Runner(registry, url="http://nowhere.invalid").stop(timeout=1)


def test_a_runner_starts_once(api: FakeApi, make_runner: Any) -> None:
    registry = Registry()
    registry.handler("t")(lambda ctx: None)
    runner = make_runner(registry)
    runner.start()
    with pytest.raises(RuntimeError):
        runner.start()


def test_metrics_hook_failures_do_not_stop_jobs(api: FakeApi, make_runner: Any) -> None:
    class Broken(NoopMetrics):
        def job_started(self, *, job_type: str) -> None:
            raise RuntimeError("metrics backend down")

    registry = Registry()
    registry.handler("t")(lambda ctx: {"ok": 1})
    [job_id] = api.add()
    make_runner(registry, metrics=Broken()).start()
    eventually(lambda: job_id in api.completed)


def test_in_memory_metrics_count_what_happened(api: FakeApi, make_runner: Any) -> None:
    registry = Registry()
    registry.handler("ok")(lambda ctx: None)
    registry.handler("bad")(lambda ctx: (_ for _ in ()).throw(NonRetryableError("no")))
    ok = api.add(3, job_type="ok")
    bad = api.add(1, job_type="bad")
    metrics = InMemoryMetrics()
    make_runner(registry, metrics=metrics).start()
    eventually(lambda: all(i in api.completed for i in ok) and bad[0] in api.failed)
    # The runner counts an outcome once the server's answer is back, after the fake saw it.
    eventually(lambda: metrics.snapshot()["jobsFailed"] and metrics.snapshot()["jobsCompleted"])
    eventually(lambda: sum(metrics.snapshot()["jobsCompleted"].values()) == 3)
    snap = metrics.snapshot()
    assert snap["jobsStarted"] == {"ok": 3, "bad": 1}
    assert snap["jobsCompleted"] == {"ok": 3}
    assert snap["jobsFailed"] == {"bad": 1}
    assert snap["jobsFailedNonRetryable"] == {"bad": 1}
    assert snap["polls"] >= 1


# --- configuration and the registry ---------------------------------------------------------------


def test_job_types_default_to_every_registered_type(api: FakeApi, make_runner: Any) -> None:
    registry = Registry()
    registry.handler("a")(lambda ctx: None)
    registry.handler("b")(lambda ctx: None)
    runner = make_runner(registry)
    runner.start()
    assert runner.job_types == ("a", "b")


def test_a_job_type_without_a_handler_is_refused_at_start() -> None:
    registry = Registry()
    registry.handler("a")(lambda ctx: None)
    runner = Runner(registry, options=RunnerOptions(job_types=["a", "b"]))
    with pytest.raises(ValueError, match="no handler registered for job type"):
        runner.start()


def test_an_empty_registry_is_refused_at_start() -> None:
    with pytest.raises(ValueError, match="no job types"):
        Runner(Registry()).start()


def test_worker_id_defaults_to_host_and_pid() -> None:
    assert Runner(Registry()).worker_id == default_worker_id()
    assert default_worker_id().endswith(f"-{__import__('os').getpid()}")


def test_the_decorator_registers_and_returns_the_function() -> None:
    registry = Registry()

    @registry.handler("ship-parcel")
    def ship(ctx: JobContext) -> None:
        return None

    async def notify(ctx: JobContext) -> None:
        return None

    assert registry.handler("notify")(notify) is notify  # the same decorator, called
    assert registry.get("ship-parcel") is not None
    assert registry.get("notify").is_async  # type: ignore[union-attr]
    assert ship(None) is None  # type: ignore[arg-type]  # the decorator returns the function


def test_register_is_the_plain_call_and_the_decorator_its_other_spelling() -> None:
    registry = Registry()

    def charge(ctx: JobContext) -> dict[str, str]:
        return {"receipt": "R-1"}

    async def notify(ctx: JobContext) -> None:
        return None

    assert registry.register("charge-card", charge) is None
    registry.register("notify", notify)
    assert registry.get("charge-card").fn is charge  # type: ignore[union-attr]
    assert registry.get("notify").is_async  # type: ignore[union-attr]
    assert registry.job_types == ("charge-card", "notify")
    registry.register("charge-card", charge)  # the same function again: no change, no error
    assert not hasattr(Runner, "register"), "a runner takes a registry; it does not register"


@pytest.mark.parametrize("spelling", ["register", "decorator"])
def test_a_second_handler_for_a_type_is_refused(spelling: str) -> None:
    registry = Registry()

    def add(fn: Any, **kwargs: Any) -> None:
        if spelling == "register":
            registry.register("t", fn, **kwargs)
        else:
            registry.handler("t", **kwargs)(fn)

    add(lambda ctx: None)
    with pytest.raises(ValueError, match="already has a handler"):
        add(lambda ctx: None)
    replacement = lambda ctx: {"x": 1}  # noqa: E731
    add(replacement, replace=True)
    assert registry.get("t").fn is replacement  # type: ignore[union-attr]


@pytest.mark.parametrize("job_type", ["", "-leading", "has space", "x" * 129, "a/b"])
def test_invalid_job_types_are_refused(job_type: str) -> None:
    with pytest.raises(ValueError, match="invalid job type"):
        Registry().handler(job_type)(lambda ctx: None)
    with pytest.raises(ValueError, match="invalid job type"):
        Registry().register(job_type, lambda ctx: None)


def test_register_refuses_what_is_not_callable() -> None:
    with pytest.raises(TypeError, match="not callable"):
        Registry().register("t", {"not": "a function"})  # type: ignore[arg-type]


def test_async_detection_sees_through_partials_and_callable_objects() -> None:
    async def handler(ctx: JobContext, extra: int) -> None:
        return None

    class AsyncCallable:
        async def __call__(self, ctx: JobContext) -> None:
            return None

    assert is_async_callable(functools.partial(handler, extra=1))
    assert is_async_callable(AsyncCallable())
    assert not is_async_callable(lambda ctx: None)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"parallelism": 0},
        {"max_jobs_per_poll": 101},
        {"poll_interval": 0},
        {"poll_interval": 1.0, "max_poll_interval": 0.5},
        {"job_types": "just-a-string"},
    ],
)
def test_nonsense_options_are_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises((ValueError, TypeError)):
        RunnerOptions(**kwargs)


# --- results in batches ---------------------------------------------------------------------------


def test_results_go_out_in_batches(api: FakeApi, make_runner: Any) -> None:
    api.batch_route = True
    registry = Registry()
    registry.handler("t")(lambda ctx: {"ok": ctx.job_id})
    ids = api.add(40)
    make_runner(registry, parallelism=8, max_jobs_per_poll=20, flush_interval=0.05).start()
    eventually(lambda: all(i in api.completed for i in ids))
    assert api.complete_calls == 0
    assert api.batch_calls < 40 / 4, api.batch_calls
    assert all(api.completed[i] == {"ok": i} for i in ids)


def test_a_batch_refused_whole_is_sent_again_one_result_at_a_time(
    api: FakeApi, make_runner: Any
) -> None:
    api.batch_route = True
    api.batch_script = [400]
    registry = Registry()
    registry.handler("t")(lambda ctx: {"ok": 1})
    ids = api.add(6)
    make_runner(registry, parallelism=6, max_jobs_per_poll=6, flush_interval=0.2).start()
    eventually(lambda: all(i in api.completed for i in ids))
    assert api.batch_calls >= 1 and api.complete_calls >= 1


def test_an_item_answered_invalid_fails_only_its_job_with_the_reason(
    api: FakeApi, make_runner: Any
) -> None:
    api.batch_route = True
    registry = Registry()
    registry.handler("t")(lambda ctx: {"ok": 1})
    ids = api.add(5)
    api.invalid_jobs = {ids[2]}
    make_runner(registry, parallelism=5, max_jobs_per_poll=5).start()
    eventually(lambda: ids[2] in api.failed and all(i in api.completed for i in ids if i != ids[2]))
    message, retryable = api.failed[ids[2]]
    assert message == "the server refused the handler's result: bad item" and not retryable


def test_a_flush_that_fails_is_retried_with_the_same_results(
    api: FakeApi, make_runner: Any
) -> None:
    api.batch_route = True
    api.batch_script = [503, 503]
    metrics = InMemoryMetrics()
    registry = Registry()
    registry.handler("t")(lambda ctx: {"ok": 1})
    ids = api.add(3)
    make_runner(registry, metrics=metrics, parallelism=3, max_jobs_per_poll=3).start()
    eventually(lambda: all(i in api.completed for i in ids))
    eventually(lambda: metrics.jobs_completed["t"] == 3)
    assert api.batch_calls >= 3 and api.complete_calls == 0
