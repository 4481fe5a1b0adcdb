"""conductor-python 2.0.0, unmodified, against ``baton dev``: Conductor's system tasks NOOP,
TERMINATE with TERMINATED, START_WORKFLOW, EXCLUSIVE_JOIN, HTTP_POLL and EVENT, each registered,
read back as sent and run."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest
from conductor.client.http.models.start_workflow_request import StartWorkflowRequest
from conductor.client.orkes_clients import OrkesClients

from tests.conductor.test_conductor_client import _model, _wait_terminal

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
