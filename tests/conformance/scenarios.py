"""The conformance scenarios, run once per language by ``test_<language>.py``.

Each language's worker (``workers/<language>/run``, see README.md) serves the same table of
handlers; these scenarios drive it through one ``baton dev`` and check what the engine recorded:
how every instance ended, how many attempts each job took, and the audit log, normalised to what
does not depend on the SDK (event types and attempts, not times, ids or worker names).
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import pytest
from baton_worker import BatonClient

from tests.support.helpers import wait_until
from tests.support.servers import CheckedServer

WORKERS = Path(__file__).resolve().parent / "workers"
ROOT = Path(__file__).resolve().parents[2]
READY_SECONDS = 180.0  # a cold JVM or a first `go build` on a busy 2-core machine
FINISH_SECONDS = 60.0
BIG = 300_000  # above the server's 256 KiB soft limit

# Audit events of one job attempt, as every SDK must leave them.
START = [("INSTANCE_STARTED", None), ("JOB_CREATED", None)]


def ran(attempt: int, outcome: str) -> list[tuple[str, int | None]]:
    return [("JOB_DISPATCHED", attempt), (outcome, attempt)]


RETRY_2 = [("JOB_RETRY_SCHEDULED", 2)]


@dataclass
class Worker:
    """One conformance worker process of one language."""

    language: str
    process: subprocess.Popen[str]
    worker_id: str
    stderr_path: Path
    lines: list[str] = field(default_factory=list)
    signalled: set[int] = field(default_factory=set)

    def _read(self, stdout: IO[str]) -> None:
        for line in stdout:
            self.lines.append(line.strip())

    def wait_for_line(self, text: str, timeout: float) -> None:
        def seen() -> bool:
            if text in self.lines:
                return True
            if self.process.poll() is not None:
                raise AssertionError(
                    f"{self.language} worker exited with {self.process.returncode} before "
                    f"{text}:\n{self.log()}"
                )
            return False

        wait_until(seen, timeout=timeout, interval=0.05, what=f"{self.language} worker's {text}")

    def log(self) -> str:
        return self.stderr_path.read_text(errors="replace")[-4000:]

    def stop(self, sig: int = signal.SIGTERM, timeout: float = FINISH_SECONDS) -> int:
        """Send ``sig`` (once: a second SIGTERM may mean "exit now"), wait for the exit."""
        if self.process.poll() is None and sig not in self.signalled:
            self.signalled.add(sig)
            self.process.send_signal(sig)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError(f"{self.language} worker did not stop:\n{self.log()}") from None


@dataclass
class Conformance:
    """What a scenario needs: the server, a client, the job-type prefix, worker factory."""

    language: str
    server: CheckedServer
    client: BatonClient
    prefix: str
    tmp_path: Path
    workers: list[Worker] = field(default_factory=list)
    protocol: str = "rest"  # the workers' wire: rest, or connect (BATON_PROTOCOL)

    def worker(self, name: str = "w") -> Worker:
        run = WORKERS / self.language / "run"
        if not run.exists():
            pytest.fail(f"no conformance worker for {self.language}: {run} is missing")
        worker_id = f"{self.language}-{name}-{uuid.uuid4().hex[:6]}"
        env = {
            **os.environ,
            "BATON_URL": self.server.base_url,
            "BATON_API_KEY": self.server.api_key or "",
            "CONFORMANCE_WORKER_ID": worker_id,
            "CONFORMANCE_JOB_PREFIX": self.prefix,
            "CONFORMANCE_PARALLELISM": "4",
            "BATON_PROTOCOL": self.protocol,
        }
        stderr_path = self.tmp_path / f"{worker_id}.log"
        process = subprocess.Popen(
            [str(run)],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=stderr_path.open("w"),
            text=True,
        )
        worker = Worker(self.language, process, worker_id, stderr_path)
        assert process.stdout is not None
        threading.Thread(target=worker._read, args=(process.stdout,), daemon=True).start()
        self.workers.append(worker)
        worker.wait_for_line("READY", READY_SECONDS)
        return worker

    def define(self, handler: str, **step: Any) -> str:
        """A one-step definition whose job runs ``handler``; its name."""
        name = f"{self.prefix}{handler}"
        job = {"id": "only", "type": "SERVICE_TASK", "jobType": name, "input": "${workflow.input}"}
        job.update(step)
        self.client.register_definition({"name": name, "steps": [job]})
        return name

    def start(self, definition: str, input: dict[str, Any] | None = None) -> str:
        return str(self.client.start_instance(definition, input=input or {})["id"])

    def finished(self, instance_id: str, timeout: float = FINISH_SECONDS) -> dict[str, Any]:
        def ended() -> dict[str, Any] | None:
            instance = dict(self.client.get_instance(instance_id))
            return instance if instance["status"] not in ("RUNNING", "PAUSED") else None

        return wait_until(ended, timeout=timeout, interval=0.1, what=f"instance {instance_id}")

    def history(self, instance_id: str) -> list[tuple[str, int | None]]:
        return [(e["type"], e.get("attempt")) for e in self.client.iter_history(instance_id)]

    def step(self, instance_id: str) -> dict[str, Any]:
        return dict(self.client.get_instance(instance_id)["steps"][0])

    def stop_signalled(self, worker: Worker) -> bool:
        with self.server.connect_database() as conn:
            row = conn.execute(
                "SELECT 1 FROM worker_stop WHERE worker_id = %s", (worker.worker_id,)
            ).fetchone()
        return row is not None

    def dispatched(self, instance_id: str) -> dict[str, Any] | None:
        step = self.step(instance_id)
        return step if step["status"] == "IN_PROGRESS" and step.get("workerId") else None


@pytest.fixture
def conformance(
    request: pytest.FixtureRequest, baton_server: CheckedServer, tmp_path: Path
) -> Iterator[Conformance]:
    language = request.module.LANGUAGE
    client = BatonClient(baton_server.base_url, api_key=baton_server.api_key)
    prefix = f"conf-{language[:2]}-{uuid.uuid4().hex[:6]}-"
    protocol = getattr(request.module, "PROTOCOL", "rest")
    c = Conformance(language, baton_server, client, prefix, tmp_path, protocol=protocol)
    yield c
    for worker in c.workers:
        if worker.process.poll() is None:
            worker.process.kill()
            worker.process.wait()
    client.close()


def test_every_handler_ends_its_instance_as_the_table_says(conformance: Conformance) -> None:
    c = conformance
    worker = c.worker()
    names = {
        "echo": c.define("echo"),
        "fail-once": c.define("fail-once", retryCount=2, retryDelaySeconds=0),
        "non-retryable": c.define("non-retryable", retryCount=3, retryDelaySeconds=0),
        "fail-with-output": c.define("fail-with-output", retryCount=3, retryDelaySeconds=0),
        # The step would wait 60 s before its retry; the handler asks for 1 s.
        "retry-delay": c.define("retry-delay", retryCount=1, retryDelaySeconds=60),
        "job-info": c.define("job-info", retryCount=0),
        # A lease of 2 s, a handler of 5 s: only heartbeats keep the job on one attempt.
        "heartbeat": c.define("heartbeat", responseTimeoutSeconds=2, retryCount=0),
        "big-output": c.define("big-output", retryCount=0),
        "big-input": c.define("big-input", retryCount=0),
        "bad-output": c.define("bad-output", retryCount=3, retryDelaySeconds=0),
    }
    ids = {
        "echo": c.start(names["echo"], {"n": 7, "nested": {"s": "é✓"}}),
        "fail-once": c.start(names["fail-once"]),
        "non-retryable": c.start(names["non-retryable"]),
        "fail-with-output": c.start(names["fail-with-output"], {"k": "v"}),
        "retry-delay": c.start(names["retry-delay"], {"delaySeconds": 1}),
        "job-info": c.start(names["job-info"]),
        "heartbeat": c.start(names["heartbeat"], {"sleepSeconds": 5}),
        "big-output": c.start(names["big-output"], {"bytes": BIG}),
        "big-input": c.start(names["big-input"], {"blob": "y" * BIG}),
        "bad-output": c.start(names["bad-output"]),
    }
    done = {name: c.finished(instance_id) for name, instance_id in ids.items()}
    statuses = {name: instance["status"] for name, instance in done.items()}
    assert statuses == {
        "echo": "COMPLETED",
        "fail-once": "COMPLETED",
        "non-retryable": "FAILED",
        "fail-with-output": "FAILED",
        "retry-delay": "COMPLETED",
        "job-info": "COMPLETED",
        "heartbeat": "COMPLETED",
        "big-output": "COMPLETED",
        "big-input": "COMPLETED",
        "bad-output": "FAILED",
    }, worker.log()

    assert done["echo"]["output"] == {"echoed": {"n": 7, "nested": {"s": "é✓"}}}
    assert done["fail-once"]["output"] == {"attempt": 2}
    assert done["retry-delay"]["output"] == {"attempt": 2}
    info = done["job-info"]["output"]
    step = c.step(ids["job-info"])
    assert info == {
        "jobId": step["jobId"],
        "instanceId": ids["job-info"],
        "stepId": "only",
        "jobType": names["job-info"],
        "attempt": 1,
        "retriesRemaining": 0,
    }
    assert done["heartbeat"]["output"] == {"slept": 5}
    assert done["big-input"]["output"] == {"length": BIG}
    offloaded = c.step(ids["big-output"])["output"]
    assert offloaded.get("$payload"), "a big output is offloaded, not sent inline"
    assert c.client.download_payload(offloaded["downloadUrl"]) == {"blob": "x" * BIG}

    failed = c.step(ids["non-retryable"])
    assert "non-retryable: refused" in (failed.get("error") or "")
    assert failed["attempts"] == 1
    with_output = c.step(ids["fail-with-output"])
    assert "fail-with-output: refused" in (with_output.get("error") or "")
    assert with_output["attempts"] == 1
    assert with_output["output"] == {"code": 42, "input": {"k": "v"}}, "a failure's output is kept"
    bad = c.step(ids["bad-output"])
    assert bad["attempts"] == 1, "an output the server cannot store is not retried"
    assert bad.get("error"), "the failure says why"

    expected = {
        "echo": START + ran(1, "JOB_COMPLETED") + [("INSTANCE_COMPLETED", None)],
        "fail-once": START
        + ran(1, "JOB_FAILED")
        + RETRY_2
        + ran(2, "JOB_COMPLETED")
        + [("INSTANCE_COMPLETED", None)],
        "non-retryable": START + ran(1, "JOB_FAILED") + [("INSTANCE_FAILED", None)],
        "fail-with-output": START + ran(1, "JOB_FAILED") + [("INSTANCE_FAILED", None)],
        "heartbeat": START + ran(1, "JOB_COMPLETED") + [("INSTANCE_COMPLETED", None)],
        "bad-output": START + ran(1, "JOB_FAILED") + [("INSTANCE_FAILED", None)],
    }
    for name, events in expected.items():
        assert c.history(ids[name]) == events, name

    # The handler's own retry delay (1 s) replaced the step's (60 s).
    events = list(c.client.iter_history(ids["retry-delay"]))
    scheduled = next(e for e in events if e["type"] == "JOB_RETRY_SCHEDULED")
    assert scheduled["detail"]["delaySeconds"] == 1


def test_sigterm_finishes_the_running_handler_and_claims_nothing_more(
    conformance: Conformance,
) -> None:
    c = conformance
    slow, echo = c.define("slow", retryCount=0), c.define("echo", retryCount=0)
    worker = c.worker()
    running = c.start(slow, {"sleepSeconds": 3})
    wait_until(lambda: c.dispatched(running), timeout=30, what="the slow job to be claimed")
    worker.signalled.add(signal.SIGTERM)
    worker.process.send_signal(signal.SIGTERM)
    # The worker's stop signal (sent by every SDK when it stops) says the signal was handled, so
    # the job started next was made claimable after the worker had stopped claiming.
    wait_until(lambda: c.stop_signalled(worker), timeout=30, what="the worker's stop signal")
    later = c.start(echo, {"late": True})
    assert worker.stop() == 0, worker.log()
    assert "STOPPED" in worker.lines
    instance = c.finished(running, timeout=5)
    assert instance["status"] == "COMPLETED" and instance["output"] == {"slept": 3}
    assert c.step(later)["status"] == "SCHEDULED", "a stopping worker claimed a new job"
    assert c.history(later) == START
    second = c.worker("second")
    assert c.finished(later)["status"] == "COMPLETED"
    assert second.stop() == 0


def test_a_killed_worker_loses_no_job(conformance: Conformance) -> None:
    c = conformance
    # A lapsed lease is an attempt that counts against the retries: one is left for it.
    slow = c.define("slow", responseTimeoutSeconds=2, retryCount=1, retryDelaySeconds=0)
    first = c.worker("first")
    instance_id = c.start(slow, {"sleepSeconds": 2})
    wait_until(lambda: c.dispatched(instance_id), timeout=30, what="the job to be claimed")
    first.stop(signal.SIGKILL)
    second = c.worker("second")
    done = c.finished(instance_id)
    assert done["status"] == "COMPLETED", second.log()
    step = c.step(instance_id)
    assert step["workerId"] == second.worker_id
    assert step["attempt"] == 2, "the lapsed lease is a second attempt"
    assert [t for t, _ in c.history(instance_id)].count("JOB_COMPLETED") == 1
    assert second.stop() == 0
