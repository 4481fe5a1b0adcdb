"""Dispatch latency of the event-driven mode (``BATON_DISPATCH_MODE=outbox``): from a job's
creation (the instance start that made it) to its handler starting, through the outbox relay and
an SQS FIFO queue (moto's, locally), with the SDK's ``sqs`` transport claiming each job by id.

``measure_outbox_latency`` drives a running server that is already in outbox mode and relays to
``queue_url`` (e.g. ``baton dev`` started with ``BATON_DISPATCH_MODE=outbox``,
``BATON_DISPATCH_QUEUE_URL`` and ``BATON_SQS_ENDPOINT``); see ``tests/e2e/test_outbox_e2e.py``
for one started that way. Nothing here imports the engine: it is a client of the API only.
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

REGION = "us-east-1"


def measure_outbox_latency(
    *,
    base_url: str,
    api_key: str,
    queue_url: str,
    sqs_endpoint: str | None = None,
    jobs: int = 200,
    parallelism: int = 8,
    start_interval: float = 0.005,
    timeout: float = 120.0,
    sqs: Any = None,
) -> list[float]:
    """Start ``jobs`` one-step instances (one every ``start_interval`` seconds, so the queue never
    holds a backlog that would measure throughput instead), run an SDK worker on the ``sqs``
    transport, and return each job's latency in seconds from just before its instance start
    request to its handler's first line, in start order. Raises ``TimeoutError`` if not every
    handler ran within ``timeout`` seconds."""
    from baton_worker import BatonClient, Registry, Runner, RunnerOptions, SqsTransport

    if sqs is None:
        import boto3

        sqs = boto3.client(
            "sqs",
            endpoint_url=sqs_endpoint,
            region_name=REGION,
            aws_access_key_id="baton-bench",
            aws_secret_access_key="baton-bench",
        )
    job_type = f"outbox-latency-{uuid.uuid4().hex[:8]}"
    started_at: dict[str, float] = {}
    handled_at: dict[str, float] = {}
    lock = threading.Lock()
    all_handled = threading.Event()

    registry = Registry()

    @registry.handler(job_type)
    def handle(ctx: Any) -> dict[str, Any]:
        now = time.perf_counter()
        with lock:
            handled_at.setdefault(ctx.instance_id, now)
            if len(handled_at) >= jobs:
                all_handled.set()
        return {}

    client = BatonClient(base_url, api_key=api_key)
    client.register_definition(
        {
            "name": job_type,
            "steps": [{"id": "only", "type": "SERVICE_TASK", "jobType": job_type}],
        }
    )
    transport = SqsTransport(client, queue_url, sqs=sqs, wait_seconds=1)
    options = RunnerOptions(parallelism=parallelism, max_jobs_per_poll=10)
    runner = Runner(registry, client=client, options=options, transport=transport)
    runner.start()
    try:
        for _ in range(jobs):
            before = time.perf_counter()
            instance = client.start_instance(job_type)
            started_at[instance["id"]] = before
            time.sleep(start_interval)
        if not all_handled.wait(timeout):
            raise TimeoutError(f"{len(handled_at)} of {jobs} jobs reached their handler")
    finally:
        runner.stop(timeout=30)
        client.close()
    return [handled_at[i] - t for i, t in started_at.items()]
