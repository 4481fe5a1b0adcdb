"""conductor-python 2.0.0, unmodified, against ``baton dev``: ``permissive`` tasks, with the two
permissive definitions of Conductor's own test harness (``test-harness/src/test/resources``:
``simple_workflow_with_permissive_task_integration_test.json`` and
``fork_join_permissive_integration_test.json``, task names given this run's workers). A permissive
task that fails after its retries stays FAILED, the next task runs, and the workflow fails with
Conductor's reason naming the task's last attempt; a retry of the workflow reruns that task only;
a JOIN over a failed permissive task waits for the other fork, then fails the workflow."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest
from conductor.client.http.models.start_workflow_request import StartWorkflowRequest
from conductor.client.orkes_clients import OrkesClients

from tests.conductor.test_conductor_client import _model, _wait_terminal
from tests.support.helpers import wait_until

pytestmark = [pytest.mark.e2e]

_TASK_DEF = {
    "createdBy": "integration_app",
    "retryCount": 1,
    "timeoutSeconds": 120,
    "inputKeys": [],
    "outputKeys": [],
    "timeoutPolicy": "TIME_OUT_WF",
    "retryLogic": "FIXED",
    "retryDelaySeconds": 0,
    "responseTimeoutSeconds": 3600,
    "inputTemplate": {},
    "rateLimitPerFrequency": 0,
    "rateLimitFrequencyInSeconds": 1,
}

_EXPORT = {
    "type": "SIMPLE",
    "decisionCases": {},
    "defaultCase": [],
    "forkTasks": [],
    "startDelay": 0,
    "joinOn": [],
    "optional": False,
    "defaultExclusiveJoinTask": [],
    "asyncComplete": False,
    "loopOver": [],
}


def _permissive_task_wf(prefix: str) -> dict[str, Any]:
    """simple_workflow_with_permissive_task_integration_test.json (t1 fails twice, retryably)."""
    first, second = f"{prefix}_network", f"{prefix}_greet"
    return {
        "name": f"{prefix}_permissive_task_wf",
        "description": "permissive_task_wf",
        "version": 1,
        "tasks": [
            {
                **_EXPORT,
                "name": first,
                "taskReferenceName": "t1",
                "inputParameters": {
                    "p1": "${workflow.input.param1}",
                    "p2": "${workflow.input.param2}",
                    "wid": "${workflow.workflowId}",
                },
                "permissive": True,
                "retryCount": 1,
                "taskDefinition": {**_TASK_DEF, "name": first, "description": first},
            },
            {
                **_EXPORT,
                "name": second,
                "taskReferenceName": "t2",
                "inputParameters": {"tp1": "${workflow.input.param1}", "tp2": "${t1.output.op}"},
                "permissive": True,
                "retryCount": 1,
                "taskDefinition": {**_TASK_DEF, "name": second, "description": second},
            },
        ],
        "inputParameters": ["param1", "param2"],
        "outputParameters": {
            "o1": "${workflow.input.param1}",
            "o2": "${t2.output.uuid}",
            "o3": "${t1.output.op}",
        },
        "schemaVersion": 2,
        "restartable": True,
        "workflowStatusListenerEnabled": False,
        "timeoutPolicy": "ALERT_ONLY",
        "timeoutSeconds": 0,
        "ownerEmail": "test@harness.com",
    }


def _fan_in_out_permissive(prefix: str) -> dict[str, Any]:
    """fork_join_permissive_integration_test.json (t1 fails, t2 completes, t3 never runs)."""

    def simple(name: str, ref: str, params: dict[str, Any], **extra: Any) -> dict[str, Any]:
        return {
            **_EXPORT,
            "name": name,
            "taskReferenceName": ref,
            "inputParameters": params,
            **extra,
        }

    return {
        "name": f"{prefix}_FanInOutPermissiveTest",
        "description": "FanInOutPermissiveTest",
        "version": 1,
        "tasks": [
            {
                **_EXPORT,
                "name": "fork",
                "taskReferenceName": "fanouttask",
                "inputParameters": {},
                "type": "FORK_JOIN",
                "forkTasks": [
                    [
                        simple(
                            f"{prefix}_doomed",
                            "t1",
                            {"p1": "workflow.input.param1", "p2": "workflow.input.param2"},
                            permissive=True,
                        )
                    ],
                    # Completes once t1 has ended (the harness completes it after failing t1).
                    [
                        simple(
                            f"{prefix}_after_t1",
                            "t2",
                            {"wid": "${workflow.workflowId}"},
                            permissive=True,
                        )
                    ],
                ],
            },
            {
                **_EXPORT,
                "name": "join",
                "taskReferenceName": "fanouttask_join",
                "inputParameters": {},
                "type": "JOIN",
                "joinOn": ["t1", "t2"],
            },
            simple(f"{prefix}_greet", "t3", {"p1": "workflow.input.param1"}),
        ],
        "inputParameters": ["param1", "param2"],
        "outputParameters": {},
        "schemaVersion": 2,
        "restartable": True,
        "workflowStatusListenerEnabled": False,
        "timeoutPolicy": "ALERT_ONLY",
        "timeoutSeconds": 0,
        "ownerEmail": "test@harness.com",
    }


def test_a_permissive_task_fails_the_workflow_at_its_end_and_a_retry_reruns_it_alone(
    clients: OrkesClients, prefix: str, workers: subprocess.Popen[bytes]
) -> None:
    definition = _permissive_task_wf(prefix)
    meta = clients.get_metadata_client()
    meta.register_workflow_def(_model(definition, "WorkflowDef"), overwrite=True)
    stored = meta.get_workflow_def(definition["name"], version=1)
    assert [t.permissive for t in stored.tasks] == [True, True]

    wf_client = clients.get_workflow_client()
    wid = wf_client.start_workflow(
        StartWorkflowRequest(
            name=definition["name"], input={"param1": "p1 value", "param2": "p2 value"}
        )
    )
    wf = _wait_terminal(clients, [wid])[wid]
    assert wf.status == "FAILED"
    by_ref: dict[str, list[Any]] = {}
    for t in wf.tasks:
        by_ref.setdefault(t.reference_task_name, []).append(t)
    assert [(t.status, t.retry_count) for t in by_ref["t1"]] == [("FAILED", 0), ("FAILED", 1)]
    assert [t.reason_for_incompletion for t in by_ref["t1"]] == ["NETWORK ERROR"] * 2
    assert [t.status for t in by_ref["t2"]] == ["COMPLETED"]
    # Conductor's reason, naming the permissive task's last attempt (as its harness asserts).
    last = by_ref["t1"][-1]
    assert wf.reason_for_incompletion == (
        f"Task {last.task_id} failed with status: FAILED and reason: 'NETWORK ERROR'"
    )

    # A retry reruns t1 only (its third attempt succeeds); t2 is not run again.
    wf_client.retry_workflow(wid)
    wait_until(
        lambda: wf_client.get_workflow(wid, include_tasks=False).status != "FAILED",
        timeout=30,
        what="the retried workflow to run",
    )
    wf = _wait_terminal(clients, [wid])[wid]
    assert wf.status == "COMPLETED", wf.reason_for_incompletion
    statuses = [(t.reference_task_name, t.status) for t in wf.tasks]
    assert statuses.count(("t2", "COMPLETED")) == 1
    assert ("t1", "COMPLETED") in statuses
    assert wf.output["o3"] == "task completed"


def _run_to_failure(
    clients: OrkesClients, definition: dict[str, Any]
) -> tuple[Any, dict[str, Any]]:
    """Register and run ``definition`` (its t1 fails for good), until it FAILED: the workflow
    and its tasks by reference name."""
    clients.get_metadata_client().register_workflow_def(
        _model(definition, "WorkflowDef"), overwrite=True
    )
    wf_client = clients.get_workflow_client()
    wid = wf_client.start_workflow(StartWorkflowRequest(name=definition["name"], input={}))
    wf = _wait_terminal(clients, [wid])[wid]
    assert wf.status == "FAILED"
    refs = {t.reference_task_name: t for t in wf.tasks}
    assert refs["t1"].status == "FAILED_WITH_TERMINAL_ERROR"
    return wf, refs


def test_a_join_over_a_failed_permissive_task_waits_for_the_other_fork_then_fails(
    clients: OrkesClients, prefix: str, workers: subprocess.Popen[bytes]
) -> None:
    wf, refs = _run_to_failure(clients, _fan_in_out_permissive(prefix))
    # t2 finished although t1 had failed: the JOIN waited for it, then failed; t3 never ran.
    assert refs["t2"].status == "COMPLETED"
    assert refs["t2"].output_data == {"sawT1": "FAILED_WITH_TERMINAL_ERROR"}
    assert "t3" not in refs
    assert "cannot be processed" in (wf.reason_for_incompletion or "")
    # Conductor's JOIN fails over a permissive task of its joinOn, naming that task's reason.
    join = refs["fanouttask_join"]
    assert (join.task_type, join.status) == ("JOIN", "FAILED")
    assert join.reason_for_incompletion == refs["t1"].reason_for_incompletion
    assert join.output_data == {"t2": {"sawT1": "FAILED_WITH_TERMINAL_ERROR"}}


def test_a_required_task_failing_in_a_fork_cancels_the_join_with_the_workflow(
    clients: OrkesClients, prefix: str, workers: subprocess.Popen[bytes]
) -> None:
    """A forked task that is neither optional nor permissive fails the workflow as it fails:
    Conductor's decider terminates it, which cancels every task still open (the other branch's
    and the JOIN), and the JOIN never fails itself."""
    definition = _fan_in_out_permissive(prefix)
    definition["name"] = f"{prefix}_FanInOutRequired"
    fork = definition["tasks"][0]
    fork["forkTasks"][0][0]["permissive"] = False
    # The other branch's task has no worker: it is still waiting when t1 fails.
    fork["forkTasks"][1][0].update(name=f"{prefix}_nobody", permissive=False)
    wf, refs = _run_to_failure(clients, definition)
    t1 = refs["t1"]
    assert wf.reason_for_incompletion == (
        f"Task {t1.task_id} failed with status: FAILED and reason: '{t1.reason_for_incompletion}'"
    )
    assert refs["t2"].status == "CANCELED"
    join = refs["fanouttask_join"]
    assert (join.task_type, join.status) == ("JOIN", "CANCELED")
    assert not join.reason_for_incompletion
    assert "t3" not in refs
