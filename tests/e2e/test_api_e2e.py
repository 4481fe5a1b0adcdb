"""The REST API end to end: ``baton dev`` on the real functions, driven over real HTTP."""

from __future__ import annotations

import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from tests.support.helpers import unique
from tests.support.helpers import wait_until as wait_for
from tests.support.servers import CheckedServer

pytestmark = [pytest.mark.e2e]


def test_readme_walkthrough(baton_server: CheckedServer) -> None:
    s = baton_server
    name = unique("order-fulfilment")
    definition = {
        "name": name,
        "steps": [
            {
                "id": "charge",
                "type": "SERVICE_TASK",
                "jobType": f"{name}-charge",
                "input": {"amount": "${workflow.input.amount}"},
                "retryCount": 2,
                "retryDelaySeconds": 1,
            },
            {
                "id": "ship",
                "type": "SERVICE_TASK",
                "jobType": f"{name}-ship",
                "input": {
                    "receipt": "${charge.output.receipt}",
                    "address": "${workflow.input.address}",
                },
            },
            {"id": "confirm", "type": "USER_TASK"},
        ],
        "outputParameters": {
            "receipt": "${charge.output.receipt}",
            "tracking": "${ship.output.tracking}",
        },
    }
    r = s.request("POST", "/v1/definitions", json=definition)
    assert r.status_code == 201 and r.json()["version"] == 1
    r = s.request(
        "POST",
        "/v1/instances",
        json={"definitionName": name, "input": {"amount": 42, "address": "1 Main St"}},
    )
    assert r.status_code == 201
    instance_id = r.json()["id"]

    jobs = s.request(
        "POST", "/v1/jobs/poll", json={"workerId": "w1", "jobTypes": [f"{name}-charge"]}
    ).json()["jobs"]
    assert jobs[0]["input"] == {"amount": 42}
    r = s.request(
        "POST",
        "/v1/jobs/complete",
        json={"jobId": jobs[0]["id"], "workerId": "w1", "variablesToSet": {"receipt": "R-1001"}},
    )
    assert r.json() == {"jobId": jobs[0]["id"], "status": "COMPLETED", "applied": True}

    jobs = s.request(
        "POST", "/v1/jobs/poll", json={"worker_id": "w1", "job_types": [f"{name}-ship"]}
    ).json()["jobs"]
    assert jobs[0]["input"] == {"receipt": "R-1001", "address": "1 Main St"}
    s.request(
        "POST",
        "/v1/jobs/complete",
        json={"jobId": jobs[0]["id"], "workerId": "w1", "variablesToSet": {"tracking": "TRK-77"}},
    )

    r = s.request(
        "POST",
        f"/v1/instances/{instance_id}/user-tasks/confirm/complete",
        json={"variablesToSet": {"confirmedBy": "ada"}},
    )
    assert r.status_code == 200
    final = s.request("GET", f"/v1/instances/{instance_id}").json()
    assert final["status"] == "COMPLETED"
    assert final["output"] == {"receipt": "R-1001", "tracking": "TRK-77"}
    assert [st["stepId"] for st in final["steps"]] == ["charge", "ship", "confirm"]
    assert all(st["status"] == "COMPLETED" for st in final["steps"])


def test_readme_second_walkthrough_branches_fan_out_and_a_timer(
    baton_server: CheckedServer,
) -> None:
    s = baton_server
    name = unique("order-routing")
    charge, pick, ship = f"{name}-charge", f"{name}-pick", f"{name}-ship"
    definition = {
        "name": name,
        "steps": [
            {
                "id": "route",
                "type": "SWITCH",
                "cases": [
                    {
                        "condition": "workflow.input.total > 100",
                        "steps": [{"id": "review", "type": "USER_TASK"}],
                    }
                ],
                "default": [
                    {"id": "auto", "type": "SET_VARIABLE", "variables": {"reviewer": "auto"}}
                ],
            },
            {
                "id": "prepare",
                "type": "PARALLEL",
                "branches": [
                    [
                        {
                            "id": "charge",
                            "type": "SERVICE_TASK",
                            "jobType": charge,
                            "input": {"amount": "${workflow.input.total}"},
                        }
                    ],
                    [
                        {
                            "id": "pack",
                            "type": "MAP",
                            "items": "${workflow.input.items}",
                            "maxConcurrency": 5,
                            "steps": [
                                {
                                    "id": "pick",
                                    "type": "SERVICE_TASK",
                                    "jobType": pick,
                                    "input": {"sku": "${map.item}", "line": "${map.index}"},
                                }
                            ],
                        }
                    ],
                ],
            },
            {"id": "cool-off", "type": "TIMER", "duration": "PT2S"},
            {
                "id": "ship",
                "type": "SERVICE_TASK",
                "jobType": ship,
                "input": {"receipt": "${charge.output.receipt}", "picked": "${pack.output}"},
            },
        ],
        "outputParameters": {
            "receipt": "${charge.output.receipt}",
            "reviewer": "${workflow.variables.reviewer}",
        },
    }
    r = s.request("POST", "/v1/definitions", json=definition)
    assert r.status_code == 201, r.text
    r = s.request(
        "POST",
        "/v1/instances",
        json={"definitionName": name, "input": {"total": 250, "items": ["mug", "tea", "spoon"]}},
    )
    instance_id = r.json()["id"]
    r = s.request(
        "POST",
        f"/v1/instances/{instance_id}/user-tasks/review/complete",
        json={"variablesToSet": {"reviewer": "ada"}},
    )
    assert r.status_code == 200, r.text

    def done_all(job_type: str, output: dict[str, Any]) -> list[dict[str, Any]]:
        jobs: list[dict[str, Any]] = s.request(
            "POST",
            "/v1/jobs/poll",
            json={"workerId": "w1", "jobTypes": [job_type], "maxJobs": 10},
        ).json()["jobs"]
        for job in jobs:
            r = s.request(
                "POST",
                "/v1/jobs/complete",
                json={"jobId": job["id"], "workerId": "w1", "variablesToSet": output},
            )
            assert r.status_code == 200, r.text
        return jobs

    assert [j["input"] for j in done_all(charge, {"receipt": "R-2002"})] == [{"amount": 250}]
    picks = done_all(pick, {"picked": True})
    assert sorted(j["input"]["line"] for j in picks) == [0, 1, 2]
    wait_for(lambda: bool(done_all(ship, {"tracking": "TRK-88"})), timeout=10)
    final = s.request("GET", f"/v1/instances/{instance_id}").json()
    assert final["status"] == "COMPLETED"
    assert final["output"] == {"receipt": "R-2002", "reviewer": "ada"}
    by_id = {st["id"]: st for st in final["steps"]}
    (pack,) = [st for st in final["steps"] if st["stepId"] == "pack"]
    assert pack["branch"] == 1 and by_id[pack["parentStepExecutionId"]]["stepId"] == "prepare"
    assert pack["output"] == [{"picked": True}] * 3
    assert sorted(st["itemIndex"] for st in final["steps"] if st["stepId"] == "pick") == [0, 1, 2]
    (route,) = [st for st in final["steps"] if st["stepId"] == "route"]
    assert route["output"]["case"] == "0"


def test_instance_operations_over_http(baton_server: CheckedServer) -> None:
    s = baton_server
    name = unique("ops")
    job_type = f"{name}-work"
    definition = {
        "name": name,
        "steps": [{"id": "work", "type": "SERVICE_TASK", "jobType": job_type, "retryCount": 0}],
    }
    assert s.request("POST", "/v1/definitions", json=definition).status_code == 201
    instance_id = s.request("POST", "/v1/instances", json={"definitionName": name}).json()["id"]
    r = s.request("POST", f"/v1/instances/{instance_id}/pause")
    assert r.status_code == 200 and r.json()["status"] == "PAUSED"
    r = s.request("POST", f"/v1/instances/{instance_id}/resume", json={})
    assert r.json()["status"] == "RUNNING"
    _problem(s.request("POST", f"/v1/instances/{instance_id}/retry"), 409)
    _problem(s.request("POST", f"/v1/instances/{instance_id}/restart"), 409)
    _problem(s.request("POST", f"/v1/instances/{instance_id}/pause", json={"x": 1}), 422)
    (job,) = s.request(
        "POST", "/v1/jobs/poll", json={"workerId": "w", "jobTypes": [job_type]}
    ).json()["jobs"]
    s.request(
        "POST",
        "/v1/jobs/fail",
        json={"jobId": job["id"], "workerId": "w", "errorMessage": "no", "retryable": False},
    )
    r = s.request("POST", f"/v1/instances/{instance_id}/retry")
    assert r.status_code == 200 and r.json()["status"] == "RUNNING"
    s.request("POST", f"/v1/instances/{instance_id}/cancel", json={})
    r = s.request(
        "POST", f"/v1/instances/{instance_id}/restart", json={"useLatestDefinition": True}
    )
    assert r.status_code == 200, r.text
    assert (r.json()["id"], r.json()["run"]) == (instance_id, 2)


def _problem(r: httpx.Response, status: int) -> dict[str, Any]:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    body: dict[str, Any] = r.json()
    assert body["status"] == status and body["title"] and body["detail"]
    return body


def test_every_error_status_over_http(baton_server: CheckedServer) -> None:
    s = baton_server
    _problem(s.request("GET", "/v1/definitions", headers={"x-api-key": ""}), 401)
    _problem(s.request("GET", "/v1/definitions", headers={"x-api-key": "wrong"}), 403)
    _problem(
        s.request(
            "POST",
            "/v1/definitions",
            content=b"{not json",
            headers={"content-type": "application/json"},
        ),
        400,
    )
    body = _problem(
        s.request(
            "POST",
            "/v1/definitions",
            json={
                "name": "x",
                "steps": [{"id": "a", "type": "SERVICE_TASK"}, {"id": "a", "type": "USER_TASK"}],
            },
        ),
        422,
    )
    assert {e["path"] for e in body["errors"]} == {"steps[0].jobType", "steps[1].id"}
    _problem(s.request("GET", "/v1/instances/6d0c3f0e-0000-4000-8000-000000000000"), 404)
    _problem(s.request("GET", "/v1/no/such/route"), 404)
    _problem(s.request("DELETE", "/v1/definitions"), 405)
    name = unique("dup")
    s.request(
        "POST",
        "/v1/definitions",
        json={"name": name, "version": 1, "steps": [{"id": "u", "type": "USER_TASK"}]},
    )
    _problem(
        s.request(
            "POST",
            "/v1/definitions",
            json={"name": name, "version": 1, "steps": [{"id": "u", "type": "USER_TASK"}]},
        ),
        409,
    )
    _problem(
        s.request(
            "POST",
            "/v1/instances",
            content=b"x" * (11 * 1024 * 1024),
            headers={"content-type": "application/json"},
        ),
        413,
    )
    big_input = {"blob": "x" * 2_500_000}
    _problem(
        s.request("POST", "/v1/instances", json={"definitionName": name, "input": big_input}), 413
    )
    # Bad input lost nothing: the definition is still there and usable.
    r = s.request("POST", "/v1/instances", json={"definitionName": name})
    assert r.status_code == 201


def test_concurrent_pollers_over_http_never_share_a_live_job(baton_server: CheckedServer) -> None:
    s = baton_server
    name = unique("par")
    job_type = f"{name}-job"
    s.request(
        "POST",
        "/v1/definitions",
        json={
            "name": name,
            # A lease far longer than the test: no lease lapses however loaded the machine is.
            "steps": [
                {
                    "id": "s",
                    "type": "SERVICE_TASK",
                    "jobType": job_type,
                    "responseTimeoutSeconds": 600,
                }
            ],
        },
    )
    n = 120
    with ThreadPoolExecutor(8) as pool:
        codes = list(
            pool.map(
                lambda _: (
                    s.request("POST", "/v1/instances", json={"definitionName": name}).status_code
                ),
                range(n),
            )
        )
    assert Counter(codes) == {201: n}
    claimed: list[str] = []
    lock = threading.Lock()

    def poller(k: int) -> None:
        client = httpx.Client(base_url=s.base_url, headers={"x-api-key": s.api_key}, timeout=30)
        empty = 0
        while empty < 3:
            jobs = client.post(
                "/v1/jobs/poll", json={"workerId": f"w{k}", "jobTypes": [job_type], "maxJobs": 5}
            ).json()["jobs"]
            if not jobs:
                empty += 1
                continue
            with lock:
                claimed.extend(j["id"] for j in jobs)
            for j in jobs:
                r = client.post("/v1/jobs/complete", json={"jobId": j["id"], "workerId": f"w{k}"})
                assert r.status_code == 200 and r.json()["applied"]
        client.close()

    with ThreadPoolExecutor(6) as pool:
        list(pool.map(poller, range(6)))
    assert len(claimed) == n and len(set(claimed)) == n
    page = s.request("GET", f"/v1/instances?definitionName={name}&status=COMPLETED&limit=100")
    first = page.json()
    rest = s.request(
        "GET",
        f"/v1/instances?definitionName={name}&status=COMPLETED&limit=100"
        f"&pageToken={first['nextPageToken']}",
    ).json()
    assert len(first["instances"]) + len(rest["instances"]) == n


def test_openapi_document_is_served(baton_server: CheckedServer) -> None:
    doc = baton_server.request("GET", "/v1/openapi.json").json()
    assert doc["openapi"].startswith("3.") and "/v1/jobs/poll" in doc["paths"]


@pytest.mark.parametrize("headers", [{}, {"x-api-key": "wrong"}], ids=["no key", "wrong key"])
def test_health_and_the_contract_are_public_and_nothing_else_is(
    baton_server: CheckedServer, headers: dict[str, str]
) -> None:
    url = baton_server.base_url
    health = httpx.get(url + "/v1/health", headers=headers)
    assert health.status_code == 200, health.text
    report = health.json()
    assert report["status"] == "ok"
    assert report["database"]["status"] == "ok"
    assert report["s3"]["status"] == "ok" and report["s3"]["bucket"] == "baton-payloads"
    doc = httpx.get(url + "/v1/openapi.json", headers=headers)
    assert doc.status_code == 200 and doc.json()["paths"]["/v1/health"]["get"]["security"] == []
    refused = 403 if headers else 401
    for path in ("/v1/definitions", "/v1/instances", "/v1/taskdefs"):
        _problem(httpx.get(url + path, headers=headers), refused)
    # A public path with a method the table does not declare is still behind the key.
    _problem(httpx.post(url + "/v1/health", headers=headers), refused)


def test_queue_trigger_e2e_priority_order_and_dead_letter(baton_server: CheckedServer) -> None:
    """Three tasks of different priorities; the worker fails one of them every time. The other
    two complete in priority order; the failing one ends dead after its retries."""
    s = baton_server
    queue = unique("reports")
    job_type = f"{queue}-handle"
    for title, priority in [("low", 1), ("poison", 5), ("high", 9)]:
        r = s.request(
            "POST",
            f"/v1/queues/{queue}/push",
            json={"title": title, "body": "{}", "priority": priority},
        )
        assert r.status_code == 201 and r.json()["status"] == "pending"
    r = s.request(
        "POST",
        "/v1/definitions",
        json={
            "name": queue,
            "steps": [
                {
                    "id": "handle",
                    "type": "SERVICE_TASK",
                    "jobType": job_type,
                    "retryCount": 0,
                    "input": {"title": "${workflow.input.title}"},
                }
            ],
            "trigger": {
                "type": "queue",
                "queueName": queue,
                "pollIntervalSecs": 1,
                "maxRetries": 2,
            },
        },
    )
    assert r.status_code == 201
    order: list[str] = []
    import time

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        stats = s.request("GET", f"/v1/queues/{queue}/stats").json()
        if stats["completed"] + stats["dead"] == 3:
            break
        jobs = s.request(
            "POST", "/v1/jobs/poll", json={"workerId": "w", "jobTypes": [job_type]}
        ).json()["jobs"]
        for j in jobs:
            title = j["input"]["title"]
            order.append(title)
            if title == "poison":
                s.request(
                    "POST",
                    "/v1/jobs/fail",
                    json={
                        "jobId": j["id"],
                        "workerId": "w",
                        "errorMessage": "cannot parse",
                        "retryable": True,
                    },
                )
            else:
                s.request("POST", "/v1/jobs/complete", json={"jobId": j["id"], "workerId": "w"})
        if not jobs:
            time.sleep(0.05)
    stats = s.request("GET", f"/v1/queues/{queue}/stats").json()
    assert stats == {"pending": 0, "processing": 0, "completed": 2, "failed": 0, "dead": 1}
    done = [t for t in order if t != "poison"]
    assert done == ["high", "low"]
    assert order.count("poison") == 2
    assert s.request("GET", f"/v1/queues/{queue}/peek").json() == {"tasks": []}
