"""Conductor's workflow search as its UI and clients query it: conditions joined by AND on the
fields Conductor's index has (``=``, ``IN (…)``, ``>``/``<`` on times, ``*`` in a value), its
``sort``, paging, and what a malformed query answers."""

from __future__ import annotations

import time
import uuid
from typing import Any

import httpx
import pytest

from tests.support.helpers import wait_until

pytestmark = [pytest.mark.e2e]


def _register(api: httpx.Client, name: str) -> None:
    task = {"name": f"{name}_t", "taskReferenceName": "t", "type": "SIMPLE"}
    body = [{"name": name, "version": 1, "tasks": [task], "schemaVersion": 2}]
    assert api.put("/metadata/workflow", json=body).status_code == 200


def _search(api: httpx.Client, query: str, **params: Any) -> list[str]:
    answer = api.get("/workflow/search", params={"query": query, **params})
    assert answer.status_code == 200, answer.text
    return [r["workflowId"] for r in answer.json()["results"]]


def test_conditions_sort_and_wildcards(api: httpx.Client) -> None:
    tag = uuid.uuid4().hex[:8]
    a, b = f"srch_a_{tag}", f"srch_b_{tag}"
    _register(api, a)
    _register(api, b)
    before = int(time.time() * 1000) - 1
    ids = {}
    for name, corr in ((a, "x1"), (a, "x2"), (b, "y1")):
        answer = api.post(f"/workflow/{name}", params={"correlationId": corr}, json={})
        ids[corr] = answer.text
    api.delete(f"/workflow/{ids['x2']}", params={"reason": "stop"})
    wait_until(
        lambda: api.get(f"/workflow/{ids['x2']}").json()["status"] == "TERMINATED",
        timeout=10,
        what="the terminated workflow",
    )

    both = f"workflowType IN ({a},{b})"
    assert sorted(_search(api, both)) == sorted(ids.values())
    assert _search(api, f"{both} AND status IN (RUNNING)", sort="startTime:ASC") == [
        ids["x1"],
        ids["y1"],
    ]
    assert _search(api, f"{both} AND status = TERMINATED") == [ids["x2"]]
    assert _search(
        api, f'workflowType = "{a}" AND correlationId IN (x1,x2)', sort="startTime:DESC"
    ) == [
        ids["x2"],
        ids["x1"],
    ]
    assert sorted(_search(api, f"workflowType = srch_*_{tag}")) == sorted(ids.values())
    assert _search(api, f"workflowId = {ids['y1']}") == [ids["y1"]]
    assert _search(api, f"{both} AND workflowId IN ({ids['y1']},not-an-id)") == [ids["y1"]]
    assert _search(api, "workflowId = not-an-id") == []
    assert sorted(_search(api, f"{both} AND startTime > {before}")) == sorted(ids.values())
    assert _search(api, f"{both} AND startTime < {before}") == []
    # paging over a sort
    first = _search(api, both, sort="workflowType:DESC", size=1)
    assert first == [ids["y1"]]


@pytest.mark.parametrize(
    ("params", "says"),
    [
        ({"query": "nosuchfield = 1"}, "unknown field"),
        ({"query": "status = SLEEPING"}, "unknown status"),
        ({"query": "status > RUNNING"}, "takes = or IN"),
        ({"query": "startTime > yesterday"}, "epoch milliseconds"),
        ({"query": "workflowType ~ x"}, "not a condition"),
        ({"query": "workflowType IN ()"}, "has no value"),
        ({"sort": "nope:ASC"}, "sort by one of"),
        ({"sort": "startTime:SIDEWAYS"}, "sort by one of"),
        ({"size": "101"}, "size"),
    ],
)
def test_a_malformed_search_is_a_400_saying_why(
    api: httpx.Client, params: dict[str, str], says: str
) -> None:
    answer = api.get("/workflow/search", params=params)
    assert answer.status_code == 400, answer.text
    assert says in answer.text
