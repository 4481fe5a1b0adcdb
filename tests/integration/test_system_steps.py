"""The engine's own system steps on a real PostgreSQL: NOOP, TERMINATE with CANCELLED (Conductor's
TERMINATED), START_WORKFLOW and EXCLUSIVE_JOIN."""

from __future__ import annotations

from typing import Any

import pytest
from baton.engine.service import Engine
from baton.errors import ValidationFailed

from tests.integration.test_control_flow import drain, steps_of, task


def test_a_noop_completes_at_once_with_no_output_and_the_list_goes_on(engine: Engine) -> None:
    engine.register_definition(
        {
            "name": "noop",
            "steps": [
                {"id": "nothing", "type": "NOOP", "input": {"seen": "${workflow.input.k}"}},
                task("after"),
            ],
            "outputParameters": {"noop": "${nothing.output}", "after": "${after.output.v}"},
        }
    )
    inst, _ = engine.start_instance(definition_name="noop", input={"k": 7})
    (nothing,) = steps_of(engine, inst["id"], "nothing")
    assert (nothing["status"], nothing["output"], nothing["input"]) == (
        "COMPLETED",
        {},
        {"seen": 7},
    )
    assert drain(engine, {"after": lambda _: {"v": 1}}) == 1
    got = engine.get_instance(inst["id"])
    assert (got["status"], got["output"]) == ("COMPLETED", {"noop": {}, "after": 1})


def test_a_terminate_cancelled_ends_the_instance_cancelled_with_its_reason_and_output(
    engine: Engine,
) -> None:
    engine.register_definition({"name": "kid", "steps": [task("kid_work")]})
    engine.register_definition(
        {
            "name": "stopper",
            "steps": [
                {
                    "id": "both",
                    "type": "PARALLEL",
                    "branches": [
                        [task("slow")],
                        [{"id": "child", "type": "SUB_WORKFLOW", "definitionName": "kid"}],
                        [
                            task("first"),
                            {
                                "id": "end",
                                "type": "TERMINATE",
                                "status": "CANCELLED",
                                "reason": "given up: ${workflow.input.why}",
                                "output": {"k": "${first.output.k}"},
                            },
                        ],
                    ],
                },
                task("never"),
            ],
        }
    )
    inst, _ = engine.start_instance(definition_name="stopper", input={"why": "late"})
    (child_step,) = steps_of(engine, inst["id"], "child")
    child_id = child_step["childInstanceId"]
    assert drain(engine, {"first": lambda _: {"k": 3}}) == 1
    got = engine.get_instance(inst["id"])
    assert (got["status"], got["reason"], got["output"]) == (
        "CANCELLED",
        "given up: late",
        {"k": 3},
    )
    assert steps_of(engine, inst["id"], "slow")[0]["status"] == "CANCELLED"
    assert steps_of(engine, inst["id"], "end")[0]["status"] == "COMPLETED"
    assert steps_of(engine, inst["id"], "never") == []
    assert engine.poll("w", ["slow", "never"], 10) == []
    assert engine.get_instance(child_id)["status"] == "CANCELLED"
    assert engine.poll("w", ["kid_work"], 10) == []


def test_a_terminate_cancelled_starts_the_failure_workflow_a_cancel_does_not(
    engine: Engine,
) -> None:
    engine.register_definition({"name": "undo", "steps": [task("undo_work")]})
    engine.register_definition(
        {
            "name": "giving_up",
            "failureWorkflow": "undo",
            "steps": [
                task("first"),
                {"id": "end", "type": "TERMINATE", "status": "CANCELLED", "reason": "gave up"},
            ],
        }
    )
    inst, _ = engine.start_instance(definition_name="giving_up", input={"k": 1})
    drain(engine, {"first": lambda _: {}})
    assert engine.get_instance(inst["id"])["status"] == "CANCELLED"
    (undo,) = engine.poll("w", ["undo_work"], 10)
    started = engine.get_instance(undo["instanceId"])
    assert started["input"]["instanceId"] == inst["id"]
    assert started["input"]["reason"] == "gave up"
    # Cancelled by a caller, as Conductor's terminate call: no failure workflow.
    other, _ = engine.start_instance(definition_name="giving_up", input={"k": 2})
    engine.cancel_instance(other["id"], "not wanted")
    assert engine.poll("w", ["undo_work"], 10) == []


def test_start_workflow_starts_another_instance_and_goes_on_without_waiting(
    engine: Engine,
) -> None:
    engine.register_definition({"name": "target", "steps": [task("target_work")]})
    engine.register_definition(
        {
            "name": "starter",
            "steps": [
                {
                    "id": "st",
                    "type": "START_WORKFLOW",
                    "request": {"name": "target", "input": {"x": "${workflow.input.x}"}},
                },
                task("after"),
            ],
        }
    )
    inst, _ = engine.start_instance(
        definition_name="starter", input={"x": 5}, correlation_id="order-1"
    )
    (st,) = steps_of(engine, inst["id"], "st")
    assert st["status"] == "COMPLETED"
    started_id = st["output"]["workflowId"]
    assert st["output"] == {"workflowId": started_id, "instanceId": started_id}
    started = engine.get_instance(started_id)
    assert (started["definitionName"], started["status"], started["input"]) == (
        "target",
        "RUNNING",
        {"x": 5},
    )
    assert started["correlationId"] == "order-1"  # the starter's, the request giving none
    assert started.get("parentInstanceId") is None
    # Nothing ties them: the starter goes on, and cancelling it leaves the other running.
    assert [j["jobType"] for j in engine.poll("w", ["after"], 10)] == ["after"]
    engine.cancel_instance(inst["id"], "done with it")
    assert engine.get_instance(started_id)["status"] == "RUNNING"
    assert drain(engine, {"target_work": lambda _: {}}) == 1
    assert engine.get_instance(started_id)["status"] == "COMPLETED"


def test_start_workflow_takes_its_whole_request_from_an_expression(engine: Engine) -> None:
    engine.register_definition({"name": "target2", "version": 1, "steps": [task("t2")]})
    engine.register_definition({"name": "target2", "version": 2, "steps": [task("t2b")]})
    engine.register_definition(
        {
            "name": "starter2",
            "steps": [{"id": "st", "type": "START_WORKFLOW", "request": "${workflow.input.sw}"}],
        }
    )
    sw = {"name": "target2", "version": 1, "input": {"a": 1}, "correlationId": "c-9"}
    inst, _ = engine.start_instance(definition_name="starter2", input={"sw": sw})
    assert engine.get_instance(inst["id"])["status"] == "COMPLETED"
    (st,) = steps_of(engine, inst["id"], "st")
    started = engine.get_instance(st["output"]["workflowId"])
    assert (started["definitionVersion"], started["input"], started["correlationId"]) == (
        1,
        {"a": 1},
        "c-9",
    )


def test_start_workflow_with_a_request_it_cannot_start_fails_the_step_saying_why(
    engine: Engine,
) -> None:
    engine.register_definition(
        {
            "name": "starter3",
            "steps": [{"id": "st", "type": "START_WORKFLOW", "request": "${workflow.input.sw}"}],
        }
    )
    cases = [
        ({"name": "no_such_definition"}, "definition 'no_such_definition' not found"),
        ({"input": {}}, "names no definition"),
        ({"name": "starter3", "version": 0}, "not a version"),
        ({"name": "starter3", "input": [1]}, "not an object"),
        (None, "resolved to null, not an object"),
    ]
    for sw, says in cases:
        inst, _ = engine.start_instance(definition_name="starter3", input={"sw": sw})
        got = engine.get_instance(inst["id"])
        assert got["status"] == "FAILED", sw
        assert says in (got["reason"] or ""), (sw, got["reason"])


def test_a_definition_that_starts_itself_is_bounded_and_the_engine_goes_on(
    engine: Engine,
) -> None:
    engine.register_definition(
        {
            "name": "again",
            "steps": [{"id": "st", "type": "START_WORKFLOW", "request": {"name": "again"}}],
        }
    )
    inst, _ = engine.start_instance(definition_name="again")
    assert engine.get_instance(inst["id"])["status"] == "COMPLETED"
    found = engine.search_instances(definition_name="again", limit=100)["instances"]
    statuses = sorted(i["status"] for i in found)
    assert statuses == ["COMPLETED"] * 32 + ["FAILED"]
    (failed,) = [i for i in found if i["status"] == "FAILED"]
    assert "nest deeper than 32 levels" in engine.get_instance(failed["id"])["reason"]


def _branching(name: str, **join: Any) -> dict[str, Any]:
    return {
        "name": name,
        "steps": [
            task("first"),
            {
                "id": "pick",
                "type": "SWITCH",
                "on": "${workflow.input.way}",
                "cases": {
                    "a": [task("a1"), task("a2")],
                    "b": [task("b1")],
                    "c": [{"id": "c1", "type": "NOOP"}],
                },
            },
            {"id": "joined", "type": "EXCLUSIVE_JOIN", **join},
            task("after", input={"got": "${joined.output.v}"}),
        ],
        "outputParameters": {"joined": "${joined.output}"},
    }


def test_an_exclusive_join_gives_the_output_of_the_case_that_ran(engine: Engine) -> None:
    engine.register_definition(
        _branching("xjoin", joinOn=["a2", "b1"], defaultJoinOn=["c1", "first"])
    )
    outputs = {
        "first": lambda _: {"v": "first"},
        "a1": lambda _: {"v": "a1"},
        "a2": lambda _: {"v": "a2"},
        "b1": lambda _: {"v": "b1"},
        "after": lambda i: {"saw": i["got"]},
    }
    for way, expected in (("a", {"v": "a2"}), ("b", {"v": "b1"}), ("c", {}), ("z", {"v": "first"})):
        inst, _ = engine.start_instance(definition_name="xjoin", input={"way": way})
        drain(engine, outputs)
        got = engine.get_instance(inst["id"])
        assert (got["status"], got["output"]) == ("COMPLETED", {"joined": expected}), way
        (joined,) = steps_of(engine, inst["id"], "joined")
        assert joined["status"] == "COMPLETED"


def test_an_exclusive_join_none_of_whose_steps_ran_fails_naming_them(engine: Engine) -> None:
    engine.register_definition(_branching("xjoin2", joinOn=["a2", "b1"]))
    inst, _ = engine.start_instance(definition_name="xjoin2", input={"way": "c"})
    drain(engine, {"first": lambda _: {}})
    got = engine.get_instance(inst["id"])
    assert got["status"] == "FAILED"
    assert "none of the steps it joins on ran (joinOn a2, b1)" in got["reason"]


def test_an_exclusive_join_on_a_step_it_cannot_see_is_refused_at_registration(
    engine: Engine,
) -> None:
    with pytest.raises(ValidationFailed) as e:
        engine.register_definition(_branching("xjoin3", joinOn=["a2", "nowhere"]))
    assert [p.path for p in e.value.problems] == ["steps[2].joinOn[1]"]
    assert "nowhere" in e.value.problems[0].message


def test_an_exclusive_join_in_a_loop_reads_this_iteration_s_case(engine: Engine) -> None:
    inner = _branching("unused", joinOn=["a2", "b1"])["steps"][1:3]
    del inner[0]["on"]
    inner[0]["script"] = "$.ways[$.i]"
    inner[0]["input"] = {"ways": "${workflow.input.ways}", "i": "${loop.iteration}"}
    engine.register_definition(
        {
            "name": "xloop",
            "steps": [
                task("first"),
                {
                    "id": "loop",
                    "type": "DO_WHILE",
                    "steps": [*inner, task("each", input={"got": "${joined.output.v}"})],
                    "while": "loop.output.iteration < 2",
                    "maxIterations": 5,
                },
            ],
        }
    )
    seen: list[Any] = []

    def each(i: dict[str, Any]) -> dict[str, Any]:
        seen.append(i["got"])
        return {}

    engine.start_instance(definition_name="xloop", input={"ways": ["x", "a", "b"]})
    drain(
        engine,
        {
            "first": lambda _: {},
            "a1": lambda _: {},
            "a2": lambda _: {"v": "a2"},
            "b1": lambda _: {"v": "b1"},
            "each": each,
        },
    )
    assert seen == ["a2", "b1"]  # the second iteration does not see the first one's a2
