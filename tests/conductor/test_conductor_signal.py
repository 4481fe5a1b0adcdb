"""Conductor's signal routes (``POST /api/tasks/{workflowId}/{status}/signal`` and its ``/sync``
form), as conductor-oss's e2e SignalTaskTest drives them: the blocked WAIT task of a workflow or
of its running sub-workflow gets the status and the body as its output; the sync form answers a
SignalResponse by its return strategy once the workflow blocks again or ends."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from tests.conductor.test_conductor_rerun import _sub_workflow
from tests.support.helpers import wait_until

pytestmark = [pytest.mark.e2e]


def _wait(ref: str) -> dict[str, Any]:
    return {"name": "wait", "taskReferenceName": ref, "type": "WAIT"}


def _register(api: httpx.Client, tasks: list[dict[str, Any]]) -> str:
    name = f"sig_{uuid.uuid4().hex[:8]}"
    body = [{"name": name, "version": 1, "tasks": tasks, "schemaVersion": 2}]
    assert api.put("/metadata/workflow", json=body).status_code == 200
    return name


def _start(api: httpx.Client, name: str) -> str:
    answer = api.post(f"/workflow/{name}", json={})
    assert answer.status_code == 200, answer.text
    return answer.text


def _workflow(api: httpx.Client, wid: str) -> dict[str, Any]:
    return dict(api.get(f"/workflow/{wid}", params={"includeTasks": "true"}).json())


def _blocked(api: httpx.Client, wid: str) -> dict[str, Any]:
    return wait_until(
        lambda: (
            (wf := _workflow(api, wid))["tasks"]
            and wf["tasks"][-1]["status"] == "IN_PROGRESS"
            and wf
        ),
        timeout=15,
        interval=0.05,
        what=f"workflow {wid} blocked",
    )


def test_an_async_signal_completes_the_wait_task(api: httpx.Client) -> None:
    name = _register(api, [_wait("w1"), _wait("w2")])
    wid = _start(api, name)
    _blocked(api, wid)
    answer = api.post(f"/tasks/{wid}/COMPLETED/signal", json={"said": 1})
    assert answer.status_code == 200, answer.text
    wf = _workflow(api, wid)
    assert [(t["referenceTaskName"], t["status"]) for t in wf["tasks"]] == [
        ("w1", "COMPLETED"),
        ("w2", "IN_PROGRESS"),
    ]
    assert wf["tasks"][0]["outputData"] == {"said": 1}


def test_a_sync_signal_answers_by_its_return_strategy(api: httpx.Client) -> None:
    name = _register(api, [_wait("w1"), _wait("w2"), _wait("w3")])
    wid = _start(api, name)
    _blocked(api, wid)
    run = api.post(f"/tasks/{wid}/COMPLETED/signal/sync", json={}).json()
    assert run["targetWorkflowId"] == wid and run["workflowId"] == wid
    assert run["responseType"] == "TARGET_WORKFLOW" and run["signalTimeout"] is False
    assert run["status"] == "RUNNING" and run["tasks"][-1]["referenceTaskName"] == "w2"

    task = api.post(
        f"/tasks/{wid}/COMPLETED/signal/sync",
        params={"returnStrategy": "BLOCKING_TASK"},
        json={"n": 2},
    ).json()
    assert task["responseType"] == "BLOCKING_TASK"
    assert task["referenceTaskName"] == "w3" and task["status"] == "IN_PROGRESS"
    assert task["targetWorkflowId"] == wid and task["workflowId"] == wid

    done = api.post(f"/tasks/{wid}/COMPLETED/signal/sync", json={}).json()
    assert done["status"] == "COMPLETED" and done["targetWorkflowStatus"] == "COMPLETED"
    # nothing blocked any more
    assert api.post(f"/tasks/{wid}/COMPLETED/signal", json={}).status_code == 200
    nothing = api.post(f"/tasks/{wid}/COMPLETED/signal/sync", json={})
    assert nothing.status_code == 404 and "no blocked task" in nothing.json()["message"]


def test_a_signal_reaches_the_wait_task_of_a_running_sub_workflow(api: httpx.Client) -> None:
    child = _register(api, [_wait("inner")])
    parent = _register(
        api,
        [
            _sub_workflow(child),
            _wait("outer"),
        ],
    )
    wid = _start(api, parent)
    kid = wait_until(
        lambda: (wf := _workflow(api, wid))["tasks"] and wf["tasks"][0].get("subWorkflowId"),
        timeout=15,
        interval=0.05,
        what="the child",
    )
    _blocked(api, kid)
    run = api.post(
        f"/tasks/{wid}/COMPLETED/signal/sync",
        params={"returnStrategy": "BLOCKING_WORKFLOW"},
        json={"from": "parent"},
    ).json()
    # the child completed, the parent blocks on its own WAIT next
    assert run["workflowId"] == wid and run["targetWorkflowId"] == wid
    assert _workflow(api, kid)["status"] == "COMPLETED"
    assert _workflow(api, kid)["tasks"][0]["outputData"] == {"from": "parent"}
    assert run["tasks"][-1]["referenceTaskName"] == "outer"


def test_signal_refusals(api: httpx.Client) -> None:
    unknown = str(uuid.uuid4())
    assert api.post(f"/tasks/{unknown}/COMPLETED/signal", json={}).status_code == 404
    assert api.post(f"/tasks/{unknown}/COMPLETED/signal/sync", json={}).status_code == 404
    name = _register(api, [_wait("w1")])
    wid = _start(api, name)
    _blocked(api, wid)
    assert api.post(f"/tasks/{wid}/DONE/signal", json={}).status_code == 400
    assert api.post(f"/tasks/{wid}/COMPLETED/signal", json=[1]).status_code == 400
    bad = api.post(
        f"/tasks/{wid}/COMPLETED/signal/sync", params={"returnStrategy": "NOPE"}, json={}
    )
    assert bad.status_code == 400
    assert _workflow(api, wid)["tasks"][0]["status"] == "IN_PROGRESS"  # nothing was applied


def test_a_wait_task_shows_how_long_it_waits(api: httpx.Client) -> None:
    timed = {**_wait("t"), "inputParameters": {"duration": "30 seconds"}}
    name = _register(api, [timed, _wait("forever")])
    wid = _start(api, name)
    (task,) = _blocked(api, wid)["tasks"]
    assert task["callbackAfterSeconds"] == 30
    assert abs(task["waitTimeout"] - task["startTime"] - 30_000) < 1_000
    signalled = api.post(f"/tasks/{wid}/COMPLETED/signal", json={})  # the timer is blocked
    assert signalled.status_code == 200, signalled.text
    wf = _blocked(api, wid)
    assert wf["tasks"][0]["status"] == "COMPLETED"  # a timer ends early when updated
    assert wf["tasks"][-1]["callbackAfterSeconds"] == 2**31 - 1  # Conductor's "forever"


def test_a_waiting_task_updated_failed_fails_its_workflow(api: httpx.Client) -> None:
    for kind in ("WAIT", "HUMAN"):
        name = _register(api, [{**_wait("w"), "type": kind}])
        wid = _start(api, name)
        (task,) = _blocked(api, wid)["tasks"]
        answer = api.post(
            "/tasks",
            json={
                "workflowInstanceId": wid,
                "taskId": task["taskId"],
                "status": "FAILED",
                "reasonForIncompletion": "declined",
                "outputData": {"why": "no"},
            },
        )
        assert answer.status_code == 200, answer.text
        wf = _workflow(api, wid)
        assert wf["status"] == "FAILED", wf
        assert wf["tasks"][0]["status"] == "FAILED"
        assert wf["tasks"][0]["reasonForIncompletion"] == "declined"
        assert wf["tasks"][0]["outputData"] == {"why": "no"}
        assert "declined" in wf["reasonForIncompletion"]


def test_a_sub_workflow_task_is_completed_by_its_id_whatever_workflow_is_named(
    api: httpx.Client,
) -> None:
    """Conductor finds the task by its id alone; SubWorkflowInlineTests sends the child's id
    as workflowInstanceId with its parent's SUB_WORKFLOW task."""
    child = _register(api, [_wait("inner")])
    parent = _register(
        api,
        [_sub_workflow(child)],
    )
    for named in ("child", None):
        wid = _start(api, parent)
        shown = wait_until(
            lambda w=wid: (t := _workflow(api, w)["tasks"]) and t[0].get("subWorkflowId") and t[0],
            timeout=15,
            what="the SUB_WORKFLOW task",
        )
        # Conductor's SUB_WORKFLOW task input names the child's definition
        assert shown["inputData"]["subWorkflowName"] == child
        assert shown["inputData"]["subWorkflowVersion"] == 1
        assert shown["inputData"]["workflowInput"] == {}
        task = wait_until(
            lambda w=wid: (t := _workflow(api, w)["tasks"]) and t[0].get("subWorkflowId") and t[0],
            timeout=15,
            what="the SUB_WORKFLOW task",
        )
        body = {"taskId": task["taskId"], "status": "COMPLETED", "outputData": {"by": "id"}}
        if named:
            body["workflowInstanceId"] = task["subWorkflowId"]
        answer = api.post("/tasks", json=body)
        assert answer.status_code == 200, answer.text
        wf = _workflow(api, wid)
        assert wf["status"] == "COMPLETED" and wf["tasks"][0]["outputData"] == {"by": "id"}
    assert (
        api.post("/tasks", json={"taskId": str(uuid.uuid4()), "status": "COMPLETED"}).status_code
        == 404
    )


def test_a_workflow_started_with_its_definition_inline_shows_its_workflow_tasks(
    api: httpx.Client,
) -> None:
    """A StartWorkflowRequest's workflowDef is kept with the run, so its tasks read back their
    workflowTask, as a registered definition's do."""
    name = f"inline_{uuid.uuid4().hex[:8]}"
    wait = {**_wait("w"), "description": "waits here"}
    body = {"name": name, "workflowDef": {"name": name, "version": 1, "tasks": [wait]}}
    answer = api.post("/workflow", json=body)
    assert answer.status_code == 200, answer.text
    (task,) = _blocked(api, answer.text)["tasks"]
    assert task["workflowTask"]["description"] == "waits here"
    assert task["workflowTask"]["taskReferenceName"] == "w"
