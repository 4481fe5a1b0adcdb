"""``baton instances pause | resume | retry | rerun | restart`` and waiting steps by execution,
against ``baton dev``; the tree of a control-flow run as ``instances get`` prints it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.sdk.test_cli import Baton, baton  # noqa: F401 (the fixture)
from tests.support.helpers import unique

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("e2e")]


def _create(baton: Baton, folder: Path, definition: dict[str, object]) -> None:  # noqa: F811
    path = folder / f"{definition['name']}.json"
    path.write_text(json.dumps(definition))
    created = baton("definitions", "create", str(path))
    assert created.code == 0, created.err


def test_pause_resume_retry_and_restart(baton: Baton, tmp_path: Path) -> None:  # noqa: F811
    name = unique("cli-ops")
    job_type = unique("cli-ops-job")
    _create(
        baton,
        tmp_path,
        {
            "name": name,
            "steps": [{"id": "work", "type": "SERVICE_TASK", "jobType": job_type}],
        },
    )
    instance = baton("instances", "start", name, "--json").json()
    paused = baton("instances", "pause", instance["id"], "--json")
    assert paused.code == 0, paused.err
    assert paused.json()["status"] == "PAUSED"
    assert re.search(r"^status: +PAUSED$", baton("instances", "get", instance["id"]).out, re.M)
    assert baton("instances", "resume", instance["id"], "--json").json()["status"] == "RUNNING"

    refused = baton("instances", "retry", instance["id"])
    assert refused.code == 1
    assert "is RUNNING, not FAILED or TIMED_OUT or CANCELLED" in refused.err

    polled = baton("jobs", "poll", "--type", job_type, "--worker", "w", "--json").json()
    (job,) = polled["jobs"] if isinstance(polled, dict) else polled
    failed = baton(
        "jobs", "fail", job["id"], "--worker", "w", "--message", "broke", "--non-retryable"
    )
    assert failed.code == 0, failed.err
    retried = baton("instances", "retry", instance["id"], "--json").json()
    assert retried["status"] == "RUNNING"
    assert [s["status"] for s in retried["steps"]] == ["FAILED", "SCHEDULED"]

    baton("instances", "cancel", instance["id"])
    restarted = baton("instances", "restart", instance["id"], "--json").json()
    assert (restarted["id"], restarted["run"], restarted["status"]) == (
        instance["id"],
        2,
        "RUNNING",
    )
    assert re.search(r"^run: +2$", baton("instances", "get", instance["id"]).out, re.M)

    # rerun from the step, with its own input and the instance's new correlation id
    baton("instances", "cancel", instance["id"])
    (step,) = baton("instances", "get", instance["id"], "--json").json()["steps"]
    again = baton(
        "instances",
        "rerun",
        instance["id"],
        step["id"],
        "--step-input",
        '{"mine": 1}',
        "--correlation-id",
        "again",
        "--json",
    )
    assert again.code == 0, again.err
    rerun = again.json()
    assert (rerun["status"], rerun["correlationId"]) == ("RUNNING", "again")
    (fresh,) = rerun["steps"]
    assert fresh["id"] != step["id"] and fresh["status"] == "SCHEDULED"
    polled = baton("jobs", "poll", "--type", job_type, "--worker", "w", "--json").json()
    (job,) = polled["jobs"] if isinstance(polled, dict) else polled
    assert job["input"] == {"mine": 1}
    running = baton("instances", "rerun", instance["id"])
    assert running.code == 1 and "only an ended instance can be" in running.err


def test_get_prints_the_tree_of_a_control_flow_run(baton: Baton, tmp_path: Path) -> None:  # noqa: F811
    name = unique("cli-tree")
    _create(
        baton,
        tmp_path,
        {
            "name": name,
            "steps": [
                {
                    "id": "fan",
                    "type": "PARALLEL",
                    "branches": [
                        [{"id": "approve", "type": "USER_TASK"}],
                        [
                            {
                                "id": "each",
                                "type": "MAP",
                                "items": "${workflow.input.xs}",
                                "steps": [{"id": "ping", "type": "SIGNAL"}],
                            }
                        ],
                    ],
                }
            ],
        },
    )
    instance = baton("instances", "start", name, "--input", '{"xs": [1, 2]}', "--json").json()
    lines = baton("instances", "get", instance["id"]).out.splitlines()
    assert any(line.startswith("fan ") for line in lines)
    assert any(line.startswith("  approve [b0] ") for line in lines)
    assert any(line.startswith("    ping [i1] ") for line in lines)

    pings = [s for s in instance["steps"] if s["stepId"] == "ping"]
    second = baton(
        "instances",
        "signal",
        instance["id"],
        "ping",
        "--payload",
        '{"n": 2}',
        "--execution",
        pings[1]["id"],
        "--json",
    ).json()
    statuses = {s["itemIndex"]: s["status"] for s in second["steps"] if s["stepId"] == "ping"}
    assert statuses == {0: "IN_PROGRESS", 1: "COMPLETED"}


def test_history_shows_every_attempt_as_a_table(baton: Baton, tmp_path: Path) -> None:  # noqa: F811
    name = unique("cli-hist")
    job_type = unique("cli-hist-job")
    _create(
        baton,
        tmp_path,
        {"name": name, "steps": [{"id": "work", "type": "SERVICE_TASK", "jobType": job_type}]},
    )
    taskdef = tmp_path / "taskdef.json"
    taskdef.write_text(json.dumps({"retryCount": 1, "retryDelaySeconds": 0}))
    assert baton("taskdefs", "put", job_type, str(taskdef)).code == 0
    instance = baton("instances", "start", name, "--json").json()
    for message in ("first error", "second error"):
        polled = baton("jobs", "poll", "--type", job_type, "--worker", "w9", "--json").json()
        (job,) = polled["jobs"] if isinstance(polled, dict) else polled
        baton("jobs", "fail", job["id"], "--worker", "w9", "--message", message)
    shown = baton("instances", "history", instance["id"])
    assert shown.code == 0, shown.err
    assert re.search(r"JOB_FAILED +work +1 +w9 +first error", shown.out), shown.out
    assert re.search(r"JOB_FAILED +work +2 +w9 +second error", shown.out), shown.out
    paged = baton("instances", "history", instance["id"], "--limit", "2", "--json").json()
    assert len(paged["events"]) == 2 and paged["nextPageToken"]
    every = baton("instances", "history", instance["id"], "--all", "--json").json()["events"]
    assert [e["type"] for e in every][:2] == ["INSTANCE_STARTED", "JOB_CREATED"]
    bare = baton("instances", "get", instance["id"], "--no-steps", "--json").json()
    assert "steps" not in bare
    steps = baton("instances", "steps", instance["id"], "--json").json()["steps"]
    assert [(s["stepId"], s["attempts"]) for s in steps] == [("work", 2)]
