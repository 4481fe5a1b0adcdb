"""Conductor's rerun (``POST /api/workflow/{id}/rerun``) through conductor-python's client, as
conductor-oss's own e2e WorkflowRerunTests drive it: from a failed task, from a completed one
with a new task input, from a task of a sub-workflow (by the child or by its parent), from a
fork's JOIN, from a DO_WHILE; and what a bad request answers."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
from conductor.client.http.models.rerun_workflow_request import RerunWorkflowRequest
from conductor.client.http.models.start_workflow_request import StartWorkflowRequest
from conductor.client.orkes_clients import OrkesClients

from tests.conductor.test_conductor_operations import _done, _poll, _register, _simple, _status
from tests.support.helpers import wait_until
from tests.support.servers import LocalServer

pytestmark = [pytest.mark.e2e]


def _start(clients: OrkesClients, name: str, **input: Any) -> str:
    return str(
        clients.get_workflow_client().start_workflow(
            StartWorkflowRequest(name=name, version=1, input=input)
        )
    )


def _until(clients: OrkesClients, wid: str, status: str) -> Any:
    return wait_until(
        lambda: (wf := _status(clients, wid)).status == status and wf,
        timeout=15,
        interval=0.05,
        what=f"workflow {wid} {status}",
    )


def _sub_workflow(child: str) -> dict[str, Any]:
    return {
        "name": "sub",
        "taskReferenceName": "sub",
        "type": "SUB_WORKFLOW",
        "subWorkflowParam": {"name": child, "version": 1},
    }


def _rerun(clients: OrkesClients, wid: str, **fields: Any) -> str:
    return str(
        clients.get_workflow_client().rerun_workflow(
            wid, RerunWorkflowRequest(re_run_from_workflow_id=wid, **fields)
        )
    )


def test_rerun_from_a_failed_task_and_from_a_completed_one_with_new_input(
    clients: OrkesClients,
) -> None:
    t1, t2 = f"rr_a_{uuid.uuid4().hex[:6]}", f"rr_b_{uuid.uuid4().hex[:6]}"
    name = _register(
        clients,
        [_simple("one", t1), _simple("two", t2, inputParameters={"x": "${workflow.input.x}"})],
    )
    wid = _start(clients, name, x=1)
    _done(clients, _poll(clients, t1))
    _done(
        clients,
        _poll(clients, t2),
        status="FAILED_WITH_TERMINAL_ERROR",
        reason_for_incompletion="no",
    )
    failed = _until(clients, wid, "FAILED")
    second = failed.tasks[1]

    assert _rerun(clients, wid, re_run_from_task_id=second.task_id) == wid
    wf = _status(clients, wid)
    assert wf.status == "RUNNING" and not wf.reason_for_incompletion
    assert [(t.reference_task_name, t.status) for t in wf.tasks] == [
        ("one", "COMPLETED"),
        ("two", "SCHEDULED"),
    ]
    _done(clients, _poll(clients, t2))
    done = _until(clients, wid, "COMPLETED")
    assert len(done.tasks) == 2

    # From the first, completed task, with its own input and the workflow's new input
    first = done.tasks[0]
    _rerun(
        clients,
        wid,
        re_run_from_task_id=first.task_id,
        task_input={"mine": 1},
        workflow_input={"x": 2},
        correlation_id="rerun-1",
    )
    task = _poll(clients, t1)
    assert task.input_data == {"mine": 1}
    _done(clients, task)
    assert _poll(clients, t2).input_data == {"x": 2}
    wf = _status(clients, wid)
    assert wf.input == {"x": 2} and wf.correlation_id == "rerun-1"


@pytest.mark.parametrize("by_parent", [False, True])
def test_rerun_a_sub_workflow_task_runs_the_parent_again(
    clients: OrkesClients, by_parent: bool
) -> None:
    t = f"rr_sub_{uuid.uuid4().hex[:6]}"
    child = _register(clients, [_simple("inner", t)])
    parent = _register(
        clients,
        [_sub_workflow(child)],
    )
    wid = _start(clients, parent)
    task = _poll(clients, t)
    kid = task.workflow_instance_id
    _done(clients, task, status="FAILED_WITH_TERMINAL_ERROR", reason_for_incompletion="bad")
    _until(clients, kid, "FAILED")
    _until(clients, wid, "FAILED")

    _rerun(clients, wid if by_parent else kid, re_run_from_task_id=task.task_id)
    assert _status(clients, kid).status == "RUNNING"
    parent_wf = _until(clients, wid, "RUNNING")
    assert parent_wf.tasks[0].status == "IN_PROGRESS"
    assert parent_wf.tasks[0].sub_workflow_id == kid
    _done(clients, _poll(clients, t))
    _until(clients, kid, "COMPLETED")
    _until(clients, wid, "COMPLETED")


def test_rerun_from_a_join_and_from_a_loop(clients: OrkesClients) -> None:
    a, b, c = (f"rr_{k}_{uuid.uuid4().hex[:6]}" for k in "abc")
    name = _register(
        clients,
        [
            {
                "name": "fork",
                "taskReferenceName": "fork",
                "type": "FORK_JOIN",
                "forkTasks": [[_simple("fa", a)], [_simple("fb", b)]],
            },
            {"name": "join", "taskReferenceName": "join", "type": "JOIN", "joinOn": ["fa", "fb"]},
            {
                "name": "loop",
                "taskReferenceName": "loop",
                "type": "DO_WHILE",
                "loopCondition": "if ($.loop['iteration'] < 2) { true; } else { false; }",
                "loopOver": [_simple("lc", c)],
            },
        ],
    )
    wid = _start(clients, name)
    _done(clients, _poll(clients, a))
    _done(clients, _poll(clients, b))
    _done(clients, _poll(clients, c))
    _done(clients, _poll(clients, c))
    done = _until(clients, wid, "COMPLETED")
    types = [t.task_type for t in done.tasks]
    assert types[:4] == ["FORK", a, b, "JOIN"] or types[:4] == ["FORK", b, a, "JOIN"]
    join = done.tasks[3]

    _rerun(clients, wid, re_run_from_task_id=join.task_id)
    wf = _status(clients, wid)
    assert wf.status == "RUNNING"
    assert [t.status for t in wf.tasks[:4]] == ["COMPLETED"] * 4
    # the loop runs again from its start; the forked tasks do not
    _done(clients, _poll(clients, c))
    _done(clients, _poll(clients, c))
    done = _until(clients, wid, "COMPLETED")
    assert [t.task_type for t in done.tasks].count(a) == 1

    loop = next(t for t in done.tasks if t.task_type == "DO_WHILE")
    _rerun(clients, wid, re_run_from_task_id=loop.task_id)
    wf = _status(clients, wid)
    assert wf.status == "RUNNING" and wf.tasks[-1].task_type == c
    assert wf.tasks[-1].status == "SCHEDULED"


def test_rerun_refusals(clients: OrkesClients, conductor_server: LocalServer) -> None:
    t = f"rr_r_{uuid.uuid4().hex[:6]}"
    name = _register(clients, [_simple("one", t)])
    wid = _start(clients, name)
    base = f"{conductor_server.base_url}/api/workflow"
    headers = {"x-api-key": conductor_server.api_key or ""}

    def post(path: str, body: Any) -> httpx.Response:
        return httpx.post(f"{base}/{path}", json=body, headers=headers, timeout=10)

    running = post(f"{wid}/rerun", {"reRunFromWorkflowId": wid})
    assert running.status_code == 409, running.text
    # refused as running before its task is looked for, as Conductor does
    assert post(f"{wid}/rerun", {"reRunFromTaskId": "nope"}).status_code == 409
    _done(clients, _poll(clients, t))
    _until(clients, wid, "COMPLETED")
    missing = post(f"{wid}/rerun", {"reRunFromTaskId": str(uuid.uuid4())})
    assert missing.status_code == 400 and "not found" in missing.json()["message"]
    assert post(f"{wid}/rerun", {"taskInput": [1], "reRunFromTaskId": "x"}).status_code == 400
    assert post(f"{wid}/rerun", [1]).status_code == 400
    assert post(f"{uuid.uuid4()}/rerun", {}).status_code == 404
    assert post("not-an-id/rerun", {}).status_code == 404


def test_retry_a_terminated_workflow_and_a_failed_sub_workflow_in_place(
    clients: OrkesClients,
) -> None:
    t = f"rr_t_{uuid.uuid4().hex[:6]}"
    name = _register(clients, [_simple("one", t)])
    wid = _start(clients, name)
    wc = clients.get_workflow_client()
    _poll(clients, t)
    wc.terminate_workflow(wid, reason="stop")
    _until(clients, wid, "TERMINATED")
    assert _status(clients, wid).last_retried_time == 0
    wc.retry_workflow(wid)
    assert _status(clients, wid).last_retried_time > 0
    _done(clients, _poll(clients, t))
    _until(clients, wid, "COMPLETED")

    # resumeSubworkflowTasks: the failed child is retried, not replaced by a new one
    s = f"rr_s_{uuid.uuid4().hex[:6]}"
    child = _register(clients, [_simple("inner", s)])
    parent = _register(
        clients,
        [_sub_workflow(child)],
    )
    wid = _start(clients, parent)
    task = _poll(clients, s)
    kid = task.workflow_instance_id
    _done(clients, task, status="FAILED_WITH_TERMINAL_ERROR", reason_for_incompletion="bad")
    _until(clients, wid, "FAILED")
    wc.retry_workflow(wid, resume_subworkflow_tasks=True)
    assert _status(clients, kid).status == "RUNNING"
    wf = _until(clients, wid, "RUNNING")
    assert [t.sub_workflow_id for t in wf.tasks] == [kid]
    _done(clients, _poll(clients, s))
    _until(clients, wid, "COMPLETED")
