"""The worker SDK offloads and fetches payloads transparently, against ``baton dev`` and its
in-process S3: a handler gets its full input and returns its full output as if nothing were
offloaded, and the polls stay small."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from baton_worker import BatonClient, JobContext, Registry, RetryPolicy, Runner, RunnerOptions

from tests.support.helpers import unique, wait_until
from tests.support.servers import CheckedServer

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("e2e")]

QUICK = RetryPolicy(initial_interval=0.05, maximum_interval=0.2, maximum_attempts=None)


@pytest.fixture
def client(baton_server: CheckedServer) -> Iterator[BatonClient]:
    with BatonClient(baton_server.base_url, api_key=baton_server.api_key) as c:
        yield c


@pytest.fixture
def runners() -> Iterator[Callable[..., Runner]]:
    made: list[Runner] = []

    def make(registry: Registry, **kwargs: Any) -> Runner:
        runner = Runner(registry, **kwargs)
        made.append(runner)
        return runner

    yield make
    for runner in made:
        assert runner.stop(timeout=30), "a runner did not drain within 30 s"


def test_large_outputs_and_inputs_round_trip_through_s3(
    client: BatonClient, runners: Callable[..., Runner]
) -> None:
    make, use, name = unique("make"), unique("use"), unique("payloads")
    client.register_definition(
        {
            "name": name,
            "steps": [
                {"id": "make", "type": "SERVICE_TASK", "jobType": make},
                {
                    "id": "use",
                    "type": "SERVICE_TASK",
                    "jobType": use,
                    "input": {
                        "picked": "${make.output.picked}",
                        "items": "${workflow.input.items}",
                    },
                },
            ],
        }
    )
    items = [f"item-{i:07d}" for i in range(50_000)]  # ~750 KB: above the 256 KB soft limit
    blob = "z" * 8_000_000  # 8 MB: beyond the inline cap and a Lambda response
    seen: dict[str, Any] = {}
    registry = Registry()

    @registry.handler(make)
    def produce(ctx: JobContext) -> dict[str, Any]:
        return {"picked": "needle", "blob": blob}

    @registry.handler(use)
    def consume(ctx: JobContext) -> dict[str, Any]:
        seen["offloaded"] = ctx.input_payload_path
        seen["input"] = ctx.input
        return {"count": len(ctx.input["items"])}

    options = RunnerOptions(poll_interval=0.05, max_poll_interval=0.2, poll_errors=QUICK)
    runners(registry, client=client, options=options).start()
    instance = client.start_instance(name, input={"items": items})

    def finished() -> dict[str, Any] | None:
        got = dict(client.get_instance(instance["id"]))
        return got if got["status"] in ("COMPLETED", "FAILED") else None

    done = wait_until(finished, timeout=60)
    assert done["status"] == "COMPLETED", done
    assert done["variables"] == {"count": 50_000}
    assert seen["offloaded"] and seen["offloaded"].startswith("payloads/step-input/")
    assert seen["input"] == {"picked": "needle", "items": items}
    make_step = next(s for s in done["steps"] if s["stepId"] == "make")
    assert make_step["output"]["$payload"].startswith("payloads/step-output/")
    assert make_step["output"]["sizeBytes"] > 8_000_000
    assert make_step["output"]["downloadUrl"].startswith("http")
    # The paged steps (what the viewer reads for big runs) carry the same download URL.
    paged = client.list_steps(instance["id"])["steps"]
    (make_paged,) = [s for s in paged if s["stepId"] == "make"]
    assert make_paged["output"]["$payload"] == make_step["output"]["$payload"]
    assert make_paged["output"]["downloadUrl"].startswith("http")


def test_a_large_workflow_input_is_uploaded_by_start_instance(
    client: BatonClient, runners: Callable[..., Runner]
) -> None:
    job, name = unique("echo"), unique("big-start")
    client.register_definition(
        {
            "name": name,
            "steps": [
                {
                    "id": "echo",
                    "type": "SERVICE_TASK",
                    "jobType": job,
                    "input": {"last": "${workflow.input.rows[99999]}"},
                }
            ],
        }
    )
    rows = [
        {"n": i, "text": "r" * 20} for i in range(100_000)
    ]  # ~3.4 MB: above the 2 MB inline cap
    registry = Registry()

    @registry.handler(job)
    def echo(ctx: JobContext) -> dict[str, Any]:
        return {"last": ctx.input["last"]}

    options = RunnerOptions(poll_interval=0.05, max_poll_interval=0.2, poll_errors=QUICK)
    runners(registry, client=client, options=options).start()
    instance = client.start_instance(name, input={"rows": rows})
    assert instance["input"]["$payload"].startswith("payloads/workflow-input/")

    def finished() -> dict[str, Any] | None:
        got = dict(client.get_instance(instance["id"]))
        return got if got["status"] in ("COMPLETED", "FAILED") else None

    done = wait_until(finished, timeout=60)
    assert done["status"] == "COMPLETED", done
    assert done["variables"] == {"last": {"n": 99_999, "text": "r" * 20}}


def test_an_output_above_the_hard_limit_fails_the_step_naming_the_limit(
    client: BatonClient, runners: Callable[..., Runner]
) -> None:
    job, name = unique("huge"), unique("too-big")
    client.register_definition(
        {"name": name, "steps": [{"id": "huge", "type": "SERVICE_TASK", "jobType": job}]}
    )
    registry = Registry()

    @registry.handler(job)
    def huge(ctx: JobContext) -> dict[str, Any]:
        return {"blob": "h" * 60_000_000}  # 60 MB: above the 50 MB hard limit

    options = RunnerOptions(poll_interval=0.05, max_poll_interval=0.2, poll_errors=QUICK)
    runners(registry, client=client, options=options).start()
    instance = client.start_instance(name)

    def finished() -> dict[str, Any] | None:
        got = dict(client.get_instance(instance["id"]))
        return got if got["status"] in ("COMPLETED", "FAILED") else None

    done = wait_until(finished, timeout=60)
    assert done["status"] == "FAILED", done
    (step,) = done["steps"]
    assert "52428800" in step["error"], step
    assert "60000011 bytes" in step["error"], step
