"""The worker SDK offloads and fetches payloads transparently, against ``baton dev`` and its
in-process S3: a handler gets its full input and returns its full output as if nothing were
offloaded, and the polls stay small."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from baton_worker import (
    BatonApiError,
    BatonClient,
    JobContext,
    Registry,
    RetryPolicy,
    Runner,
    RunnerOptions,
)

from tests.support.helpers import unique, wait_until
from tests.support.servers import CheckedServer

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("e2e")]

QUICK = RetryPolicy(initial_interval=0.05, maximum_interval=0.2, maximum_attempts=None)


@pytest.fixture
def client(baton_server: CheckedServer) -> Iterator[BatonClient]:
    with BatonClient(baton_server.base_url, api_key=baton_server.api_key) as c:
        yield c


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


class _Sizes(httpx.HTTPTransport):
    """Records the body size of every poll response (what a Lambda would have to return)."""

    def __init__(self) -> None:
        super().__init__()
        self.polls: list[int] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        if request.url.path.endswith("/v1/jobs/poll"):
            response.read()
            self.polls.append(len(response.content))
        return response


def test_a_map_over_a_20_mb_list_and_an_instance_output_referencing_it(
    baton_server: CheckedServer, runners: Callable[..., Runner]
) -> None:
    make, item, name = unique("make-list"), unique("item"), unique("map-20mb")
    sizes = _Sizes()
    client = BatonClient(baton_server.base_url, api_key=baton_server.api_key, transport=sizes)
    client.register_definition(
        {
            "name": name,
            "steps": [
                {"id": "make", "type": "SERVICE_TASK", "jobType": make},
                {
                    "id": "each",
                    "type": "MAP",
                    "items": "${make.output.items}",
                    "maxConcurrency": 16,
                    "steps": [
                        {
                            "id": "one",
                            "type": "SERVICE_TASK",
                            "jobType": item,
                            "input": {"item": "${map.item}", "index": "${map.index}"},
                        }
                    ],
                },
            ],
            "outputParameters": {
                "items": "${make.output.items}",
                "results": "${each.output}",
                "last": "${make.output.items[999].n}",
            },
        }
    )
    # 1,000 items of ~20 KB: a 20 MB list (each item is a job's input, the whole never is).
    items = [{"n": i, "pad": f"{i:05d}é" + "ab" * 10_000} for i in range(1_000)]
    registry = Registry()

    @registry.handler(make)
    def produce(ctx: JobContext) -> dict[str, Any]:
        return {"items": items}

    @registry.handler(item)
    def one(ctx: JobContext) -> dict[str, Any]:
        got = ctx.input["item"]
        assert got == items[ctx.input["index"]]
        return {"n": got["n"], "chars": len(got["pad"])}

    options = RunnerOptions(poll_interval=0.05, max_poll_interval=0.2, poll_errors=QUICK)
    runners(registry, client=client, options=options).start()
    instance = client.start_instance(name)

    def finished() -> dict[str, Any] | None:
        got = dict(client.get_instance(instance["id"], include_steps=False))
        return got if got["status"] in ("COMPLETED", "FAILED") else None

    done = wait_until(finished, timeout=240)
    assert done["status"] == "COMPLETED", done.get("reason")
    # The instance output (20 MB of JSON) lives in S3: a path and a download URL.
    output = done["output"]
    assert output["$payload"].startswith("payloads/workflow-output/"), output
    body = httpx.get(output["downloadUrl"], timeout=60).content
    assert len(body) == output["sizeBytes"]
    got = json.loads(body)
    assert json.dumps(got["items"]) == json.dumps(items)  # byte for byte, in order
    assert got["results"] == [{"n": i, "chars": 20_006} for i in range(1_000)]
    assert got["last"] == 999
    # The MAP kept its items in S3 too: its row holds a reference, not 20 MB.
    steps = client.list_steps(instance["id"], limit=5)["steps"]
    (each,) = [s for s in steps if s["stepId"] == "each"]
    assert each["input"]["$payload"].startswith("payloads/step-input/"), each["input"]
    assert sizes.polls and max(sizes.polls) < 6_000_000, max(sizes.polls)
    client.close()


def test_a_poll_stays_under_6_mb_whatever_the_sizes(
    baton_server: CheckedServer, client: BatonClient
) -> None:
    job, name = unique("fat"), unique("fat-map")
    client.register_definition(
        {
            "name": name,
            "steps": [
                {
                    "id": "each",
                    "type": "MAP",
                    "items": "${workflow.input.items}",
                    "maxConcurrency": 40,
                    "steps": [
                        {
                            "id": "fat",
                            "type": "SERVICE_TASK",
                            "jobType": job,
                            "input": {"item": "${map.item}"},
                        }
                    ],
                },
            ],
        }
    )
    # 40 jobs whose inputs are each just under the 256 KB soft limit (inline): 10 MB in all.
    items = [f"{i:03d}" + "x" * 250_000 for i in range(40)]
    client.start_instance(name, input={"items": items})
    headers = {"x-api-key": baton_server.api_key or ""}
    seen: list[str] = []
    deadline = time.monotonic() + 60
    while len(seen) < 40 and time.monotonic() < deadline:
        r = httpx.post(
            f"{baton_server.base_url}/v1/jobs/poll",
            json={"workerId": "w", "jobTypes": [job], "maxJobs": 100},
            headers=headers,
            timeout=30,
        )
        assert r.status_code == 200, r.text
        assert len(r.content) < 6_000_000, len(r.content)
        seen += [j["input"]["item"][:3] for j in r.json()["jobs"]]
    assert sorted(seen) == [f"{i:03d}" for i in range(40)]


def test_an_idempotent_start_with_a_large_input_is_matched_by_content(
    client: BatonClient,
) -> None:
    name = unique("big-idem")
    client.register_definition(
        {"name": name, "steps": [{"id": "s", "type": "SERVICE_TASK", "jobType": unique("j")}]}
    )
    rows = [{"n": i, "text": "r" * 30} for i in range(80_000)]  # ~3.5 MB: uploaded each time
    key = unique("key")
    first = client.start_instance(name, input={"rows": rows}, idempotency_key=key)
    again = client.start_instance(name, input={"rows": rows}, idempotency_key=key)
    assert again["id"] == first["id"]
    # Same key, another input (of the very same size): a conflict, not the first instance.
    other = [{"n": i, "text": "s" * 30} for i in range(80_000)]
    with pytest.raises(BatonApiError) as refused:
        client.start_instance(name, input={"rows": other}, idempotency_key=key)
    assert refused.value.status == 409
