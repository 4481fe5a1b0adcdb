"""conductor-python 2.0.0, unmodified, against ``baton dev``: Conductor's system tasks NOOP,
TERMINATE with TERMINATED, START_WORKFLOW, EXCLUSIVE_JOIN, HTTP_POLL and EVENT, each registered,
read back as sent and run."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import httpx
import pytest
from conductor.client.http.models.start_workflow_request import StartWorkflowRequest
from conductor.client.orkes_clients import OrkesClients

from tests.conductor.test_conductor_client import _model, _wait_terminal
from tests.support.http_target import http_target
from tests.support.servers import LocalServer

pytestmark = [pytest.mark.e2e]


def _register(clients: OrkesClients, definition: dict[str, Any]) -> None:
    meta = clients.get_metadata_client()
    meta.register_workflow_def(_model(definition, "WorkflowDef"), overwrite=True)
    stored = meta.get_workflow_def(definition["name"], version=definition.get("version", 1))
    assert [t.type for t in stored.tasks] == [t["type"] for t in definition["tasks"]]


def _start(clients: OrkesClients, workflow: str, **input: Any) -> str:
    wid: str = clients.get_workflow_client().start_workflow(
        StartWorkflowRequest(name=workflow, input=input)
    )
    return wid


def test_a_noop_completes_and_a_terminate_terminated_ends_the_workflow_terminated(
    clients: OrkesClients, prefix: str, workers: subprocess.Popen[bytes]
) -> None:
    _register(
        clients,
        {
            "name": f"{prefix}_noop_terminate",
            "version": 1,
            "tasks": [
                {
                    "name": "nothing",
                    "taskReferenceName": "nothing",
                    "type": "NOOP",
                    "inputParameters": {"seen": "${workflow.input.name}"},
                },
                {
                    "name": f"{prefix}_greet",
                    "taskReferenceName": "greet",
                    "type": "SIMPLE",
                    "inputParameters": {"name": "${workflow.input.name}"},
                },
                {
                    "name": "stop",
                    "taskReferenceName": "stop",
                    "type": "TERMINATE",
                    "inputParameters": {
                        "terminationStatus": "TERMINATED",
                        "terminationReason": "stopped after ${greet.output.greeting}",
                        "workflowOutput": {"greeting": "${greet.output.greeting}"},
                    },
                },
                {
                    "name": f"{prefix}_greet",
                    "taskReferenceName": "never",
                    "type": "SIMPLE",
                    "inputParameters": {"name": "never"},
                },
            ],
        },
    )
    wid = _start(clients, f"{prefix}_noop_terminate", name="ann")
    wf = _wait_terminal(clients, [wid])[wid]
    assert wf.status == "TERMINATED"
    assert wf.reason_for_incompletion == "stopped after hello ann"
    assert wf.output == {"greeting": "hello ann"}
    refs = {t.reference_task_name: t for t in wf.tasks}
    assert "never" not in refs
    assert refs["nothing"].task_type == "NOOP"
    assert refs["nothing"].status == "COMPLETED"
    assert refs["nothing"].input_data == {"seen": "ann"}
    assert refs["nothing"].output_data == {}
    assert refs["stop"].task_type == "TERMINATE" and refs["stop"].status == "COMPLETED"


def test_start_workflow_starts_another_workflow_and_completes_with_its_id(
    clients: OrkesClients, prefix: str, workers: subprocess.Popen[bytes]
) -> None:
    _register(
        clients,
        {
            "name": f"{prefix}_started",
            "version": 1,
            "tasks": [
                {
                    "name": f"{prefix}_greet",
                    "taskReferenceName": "greet",
                    "type": "SIMPLE",
                    "inputParameters": {"name": "${workflow.input.who}"},
                }
            ],
            "outputParameters": {"greeting": "${greet.output.greeting}"},
        },
    )
    # As Conductor's test harness writes it: the whole request from the workflow's input.
    _register(
        clients,
        {
            "name": f"{prefix}_starter",
            "version": 1,
            "tasks": [
                {
                    "name": "start_workflow",
                    "taskReferenceName": "st",
                    "inputParameters": {"startWorkflow": "${workflow.input.startWorkflow}"},
                    "type": "START_WORKFLOW",
                }
            ],
            "outputParameters": {"started": "${st.output.workflowId}"},
        },
    )
    request = {"name": f"{prefix}_started", "version": 1, "input": {"who": "bo"}}
    wid = _start(clients, f"{prefix}_starter", startWorkflow=request)
    wf = _wait_terminal(clients, [wid])[wid]
    assert wf.status == "COMPLETED", wf.reason_for_incompletion
    (st,) = wf.tasks
    assert st.task_type == "START_WORKFLOW" and st.status == "COMPLETED"
    started = st.output_data["workflowId"]
    assert wf.output == {"started": started}
    other = _wait_terminal(clients, [started])[started]
    assert other.workflow_name == f"{prefix}_started"
    assert other.status == "COMPLETED", other.reason_for_incompletion
    assert other.output == {"greeting": "hello bo"}


def _greet(prefix: str, ref: str, who: str) -> dict[str, Any]:
    return {
        "name": f"{prefix}_greet",
        "taskReferenceName": ref,
        "type": "SIMPLE",
        "inputParameters": {"name": who},
    }


def test_an_exclusive_join_after_decisions_gives_the_output_of_the_branch_that_ran(
    clients: OrkesClients, prefix: str, workers: subprocess.Popen[bytes]
) -> None:
    # The shape of Conductor's own exclusive_join_integration_test.json.
    _register(
        clients,
        {
            "name": f"{prefix}_exclusive",
            "version": 1,
            "tasks": [
                _greet(prefix, "task1", "one"),
                {
                    "name": "decide_task",
                    "taskReferenceName": "decision1",
                    "inputParameters": {"decision_1": "${workflow.input.decision_1}"},
                    "type": "DECISION",
                    "caseValueParam": "decision_1",
                    "decisionCases": {
                        "true": [
                            _greet(prefix, "task2", "two"),
                            {
                                "name": "decide_task",
                                "taskReferenceName": "decision2",
                                "inputParameters": {"decision_2": "${workflow.input.decision_2}"},
                                "type": "DECISION",
                                "caseValueParam": "decision_2",
                                "decisionCases": {"true": [_greet(prefix, "task3", "three")]},
                            },
                        ],
                        "false": [_greet(prefix, "task4", "four")],
                    },
                },
                {
                    "name": "exclusive_join",
                    "taskReferenceName": "exclusiveJoin",
                    "type": "EXCLUSIVE_JOIN",
                    "joinOn": ["task3", "task4"],
                    "defaultExclusiveJoinTask": ["task2", "task1"],
                },
            ],
            "outputParameters": {"joined": "${exclusiveJoin.output.greeting}"},
        },
    )
    cases = {
        ("true", "true"): "hello three",
        ("true", "false"): "hello two",
        ("false", "false"): "hello four",
    }
    ids = {
        k: _start(clients, f"{prefix}_exclusive", decision_1=k[0], decision_2=k[1]) for k in cases
    }
    done = _wait_terminal(clients, list(ids.values()))
    for k, greeting in cases.items():
        wf = done[ids[k]]
        assert wf.status == "COMPLETED", (k, wf.reason_for_incompletion)
        assert wf.output == {"joined": greeting}, k
        (join,) = [t for t in wf.tasks if t.reference_task_name == "exclusiveJoin"]
        assert join.task_type == "EXCLUSIVE_JOIN" and join.status == "COMPLETED"
        assert join.output_data == {"greeting": greeting}
        assert join.input_data["joinOn"] == ["task3", "task4"]


def test_an_http_poll_calls_until_its_condition_holds(
    clients: OrkesClients, prefix: str, workers: subprocess.Popen[bytes]
) -> None:
    with http_target() as target:
        _register(
            clients,
            {
                "name": f"{prefix}_http_poll",
                "version": 1,
                "tasks": [
                    {
                        "name": "await_job",
                        "taskReferenceName": "await_job",
                        "type": "HTTP_POLL",
                        "inputParameters": {
                            "want": "${workflow.input.want}",
                            "http_request": {
                                "uri": "${workflow.input.api}/count",
                                "method": "GET",
                                "terminationCondition": (
                                    "(function(){ return $.output.response.body.n >= $.input.want;"
                                    " })();"
                                ),
                                "pollingInterval": 1,
                                "pollingStrategy": "FIXED",
                                "maxPollCount": 10,
                            },
                        },
                    }
                ],
                "outputParameters": {"n": "${await_job.output.response.body.n}"},
            },
        )
        wid = _start(clients, f"{prefix}_http_poll", api=target.url(""), want=3)
        wf = _wait_terminal(clients, [wid])[wid]
        assert wf.status == "COMPLETED", wf.reason_for_incompletion
        assert wf.output == {"n": 3}
        assert target.hits["/count"] == 3
        (task,) = wf.tasks
        assert task.task_type == "HTTP_POLL" and task.status == "COMPLETED"
        assert task.output_data["pollCount"] == 3
        assert task.output_data["response"]["statusCode"] == 200
        assert task.input_data["want"] == 3


def test_an_event_to_a_conductor_queue_is_a_task_of_baton_s_queue(
    clients: OrkesClients,
    prefix: str,
    workers: subprocess.Popen[bytes],
    conductor_server: LocalServer,
) -> None:
    queue = f"{prefix}-events"
    _register(
        clients,
        {
            "name": f"{prefix}_event",
            "version": 1,
            "tasks": [
                {
                    "name": "publish_order_status",
                    "taskReferenceName": "publish",
                    "type": "EVENT",
                    "sink": f"conductor:{queue}",
                    "inputParameters": {"orderId": "${workflow.input.orderId}", "status": "PAID"},
                }
            ],
        },
    )
    wid = _start(clients, f"{prefix}_event", orderId="o-7")
    wf = _wait_terminal(clients, [wid])[wid]
    assert wf.status == "COMPLETED", wf.reason_for_incompletion
    (task,) = wf.tasks
    assert task.task_type == "EVENT" and task.status == "COMPLETED"
    assert task.output_data["orderId"] == "o-7"
    assert task.output_data["workflowInstanceId"] == wid
    assert task.output_data["sink"] == f"queue:{queue}"
    r = httpx.get(
        f"{conductor_server.base_url}/v1/queues/{queue}/peek",
        headers={"x-api-key": conductor_server.api_key or ""},
        timeout=10,
    )
    assert r.status_code == 200, r.text
    (pushed,) = r.json()["tasks"]
    body = json.loads(pushed["body"])
    assert body == {
        "orderId": "o-7",
        "status": "PAID",
        "workflowInstanceId": wid,
        "workflowType": f"{prefix}_event",
        "correlationId": None,
    }
    assert pushed["id"] == task.output_data["messageId"]
