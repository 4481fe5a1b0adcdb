"""The event-driven dispatch mode end to end: ``baton dev`` with BATON_DISPATCH_MODE=outbox
relaying to an SQS FIFO queue on a moto server, SDK workers on the ``sqs`` transport claiming each
job by id and completing it over the same REST API; a duplicate delivery is harmless."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from baton_worker import BatonClient, Registry, Runner, RunnerOptions, SqsTransport

from tests.support.helpers import unique, wait_until
from tests.support.servers import LocalServer
from tests.support.sqs import REGION, fifo_queue, moto_endpoint, sqs_client

__all__ = ["moto_endpoint"]  # the fixture, used by name

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("e2e")]
ROOT = Path(__file__).resolve().parents[2]


def _outbox_server(
    tmp_path: Path, moto_endpoint: str, database_url: str | None, queue: str, **env: str
) -> LocalServer:
    """``baton dev`` in the outbox mode, relaying to ``queue`` on the moto server."""
    return LocalServer(
        data_dir=tmp_path / "data",
        functions_dir=None,
        log_path=tmp_path / "server.log",
        database_url=database_url,
        extra_env={
            "BATON_DISPATCH_MODE": "outbox",
            "BATON_DISPATCH_QUEUE_URL": queue,
            "BATON_SQS_ENDPOINT": moto_endpoint,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            **env,
        },
    ).start()


@pytest.fixture
def outbox_server(
    tmp_path: Path, moto_endpoint: str, e2e_database_url: str | None
) -> Iterator[tuple[LocalServer, str]]:
    queue = fifo_queue(moto_endpoint)
    server = _outbox_server(tmp_path, moto_endpoint, e2e_database_url, queue)
    yield server, queue
    code = server.stop()
    assert code == 0, server.output()


def test_outbox_mode_end_to_end_over_sqs_with_duplicates_harmless(
    outbox_server: tuple[LocalServer, str], moto_endpoint: str
) -> None:
    server, queue = outbox_server
    sqs = sqs_client(moto_endpoint)
    job_type = unique("outbox")
    runs: Counter[str] = Counter()
    lock = threading.Lock()
    registry = Registry()

    @registry.handler(job_type)
    def handle(ctx: Any) -> dict[str, Any]:
        with lock:
            runs[ctx.job_id] += 1
        return {"doubled": ctx.input["n"] * 2}

    client = BatonClient(server.base_url, api_key=server.api_key)
    client.register_definition(
        {
            "name": job_type,
            "steps": [
                {
                    "id": "work",
                    "type": "SERVICE_TASK",
                    "jobType": job_type,
                    "input": {"n": "${workflow.input.n}"},
                }
            ],
        }
    )
    transport = SqsTransport(client, queue, sqs=sqs, wait_seconds=1)
    options = RunnerOptions(parallelism=4, poll_interval=0.05, max_poll_interval=0.2)
    n = 30
    with Runner(registry, client=client, options=options, transport=transport):
        ids = [client.start_instance(job_type, input={"n": k})["id"] for k in range(n)]

        def finished() -> bool:
            return all(client.get_instance(i)["status"] == "COMPLETED" for i in ids)

        wait_until(finished, timeout=60, interval=0.2, what="every instance completed over SQS")
        # A delivery the broker repeats after its deduplication window (simulated: a new
        # deduplication id) reaches the worker, whose claim is refused and the message dropped.
        job_id = client.get_instance(ids[0])["steps"][0]["jobId"]
        replay = {"jobId": job_id, "instanceId": ids[0], "jobType": job_type, "attempt": 1}
        sqs.send_message(
            QueueUrl=queue,
            MessageBody=json.dumps(replay),
            MessageGroupId=ids[0],
            MessageDeduplicationId="replay-after-window",
        )
        wait_until(lambda: transport.duplicates >= 1, timeout=20, what="the replay refused")
    assert len(runs) == n and set(runs.values()) == {1}  # each job ran exactly once
    outputs = sorted(client.get_instance(i)["output"]["doubled"] for i in ids)
    assert outputs == [2 * k for k in range(n)]
    client.close()


def test_baton_dev_relays_on_a_timer_of_its_own_in_outbox_mode(
    tmp_path: Path, moto_endpoint: str, e2e_database_url: str | None
) -> None:
    # The other duties tick every 30 s here: a job reaches the queue well before that only if
    # the relay runs on its own (100 ms) timer.
    queue = fifo_queue(moto_endpoint)
    server = _outbox_server(
        tmp_path, moto_endpoint, e2e_database_url, queue, BATON_TICK_SECONDS="30"
    )
    try:
        client = BatonClient(server.base_url, api_key=server.api_key)
        job_type = unique("fast-relay")
        client.register_definition(
            {"name": job_type, "steps": [{"id": "s", "type": "SERVICE_TASK", "jobType": job_type}]}
        )
        client.start_instance(job_type)
        sqs = sqs_client(moto_endpoint)

        def delivered() -> bool:
            got = sqs.receive_message(QueueUrl=queue, WaitTimeSeconds=1).get("Messages", [])
            return any(json.loads(m["Body"])["jobType"] == job_type for m in got)

        wait_until(delivered, timeout=10, interval=0.1, what="the job on the queue")
        client.close()
    finally:
        assert server.stop() == 0, server.output()


WORKER = """
from baton_worker import Registry

registry = Registry()


@registry.handler("{job_type}")
def double(ctx):
    return {{"doubled": ctx.input["n"] * 2}}
"""


def test_baton_worker_run_finds_baton_devs_own_queue_with_no_aws_configuration(
    tmp_path: Path, e2e_database_url: str | None
) -> None:
    # As a user runs it: `BATON_DISPATCH_MODE=outbox make dev`, then `baton worker run
    # --transport sqs` told only where the server is (no queue URL, endpoint or credentials).
    server = LocalServer(
        data_dir=tmp_path / "data",
        functions_dir=None,
        log_path=tmp_path / "server.log",
        database_url=e2e_database_url,
        api_key=None,  # generated and kept in the data directory, where the worker finds it
        extra_env={"BATON_DISPATCH_MODE": "outbox"},
    ).start()
    job_type = unique("dev-queue")
    (tmp_path / "dev_queue_worker.py").write_text(WORKER.format(job_type=job_type))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "BATON_"))}
    env.update(BATON_URL=server.base_url, BATON_DATA_DIR=str(tmp_path / "data"))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tmp_path), env.get("PYTHONPATH")]))
    cmd = [sys.executable, "-m", "baton_worker.cli", "worker", "run", "dev_queue_worker:registry"]
    cmd += ["--transport", "sqs", "--worker-id", "sqs-cli"]
    log_path = tmp_path / "worker.log"
    with log_path.open("wb") as log:
        worker = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        kept = json.loads((tmp_path / "data" / "dispatch-queue.json").read_text())
        assert kept["mode"] == "outbox" and kept["queueUrl"] in server.log()
        assert "dispatch   outbox: relay every 0.1 s -> SQS FIFO" in server.log()
        assert "scheduled  reaper, sweeper, queue_dispatcher every" in server.log()
        client = BatonClient(server.base_url, api_key=server.api_key)
        step = {"id": "s", "type": "SERVICE_TASK", "jobType": job_type}
        step["input"] = {"n": "${workflow.input.n}"}
        client.register_definition({"name": job_type, "steps": [step]})
        started = client.start_instance(job_type, input={"n": 21})

        def finished() -> dict[str, Any] | None:
            assert worker.poll() is None, log_path.read_text()
            doc = client.get_instance(started["id"])
            return dict(doc) if doc["status"] != "RUNNING" else None

        done = wait_until(finished, timeout=30, interval=0.1, what="the instance over SQS")
        assert done["status"] == "COMPLETED", done
        assert done["variables"]["doubled"] == 42 and done["steps"][0]["workerId"] == "sqs-cli"
        assert "receiving jobs from " + kept["queueUrl"] in log_path.read_text()
        client.close()
    finally:
        worker.send_signal(signal.SIGINT)
        try:
            assert worker.wait(20) == 0, log_path.read_text()
        finally:
            if worker.poll() is None:
                worker.kill()
            assert server.stop() == 0, server.output()
