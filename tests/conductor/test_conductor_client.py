"""conductor-python 2.0.0, unmodified and unpatched, against ``baton dev``: its metadata client
registers Conductor JSON, its workflow client starts, reads and terminates workflows, and its
TaskHandler runs function workers in subprocesses (one failing once and retried, one raising a
non-retryable exception). Every wait is on a condition with a deadline."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
from conductor.client.http.api_client import ApiClient
from conductor.client.http.models.start_workflow_request import StartWorkflowRequest
from conductor.client.http.models.task_def import TaskDef
from conductor.client.http.models.workflow_def import WorkflowDef
from conductor.client.orkes_clients import OrkesClients

from tests.support.helpers import wait_until
from tests.support.servers import ROOT, LocalServer

pytestmark = [pytest.mark.e2e]
TERMINAL = {"COMPLETED", "FAILED", "TIMED_OUT", "TERMINATED"}


def _model(data: dict[str, Any], klass: str) -> Any:
    return ApiClient().deserialize_class(data, klass)


def _pipeline(prefix: str) -> dict[str, Any]:
    return {
        "name": f"{prefix}_pipeline",
        "version": 1,
        "schemaVersion": 2,
        "ownerEmail": "team@example.com",
        "tasks": [
            {
                "name": f"{prefix}_greet",
                "taskReferenceName": "greet",
                "type": "SIMPLE",
                "inputParameters": {"name": "${workflow.input.name}"},
            },
            {
                "name": f"{prefix}_flaky",
                "taskReferenceName": "flaky",
                "type": "SIMPLE",
                "inputParameters": {"wid": "${workflow.workflowId}"},
            },
            {
                "name": "route",
                "taskReferenceName": "route",
                "type": "SWITCH",
                "evaluatorType": "value-param",
                "expression": "kind",
                "inputParameters": {"kind": "${workflow.input.kind}"},
                "decisionCases": {
                    "doomed": [
                        {
                            "name": f"{prefix}_doomed",
                            "taskReferenceName": "doomed",
                            "type": "SIMPLE",
                            "inputParameters": {"name": "${workflow.input.name}"},
                        }
                    ]
                },
                "defaultCase": [],
            },
        ],
        "outputParameters": {
            "greeting": "${greet.output.greeting}",
            "attempts": "${flaky.output.attempts}",
        },
    }


def _fork(prefix: str) -> dict[str, Any]:
    def greet(ref: str, who: str) -> dict[str, Any]:
        return {
            "name": f"{prefix}_greet",
            "taskReferenceName": ref,
            "type": "SIMPLE",
            "inputParameters": {"name": who},
        }

    return {
        "name": f"{prefix}_fork",
        "version": 1,
        "tasks": [
            {
                "name": "fan_out",
                "taskReferenceName": "fan_out",
                "type": "FORK_JOIN",
                "forkTasks": [[greet("left", "ada")], [greet("right", "grace")]],
            },
            {
                "name": "fan_in",
                "taskReferenceName": "fan_in",
                "type": "JOIN",
                "joinOn": ["left", "right"],
            },
            {
                "name": "js_switch",
                "taskReferenceName": "js_switch",
                "type": "SWITCH",
                "evaluatorType": "javascript",
                "expression": "$.n > 3",
                "inputParameters": {"n": "${workflow.input.n}"},
                "decisionCases": {
                    "true": [greet("big", "big")],
                    "false": [greet("small", "small")],
                },
            },
        ],
        "outputParameters": {"left": "${left.output.greeting}"},
    }


def _wait_terminal(clients: OrkesClients, ids: list[str], timeout: float = 120.0) -> dict[str, Any]:
    wf_client = clients.get_workflow_client()
    done: dict[str, Any] = {}

    def probe() -> bool:
        for wid in ids:
            if wid in done:
                continue
            wf = wf_client.get_workflow(wid, include_tasks=True)
            assert wf is not None, f"the client could not read workflow {wid}"
            if wf.status in TERMINAL:
                done[wid] = wf
        return len(done) == len(ids)

    wait_until(probe, timeout=timeout, interval=0.25, what="workflows to end")
    return done


def test_token_refuses_a_wrong_secret_with_403_not_404(conductor_server: LocalServer) -> None:
    r = httpx.post(
        f"{conductor_server.base_url}/api/token", json={"keyId": "x", "keySecret": "wrong"}
    )
    assert r.status_code == 403
    assert r.json()["message"]
    r = httpx.get(f"{conductor_server.base_url}/api/metadata/taskdefs")
    assert r.status_code == 401
    r = httpx.get(
        f"{conductor_server.base_url}/api/metadata/taskdefs",
        headers={"X-Authorization": "bct1.1.bad"},
    )
    assert r.status_code == 401
    assert r.json()["error"] == "INVALID_TOKEN"
    r = httpx.get(
        f"{conductor_server.base_url}/api/metadata/taskdefs",
        headers={"x-api-key": conductor_server.api_key or ""},
    )
    assert r.status_code == 200


def test_twenty_workflows_with_workers_retries_and_terminal_errors(
    clients: OrkesClients,
    prefix: str,
    workers: subprocess.Popen[bytes],
) -> None:
    meta = clients.get_metadata_client()
    for task, retries in (("greet", 0), ("flaky", 2), ("doomed", 3)):
        meta.register_task_def(
            TaskDef(
                name=f"{prefix}_{task}",
                retry_count=retries,
                retry_delay_seconds=0,
                timeout_seconds=0,
                response_timeout_seconds=60,
                owner_email="team@example.com",
            )
        )
    assert meta.get_task_def(f"{prefix}_flaky").retry_count == 2
    meta.register_workflow_def(_model(_pipeline(prefix), "WorkflowDef"), overwrite=True)
    stored = meta.get_workflow_def(f"{prefix}_pipeline", version=1)
    assert isinstance(stored, WorkflowDef)
    assert [t.task_reference_name for t in stored.tasks] == ["greet", "flaky", "route"]

    wf_client = clients.get_workflow_client()
    ids = []
    for n in range(20):
        kind = "doomed" if n % 10 == 0 else "fine"
        request = StartWorkflowRequest(
            name=f"{prefix}_pipeline",
            version=1,
            input={"name": f"user{n}", "kind": kind},
            correlation_id=f"{prefix}-{n}",
        )
        ids.append(wf_client.start_workflow(request))
    assert all(isinstance(i, str) and len(i) == 36 for i in ids)

    done = _wait_terminal(clients, ids)
    for n, wid in enumerate(ids):
        wf = done[wid]
        by_ref: dict[str, list[Any]] = {}
        for t in wf.tasks:
            by_ref.setdefault(t.reference_task_name, []).append(t)
        flaky = by_ref["flaky"]
        assert [(t.status, t.retry_count) for t in flaky] == [("FAILED", 0), ("COMPLETED", 1)]
        assert flaky[0].task_id != flaky[1].task_id
        assert "transient failure" in (flaky[0].reason_for_incompletion or "")
        if n % 10 == 0:
            assert wf.status == "FAILED", wf.reason_for_incompletion
            doomed = by_ref["doomed"]
            assert [t.status for t in doomed] == ["FAILED_WITH_TERMINAL_ERROR"]
            assert f"user{n} cannot be processed" in (wf.reason_for_incompletion or "")
        else:
            assert wf.status == "COMPLETED", wf.reason_for_incompletion
            assert wf.output == {"greeting": f"hello user{n}", "attempts": 2}
            assert "doomed" not in by_ref


def test_fork_join_and_a_javascript_switch_in_conductor_json(
    clients: OrkesClients, prefix: str, workers: subprocess.Popen[bytes]
) -> None:
    meta = clients.get_metadata_client()
    meta.update_workflow_def(_model(_fork(prefix), "WorkflowDef"), overwrite=True)
    wf_client = clients.get_workflow_client()
    big = wf_client.start_workflow(StartWorkflowRequest(name=f"{prefix}_fork", input={"n": 5}))
    small = wf_client.start_workflow(StartWorkflowRequest(name=f"{prefix}_fork", input={"n": 1}))
    done = _wait_terminal(clients, [big, small])
    for wid, branch in ((big, "big"), (small, "small")):
        wf = done[wid]
        assert wf.status == "COMPLETED", wf.reason_for_incompletion
        refs = {t.reference_task_name: t for t in wf.tasks}
        assert refs["left"].output_data == {"greeting": "hello ada"}
        assert refs["right"].output_data == {"greeting": "hello grace"}
        assert branch in refs
        assert ({"big", "small"} - {branch}).isdisjoint(refs)
        assert refs["fan_out"].task_type == "FORK"
        assert wf.output == {"left": "hello ada"}


def test_terminate_cancels_open_tasks(clients: OrkesClients, prefix: str) -> None:
    meta = clients.get_metadata_client()
    waiting = {
        "name": f"{prefix}_waiting",
        "version": 1,
        "tasks": [
            {
                "name": f"{prefix}_nobody_polls",
                "taskReferenceName": "stuck",
                "type": "SIMPLE",
            }
        ],
    }
    meta.register_workflow_def(_model(waiting, "WorkflowDef"), overwrite=True)
    wf_client = clients.get_workflow_client()
    wid = wf_client.start_workflow_by_name(f"{prefix}_waiting", {"x": 1}, version=1)
    assert wf_client.get_workflow(wid, include_tasks=True).status == "RUNNING"
    wf_client.terminate_workflow(wid, reason="no longer needed")
    wf = wf_client.get_workflow(wid, include_tasks=True)
    assert wf.status == "TERMINATED"
    assert wf.reason_for_incompletion == "no longer needed"
    assert [t.status for t in wf.tasks] == ["CANCELED"]


def test_untranslatable_definitions_are_refused_with_400_naming_the_task(
    clients: OrkesClients, prefix: str
) -> None:
    from conductor.client.http.rest import ApiException

    meta = clients.get_metadata_client()
    bad = {
        "name": f"{prefix}_bad",
        "version": 1,
        "tasks": [
            {
                "name": "call",
                "taskReferenceName": "call_api",
                "type": "KAFKA_PUBLISH",
                "inputParameters": {"kafka_request": {"topic": "orders", "value": "x"}},
            }
        ],
    }
    with pytest.raises(ApiException) as e:
        meta.register_workflow_def(_model(bad, "WorkflowDef"), overwrite=True)
    assert e.value.status == 400
    assert "call_api" in str(e.value.body)
    assert "KAFKA_PUBLISH" in str(e.value.body)


def test_the_marker_dir_is_not_left_in_the_repository() -> None:
    assert not any(Path(ROOT).glob("*.flaky"))
