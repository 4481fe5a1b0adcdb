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
