"""Golden translations of Conductor's remaining system tasks (NOOP, TERMINATE with TERMINATED,
START_WORKFLOW, EXCLUSIVE_JOIN, HTTP_POLL, EVENT) both ways, and the refusal of a task type
Conductor itself does not have."""

from __future__ import annotations

from typing import Any

import pytest
from baton.conductor import definitions as cd
from baton.conductor.errors import Untranslatable, from_error
from baton.definitions import parse_definition


def simple(ref: str, name: str = "work", **extra: Any) -> dict[str, Any]:
    return {"name": name, "taskReferenceName": ref, "type": "SIMPLE", **extra}


def _wf(tasks: list[dict[str, Any]]) -> dict[str, Any]:
    return {"name": "golden", "version": 1, "tasks": [simple("prev"), *tasks]}


GOLDEN: list[tuple[str, list[dict[str, Any]], dict[str, Any]]] = [
    (
        "NOOP",
        [
            {
                "name": "nothing",
                "taskReferenceName": "nothing",
                "type": "NOOP",
                "inputParameters": {"seen": "${workflow.input.x}"},
            }
        ],
        {"id": "nothing", "type": "NOOP", "input": {"seen": "${workflow.input.x}"}},
    ),
    (
        "TERMINATE_TERMINATED",
        [
            {
                "name": "stop",
                "taskReferenceName": "stop",
                "type": "TERMINATE",
                "inputParameters": {
                    "terminationStatus": "TERMINATED",
                    "terminationReason": "no longer wanted",
                    "workflowOutput": {"why": "${workflow.input.x}"},
                },
            }
        ],
        {
            "id": "stop",
            "type": "TERMINATE",
            "status": "CANCELLED",
            "reason": "no longer wanted",
            "output": {"why": "${workflow.input.x}"},
        },
    ),
    (
        "START_WORKFLOW",
        [
            {
                "name": "start_workflow",
                "taskReferenceName": "st",
                "type": "START_WORKFLOW",
                "inputParameters": {
                    "startWorkflow": {
                        "name": "other",
                        "version": 2,
                        "input": {"id": "${prev.output.id}"},
                        "correlationId": "${workflow.correlationId}",
                    }
                },
            }
        ],
        {
            "id": "st",
            "type": "START_WORKFLOW",
            "request": {
                "name": "other",
                "version": 2,
                "input": {"id": "${prev.output.id}"},
                "correlationId": "${workflow.correlationId}",
            },
            "input": {
                "startWorkflow": {
                    "name": "other",
                    "version": 2,
                    "input": {"id": "${prev.output.id}"},
                    "correlationId": "${workflow.correlationId}",
                }
            },
        },
    ),
    (
        "START_WORKFLOW_EXPRESSION",
        [
            {
                "name": "start_workflow",
                "taskReferenceName": "st",
                "type": "START_WORKFLOW",
                "inputParameters": {"startWorkflow": "${workflow.input.startWorkflow}"},
            }
        ],
        {
            "id": "st",
            "type": "START_WORKFLOW",
            "request": "${workflow.input.startWorkflow}",
            "input": {"startWorkflow": "${workflow.input.startWorkflow}"},
        },
    ),
]


@pytest.mark.parametrize(
    ("conductor", "baton"), [(c, b) for _, c, b in GOLDEN], ids=[g[0] for g in GOLDEN]
)
def test_conductor_to_baton(conductor: list[dict[str, Any]], baton: dict[str, Any]) -> None:
    out = cd.to_baton_workflow(_wf(conductor))
    got = dict(out["steps"][1])
    got.pop("name", None)
    assert got == baton
    parse_definition(out)  # Baton accepts what the translation gives


@pytest.mark.parametrize(
    ("conductor", "baton"), [(c, b) for _, c, b in GOLDEN], ids=[g[0] for g in GOLDEN]
)
def test_baton_to_conductor_and_back_is_a_fixed_point(
    conductor: list[dict[str, Any]], baton: dict[str, Any]
) -> None:
    first = cd.to_baton_workflow(_wf(conductor))
    shown = cd.to_conductor_workflow(parse_definition(first).wire() | {"version": 1})
    assert [t["type"] for t in shown["tasks"][1:]] == [t["type"] for t in conductor]
    for sent, back in zip(conductor, shown["tasks"][1:], strict=True):
        assert back["inputParameters"] == sent.get("inputParameters", {})
    again = cd.to_baton_workflow(shown)
    assert parse_definition(again).wire() == parse_definition(first).wire()


@pytest.mark.parametrize("kind", ["USER_TASK", "BLOCKING_SYSTEM_TASK"])
def test_a_custom_task_type_is_refused_as_no_type_of_conductor_s(kind: str) -> None:
    with pytest.raises(Untranslatable) as e:
        cd.to_baton_workflow(_wf([{"name": "x", "taskReferenceName": "the_task", "type": kind}]))
    status, body = from_error(e.value)
    assert status == 400
    assert "the_task" in body["message"] and kind in body["message"]
    assert "not one of Conductor's task types" in body["message"]
    assert "custom system task type" in body["message"]


def test_a_conductor_type_baton_lacks_is_refused_as_such() -> None:
    with pytest.raises(Untranslatable) as e:
        cd.to_baton_workflow(
            _wf([{"name": "k", "taskReferenceName": "k", "type": "KAFKA_PUBLISH"}])
        )
    assert "task type KAFKA_PUBLISH cannot be translated to Baton" in str(e.value)
    assert "custom" not in str(e.value)


@pytest.mark.parametrize(
    ("params", "says"),
    [
        ({}, "inputParameters.startWorkflow must be an object"),
        ({"startWorkflow": "other"}, "inputParameters.startWorkflow must be an object"),
        ({"startWorkflow": {"version": 1}}, "startWorkflow needs the name"),
        (
            {"startWorkflow": {"name": "x", "workflowDef": {"name": "x", "tasks": []}}},
            "register it and give its name",
        ),
    ],
)
def test_a_start_workflow_it_cannot_run_is_refused_saying_why(
    params: dict[str, Any], says: str
) -> None:
    task = {"name": "s", "taskReferenceName": "st", "type": "START_WORKFLOW"}
    with pytest.raises(Untranslatable) as e:
        cd.to_baton_workflow(_wf([{**task, "inputParameters": params}]))
    assert says in str(e.value) and "st" in str(e.value)


def test_a_v1_start_workflow_reads_back_as_conductor_s() -> None:
    body = {
        "name": "v1",
        "version": 1,
        "steps": [
            {
                "id": "st",
                "type": "START_WORKFLOW",
                "request": {"definitionName": "other", "input": {"a": "${workflow.instanceId}"}},
            }
        ],
    }
    parse_definition(body)
    (task,) = cd.to_conductor_workflow(body)["tasks"]
    assert task["type"] == "START_WORKFLOW"
    assert task["inputParameters"] == {
        "startWorkflow": {"name": "other", "input": {"a": "${workflow.workflowId}"}}
    }
