"""Retention and archive over HTTP against a real ``baton dev`` (its local S3 and sweeper), with
``BATON_RETENTION_SECONDS=1``: an ended run leaves the database for the archive, and it still
reads back (view, payloads, steps, history, search) with ``archived: true``; changing it is a
409 problem, deleting it removes it. Every JSON answer must parse into its proto message."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from baton import settings

from tests.support.helpers import unique, wait_until
from tests.support.servers import CheckedServer

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("e2e")]

BIG_INPUT = json.dumps({"blob": "x" * 300_000}).encode()  # above the soft limit: offloaded


@pytest.fixture
def server(tmp_path: Path, e2e_database_url: str | None) -> Iterator[CheckedServer]:
    if e2e_database_url:
        pytest.skip("archives every ended run of its database (this run shares DATABASE_URL)")
    s = CheckedServer(
        data_dir=tmp_path / "data",
        functions_dir=None,
        log_path=tmp_path / "server.log",
        extra_env={settings.ENV_RETENTION_SECONDS: "1"},
    ).start()
    yield s
    assert s.stop() == 0, s.output()


def _ok(r: httpx.Response, status: int = 200) -> Any:
    assert r.status_code == status, r.text
    return r.json()


def _pages(s: CheckedServer, path: str, key: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    token = ""
    while True:
        page = _ok(s.request("GET", f"{path}?limit=2" + (f"&pageToken={token}" if token else "")))
        assert page.get("archived") in (None, True)
        items.extend(page[key])
        token = page.get("nextPageToken") or ""
        if not token:
            return items


def test_an_ended_run_is_archived_and_still_reads_back(server: CheckedServer) -> None:
    s = server
    name, job_type = unique("archived-flow"), unique("archived-job")
    _ok(
        s.request(
            "POST",
            "/v1/definitions",
            json={
                "name": name,
                "steps": [
                    {"id": "a", "type": "SERVICE_TASK", "jobType": job_type},
                    {"id": "b", "type": "SET_VARIABLE", "variables": {"done": True}},
                ],
            },
        ),
        201,
    )
    grant = _ok(
        s.request(
            "POST", "/v1/payloads", json={"kind": "WORKFLOW_INPUT", "sizeBytes": len(BIG_INPUT)}
        ),
        201,
    )
    put = httpx.put(grant["uploadUrl"], content=BIG_INPUT, headers=grant["uploadHeaders"])
    assert put.status_code == 200, put.text
    started = _ok(
        s.request(
            "POST",
            "/v1/instances",
            json={"definitionName": name, "inputPayloadPath": grant["path"], "correlationId": "k"},
        ),
        201,
    )
    iid = started["id"]
    jobs = _ok(
        s.request(
            "POST",
            "/v1/jobs/poll",
            json={"workerId": "w", "jobTypes": [job_type], "maxJobs": 1, "waitSeconds": 5},
        )
    )["jobs"]
    _ok(
        s.request(
            "POST",
            "/v1/jobs/complete",
            json={"jobId": jobs[0]["id"], "workerId": "w", "variablesToSet": {"ok": 1}},
        )
    )

    got = wait_until(
        lambda: (r := s.request("GET", f"/v1/instances/{iid}").json()).get("archived") and r,
        timeout=60,
        what="the run archived by the sweeper",
    )

    assert got["status"] == "COMPLETED" and got["variables"]["done"] is True
    assert [st["stepId"] for st in got["steps"]] == ["a", "b"]
    # Its input moved under the archive, and is served from there.
    assert got["input"]["$payload"].startswith(f"archive/payloads/{iid}/")
    assert httpx.get(got["input"]["downloadUrl"]).content == BIG_INPUT
    resolved = _ok(s.request("GET", f"/v1/instances/{iid}?resolvePayloads=true"))
    assert resolved["input"] == json.loads(BIG_INPUT)
    history = _pages(s, f"/v1/instances/{iid}/history", "events")
    assert {"JOB_COMPLETED", "INSTANCE_COMPLETED"} <= {e["type"] for e in history}
    assert [st["stepId"] for st in _pages(s, f"/v1/instances/{iid}/steps", "steps")] == ["a", "b"]
    found = _ok(s.request("GET", f"/v1/instances?archived=true&definitionName={name}"))
    assert [i["id"] for i in found["instances"]] == [iid]
    assert found["instances"][0]["archived"] is True
    ended = got["completedAt"]
    empty = s.request(
        "GET", "/v1/instances", params={"archived": "true", "from": ended, "to": ended}
    )
    assert empty.status_code == 422 and "must be later than from" in empty.text  # to is exclusive
    from baton_worker import BatonClient

    with BatonClient(s.base_url, api_key=s.api_key) as client:  # the SDK's search
        page = client.search_instances(archived=True, definition_name=name)
        assert [i["id"] for i in page["instances"]] == [iid] and page["instances"][0]["archived"]
        assert client.search_instances(archived=True, ended_to=ended)["instances"] == []
    assert _ok(s.request("GET", f"/v1/instances?definitionName={name}"))["instances"] == []

    for action, body in (("retry", {}), ("restart", {}), ("cancel", {}), ("pause", {})):
        r = s.request("POST", f"/v1/instances/{iid}/{action}", json=body)
        assert r.status_code == 409, (action, r.text)
        assert r.headers["content-type"].startswith("application/problem+json")
        assert "is archived" in r.json()["detail"]

    bad = s.request("GET", "/v1/instances", params={"archived": "true", "from": "yesterday"})
    assert bad.status_code in (400, 422) and "from" in bad.text
    assert s.request("GET", "/v1/instances", params={"from": ended}).status_code in (400, 422)

    deleted = _ok(s.request("DELETE", f"/v1/instances/{iid}"))
    assert deleted["archived"] is True and deleted["historyEvents"] == len(history)
    assert s.request("GET", f"/v1/instances/{iid}").status_code == 404
    assert httpx.get(got["input"]["downloadUrl"]).status_code == 404
