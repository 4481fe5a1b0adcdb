"""conductor-python, unmodified, against ``baton dev``: HTTP tasks (``http_request`` and the
top-level form) call a local test server, the output is Conductor's ``response``, a call to the
instance-metadata address fails its task with the reason, and the definition reads back as
sent."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from conductor.client.http.models.start_workflow_request import StartWorkflowRequest
from conductor.client.orkes_clients import OrkesClients

from tests.conductor.test_conductor_client import _model, _wait_terminal
from tests.support.http_target import Target, http_target

pytestmark = [pytest.mark.e2e]


@pytest.fixture
def target() -> Iterator[Target]:
    with http_target() as t:
        yield t


def _definition(prefix: str) -> dict[str, Any]:
    return {
        "name": f"{prefix}_http",
        "version": 1,
        "tasks": [
            {
                "name": "http_task",
                "taskReferenceName": "create",
                "type": "HTTP",
                "inputParameters": {
                    "http_request": {
                        "uri": "${workflow.input.base}/json",
                        "method": "POST",
                        "headers": {"X-Order": "${workflow.input.order}"},
                        "body": {"order": "${workflow.input.order}"},
                        "connectionTimeOut": 2000,
                        "readTimeOut": 2000,
                    }
                },
            },
            {
                "name": "http_task",
                "taskReferenceName": "read",
                "type": "HTTP",
                "inputParameters": {
                    "uri": "${workflow.input.base}/text",
                    "method": "GET",
                },
            },
        ],
        "outputParameters": {
            "status": "${create.output.response.statusCode}",
            "echo": "${create.output.response.body.echo}",
            "text": "${read.output.response.body}",
        },
    }


def test_http_tasks_call_a_local_server(clients: OrkesClients, prefix: str, target: Target) -> None:
    meta = clients.get_metadata_client()
    sent = _definition(prefix)
    meta.register_workflow_def(_model(sent, "WorkflowDef"), overwrite=True)
    stored = meta.get_workflow_def(f"{prefix}_http", version=1)
    assert [t.type for t in stored.tasks] == ["HTTP", "HTTP"]
    assert stored.tasks[0].input_parameters == sent["tasks"][0]["inputParameters"]
    assert stored.tasks[1].input_parameters == sent["tasks"][1]["inputParameters"]
    meta.register_workflow_def(
        _model(
            {
                "name": f"{prefix}_metadata",
                "version": 1,
                "tasks": [
                    {
                        "name": "http_task",
                        "taskReferenceName": "steal",
                        "type": "HTTP",
                        "inputParameters": {
                            "http_request": {"uri": "http://169.254.169.254/latest/meta-data/"}
                        },
                    }
                ],
            },
            "WorkflowDef",
        ),
        overwrite=True,
    )
    wf_client = clients.get_workflow_client()
    wid = wf_client.start_workflow(
        StartWorkflowRequest(name=f"{prefix}_http", input={"base": target.url(""), "order": "o-1"})
    )
    bad = wf_client.start_workflow(StartWorkflowRequest(name=f"{prefix}_metadata", input={}))
    done = _wait_terminal(clients, [wid, bad], timeout=60)
    wf = done[wid]
    assert wf.status == "COMPLETED", wf.reason_for_incompletion
    assert wf.output == {"status": 200, "echo": {"order": "o-1"}, "text": "plain words"}
    refs = {t.reference_task_name: t for t in wf.tasks}
    assert refs["create"].task_type == "HTTP"
    response = refs["create"].output_data["response"]
    assert response["statusCode"] == 200
    assert response["reasonPhrase"] == "OK"
    assert response["body"]["ok"] is True
    assert target.requests[0]["headers"]["X-Order"] == "o-1"
    wf = done[bad]
    assert wf.status == "FAILED"
    (task,) = wf.tasks
    assert task.status == "FAILED_WITH_TERMINAL_ERROR"  # a refusal is not retried
    said = "refused: 169.254.169.254 is an instance-metadata address"
    assert said in (task.reason_for_incompletion or "")
    assert said in (wf.reason_for_incompletion or "")


def test_the_task_definition_of_an_http_tasks_name_sets_its_retries_and_headers_are_redacted(
    clients: OrkesClients, prefix: str, target: Target
) -> None:
    """Conductor applies the TaskDef registered under an HTTP task's ``name``; credentials in
    its headers are sent but never shown in the task's ``inputData``."""
    meta = clients.get_metadata_client()
    meta.register_task_def(
        _model(
            {"name": f"{prefix}_flaky_api", "retryCount": 1, "retryDelaySeconds": 0},
            "TaskDef",
        )
    )
    meta.register_workflow_def(
        _model(
            {
                "name": f"{prefix}_http_taskdef",
                "version": 1,
                "tasks": [
                    {
                        "name": f"{prefix}_flaky_api",
                        "taskReferenceName": "call",
                        "type": "HTTP",
                        "inputParameters": {
                            "http_request": {
                                "uri": "${workflow.input.base}/fail",
                                "headers": {"Authorization": "Bearer ${workflow.input.token}"},
                            }
                        },
                    }
                ],
            },
            "WorkflowDef",
        ),
        overwrite=True,
    )
    wid = clients.get_workflow_client().start_workflow(
        StartWorkflowRequest(
            name=f"{prefix}_http_taskdef", input={"base": target.url(""), "token": "s3cr3t"}
        )
    )
    wf = _wait_terminal(clients, [wid], timeout=60)[wid]
    assert wf.status == "FAILED"
    assert target.hits["/fail"] == 2  # the first call and the task definition's one retry
    assert [t.status for t in wf.tasks] == ["FAILED", "FAILED"]
    assert all(r["headers"]["Authorization"] == "Bearer s3cr3t" for r in target.requests)
    for task in wf.tasks:
        assert "s3cr3t" not in repr(task.input_data), task.input_data
        assert task.input_data["request"]["headers"] == {"Authorization": "[redacted]"}


def test_an_http_task_without_a_task_definition_is_not_retried(
    clients: OrkesClients, prefix: str, target: Target
) -> None:
    """Conductor starts a system task with no TaskDef on an ad-hoc one of retryCount 0
    (``MetadataMapperService``; its e2e FailureWorkflowTests expect FAILED within seconds): one
    call, then the workflow fails, where Baton's own default would retry 3 times a minute
    apart. A WorkflowTask's own retryCount still holds."""
    name = f"{prefix}_http_adhoc"

    def call(ref: str, **extra: Any) -> dict[str, Any]:
        request = {"uri": "${workflow.input.base}/fail", "method": "GET"}
        return {
            "name": f"{prefix}_no_def_{ref}",
            "taskReferenceName": ref,
            "type": "HTTP",
            "inputParameters": {"http_request": request},
            **extra,
        }

    meta = clients.get_metadata_client()
    meta.register_workflow_def(
        _model({"name": name, "version": 1, "tasks": [call("once")]}, "WorkflowDef"),
        overwrite=True,
    )
    wid = clients.get_workflow_client().start_workflow(
        StartWorkflowRequest(name=name, input={"base": target.url("")})
    )
    wf = _wait_terminal(clients, [wid], timeout=30)[wid]
    assert wf.status == "FAILED"
    assert [t.status for t in wf.tasks] == ["FAILED"]
    assert target.hits["/fail"] == 1

    meta.register_workflow_def(
        _model(
            {
                "name": name,
                "version": 2,
                "tasks": [call("twice", retryCount=1, taskDefinition={"retryDelaySeconds": 0})],
            },
            "WorkflowDef",
        ),
        overwrite=True,
    )
    wid = clients.get_workflow_client().start_workflow(
        StartWorkflowRequest(name=name, version=2, input={"base": target.url("")})
    )
    wf = _wait_terminal(clients, [wid], timeout=30)[wid]
    assert [t.status for t in wf.tasks] == ["FAILED", "FAILED"]
    assert target.hits["/fail"] == 3


def test_an_http_task_of_an_inline_sub_workflow_without_a_task_definition_is_not_retried(
    clients: OrkesClients, api: httpx.Client, prefix: str, target: Target
) -> None:
    """The same ad-hoc retryCount 0 for the HTTP task of a definition a SUB_WORKFLOW carries
    inline (``subWorkflowParam.workflowDefinition``): Conductor starts it as any other."""
    name = f"{prefix}_http_inline_child"
    child = {
        "name": f"{name}_child",
        "version": 1,
        "tasks": [
            {
                "name": f"{prefix}_no_def_inline",
                "taskReferenceName": "call",
                "type": "HTTP",
                "inputParameters": {
                    "http_request": {"uri": "${workflow.input.base}/inline-fail", "method": "GET"}
                },
            }
        ],
    }
    sub = {
        "name": "sub",
        "taskReferenceName": "sub",
        "type": "SUB_WORKFLOW",
        "subWorkflowParam": {"name": child["name"], "workflowDefinition": child},
        "inputParameters": {"base": "${workflow.input.base}"},
    }
    clients.get_metadata_client().register_workflow_def(
        _model({"name": name, "version": 1, "tasks": [sub]}, "WorkflowDef"), overwrite=True
    )
    wid = clients.get_workflow_client().start_workflow(
        StartWorkflowRequest(name=name, input={"base": target.url("")})
    )
    wf = _wait_terminal(clients, [wid], timeout=30)[wid]
    assert wf.status == "FAILED"
    assert target.hits["/inline-fail"] == 1

    # And a definition given when the child starts (one ${…} giving a Conductor WorkflowDef).
    # (Plain HTTP: the Python client's model reads an expression here as a WorkflowDef.)
    given = {**sub, "subWorkflowParam": {"workflowDefinition": "${workflow.input.child}"}}
    registered = api.post("/metadata/workflow", json={"name": name, "version": 2, "tasks": [given]})
    assert registered.status_code == 200, registered.text
    wid = clients.get_workflow_client().start_workflow(
        StartWorkflowRequest(name=name, version=2, input={"base": target.url(""), "child": child})
    )
    wf = _wait_terminal(clients, [wid], timeout=30)[wid]
    assert wf.status == "FAILED"
    assert target.hits["/inline-fail"] == 2


def test_a_dynamic_fork_of_http_tasks_calls_each_input(
    clients: OrkesClients, prefix: str, target: Target
) -> None:
    """The dynamic-fork guide's ``dynamic_workflow_array_http``: ``forkTaskType`` HTTP over
    ``forkTaskInputs``, each an ``http_request``; the JOIN gives each call's response by the
    forked task's name, ``_HTTP_<index>``."""
    calls = [
        {"http_request": {"method": "POST", "uri": target.url("/json"), "body": {"n": n}}}
        for n in (1, 2)
    ]
    definition = {
        "name": f"{prefix}_dynamic_http",
        "version": 1,
        "tasks": [
            {
                "name": "dynamic_workflow_array_http",
                "taskReferenceName": "dynamic_workflow_array_http_ref",
                "inputParameters": {"forkTaskType": "HTTP", "forkTaskInputs": calls},
                "type": "FORK_JOIN_DYNAMIC",
            },
            {
                "name": "dynamic_workflow_array_http_join",
                "taskReferenceName": "dynamic_workflow_array_http_join_ref",
                "inputParameters": {},
                "type": "JOIN",
                "joinOn": [],
            },
        ],
        "schemaVersion": 2,
    }
    clients.get_metadata_client().register_workflow_def(
        _model(definition, "WorkflowDef"), overwrite=True
    )
    wid = clients.get_workflow_client().start_workflow(
        StartWorkflowRequest(name=f"{prefix}_dynamic_http", version=1, input={})
    )
    wf = _wait_terminal(clients, [wid])[wid]
    assert wf.status == "COMPLETED", wf.reason_for_incompletion
    join = next(t for t in wf.tasks if t.task_type == "JOIN")
    echoed = {k: v["response"]["body"]["echo"] for k, v in join.output_data.items()}
    assert echoed == {"_HTTP_0": {"n": 1}, "_HTTP_1": {"n": 2}}
    assert sorted(t.task_type for t in wf.tasks if t.reference_task_name.startswith("_HTTP_")) == [
        "HTTP",
        "HTTP",
    ]


def test_a_dynamic_fork_task_list_runs_its_http_entries_as_calls(
    clients: OrkesClients, prefix: str, target: Target
) -> None:
    """A FORK_JOIN_DYNAMIC task list (dynamicForkTasksParam) whose entries are HTTP tasks, each
    with its input (an http_request) by reference name: each is an HTTP call, as in Conductor,
    not a job waiting for a worker."""
    definition = {
        "name": f"{prefix}_dynamic_http_list",
        "version": 1,
        "tasks": [
            {
                "name": "fan",
                "taskReferenceName": "fan",
                "type": "FORK_JOIN_DYNAMIC",
                "dynamicForkTasksParam": "dynamicTasks",
                "dynamicForkTasksInputParamName": "dynamicTasksInput",
                "inputParameters": {
                    "dynamicTasks": "${workflow.input.tasks}",
                    "dynamicTasksInput": "${workflow.input.inputs}",
                },
            },
            {"name": "fan_join", "taskReferenceName": "fan_join", "type": "JOIN"},
        ],
    }
    clients.get_metadata_client().register_workflow_def(
        _model(definition, "WorkflowDef"), overwrite=True
    )
    refs = ("call_a", "call_b")
    given = {
        "tasks": [{"name": "http_call", "taskReferenceName": r, "type": "HTTP"} for r in refs],
        "inputs": {
            r: {"http_request": {"uri": target.url("/json"), "method": "POST", "body": {"r": r}}}
            for r in refs
        },
    }
    wid = clients.get_workflow_client().start_workflow(
        StartWorkflowRequest(name=f"{prefix}_dynamic_http_list", version=1, input=given)
    )
    wf = _wait_terminal(clients, [wid])[wid]
    assert wf.status == "COMPLETED", wf.reason_for_incompletion
    join = next(t for t in wf.tasks if t.task_type == "JOIN")
    assert {k: v["response"]["body"]["echo"] for k, v in join.output_data.items()} == {
        r: {"r": r} for r in refs
    }
    forked = sorted(
        (t.reference_task_name, t.task_type) for t in wf.tasks if t.reference_task_name in refs
    )
    assert forked == [("call_a", "HTTP"), ("call_b", "HTTP")]
