"""The Python SDK's conformance worker: the handler table of tests/conformance/README.md."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from typing import Any

from baton_worker import (
    BatonClient,
    JobContext,
    JobError,
    NonRetryableError,
    Registry,
    Runner,
    RunnerOptions,
)

registry = Registry()
PREFIX = os.environ.get("CONFORMANCE_JOB_PREFIX", "")


def handler(name: str) -> Any:
    return registry.handler(PREFIX + name)


@handler("echo")
def echo(ctx: JobContext) -> dict[str, Any]:
    return {"echoed": ctx.input}


@handler("fail-once")
def fail_once(ctx: JobContext) -> dict[str, Any]:
    if ctx.attempt == 1:
        raise JobError("fail-once: attempt 1")
    return {"attempt": ctx.attempt}


@handler("non-retryable")
def non_retryable(ctx: JobContext) -> dict[str, Any]:
    raise NonRetryableError("non-retryable: refused")


@handler("fail-with-output")
def fail_with_output(ctx: JobContext) -> dict[str, Any]:
    raise NonRetryableError("fail-with-output: refused", output={"code": 42, "input": ctx.input})


@handler("retry-delay")
def retry_delay(ctx: JobContext) -> dict[str, Any]:
    if ctx.attempt == 1:
        raise JobError("retry-delay: attempt 1", next_retry_delay=ctx.input["delaySeconds"])
    return {"attempt": ctx.attempt}


@handler("job-info")
def job_info(ctx: JobContext) -> dict[str, Any]:
    return {
        "jobId": ctx.job_id,
        "instanceId": ctx.instance_id,
        "stepId": ctx.step_id,
        "jobType": ctx.job_type,
        "attempt": ctx.attempt,
        "retriesRemaining": ctx.retries_remaining,
    }


def _sleep(ctx: JobContext) -> dict[str, Any]:
    seconds = ctx.input["sleepSeconds"]
    time.sleep(seconds)
    return {"slept": seconds}


handler("heartbeat")(_sleep)
handler("slow")(_sleep)


@handler("big-output")
def big_output(ctx: JobContext) -> dict[str, Any]:
    return {"blob": "x" * int(ctx.input["bytes"])}


@handler("big-input")
def big_input(ctx: JobContext) -> dict[str, Any]:
    return {"length": len(ctx.input["blob"])}


@handler("bad-output")
def bad_output(ctx: JobContext) -> dict[str, Any]:
    return {"ratio": float("nan")}


def main() -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    logging.getLogger("httpx").setLevel(logging.WARNING)  # a line per request costs CPU
    client = BatonClient(
        os.environ["BATON_URL"],
        api_key=os.environ["BATON_API_KEY"],
        protocol=os.environ.get("BATON_PROTOCOL") or "rest",
    )
    # The poll and batch sizes are the SDK's defaults unless a benchmark sets them
    # (bench/sdk_polyglot.py --python-sizes).
    defaults = RunnerOptions()
    options = RunnerOptions(
        worker_id=os.environ.get("CONFORMANCE_WORKER_ID"),
        parallelism=int(os.environ.get("CONFORMANCE_PARALLELISM", "4")),
        max_jobs_per_poll=int(
            os.environ.get("CONFORMANCE_MAX_JOBS_PER_POLL") or defaults.max_jobs_per_poll
        ),
        max_results_per_flush=int(
            os.environ.get("CONFORMANCE_MAX_RESULTS_PER_FLUSH") or defaults.max_results_per_flush
        ),
    )
    runner = Runner(registry, client=client, options=options)
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    runner.start()
    print("READY", flush=True)
    # With a timeout: Python runs a signal's handler in the main thread, and only when that
    # thread runs. The kernel may deliver SIGTERM to any of the runner's threads, and then a
    # main thread blocked in an untimed wait never wakes to run it (CI saw a worker ignore
    # SIGTERM for 30 s). Runner.run() waits the same way.
    while not stop.wait(0.2):
        pass
    runner.stop()
    print("STOPPED", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
