"""The worker SDK against ``baton dev`` with the real functions: the example end to end, retries,
non-retryable failures, a graceful stop mid-batch, a runner killed mid-job, heartbeats, and a
server that answers 503 (or nothing) for a while."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar

import httpx
import psycopg
import pytest
from baton_worker import (
    BatonClient,
    InMemoryMetrics,
    JobContext,
    JobError,
    NonRetryableError,
    Registry,
    RetryPolicy,
    Runner,
    RunnerOptions,
)
from baton_worker.cli.worker import load_registry
from baton_worker.types import Instance

from tests.support.helpers import unique
from tests.support.helpers import wait_until as wait_for
from tests.support.servers import CheckedServer, free_port

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("e2e")]

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "order_fulfilment"
T = TypeVar("T")

QUICK = RetryPolicy(initial_interval=0.05, maximum_interval=0.2, maximum_attempts=None)


def quick_options(**overrides: Any) -> RunnerOptions:
    """Short pauses everywhere, so tests wait on conditions, not on intervals."""
    settings: dict[str, Any] = {
        "poll_interval": 0.05,
        "max_poll_interval": 0.2,
        "poll_errors": QUICK,
        "report_retry": RetryPolicy(
            initial_interval=0.05, maximum_interval=0.2, maximum_attempts=None, maximum_elapsed=30
        ),
    }
    return RunnerOptions(**{**settings, **overrides})


# --- fixtures ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def client(baton_server: CheckedServer) -> Iterator[BatonClient]:
    with BatonClient(baton_server.base_url, api_key=baton_server.api_key) as c:
        yield c


@pytest.fixture(scope="module")
def database(baton_server: CheckedServer) -> Iterator[psycopg.Connection[Any]]:
    """A connection to the server's database, to read what the API does not show (audit)."""
    if baton_server.database_url:
        conn = psycopg.connect(baton_server.database_url, autocommit=True)
    else:  # embedded: postmaster.pid names the socket directory (line 5) and port (line 4)
        lines = (baton_server.data_dir / "postgres" / "postmaster.pid").read_text().splitlines()
        conn = psycopg.connect(
            host=lines[4].strip(), port=int(lines[3]), user="postgres", dbname="postgres"
        )
        conn.autocommit = True
    with conn:
        yield conn


# --- helpers -------------------------------------------------------------------------------------


def wait_status(client: BatonClient, instance_id: str, *statuses: str) -> Instance:
    def probe() -> Instance | None:
        instance = client.get_instance(instance_id)
        return instance if instance["status"] in statuses else None

    return wait_for(probe, what=f"instance {instance_id} to be {'/'.join(statuses)}")


def one_step(name: str, job_type: str, **settings: Any) -> dict[str, Any]:
    step = {"id": "work", "type": "SERVICE_TASK", "jobType": job_type, **settings}
    return {"name": name, "steps": [step]}


def audit(database: psycopg.Connection[Any], instance_id: str) -> list[tuple[str, Any]]:
    rows = database.execute(
        "SELECT event, detail FROM audit_log WHERE instance_id = %s ORDER BY id", (instance_id,)
    ).fetchall()
    return [(r[0], r[1]) for r in rows]


def job_states(database: psycopg.Connection[Any], job_type: str) -> dict[str, int]:
    rows = database.execute(
        "SELECT status, count(*) FROM job WHERE job_type = %s GROUP BY status", (job_type,)
    ).fetchall()
    return {r[0]: int(r[1]) for r in rows}


# --- the example ---------------------------------------------------------------------------------


def test_order_fulfilment_example_runs_to_completion_through_the_sdk(
    client: BatonClient, database: psycopg.Connection[Any], runners: Callable[..., Runner]
) -> None:
    definition = json.loads((EXAMPLE / "definition.json").read_text())
    definition["name"] = unique("order-fulfilment")
    client.register_definition(definition)
    order = json.loads((EXAMPLE / "input.json").read_text())
    worker = load_registry(f"{EXAMPLE / 'worker.py'}:registry")
    metrics = InMemoryMetrics()
    runners(worker, client=client, options=quick_options(parallelism=4), metrics=metrics).start()

    ids = [
        client.start_instance(definition["name"], input={**order, "orderId": f"A-{n}"})["id"]
        for n in range(3)
    ]
    for instance_id in ids:
        # The charge fails once and is retried after its 1 s delay; then the user task waits.
        wait_for(
            lambda i=instance_id: any(  # type: ignore[misc]
                s["stepId"] == "approve" and s["status"] == "IN_PROGRESS"
                for s in client.get_instance(i).get("steps", [])
            ),
            what="the approval step",
        )
        client.complete_user_task(instance_id, "approve", variables={"approvedBy": "ada"})

    for instance_id in ids:
        done = wait_status(client, instance_id, "COMPLETED", "FAILED")
        assert done["status"] == "COMPLETED", done
        assert set(done["output"]) == {"reservation", "receipt", "tracking", "approvedBy"}
        assert done["output"]["approvedBy"] == "ada"
        steps = {s["stepId"]: s for s in done.get("steps", [])}
        assert steps["charge"]["attempt"] == 2
        assert "error" not in steps["charge"]  # completed: attempt 1's error is in the history
        failures = client.get_history(instance_id)["events"]
        assert any("payment gateway timed out" in (e.get("message") or "") for e in failures)
        events = [e for e, _ in audit(database, instance_id)]
        assert events.count("JOB_RETRY_SCHEDULED") == 1
        assert events.count("JOB_COMPLETED") == 4  # reserve, charge, ship, notify
    assert metrics.jobs_failed["charge-card"] == 3
    # The async handler's count follows its complete call's answer, a moment after the instance.
    wait_for(lambda: metrics.jobs_completed["send-confirmation"] == 3, what="the async completions")


# --- failures and retries ------------------------------------------------------------------------


def test_plain_exception_is_retried_per_the_definition(
    client: BatonClient, runners: Callable[..., Runner]
) -> None:
    job_type = unique("flaky")
    name = unique("retry")
    client.register_definition(one_step(name, job_type, retryCount=2, retryDelaySeconds=0))
    seen: list[tuple[int, int]] = []
    registry = Registry()

    @registry.handler(job_type)
    def flaky(ctx: JobContext) -> dict[str, Any]:
        seen.append((ctx.attempt, ctx.retries_remaining))
        if ctx.attempt < 3:
            raise ValueError(f"transient trouble on attempt {ctx.attempt}")
        return {"succeededOn": ctx.attempt}

    runners(registry, client=client, options=quick_options()).start()
    instance = client.start_instance(name)
    done = wait_status(client, instance["id"], "COMPLETED", "FAILED")
    assert done["status"] == "COMPLETED", done
    assert done["variables"] == {"succeededOn": 3}
    assert seen == [(1, 2), (2, 1), (3, 0)]


def test_retries_run_out_and_the_instance_fails(
    client: BatonClient, runners: Callable[..., Runner]
) -> None:
    job_type = unique("broken")
    name = unique("exhaust")
    client.register_definition(one_step(name, job_type, retryCount=1, retryDelaySeconds=0))
    calls: list[int] = []
    registry = Registry()

    @registry.handler(job_type)
    def broken(ctx: JobContext) -> None:
        calls.append(ctx.attempt)
        raise RuntimeError("still broken")

    runners(registry, client=client, options=quick_options()).start()
    done = wait_status(client, client.start_instance(name)["id"], "COMPLETED", "FAILED")
    assert done["status"] == "FAILED"
    assert calls == [1, 2]
    [step] = done.get("steps", [])
    assert "RuntimeError: still broken" in step.get("error", "")
    assert "retries exhausted after 2 attempts" in step.get("error", "")


def test_non_retryable_error_fails_at_once(
    client: BatonClient, database: psycopg.Connection[Any], runners: Callable[..., Runner]
) -> None:
    job_type = unique("strict")
    name = unique("nonretry")
    client.register_definition(one_step(name, job_type, retryCount=3, retryDelaySeconds=0))
    calls: list[int] = []
    registry = Registry()

    @registry.handler(job_type)
    def refuse(ctx: JobContext) -> None:
        calls.append(ctx.attempt)
        raise NonRetryableError("card declined: do not retry")

    runners(registry, client=client, options=quick_options()).start()
    instance_id = client.start_instance(name)["id"]
    done = wait_status(client, instance_id, "COMPLETED", "FAILED")
    assert done["status"] == "FAILED"
    assert calls == [1]
    [step] = done.get("steps", [])
    assert step.get("error") == "card declined: do not retry"
    events = audit(database, instance_id)
    assert [d["retryable"] for e, d in events if e == "JOB_FAILED"] == [False]
    assert "JOB_RETRY_SCHEDULED" not in [e for e, _ in events]


def test_job_error_next_retry_delay_overrides_the_steps_delay(
    client: BatonClient, database: psycopg.Connection[Any], runners: Callable[..., Runner]
) -> None:
    job_type = unique("throttled")
    name = unique("retry-now")
    client.register_definition(one_step(name, job_type, retryCount=1, retryDelaySeconds=3600))
    calls: list[int] = []
    registry = Registry()

    @registry.handler(job_type)
    def throttled(ctx: JobContext) -> dict[str, Any]:
        calls.append(ctx.attempt)
        if ctx.attempt == 1:
            raise JobError("slow down", next_retry_delay=0)
        return {"succeededOn": ctx.attempt}

    runners(registry, client=client, options=quick_options()).start()
    instance_id = client.start_instance(name)["id"]
    started = time.monotonic()
    # Retried at once, not after the step's hour; wait_status gives up after its own timeout.
    done = wait_status(client, instance_id, "COMPLETED", "FAILED")
    assert done["status"] == "COMPLETED", done
    assert time.monotonic() - started < 30
    assert done["variables"] == {"succeededOn": 2}
    assert calls == [1, 2]
    events = [e for e, _ in audit(database, instance_id)]
    assert events.count("JOB_RETRY_SCHEDULED") == 1


@pytest.mark.parametrize(
    ("result", "problem"),
    [
        ({"ratio": float("nan")}, "$.ratio is NaN, which is not JSON"),
        ({"note": "a\x00b"}, "$.note contains a NUL character"),
    ],
)
def test_a_result_the_server_cannot_take_fails_the_instance_at_once(
    client: BatonClient,
    database: psycopg.Connection[Any],
    runners: Callable[..., Runner],
    result: dict[str, Any],
    problem: str,
) -> None:
    job_type = unique("unsendable")
    name = unique("bad-result")
    client.register_definition(one_step(name, job_type, retryCount=3, retryDelaySeconds=0))
    calls: list[int] = []
    registry = Registry()

    @registry.handler(job_type)
    def compute(ctx: JobContext) -> dict[str, Any]:
        calls.append(ctx.attempt)
        return result

    runners(registry, client=client, options=quick_options()).start()
    instance_id = client.start_instance(name)["id"]
    started = time.monotonic()
    done = wait_status(client, instance_id, "COMPLETED", "FAILED")
    assert time.monotonic() - started < 10
    assert done["status"] == "FAILED"
    assert calls == [1]  # not retried: the same result would be refused again
    assert problem in done.get("reason", ""), done
    [step] = done.get("steps", [])
    assert problem in step.get("error", "")
    assert [d["retryable"] for e, d in audit(database, instance_id) if e == "JOB_FAILED"] == [False]


def test_an_error_message_with_a_nul_character_reaches_the_server(
    client: BatonClient, runners: Callable[..., Runner]
) -> None:
    job_type = unique("nul-message")
    name = unique("nul")
    client.register_definition(one_step(name, job_type, retryCount=0))
    registry = Registry()

    @registry.handler(job_type)
    def refuse(ctx: JobContext) -> None:
        raise NonRetryableError("bad byte: \x00")

    runners(registry, client=client, options=quick_options()).start()
    done = wait_status(client, client.start_instance(name)["id"], "COMPLETED", "FAILED")
    assert done["status"] == "FAILED"
    [step] = done.get("steps", [])
    assert step.get("error") == "bad byte: \\x00"


# --- stopping and crashing -----------------------------------------------------------------------


def test_stopped_runner_finishes_its_in_flight_jobs_and_leaves_nothing_locked(
    client: BatonClient, database: psycopg.Connection[Any], runners: Callable[..., Runner]
) -> None:
    job_type = unique("drain")
    name = unique("stop")
    client.register_definition(one_step(name, job_type))
    entered = threading.Semaphore(0)
    release = threading.Event()
    registry = Registry()

    @registry.handler(job_type)
    def hold(ctx: JobContext) -> dict[str, Any]:
        entered.release()
        release.wait(30)
        return {"finishedAfterStop": ctx.shutting_down}

    ids = [client.start_instance(name)["id"] for _ in range(6)]
    runner = runners(
        registry,
        client=client,
        options=quick_options(parallelism=3, max_jobs_per_poll=3, prefetch=0),
    )
    runner.start()
    for _ in range(3):
        assert entered.acquire(timeout=30), "the batch did not start"
    assert job_states(database, job_type) == {"LOCKED": 3, "UNLOCKED": 3}

    runner.request_stop()
    assert not runner.wait(0.3), "the runner stopped with handlers still running"
    release.set()
    assert runner.stop(timeout=30)

    assert job_states(database, job_type) == {"COMPLETED": 3, "UNLOCKED": 3}
    statuses = sorted(client.get_instance(i)["status"] for i in ids)
    assert statuses == ["COMPLETED"] * 3 + ["RUNNING"] * 3
    finished = [client.get_instance(i) for i in ids]
    assert all(
        i["variables"] == {"finishedAfterStop": True}
        for i in finished
        if i["status"] == "COMPLETED"
    )
    for instance in finished:  # the server is shared: leave nothing running behind
        if instance["status"] == "RUNNING":
            client.cancel_instance(instance["id"], reason="test over")


WORKER_THAT_HANGS = """
import os, pathlib, time
from baton_worker import Registry

registry = Registry()


@registry.handler(os.environ["E2E_JOB_TYPE"])
def hang(ctx):
    marker = pathlib.Path(os.environ["E2E_MARKER_DIR"]) / f"{ctx.job_id}.started"
    marker.write_text(str(os.getpid()))
    time.sleep(300)
    return {"by": "the killed worker"}
"""


def test_runner_killed_mid_job_loses_nothing(
    baton_server: CheckedServer,
    client: BatonClient,
    database: psycopg.Connection[Any],
    runners: Callable[..., Runner],
    tmp_path: Path,
) -> None:
    job_type = unique("fragile")
    name = unique("sigkill")
    client.register_definition(one_step(name, job_type, responseTimeoutSeconds=2, retryCount=1))
    instance_id = client.start_instance(name)["id"]

    module = tmp_path / "hanging_worker.py"
    module.write_text(textwrap.dedent(WORKER_THAT_HANGS))
    env = {**os.environ, "E2E_JOB_TYPE": job_type, "E2E_MARKER_DIR": str(tmp_path)}
    cmd = [sys.executable, "-m", "baton_worker.cli", "worker", "run", f"{module}:registry"]
    cmd += ["--url", baton_server.base_url, "--api-key", baton_server.api_key]
    cmd += ["--worker-id", "doomed", "--poll-interval", "0.05"]
    log_path = tmp_path / "doomed.log"
    with log_path.open("wb") as log:
        doomed = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for(
            lambda: list(tmp_path.glob("*.started")) or doomed.poll() is not None,
            what="the subprocess worker to start the job",
        )
        assert doomed.poll() is None, log_path.read_text()
        # Past its first lease: the doomed worker's heartbeats were keeping the job.
        time.sleep(2.5)
        assert job_states(database, job_type) == {"LOCKED": 1}
    finally:
        doomed.send_signal(signal.SIGKILL)
        doomed.wait(10)

    calls: list[str] = []
    registry = Registry()

    @registry.handler(job_type)
    def rescue(ctx: JobContext) -> dict[str, Any]:
        calls.append(ctx.job_id)
        return {"by": "the rescuer"}

    rescuer = runners(registry, client=client, options=quick_options(worker_id="rescuer"))
    rescuer.start()
    done = wait_status(client, instance_id, "COMPLETED", "FAILED")
    assert done["status"] == "COMPLETED", done
    assert done["variables"] == {"by": "the rescuer"}
    assert len(calls) == 1
    [step] = done.get("steps", [])
    assert step.get("workerId") == "rescuer"

    events = audit(database, instance_id)
    names = [e for e, _ in events]
    assert names.count("JOB_COMPLETED") == 1
    dispatched = [d["workerId"] for e, d in events if e in ("JOB_DISPATCHED", "JOB_RECLAIMED")]
    assert dispatched == ["doomed", "rescuer"]
    assert job_states(database, job_type) == {"COMPLETED": 1}


def test_heartbeats_keep_a_long_job_on_its_first_worker(
    client: BatonClient, database: psycopg.Connection[Any], runners: Callable[..., Runner]
) -> None:
    job_type = unique("long")
    name = unique("heartbeat")
    client.register_definition(one_step(name, job_type, responseTimeoutSeconds=1))
    registry = Registry()
    registry.handler(job_type)(lambda ctx: time.sleep(3.0) or {"leaseLost": ctx.lease_lost})
    runner = runners(registry, client=client, options=quick_options())
    runner.start()
    instance_id = client.start_instance(name)["id"]
    done = wait_status(client, instance_id, "COMPLETED", "FAILED")
    assert done["variables"] == {"leaseLost": False}
    names = [e for e, _ in audit(database, instance_id)]
    assert names.count("JOB_DISPATCHED") == 1
    assert "JOB_RECLAIMED" not in names
    assert "JOB_LEASE_EXPIRED" not in names


# --- an unhealthy server -------------------------------------------------------------------------


class FlakyProxy(ThreadingHTTPServer):
    """Forwards to the real server, but answers 503 (problem+json, Retry-After) to the first
    ``fail[path]`` requests of each path."""

    daemon_threads = True

    def __init__(self, port: int, upstream: str, fail: dict[str, int]) -> None:
        self.upstream = httpx.Client(base_url=upstream, timeout=30)
        self.fail = dict(fail)
        self.failed: dict[str, int] = dict.fromkeys(fail, 0)
        self.forwarded: dict[str, int] = {}
        self.counts_lock = threading.Lock()
        super().__init__(("127.0.0.1", port), _ProxyHandler)


class _ProxyHandler(BaseHTTPRequestHandler):
    server: FlakyProxy
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self._handle()

    do_POST = do_PUT = do_DELETE = do_GET

    def _handle(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        proxy = self.server
        with proxy.counts_lock:
            refuse = proxy.fail.get(self.path, 0) > 0
            if refuse:
                proxy.fail[self.path] -= 1
                proxy.failed[self.path] += 1
            else:
                proxy.forwarded[self.path] = proxy.forwarded.get(self.path, 0) + 1
        if refuse:
            doc = {
                "type": "https://baton.dev/problems/unavailable",
                "title": "Service unavailable",
                "status": 503,
                "detail": "the database is unreachable (simulated)",
                "errors": [],
            }
            self._reply(
                503, json.dumps(doc).encode(), "application/problem+json", {"Retry-After": "1"}
            )
            return
        headers = {
            k: v for k, v in self.headers.items() if k.lower() in ("x-api-key", "content-type")
        }
        answer = proxy.upstream.request(self.command, self.path, content=body, headers=headers)
        self._reply(answer.status_code, answer.content, answer.headers.get("content-type", ""), {})

    def _reply(self, status: int, body: bytes, content_type: str, extra: dict[str, str]) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for k, v in extra.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        return None


def test_runner_survives_a_server_that_refuses_connections_then_answers_503(
    baton_server: CheckedServer,
    client: BatonClient,
    database: psycopg.Connection[Any],
    runners: Callable[..., Runner],
) -> None:
    port = free_port()
    job_type = unique("weather")
    name = unique("storm")
    client.register_definition(one_step(name, job_type))
    instance_id = client.start_instance(name)["id"]
    calls: list[str] = []
    registry = Registry()
    registry.handler(job_type)(lambda ctx: calls.append(ctx.job_id) or {"survived": True})
    metrics = InMemoryMetrics()
    runner = runners(
        registry,
        url=f"http://127.0.0.1:{port}",
        api_key=baton_server.api_key,
        options=quick_options(),
        metrics=metrics,
    )
    runner.start()

    # Nothing listens yet: connection refused, again and again.
    wait_for(lambda: metrics.poll_errors >= 3, what="refused polls")
    assert runner.running

    # Then a server that answers 503 to the first polls and the first completions.
    proxy = FlakyProxy(
        port, baton_server.base_url, {"/v1/jobs/poll": 4, "/v1/jobs/complete-batch": 3}
    )
    serving = threading.Thread(target=proxy.serve_forever, daemon=True)
    serving.start()
    try:
        done = wait_status(client, instance_id, "COMPLETED", "FAILED")
    finally:
        proxy.shutdown()
        proxy.server_close()
        proxy.upstream.close()
    assert done["variables"] == {"survived": True}
    assert proxy.failed == {"/v1/jobs/poll": 4, "/v1/jobs/complete-batch": 3}
    # The runner reports in batches: the flush was sent again until it got through, once.
    assert proxy.forwarded.get("/v1/jobs/complete-batch") == 1
    assert len(calls) == 1
    assert metrics.poll_errors >= 3 + 4
    # Counted once the complete call returns, a moment after the instance shows COMPLETED.
    wait_for(lambda: metrics.jobs_completed[job_type] == 1, what="the completion metric")
    assert runner.running
    names = [e for e, _ in audit(database, instance_id)]
    assert names.count("JOB_COMPLETED") == 1


# --- results in batches --------------------------------------------------------------------------


class _Calls(httpx.HTTPTransport):
    """Counts the requests per path."""

    def __init__(self) -> None:
        super().__init__()
        self.paths: dict[str, int] = {}
        self._lock = threading.Lock()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        with self._lock:
            self.paths[request.url.path] = self.paths.get(request.url.path, 0) + 1
        return super().handle_request(request)


def test_results_are_flushed_in_batches_and_at_stop(
    baton_server: CheckedServer, database: psycopg.Connection[Any], runners: Callable[..., Runner]
) -> None:
    job_type, name = unique("batched"), unique("batched-flow")
    calls = _Calls()
    client = BatonClient(baton_server.base_url, api_key=baton_server.api_key, transport=calls)
    client.register_definition(one_step(name, job_type))
    ids = [client.start_instance(name)["id"] for _ in range(200)]
    registry = Registry()
    registry.handler(job_type)(lambda ctx: {"n": 1})
    # A long flush interval: batches fill up (32 results), the rest is flushed by stop().
    options = quick_options(parallelism=8, max_jobs_per_poll=32, flush_interval=1.0)
    runner = runners(registry, client=client, options=options)
    runner.start()
    wait_for(
        lambda: job_states(database, job_type).get("COMPLETED", 0) >= 192,
        what="six full batches of results",
    )
    assert runner.stop(timeout=30)
    assert job_states(database, job_type) == {"COMPLETED": 200}
    assert calls.paths.get("/v1/jobs/complete") is None
    flushes = calls.paths["/v1/jobs/complete-batch"]
    assert flushes <= 200 / 8, flushes  # far fewer calls than results
    done = [client.get_instance(i, include_steps=False)["status"] for i in ids]
    assert set(done) == {"COMPLETED"}
    client.close()
