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
    (
        "EXCLUSIVE_JOIN",
        [
            {
                "name": "decide",
                "taskReferenceName": "decide",
                "type": "SWITCH",
                "evaluatorType": "value-param",
                "expression": "way",
                "inputParameters": {"way": "${workflow.input.way}"},
                "decisionCases": {"a": [simple("a1")], "b": [simple("b1")]},
            },
            {
                "name": "exclusive_join",
                "taskReferenceName": "xj",
                "type": "EXCLUSIVE_JOIN",
                "joinOn": ["a1", "b1"],
                "defaultExclusiveJoinTask": ["prev"],
            },
        ],
        {
            "id": "xj",
            "type": "EXCLUSIVE_JOIN",
            "joinOn": ["a1", "b1"],
            "defaultJoinOn": ["prev"],
            "input": {"joinOn": ["a1", "b1"], "defaultExclusiveJoinTask": ["prev"]},
        },
    ),
    (
        "HTTP_POLL",
        [
            {
                "name": "await_job",
                "taskReferenceName": "await_job",
                "type": "HTTP_POLL",
                "inputParameters": {
                    "http_request": {
                        "uri": "${workflow.input.api}/jobs/${prev.output.id}",
                        "method": "GET",
                        "readTimeOut": 30000,
                        "terminationCondition": "$.output.response.body.state === 'DONE'",
                        "pollingInterval": 60,
                        "pollingStrategy": "LINEAR_BACKOFF",
                        "maxPollCount": 60,
                    }
                },
            }
        ],
        {
            "id": "await_job",
            "type": "HTTP_POLL",
            "request": {
                "uri": "${workflow.input.api}/jobs/${prev.output.id}",
                "method": "GET",
                "readTimeOut": 30000,
            },
            "input": {},
            "terminationCondition": "$.output.response.body.state === 'DONE'",
            "pollingIntervalSeconds": 60,
            "pollingStrategy": "LINEAR_BACKOFF",
            "maxPollCount": 60,
        },
    ),
    (
        "EVENT",
        [
            {
                "name": "publish",
                "taskReferenceName": "publish",
                "type": "EVENT",
                "sink": "conductor:order-status",
                "inputParameters": {"orderId": "${workflow.input.orderId}"},
            }
        ],
        {
            "id": "publish",
            "type": "EVENT",
            "sink": "queue:order-status",
            "input": {"orderId": "${workflow.input.orderId}"},
        },
    ),
    (
        "EVENT_SQS",
        [
            {
                "name": "send",
                "taskReferenceName": "send",
                "type": "EVENT",
                "sink": "sqs:${workflow.input.queue}",
                "inputParameters": {"a": 1},
            }
        ],
        {
            "id": "send",
            "type": "EVENT",
            "sink": "sqs:${workflow.input.queue}",
            "input": {"a": 1},
        },
    ),
]


@pytest.mark.parametrize(
    ("conductor", "baton"), [(c, b) for _, c, b in GOLDEN], ids=[g[0] for g in GOLDEN]
)
def test_conductor_to_baton(conductor: list[dict[str, Any]], baton: dict[str, Any]) -> None:
    out = cd.to_baton_workflow(_wf(conductor))
    got = dict(out["steps"][-1])
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
    sent, back = conductor[-1], shown["tasks"][-1]
    assert back["inputParameters"] == sent.get("inputParameters", {})
    for field in ("joinOn", "defaultExclusiveJoinTask", "sink"):
        assert back.get(field) == sent.get(field)
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


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({}, "needs joinOn"),
        ({"joinOn": "a1"}, "joinOn must be a list of task reference names"),
        ({"joinOn": ["prev"], "defaultExclusiveJoinTask": [1]}, "defaultExclusiveJoinTask must"),
    ],
)
def test_an_exclusive_join_without_a_list_to_join_is_refused(
    fields: dict[str, Any], says: str
) -> None:
    task = {"name": "x", "taskReferenceName": "xj", "type": "EXCLUSIVE_JOIN", **fields}
    with pytest.raises(Untranslatable) as e:
        cd.to_baton_workflow(_wf([task]))
    assert says in str(e.value) and "xj" in str(e.value)


@pytest.mark.parametrize(
    ("request_", "says"),
    [
        ({"uri": "http://x"}, "terminationCondition must be a non-empty script"),
        ("${workflow.input.req}", "is an object holding its terminationCondition"),
        (
            {"uri": "http://x", "terminationCondition": "true", "pollingInterval": 0},
            "pollingInterval must be a whole number, 1 or more",
        ),
        (
            {"uri": "http://x", "terminationCondition": "true", "pollingStrategy": "RANDOM"},
            "pollingStrategy 'RANDOM' is not one of",
        ),
    ],
)
def test_an_http_poll_it_cannot_run_is_refused_saying_why(request_: Any, says: str) -> None:
    task = {
        "name": "p",
        "taskReferenceName": "p",
        "type": "HTTP_POLL",
        "inputParameters": {"http_request": request_},
    }
    with pytest.raises(Untranslatable) as e:
        cd.to_baton_workflow(_wf([task]))
    assert says in str(e.value)


@pytest.mark.parametrize(
    ("sink", "says"),
    [
        (None, "an EVENT task needs a sink"),
        ("kafka:orders", "not kafka:"),
        ("conductor:no spaces", "is no queue name"),
        ("queue:x", "Conductor names its own queues conductor:<name>"),
    ],
)
def test_an_event_to_a_sink_baton_has_not_is_refused_saying_why(sink: Any, says: str) -> None:
    task = {"name": "e", "taskReferenceName": "e", "type": "EVENT", "sink": sink}
    with pytest.raises(Untranslatable) as e:
        cd.to_baton_workflow(_wf([task]))
    assert says in str(e.value)


def test_an_event_to_conductor_alone_is_the_definition_s_and_step_s_own_queue() -> None:
    task = {"name": "e", "taskReferenceName": "wait0", "type": "EVENT", "sink": "conductor"}
    out = cd.to_baton_workflow(_wf([task]))
    assert out["steps"][-1]["sink"] == "queue"
    parse_definition(out)
    back = cd.to_conductor_workflow(parse_definition(out).wire() | {"version": 1})
    assert back["tasks"][-1]["sink"] == "conductor"
