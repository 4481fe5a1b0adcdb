"""Schedules over HTTP against a real ``baton dev``: a schedule every 2 seconds starts instances
(fired by the duty loop, the sweeper) that a worker completes; the API's errors are problem+json."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.helpers import unique, wait_until
from tests.support.servers import CheckedServer

pytestmark = [pytest.mark.e2e]


def _work(s: CheckedServer, job_type: str) -> int:
    r = s.request(
        "POST",
        "/v1/jobs/poll",
        json={"workerId": "sched-worker", "jobTypes": [job_type], "maxJobs": 10, "waitSeconds": 1},
    )
    assert r.status_code == 200, r.text
    jobs: list[dict[str, Any]] = r.json()["jobs"]
    for job in jobs:
        done = s.request(
            "POST",
            "/v1/jobs/complete",
            json={"jobId": job["id"], "workerId": "sched-worker", "variablesToSet": {"ok": True}},
        )
        assert done.status_code == 200, done.text
    return len(jobs)


def test_a_schedule_every_two_seconds_starts_instances_a_worker_completes(
    baton_server: CheckedServer,
) -> None:
    s = baton_server
    name, job_type, sid = unique("nightly"), unique("nightly-job"), unique("every2s")
    r = s.request(
        "POST",
        "/v1/definitions",
        json={
            "name": name,
            "steps": [
                {
                    "id": "work",
                    "type": "SERVICE_TASK",
                    "jobType": job_type,
                    "input": {"slot": "${workflow.input.slot}"},
                }
            ],
        },
    )
    assert r.status_code == 201, r.text
    r = s.request(
        "POST",
        "/v1/schedules",
        json={
            "id": sid,
            "definitionName": name,
            "input": {"slot": "${schedule.time}", "schedule": "${schedule.id}"},
            "spec": {"interval": {"everySeconds": 2}},
            "overlapPolicy": "ALLOW_ALL",
        },
    )
    assert r.status_code == 201, r.text
    assert len(r.json()["nextFireTimes"]) == 10

    def completed() -> list[dict[str, Any]]:
        _work(s, job_type)
        found = s.request("GET", "/v1/instances", params={"definitionName": name, "limit": 100})
        assert found.status_code == 200, found.text
        return [i for i in found.json()["instances"] if i["status"] == "COMPLETED"]

    wait_until(
        lambda: len(completed()) >= 3, timeout=60, interval=0.2, what="three scheduled runs done"
    )
    r = s.request("POST", f"/v1/schedules/{sid}/pause", json={"note": "enough"})
    assert r.status_code == 200 and r.json()["paused"] is True, r.text
    view = s.request("GET", f"/v1/schedules/{sid}").json()
    started = [a for a in view["recentActions"] if a["outcome"] == "STARTED"]
    assert len(started) >= 3
    for action in started:
        inst = s.request("GET", f"/v1/instances/{action['instanceId']}").json()
        assert inst["correlationId"] == f"schedule:{sid}:{action['slotTime']}"
        assert inst["input"] == {"slot": action["slotTime"], "schedule": sid}
    # Slots are two seconds apart, aligned to the epoch.
    seconds = sorted(int(a["slotTime"][17:19]) for a in started)
    assert all(x % 2 == 0 for x in seconds)

    r = s.request("POST", f"/v1/schedules/{sid}/trigger")
    assert r.status_code == 202, r.text
    wait_until(
        lambda: any(
            a["kind"] == "TRIGGER" and a["outcome"] == "STARTED"
            for a in s.request("GET", f"/v1/schedules/{sid}").json()["recentActions"]
        ),
        timeout=30,
        what="the triggered slot fired while paused",
    )
    assert s.request("DELETE", f"/v1/schedules/{sid}").json() == {"id": sid, "deleted": True}


def test_schedule_errors_are_problems(baton_server: CheckedServer) -> None:
    s = baton_server
    r = s.request(
        "POST",
        "/v1/schedules",
        json={"definitionName": "x", "spec": {"cron": ["* * *"], "timeZone": "Nowhere/City"}},
    )
    assert r.status_code == 422, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    paths = {e["path"] for e in r.json()["errors"]}
    assert paths == {"spec.cron[0]", "spec.timeZone"}
    missing = unique("nope")
    r = s.request("GET", f"/v1/schedules/{missing}")
    assert r.status_code == 404 and "schedule" in r.json()["detail"], r.text
    r = s.request("POST", f"/v1/schedules/{missing}/backfill", json={"from": "x"})
    assert r.status_code == 422, r.text
    assert {e["path"] for e in r.json()["errors"]} == {"from", "to"}
    r = s.request("POST", "/v1/schedules", json=[1])
    assert r.status_code == 422, r.text
    # A dry run answers 200 with the next fire times and creates nothing.
    sid = unique("dry")
    body = {"id": sid, "definitionName": "x", "spec": {"cron": ["30 6 * * *"]}, "dryRun": True}
    r = s.request("POST", "/v1/schedules", json=body)
    assert r.status_code == 200, r.text
    assert [t[10:] for t in r.json()["nextFireTimes"]] == ["T06:30:00Z"] * 10
    assert s.request("GET", f"/v1/schedules/{sid}").status_code == 404
