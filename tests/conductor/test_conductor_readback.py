"""Read-back is exact: a definition registered on ``/api`` in Conductor's export format (every
WorkflowTask field, empty ``decisionCases``/``forkTasks``/``loopOver``/``joinOn`` on every task,
``createTime``, ``ownerEmail``) comes back from ``GET /api/metadata/workflow`` equal to what was
sent (compared as parsed JSON), by name, by version and in the list; whatever Baton runs."""

from __future__ import annotations

import copy
import uuid
from typing import Any

import pytest

from tests.support.servers import LocalServer

pytestmark = [pytest.mark.e2e]


def _task(name: str, ref: str, kind: str = "SIMPLE", **fields: Any) -> dict[str, Any]:
    """A WorkflowTask as Conductor's UI and ``GET`` export it: every field present."""
    return {
        "name": name,
        "taskReferenceName": ref,
        "description": None,
        "inputParameters": {},
        "type": kind,
        "dynamicTaskNameParam": None,
        "caseValueParam": None,
        "caseExpression": None,
        "scriptExpression": None,
        "decisionCases": {},
        "dynamicForkJoinTasksParam": None,
        "dynamicForkTasksParam": None,
        "dynamicForkTasksInputParamName": None,
        "defaultCase": [],
        "forkTasks": [],
        "startDelay": 0,
        "subWorkflowParam": None,
        "joinOn": [],
        "sink": None,
        "optional": False,
        "taskDefinition": None,
        "rateLimited": None,
        "defaultExclusiveJoinTask": [],
        "asyncComplete": False,
        "loopCondition": None,
        "loopOver": [],
        "retryCount": None,
        "evaluatorType": None,
        "expression": None,
        "onStateChange": {},
        "joinStatus": None,
        "cacheConfig": None,
        "permissive": False,
        **fields,
    }


def _exported(name: str, version: int) -> dict[str, Any]:
    prefix = name
    return {
        "createTime": 1718000000000,
        "updateTime": 1718000500000,
        "createdBy": "ops@example.com",
        "accessPolicy": {},
        "name": name,
        "description": "orders, exported from Conductor",
        "version": version,
        "tasks": [
            _task(
                f"{prefix}_fetch",
                "fetch",
                inputParameters={"orderId": "${workflow.input.orderId}", "n": 3},
                optional=True,
                startDelay=0,
                retryCount=2,
            ),
            _task(
                "fork",
                "fork",
                "FORK_JOIN",
                forkTasks=[
                    [_task(f"{prefix}_b", "right_b")],
                    [_task(f"{prefix}_a", "left_a"), _task(f"{prefix}_a2", "left_a2")],
                ],
            ),
            # The JOIN's name differs from its reference; joinOn is not in branch order.
            _task("collect_join", "join", "JOIN", joinOn=["left_a2", "right_b"]),
            _task(
                "loop",
                "loop",
                "DO_WHILE",
                inputParameters={"limit": "${workflow.input.limit}"},
                loopCondition="if ($.loop['iteration'] < $.limit) { true; } else { false; }",
                loopOver=[_task(f"{prefix}_step", "step")],
            ),
            _task(
                "decide",
                "decide",
                "DECISION",
                inputParameters={"kind": "${workflow.input.kind}"},
                caseValueParam="kind",
                decisionCases={"big": [_task(f"{prefix}_big", "big")]},
                defaultCase=[_task(f"{prefix}_small", "small")],
            ),
            _task(
                "child",
                "child",
                "SUB_WORKFLOW",
                subWorkflowParam={"name": f"{prefix}_child", "version": 3},
                inputParameters={"x": "${fetch.output.x}"},
            ),
            # A fork over a task list chosen at run time, and a task whose type is.
            _task(
                "fan",
                "fan",
                "FORK_JOIN_DYNAMIC",
                inputParameters={
                    "dynamicTasks": "${fetch.output.tasks}",
                    "dynamicTasksInput": "${fetch.output.inputs}",
                },
                dynamicForkTasksParam="dynamicTasks",
                dynamicForkTasksInputParamName="dynamicTasksInput",
            ),
            _task("fan_join", "fan_join", "JOIN"),
            _task(
                "dynamic",
                "pick",
                "DYNAMIC",
                inputParameters={
                    "taskToExecute": "${fetch.output.next}",
                    "all": "${fan_join.output}",
                },
                dynamicTaskNameParam="taskToExecute",
            ),
        ],
        "inputParameters": ["orderId", "limit", "kind"],
        "outputParameters": {"x": "${fetch.output.x}", "list": "${fetch.output.list[0].id}"},
        "failureWorkflow": "",
        "schemaVersion": 2,
        "restartable": True,
        "workflowStatusListenerEnabled": False,
        "ownerEmail": "ops@example.com",
        "timeoutPolicy": "ALERT_ONLY",
        "timeoutSeconds": 0,
        "variables": {},
        "inputTemplate": {"limit": 2},
        "enforceSchema": True,
    }


def test_an_exported_definition_reads_back_exactly(conductor_server: LocalServer) -> None:
    name = f"readback_{uuid.uuid4().hex[:8]}"
    sent = {1: _exported(name, 1), 2: _exported(name, 2)}
    sent[2]["description"] = "version two"
    sent[2]["tasks"][2]["joinOn"] = ["right_b", "left_a2"]
    for definition in sent.values():
        r = conductor_server.request("POST", "/api/metadata/workflow", json=definition)
        assert r.status_code == 200, r.text

    latest = conductor_server.request("GET", f"/api/metadata/workflow/{name}")
    assert latest.status_code == 200, latest.text
    assert latest.json() == sent[2]
    for version, definition in sent.items():
        r = conductor_server.request("GET", f"/api/metadata/workflow/{name}?version={version}")
        assert r.json() == definition
    listed = conductor_server.request("GET", "/api/metadata/workflow").json()
    assert [d for d in listed if d["name"] == name] == [sent[2]]

    # What a JOIN, a DO_WHILE's inputParameters, a sub-workflow's version read back as, named.
    got = latest.json()["tasks"]
    assert got[2]["name"] == "collect_join" and got[2]["joinOn"] == ["right_b", "left_a2"]
    assert got[3]["inputParameters"] == {"limit": "${workflow.input.limit}"}
    assert got[5]["subWorkflowParam"] == {"name": f"{name}_child", "version": 3}


def test_a_definition_without_a_version_reads_back_with_the_one_it_was_given(
    conductor_server: LocalServer,
) -> None:
    name = f"readback_{uuid.uuid4().hex[:8]}"
    sent = _exported(name, 1)
    del sent["version"]
    for _ in range(2):
        r = conductor_server.request("POST", "/api/metadata/workflow", json=copy.deepcopy(sent))
        assert r.status_code == 200, r.text
    got = conductor_server.request("GET", f"/api/metadata/workflow/{name}").json()
    assert got == {**sent, "version": 2}


def test_overwriting_a_version_reads_back_the_new_definition(conductor_server: LocalServer) -> None:
    name = f"readback_{uuid.uuid4().hex[:8]}"
    first = _exported(name, 1)
    r = conductor_server.request("PUT", "/api/metadata/workflow", json=[first])
    assert r.status_code == 200, r.text
    second = {**copy.deepcopy(first), "description": "rewritten", "timeoutSeconds": 60}
    r = conductor_server.request("PUT", "/api/metadata/workflow", json=[second])
    assert r.status_code == 200, r.text
    got = conductor_server.request("GET", f"/api/metadata/workflow/{name}?version=1").json()
    assert got == second
