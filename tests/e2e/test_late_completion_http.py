"""A late completion over HTTP against a real ``baton dev``: a worker whose lease lapsed completes
anyway, after another worker took the job again (by poll, or by id as in the outbox mode); its
work counts once, and the other worker's results are repeats, its heartbeat a 409."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.helpers import unique, wait_until
from tests.support.servers import CheckedServer

pytestmark = [pytest.mark.e2e]


def _post(s: CheckedServer, path: str, body: dict[str, Any], status: int = 200) -> Any:
    r = s.request("POST", path, json=body)
    assert r.status_code == status, r.text
    return r.json()


def _one_step(s: CheckedServer, name: str) -> str:
    step = {"id": "work", "type": "SERVICE_TASK", "jobType": name}
    step |= {"responseTimeoutSeconds": 1, "retryCount": 3}
    _post(s, "/v1/definitions", {"name": name, "steps": [step]}, 201)
    started = _post(s, "/v1/instances", {"definitionName": name}, 201)
    return str(started["id"])


def _poll(s: CheckedServer, worker: str, job_type: str) -> list[dict[str, Any]]:
    jobs: list[dict[str, Any]] = _post(
        s, "/v1/jobs/poll", {"workerId": worker, "jobTypes": [job_type]}
    )["jobs"]
    return jobs


@pytest.mark.parametrize("retaken", ["poll", "claim-by-id"])
def test_a_late_completion_counts_once_and_supersedes_the_next_attempt(
    baton_server: CheckedServer, retaken: str
) -> None:
    s = baton_server
    name = unique("late")
    iid = _one_step(s, name)
    (first,) = wait_until(lambda: _poll(s, "slow", name), timeout=10, what="the first claim")
    jid = first["id"]
    if retaken == "poll":  # the poll takes the lapsed lease as attempt 2
        (second,) = wait_until(lambda: _poll(s, "fast", name), timeout=10, what="a reclaim")
    else:  # the sweeper re-queues it as attempt 2; a worker claims it by id
        wait_until(
            lambda: s.request("GET", f"/v1/instances/{iid}").json()["steps"][0]["attempt"] == 2,
            timeout=10,
            what="the sweeper to re-queue the lapsed lease",
        )
        second = _post(s, f"/v1/jobs/{jid}/claim", {"workerId": "fast", "attempt": 2})
    assert (second["id"], second["attempt"]) == (jid, 2)

    done = {"jobId": jid, "workerId": "slow", "attempt": 1, "variablesToSet": {"by": "slow"}}
    assert _post(s, "/v1/jobs/complete", done) == {
        "jobId": jid,
        "status": "COMPLETED",
        "applied": True,
    }
    assert _post(s, "/v1/jobs/complete", done)["applied"] is False  # re-sent: a repeat
    # The superseded attempt: its heartbeat is refused so it can stop, its results are repeats.
    beat = s.request("POST", "/v1/jobs/heartbeat", json={"jobId": jid, "workerId": "fast"})
    assert beat.status_code == 409 and "COMPLETED" in beat.json()["detail"]
    mine = {"jobId": jid, "workerId": "fast", "attempt": 2}
    assert _post(s, "/v1/jobs/complete", mine | {"variablesToSet": {"by": "fast"}}) == {
        "jobId": jid,
        "status": "COMPLETED",
        "applied": False,
    }
    failed = _post(s, "/v1/jobs/fail", mine | {"errorMessage": "gave up"})
    assert failed == {"jobId": jid, "status": "COMPLETED", "applied": False}
    batch = _post(
        s,
        "/v1/jobs/complete-batch",
        {
            "results": [
                mine | {"variablesToSet": {"by": "fast"}},
                mine | {"failure": {"errorMessage": "gave up"}},
            ]
        },
    )["results"]
    assert [(a["outcome"], a["status"]) for a in batch] == [("DUPLICATE", "COMPLETED")] * 2
    instance = s.request("GET", f"/v1/instances/{iid}").json()
    assert instance["status"] == "COMPLETED" and instance["variables"] == {"by": "slow"}
    events = s.request("GET", f"/v1/instances/{iid}/history").json()["events"]
    assert [e["type"] for e in events].count("JOB_COMPLETED") == 1
    (completed,) = [e for e in events if e["type"] == "JOB_COMPLETED"]
    assert (completed["attempt"], completed["workerId"]) == (1, "slow")


def test_a_late_failure_and_a_result_for_a_cancelled_job_are_refused(
    baton_server: CheckedServer,
) -> None:
    s = baton_server
    name = unique("late-refused")
    iid = _one_step(s, name)
    (first,) = wait_until(lambda: _poll(s, "slow", name), timeout=10, what="the first claim")
    wait_until(lambda: _poll(s, "fast", name), timeout=10, what="a reclaim")
    late_fail = {"jobId": first["id"], "workerId": "slow", "attempt": 1, "errorMessage": "x"}
    r = s.request("POST", "/v1/jobs/fail", json=late_fail)
    assert r.status_code == 409 and "lease lapsed" in r.json()["detail"]
    _post(s, f"/v1/instances/{iid}/cancel", {})
    done = {"jobId": first["id"], "workerId": "slow", "attempt": 1}
    r = s.request("POST", "/v1/jobs/complete", json=done)
    assert r.status_code == 409 and "CANCELLED" in r.json()["detail"]
    assert s.request("GET", f"/v1/instances/{iid}").json()["status"] == "CANCELLED"
