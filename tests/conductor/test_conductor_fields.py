"""conductor-python 2.0.0, unmodified, against ``baton dev``: WorkflowTask fields and expression
forms teams' definitions use. An ``optional`` task that fails is COMPLETED_WITH_ERRORS and the
workflow goes on to COMPLETED, its output the last task's (no outputParameters); a workflow's
``inputTemplate`` fills missing input; ``${workflow.workflowId}``, ``${ref.taskId}``,
``${ref.status}``, ``${ref.startTime}``, ``${workflow.createTime}`` and JSONPath brackets read
what Conductor's task view shows."""

from __future__ import annotations

import subprocess
import time
from typing import Any

import pytest
from conductor.client.http.models.start_workflow_request import StartWorkflowRequest
from conductor.client.orkes_clients import OrkesClients

from tests.conductor.test_conductor_client import _model, _wait_terminal
from tests.support.servers import LocalServer

pytestmark = [pytest.mark.e2e]


def _task(prefix: str, kind: str, ref: str, **extra: Any) -> dict[str, Any]:
    return {"name": f"{prefix}_{kind}", "taskReferenceName": ref, "type": "SIMPLE", **extra}


def _register(clients: OrkesClients, definition: dict[str, Any]) -> None:
    meta = clients.get_metadata_client()
    meta.register_workflow_def(_model(definition, "WorkflowDef"), overwrite=True)


def test_an_optional_task_that_fails_lets_the_workflow_complete(
    clients: OrkesClients, prefix: str, workers: subprocess.Popen[bytes]
) -> None:
    name = f"{prefix}_optional"
    _register(
        clients,
        {
            "name": name,
            "version": 1,
            "inputTemplate": {"who": "template"},
            "tasks": [
                _task(prefix, "doomed", "may_fail", optional=True, inputParameters={"name": "x"}),
                _task(prefix, "greet", "hello", inputParameters={"name": "${workflow.input.who}"}),
            ],
        },
    )
    wid = clients.get_workflow_client().start_workflow(StartWorkflowRequest(name=name, input={}))
    wf = _wait_terminal(clients, [wid])[wid]
    assert wf.status == "COMPLETED", wf.reason_for_incompletion
    refs = {t.reference_task_name: t for t in wf.tasks}
    assert refs["may_fail"].status == "COMPLETED_WITH_ERRORS"
    assert "x cannot be processed" in refs["may_fail"].reason_for_incompletion
    assert refs["hello"].status == "COMPLETED"
    # No outputParameters: the workflow's output is its last task's; the template's default.
    assert wf.output == {"greeting": "hello template"}


def test_expressions_read_the_workflow_s_and_tasks_ids_status_and_times(
    clients: OrkesClients, prefix: str, workers: subprocess.Popen[bytes]
) -> None:
    name = f"{prefix}_ids"
    _register(
        clients,
        {
            "name": name,
            "version": 1,
            "tasks": [
                _task(prefix, "greet", "hello", inputParameters={"name": "${CPEWF_TASK_ID}"}),
                {
                    "name": "lists",
                    "taskReferenceName": "lists",
                    "type": "INLINE",
                    "inputParameters": {
                        "evaluatorType": "javascript",
                        "expression": "({rows: [{x: 'first'}, {x: 'second'}], 'odd key': 7})",
                    },
                },
                _task(
                    prefix,
                    "greet",
                    "echo",
                    inputParameters={
                        "name": "${workflow.workflowId}/${hello.taskId}",
                        "status": "${hello.status}",
                    },
                ),
            ],
            "outputParameters": {
                "workflowId": "${workflow.workflowId}",
                "correlationId": "${workflow.correlationId}",
                "createTime": "${workflow.createTime}",
                "taskId": "${hello.taskId}",
                "inlineId": "${lists.taskId}",
                "status": "${hello.status}",
                "startTime": "${hello.startTime}",
                "endTime": "${hello.endTime}",
                "second": "${lists.output.result.rows[1].x}",
                "odd": "${lists.output.result['odd key']}",
                "echoed": "${echo.output.greeting}",
            },
        },
    )
    before = int(time.time() * 1000)
    wid = clients.get_workflow_client().start_workflow(
        StartWorkflowRequest(name=name, input={}, correlation_id="order-42")
    )
    wf = _wait_terminal(clients, [wid])[wid]
    assert wf.status == "COMPLETED", wf.reason_for_incompletion
    refs = {t.reference_task_name: t for t in wf.tasks}
    out = wf.output
    assert out["workflowId"] == wid and out["correlationId"] == "order-42"
    assert out["taskId"] == refs["hello"].task_id  # what the worker was handed
    assert out["inlineId"] == refs["lists"].task_id
    assert out["status"] == "COMPLETED"
    assert out["startTime"] == refs["hello"].start_time
    assert out["endTime"] == refs["hello"].end_time
    assert before - 1000 <= out["createTime"] <= out["startTime"] <= out["endTime"]
    assert out["createTime"] == wf.create_time
    assert out["second"] == "second" and out["odd"] == 7
    assert out["echoed"] == f"hello {wid}/{refs['hello'].task_id}"
    assert refs["hello"].output_data == {"greeting": f"hello {refs['hello'].task_id}"}
    assert refs["echo"].input_data["status"] == "COMPLETED"


def test_a_loop_over_items_and_a_sub_workflow_named_at_run_time(
    clients: OrkesClients,
    prefix: str,
    workers: subprocess.Popen[bytes],
    conductor_server: LocalServer,
) -> None:
    """(conductor-python 2.0.0's WorkflowTask has no ``items``: this definition is registered
    as JSON, as a team's definition files are.)"""
    child = f"{prefix}_child_flow"
    _register(
        clients,
        {
            "name": child,
            "version": 1,
            "tasks": [_task(prefix, "greet", "inner", inputParameters={"name": "child"})],
        },
    )
    name = f"{prefix}_items"
    registered = conductor_server.request(
        "POST",
        "/api/metadata/workflow",
        json={
            "name": name,
            "version": 1,
            "tasks": [
                {
                    "name": "each",
                    "taskReferenceName": "each",
                    "type": "DO_WHILE",
                    "items": "${workflow.input.names}",
                    "loopOver": [
                        _task(
                            prefix,
                            "greet",
                            "hi",
                            inputParameters={
                                "name": "${each.output.loopIndex}:${each.output.loopItem}"
                            },
                        )
                    ],
                },
                {
                    "name": "sub",
                    "taskReferenceName": "sub",
                    "type": "SUB_WORKFLOW",
                    "subWorkflowParam": {"name": "${workflow.input.flow}", "version": 1},
                },
            ],
            "outputParameters": {"child": "${sub.output.greeting}"},
        },
    )
    assert registered.status_code == 200, registered.text
    wid = clients.get_workflow_client().start_workflow(
        StartWorkflowRequest(name=name, input={"names": ["ann", "bob"], "flow": child})
    )
    wf = _wait_terminal(clients, [wid])[wid]
    assert wf.status == "COMPLETED", wf.reason_for_incompletion
    greeted = [t.output_data["greeting"] for t in wf.tasks if t.reference_task_name == "hi"]
    assert greeted == ["hello 0:ann", "hello 1:bob"]
    assert wf.output == {"child": "hello child"}
