"""Batch starts over HTTP against a real ``baton dev``: ``POST /v1/instances/batch`` answers each
item on its own (STARTED, EXISTING, INVALID, NOT_FOUND, CONFLICT) and starts the valid ones, which
run like any other instance."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.helpers import unique, wait_until
from tests.support.servers import CheckedServer

pytestmark = [pytest.mark.e2e]


def _post(s: CheckedServer, path: str, body: Any, status: int = 200) -> Any:
    r = s.request("POST", path, json=body)
    assert r.status_code == status, r.text
    return r.json()


def _define(s: CheckedServer, name: str) -> None:
    step = {"id": "work", "type": "SERVICE_TASK", "jobType": name}
    _post(s, "/v1/definitions", {"name": name, "steps": [step]}, 201)


def test_a_batch_answers_each_item_and_starts_only_the_valid_ones(
    baton_server: CheckedServer,
) -> None:
    s = baton_server
    name = unique("batch")
    _define(s, name)
    key = unique("key")
    before = _post(
        s, "/v1/instances", {"definitionName": name, "idempotencyKey": key, "input": {"n": 0}}, 201
    )
    items: list[Any] = [
        {"definitionName": name, "input": {"n": 1}},
        {"definitionName": name, "idempotencyKey": key, "input": {"n": 0}},  # a repeat
        {"definitionName": unique("nope")},
        {"definitionName": name, "input": "not an object"},
        {"definitionName": name, "idempotencyKey": key, "input": {"n": 9}},  # reused differently
        {"definitionName": name, "idempotencyKey": f"{key}-new", "input": {"n": 2}},
        {"definitionName": name, "idempotencyKey": f"{key}-new", "input": {"n": 2}},  # in-batch
        {"input": {"n": 3}},  # neither definitionName nor definition
        {
            "definition": {
                "name": unique("inline"),
                "steps": [{"id": "w", "type": "SERVICE_TASK", "jobType": name}],
            },
            "input": {"n": 4},
        },
    ]
    results = _post(s, "/v1/instances/batch", {"instances": items})["results"]

    assert [r["index"] for r in results] == list(range(len(items)))
    outcomes = [r["outcome"] for r in results]
    assert outcomes == [
        "STARTED",
        "EXISTING",
        "NOT_FOUND",
        "INVALID",
        "CONFLICT",
        "STARTED",
        "EXISTING",
        "INVALID",
        "STARTED",
    ]
    assert results[1]["instance"]["id"] == before["id"]
    assert results[6]["instance"]["id"] == results[5]["instance"]["id"]
    assert results[2]["problem"]["status"] == 404
    assert results[3]["problem"]["status"] == 422
    assert "instances[3].input" in results[3]["error"]
    assert results[4]["problem"]["status"] == 409
    assert results[7]["problem"]["status"] == 422
    for r in results:
        assert ("instance" in r) == (r["outcome"] in ("STARTED", "EXISTING"))
        assert ("problem" in r) != ("instance" in r)
    started = [r["instance"] for r in results if r["outcome"] == "STARTED"]
    assert [i["input"] for i in started] == [{"n": 1}, {"n": 2}, {"n": 4}]
    assert all(i["status"] == "RUNNING" and "steps" not in i for i in started)

    # The started instances run: one job each for the workers, then COMPLETED.
    want = {i["id"] for i in started}
    jobs: list[dict[str, Any]] = []

    def polled() -> bool:
        jobs.extend(
            _post(s, "/v1/jobs/poll", {"workerId": "w", "jobTypes": [name], "maxJobs": 10})["jobs"]
        )
        return {j["instanceId"] for j in jobs} >= want

    wait_until(polled, timeout=10, what="the batch's jobs")
    for j in jobs:
        _post(s, "/v1/jobs/complete", {"jobId": j["id"], "workerId": "w", "variablesToSet": {}})
    for iid in want:
        assert s.request("GET", f"/v1/instances/{iid}").json()["status"] == "COMPLETED"


def test_a_batch_over_the_item_limit_is_refused_whole_saying_what_to_do(
    baton_server: CheckedServer,
) -> None:
    s = baton_server
    name = unique("batch-limit")
    _define(s, name)
    too_many = {"instances": [{"definitionName": name}] * 101}
    problem = _post(s, "/v1/instances/batch", too_many, 422)
    assert problem["status"] == 422 and "100" in str(problem)
    assert _post(s, "/v1/instances/batch", {"instances": []}, 422)["status"] == 422
    assert _post(s, "/v1/instances/batch", [{"definitionName": name}], 422)["status"] == 422
    found = s.request("GET", "/v1/instances", params={"definitionName": name}).json()
    assert found["instances"] == []


def test_a_batch_of_a_hundred_starts_them_all(baton_server: CheckedServer) -> None:
    s = baton_server
    name = unique("batch-full")
    _define(s, name)
    items = [{"definitionName": name, "input": {"n": n}} for n in range(100)]
    results = _post(s, "/v1/instances/batch", {"instances": items})["results"]
    assert [r["outcome"] for r in results] == ["STARTED"] * 100
    assert [r["instance"]["input"]["n"] for r in results] == list(range(100))
    assert len({r["instance"]["id"] for r in results}) == 100
