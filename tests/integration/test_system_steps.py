"""The engine's own system steps on a real PostgreSQL: NOOP, TERMINATE with CANCELLED (Conductor's
TERMINATED), START_WORKFLOW and EXCLUSIVE_JOIN."""

from __future__ import annotations

from baton.engine.service import Engine

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
