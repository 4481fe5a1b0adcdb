"""The engine's dynamic forms on a real PostgreSQL (what Conductor's DYNAMIC and
FORK_JOIN_DYNAMIC run as): a SERVICE_TASK whose ``jobType`` is an expression resolved when it
starts, and a MAP with a ``key`` (its output by key) and ``inputs`` (``${map.input}``)."""

from __future__ import annotations

from typing import Any

import pytest
from baton.engine.service import Engine
from baton.errors import ValidationFailed

from tests.integration.test_control_flow import drain


def _fork(**extra: Any) -> dict[str, Any]:
    return {
        "name": "fork",
        "steps": [
            {
                "id": "fork",
                "type": "MAP",
                "items": "${workflow.input.tasks}",
                "key": "${map.item.taskReferenceName}",
                "inputs": "${workflow.input.inputs}",
                "maxConcurrency": 1000,
                "steps": [
                    {
                        "id": "forked",
                        "type": "SERVICE_TASK",
                        "jobType": "${map.item.name}",
                        "input": "${map.input}",
                    }
                ],
                **extra,
            }
        ],
        "outputParameters": {"joined": "${fork.output}"},
    }


def test_a_keyed_map_runs_each_task_by_its_name_with_its_input_and_joins_by_key(
    engine: Engine,
) -> None:
    engine.register_definition(_fork())
    tasks = [
        {"name": "resize", "taskReferenceName": "r1"},
        {"name": "resize", "taskReferenceName": "r2"},
        {"name": "notify", "taskReferenceName": "n1"},
        {"name": "notify", "taskReferenceName": "n2"},
    ]
    inputs = {"r1": {"w": 1}, "r2": {"w": 2}, "n1": {"to": "a"}}  # n2 has none: it gets {}
    inst, _ = engine.start_instance(
        definition_name="fork", input={"tasks": tasks, "inputs": inputs}
    )
    seen: dict[str, list[dict[str, Any]]] = {"resize": [], "notify": []}

    def resize(i: dict[str, Any]) -> Any:
        seen["resize"].append(i)
        return {"w": i["w"] * 10}

    def notify(i: dict[str, Any]) -> Any:
        seen["notify"].append(i)
        return {"sent": i.get("to")}

    assert drain(engine, {"resize": resize, "notify": notify}) == 4
    got = engine.get_instance(inst["id"])
    assert got["status"] == "COMPLETED"
    assert got["output"] == {
        "joined": {"r1": {"w": 10}, "r2": {"w": 20}, "n1": {"sent": "a"}, "n2": {"sent": None}}
    }
    assert sorted(i["w"] for i in seen["resize"]) == [1, 2]
    assert {"to": "a"} in seen["notify"] and {} in seen["notify"]
    jobs = sorted(s["jobType"] for s in got["steps"] if s["stepId"] == "forked")
    assert jobs == ["notify", "notify", "resize", "resize"]


def test_a_keyed_map_over_no_items_completes_with_an_empty_object(engine: Engine) -> None:
    engine.register_definition(_fork())
    inst, _ = engine.start_instance(definition_name="fork", input={"tasks": [], "inputs": {}})
    got = engine.get_instance(inst["id"])
    assert got["status"] == "COMPLETED" and got["output"] == {"joined": {}}


@pytest.mark.parametrize(
    ("tasks", "inputs", "reason"),
    [
        (
            [{"name": "a", "taskReferenceName": "x"}, {"name": "b", "taskReferenceName": "x"}],
            {},
            "item 1: key ${map.item.taskReferenceName} gave 'x' twice",
        ),
        ([{"name": "a"}], {}, "item 0: key ${map.item.taskReferenceName} gave None, not a name"),
        ([{"name": "a", "taskReferenceName": "x"}], [1], "inputs resolved to list"),
    ],
)
def test_a_keyed_map_whose_keys_or_inputs_are_unusable_fails_saying_why(
    engine: Engine, tasks: Any, inputs: Any, reason: str
) -> None:
    engine.register_definition(_fork())
    inst, _ = engine.start_instance(
        definition_name="fork", input={"tasks": tasks, "inputs": inputs}
    )
    got = engine.get_instance(inst["id"])
    assert got["status"] == "FAILED"
    assert reason in got["reason"]
    assert engine.poll("w", ["a", "b"], 10) == []  # nothing was started


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        (None, "gave None, not a job type"),
        ("has space", "gave 'has space', not a job type"),
        ("baton:http", "a job type of the engine"),
    ],
)
def test_a_job_type_that_resolves_to_no_job_type_fails_the_step(
    engine: Engine, name: Any, reason: str
) -> None:
    engine.register_definition(
        {
            "name": "dyn",
            "steps": [{"id": "pick", "type": "SERVICE_TASK", "jobType": "${workflow.input.task}"}],
        }
    )
    inst, _ = engine.start_instance(definition_name="dyn", input={"task": name})
    got = engine.get_instance(inst["id"])
    assert got["status"] == "FAILED" and reason in got["reason"]
    assert engine.poll("w", ["baton:http"], 10) == []


def test_a_job_type_given_as_an_expression_is_the_one_the_input_names(engine: Engine) -> None:
    engine.register_definition(
        {
            "name": "dyn",
            "steps": [
                {
                    "id": "pick",
                    "type": "SERVICE_TASK",
                    "jobType": "${workflow.input.task}",
                    "input": {"task": "${workflow.input.task}", "n": 2},
                    "retryCount": 0,
                }
            ],
            "outputParameters": "${pick.output}",
        }
    )
    a, _ = engine.start_instance(definition_name="dyn", input={"task": "double"})
    b, _ = engine.start_instance(definition_name="dyn", input={"task": "square"})
    (job,) = engine.poll("w", ["square"], 10)
    assert job["input"] == {"task": "square", "n": 2}
    engine.complete_job(job["id"], "w", {"v": 4}, attempt=job["attempt"])
    drain(engine, {"double": lambda i: {"v": i["n"] * 2}})
    assert engine.get_instance(a["id"])["output"] == {"v": 4}
    b = engine.get_instance(b["id"])
    assert b["status"] == "COMPLETED" and b["output"] == {"v": 4}
    assert [s["jobType"] for s in b["steps"]] == ["square"]


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        ({"key": "${workflow.input.x}"}, "a key reads ${map.item…} and ${map.index} only"),
        ({"key": "${map.input.x}"}, "a key reads ${map.item…} and ${map.index} only"),
        ({"key": None}, "inputs are read by each item's key: give a key"),
    ],
)
def test_a_key_reads_the_item_alone_and_inputs_need_a_key(
    engine: Engine, extra: dict[str, Any], says: str
) -> None:
    definition = _fork(**extra)
    if extra.get("key", "") is None:
        del definition["steps"][0]["key"]
    with pytest.raises(ValidationFailed) as e:
        engine.register_definition(definition)
    assert says in str(e.value.problems)


def test_a_keyed_map_ending_in_a_switch_joins_the_output_of_the_task_each_item_ran(
    engine: Engine,
) -> None:
    """Conductor's dynamic fork of a task list mixing worker tasks and sub-workflows: a SWITCH
    on each task's type; the join holds each item's task output, not the SWITCH's ``{case}``."""
    engine.register_definition(
        {
            "name": "child",
            "steps": [{"id": "inner", "type": "SERVICE_TASK", "jobType": "inner"}],
            "outputParameters": {"inner": "${inner.output}", "got": "${workflow.input}"},
        }
    )
    definition = _fork()
    definition["steps"][0]["steps"] = [
        {
            "id": "by_type",
            "type": "SWITCH",
            "on": "${map.item.type}",
            "cases": {
                "SUB_WORKFLOW": [
                    {
                        "id": "flow",
                        "type": "SUB_WORKFLOW",
                        "definitionName": "${map.item.subWorkflowParam.name}",
                        "definitionVersion": "${map.item.subWorkflowParam.version}",
                        "input": "${map.input}",
                    }
                ]
            },
            "default": [
                {
                    "id": "forked",
                    "type": "SERVICE_TASK",
                    "jobType": "${map.item.name}",
                    "input": "${map.input}",
                }
            ],
        }
    ]
    engine.register_definition(definition)
    tasks = [
        {"name": "work", "taskReferenceName": "w1", "type": "SIMPLE"},
        {"name": "work", "taskReferenceName": "w2"},
        {
            "name": "child",
            "taskReferenceName": "c1",
            "type": "SUB_WORKFLOW",
            "subWorkflowParam": {"name": "child"},
        },
    ]
    inputs = {"w1": {"n": 1}, "w2": {"n": 2}, "c1": {"n": 3}}
    inst, _ = engine.start_instance(
        definition_name="fork", input={"tasks": tasks, "inputs": inputs}
    )
    drain(engine, {"work": lambda i: {"n": i["n"] * 10}, "inner": lambda i: {"deep": True}})
    got = engine.get_instance(inst["id"])
    assert got["status"] == "COMPLETED"
    assert got["output"] == {
        "joined": {
            "w1": {"n": 10},
            "w2": {"n": 20},
            "c1": {"inner": {"deep": True}, "got": {"n": 3}},
        }
    }
