"""A rerun from a step execution (Conductor's rerun from a task) on a real PostgreSQL: what after
it is removed and what is kept, in a sequence, a PARALLEL, a DO_WHILE and a JOIN; a new input
for the instance and for the step; and parents that run again with their child (rerun, retry
and restart of a child)."""

from __future__ import annotations

from typing import Any

import pytest
from baton.engine.service import Engine
from baton.errors import Conflict, StepNotFound, ValidationFailed

from tests.integration.test_control_flow import Handler, drain, steps_of, task


def _counting(runs: dict[str, int], *failing: str) -> dict[str, Handler]:
    """Handlers for every type that count their runs; ``failing`` types fail once each."""
    failed: set[str] = set()

    def handler(name: str) -> Handler:
        def run(given: dict[str, Any]) -> Any:
            runs[name] = runs.get(name, 0) + 1
            if name in failing and name not in failed:
                failed.add(name)
                raise RuntimeError(f"{name} broke")
            return {name: runs[name], "given": given}

        return run

    names = ["a", "b", "c", "ok", "shaky", "last", "t", "after", "x"]
    return {n: handler(n) for n in names}


def _statuses(engine: Engine, iid: str) -> list[tuple[str, str]]:
    return [(s["stepId"], s["status"]) for s in engine.get_instance(iid)["steps"]]


def test_a_rerun_from_a_step_removes_what_followed_and_runs_again_from_it(engine: Engine) -> None:
    engine.register_definition(
        {
            "name": "seq",
            "steps": [
                task("a"),
                task("b", input={"v": "${workflow.input.v}"}),
                task("c", input={"v": "${workflow.input.v}"}),
            ],
            "outputParameters": {"b": "${b.output.given}", "c": "${c.output.given}"},
        }
    )
    inst, _ = engine.start_instance(definition_name="seq", input={"v": 1})
    runs: dict[str, int] = {}
    handlers = _counting(runs, "c")
    drain(engine, handlers)
    assert engine.get_instance(inst["id"])["status"] == "FAILED"
    (b,) = steps_of(engine, inst["id"], "b")

    with pytest.raises(Conflict, match="only an ended instance can be rerun"):
        running, _ = engine.start_instance(definition_name="seq")
        engine.rerun_instance(running["id"], from_step_execution=b["id"])
    with pytest.raises(StepNotFound):
        engine.rerun_instance(inst["id"], from_step_execution=running["id"])
    with pytest.raises(ValidationFailed):
        engine.rerun_instance(inst["id"], from_step_execution="not-an-id")
    engine.cancel_instance(running["id"], "not this one")

    again = engine.rerun_instance(
        inst["id"], from_step_execution=b["id"], input={"v": 2}, step_input={"mine": True}
    )
    assert again["status"] == "RUNNING" and "reason" not in again
    # b's old execution and c's are gone; b runs again, given the rerun's input
    assert _statuses(engine, inst["id"]) == [("a", "COMPLETED"), ("b", "SCHEDULED")]
    drain(engine, handlers)
    done = engine.get_instance(inst["id"])
    assert done["status"] == "COMPLETED"
    assert done["input"] == {"v": 2}
    assert done["output"] == {"b": {"mine": True}, "c": {"v": 2}}
    assert runs == {"a": 1, "b": 2, "c": 2}
    events = [a["event"] for a in engine.audit_trail(inst["id"])]
    assert events.count("INSTANCE_RERUN") == 1

    # a completed instance reruns too, from its first step
    (a,) = steps_of(engine, inst["id"], "a")
    engine.rerun_instance(inst["id"], from_step_execution=a["id"], correlation_id="again")
    assert _statuses(engine, inst["id"]) == [("a", "SCHEDULED")]
    drain(engine, handlers)
    done = engine.get_instance(inst["id"])
    assert done["status"] == "COMPLETED" and done["correlationId"] == "again"
    assert runs == {"a": 2, "b": 3, "c": 3}


def test_a_rerun_inside_a_parallel_keeps_the_branches_that_completed(engine: Engine) -> None:
    engine.register_definition(
        {
            "name": "fan",
            "steps": [
                task("a"),
                {
                    "id": "fan",
                    "type": "PARALLEL",
                    "branches": [[task("ok")], [task("shaky"), task("b")]],
                },
                task("last"),
            ],
        }
    )
    inst, _ = engine.start_instance(definition_name="fan")
    runs: dict[str, int] = {}
    handlers = _counting(runs, "b")
    drain(engine, handlers)
    assert engine.get_instance(inst["id"])["status"] == "FAILED"
    (shaky,) = steps_of(engine, inst["id"], "shaky")
    engine.rerun_instance(inst["id"], from_step_execution=shaky["id"])
    assert [s["status"] for s in steps_of(engine, inst["id"], "fan")] == ["IN_PROGRESS"]
    assert [s["status"] for s in steps_of(engine, inst["id"], "ok")] == ["COMPLETED"]
    assert [s["status"] for s in steps_of(engine, inst["id"], "shaky")] == ["SCHEDULED"]
    assert steps_of(engine, inst["id"], "b") == []
    drain(engine, handlers)
    assert engine.get_instance(inst["id"])["status"] == "COMPLETED"
    assert runs == {"a": 1, "ok": 1, "shaky": 2, "b": 2, "last": 1}

    # Rerun at the JOIN: the branches stay as they ended, the join and what follows run again
    (fan,) = steps_of(engine, inst["id"], "fan")
    engine.rerun_instance(inst["id"], from_step_execution=fan["id"], at_join=True)
    drain(engine, handlers)
    done = engine.get_instance(inst["id"])
    assert done["status"] == "COMPLETED"
    assert runs == {"a": 1, "ok": 1, "shaky": 2, "b": 2, "last": 2}
    assert [s["status"] for s in steps_of(engine, inst["id"], "last")] == ["COMPLETED"]


def test_a_rerun_inside_a_loop_removes_the_later_iterations(engine: Engine) -> None:
    engine.register_definition(
        {
            "name": "loop",
            "steps": [
                {
                    "id": "round",
                    "type": "DO_WHILE",
                    "while": "round.iteration < 3",
                    "maxIterations": 10,
                    "steps": [task("t", input={"k": "${round.iteration}"})],
                },
                task("after"),
            ],
        }
    )
    inst, _ = engine.start_instance(definition_name="loop")
    runs: dict[str, int] = {}
    handlers = _counting(runs)
    drain(engine, handlers)
    assert engine.get_instance(inst["id"])["status"] == "COMPLETED"
    ts = steps_of(engine, inst["id"], "t")
    assert [s["iteration"] for s in ts] == [1, 2, 3]
    engine.rerun_instance(inst["id"], from_step_execution=ts[1]["id"])
    left = steps_of(engine, inst["id"], "t")
    assert [(s["iteration"], s["status"]) for s in left] == [(1, "COMPLETED"), (2, "SCHEDULED")]
    assert steps_of(engine, inst["id"], "after") == []
    drain(engine, handlers)
    assert engine.get_instance(inst["id"])["status"] == "COMPLETED"
    assert [s["iteration"] for s in steps_of(engine, inst["id"], "t")] == [1, 2, 3]
    assert runs == {"t": 5, "after": 2}


def _parent_and_child(engine: Engine) -> tuple[str, str]:
    engine.register_definition({"name": "kid", "steps": [task("x")]})
    engine.register_definition(
        {
            "name": "mom",
            "steps": [{"id": "c", "type": "SUB_WORKFLOW", "definitionName": "kid"}, task("after")],
        }
    )
    inst, _ = engine.start_instance(definition_name="mom")
    kid = steps_of(engine, inst["id"], "c")[0]["childInstanceId"]
    return inst["id"], kid


@pytest.mark.parametrize("how", ["rerun", "retry", "restart"])
def test_a_parent_runs_again_with_its_child(engine: Engine, how: str) -> None:
    mom, kid = _parent_and_child(engine)
    runs: dict[str, int] = {}
    handlers = _counting(runs, "x")
    drain(engine, handlers)
    engine.deliver_pending()
    assert engine.get_instance(kid)["status"] == "FAILED"
    assert engine.get_instance(mom)["status"] == "FAILED"
    if how == "rerun":
        (x,) = steps_of(engine, kid, "x")
        engine.rerun_instance(kid, from_step_execution=x["id"])
    elif how == "retry":
        engine.retry_instance(kid)
    else:
        engine.restart_instance(kid)
    parent = engine.get_instance(mom)
    assert parent["status"] == "RUNNING"
    assert [s["status"] for s in steps_of(engine, mom, "c")] == ["IN_PROGRESS"]
    drain(engine, handlers)
    engine.deliver_pending()
    assert engine.get_instance(kid)["status"] == "COMPLETED"
    assert engine.get_instance(mom)["status"] == "COMPLETED"
    assert [s["status"] for s in steps_of(engine, mom, "c")] == ["COMPLETED"]
    assert runs == {"x": 2, "after": 1}
    assert "INSTANCE_RERUN" in [a["event"] for a in engine.audit_trail(mom)]


def test_a_child_rerun_that_ends_at_once_ends_its_parent_step_too(engine: Engine) -> None:
    engine.register_definition(
        {"name": "quick", "steps": [{"id": "v", "type": "SET_VARIABLE", "variables": {"n": 1}}]}
    )
    engine.register_definition(
        {
            "name": "holder",
            "steps": [
                {"id": "c", "type": "SUB_WORKFLOW", "definitionName": "quick"},
                task("after"),
            ],
        }
    )
    inst, _ = engine.start_instance(definition_name="holder")
    engine.deliver_pending()
    kid = steps_of(engine, inst["id"], "c")[0]["childInstanceId"]
    engine.cancel_instance(inst["id"], "stop")
    engine.deliver_pending()
    assert engine.get_instance(inst["id"])["status"] == "CANCELLED"
    (v,) = steps_of(engine, kid, "v")
    engine.rerun_instance(kid, from_step_execution=v["id"])  # the child completes at once
    engine.deliver_pending()
    assert engine.get_instance(kid)["status"] == "COMPLETED"
    assert [s["status"] for s in steps_of(engine, inst["id"], "c")] == ["COMPLETED"]
    assert [s["status"] for s in steps_of(engine, inst["id"], "after")] == ["SCHEDULED"]


def test_a_rerun_without_a_step_restarts_with_the_new_input(engine: Engine) -> None:
    engine.register_definition(
        {"name": "one", "steps": [task("a", input={"v": "${workflow.input.v}"})]}
    )
    inst, _ = engine.start_instance(definition_name="one", input={"v": 1})
    runs: dict[str, int] = {}
    handlers = _counting(runs)
    drain(engine, handlers)
    engine.rerun_instance(inst["id"], input={"v": 7}, correlation_id="c7")
    jobs = engine.poll("w", ["a"], 10)
    assert [j["input"] for j in jobs] == [{"v": 7}]
    got = engine.get_instance(inst["id"])
    assert got["input"] == {"v": 7} and got["correlationId"] == "c7"


def test_a_cancelled_instance_is_retried_from_what_its_cancel_stopped(engine: Engine) -> None:
    engine.register_definition(
        {
            "name": "stopped",
            "steps": [
                task("a"),
                {"id": "fan", "type": "PARALLEL", "branches": [[task("ok")], [task("b")]]},
                task("last"),
            ],
        }
    )
    inst, _ = engine.start_instance(definition_name="stopped")
    runs: dict[str, int] = {}
    handlers = _counting(runs)
    drain(engine, {"a": handlers["a"], "ok": handlers["ok"]})
    engine.cancel_instance(inst["id"], "enough")
    assert [s["status"] for s in steps_of(engine, inst["id"], "b")] == ["CANCELLED"]
    retried = engine.retry_instance(inst["id"])
    assert retried["status"] == "RUNNING"
    drain(engine, handlers)
    assert engine.get_instance(inst["id"])["status"] == "COMPLETED"
    assert runs == {"a": 1, "ok": 1, "b": 1, "last": 1}
    assert [s["status"] for s in steps_of(engine, inst["id"], "b")] == ["CANCELLED", "COMPLETED"]


def test_a_parent_running_again_resumes_its_other_children_in_place(engine: Engine) -> None:
    """Conductor's updateAndPushParents: the parent's sibling sub-workflows that its failure
    cancelled are retried in place (what they completed stays), and a cancelled sibling task
    is reset in place (its old execution gone)."""
    engine.register_definition({"name": "bad-kid", "steps": [task("x")]})
    engine.register_definition({"name": "slow-kid", "steps": [task("a"), task("b")]})
    engine.register_definition(
        {
            "name": "family",
            "steps": [
                {
                    "id": "fan",
                    "type": "PARALLEL",
                    "branches": [
                        [{"id": "one", "type": "SUB_WORKFLOW", "definitionName": "bad-kid"}],
                        [{"id": "two", "type": "SUB_WORKFLOW", "definitionName": "slow-kid"}],
                        [task("shaky")],
                    ],
                },
                task("last"),
            ],
        }
    )
    inst, _ = engine.start_instance(definition_name="family")
    mom = inst["id"]
    first = steps_of(engine, mom, "one")[0]["childInstanceId"]
    second = steps_of(engine, mom, "two")[0]["childInstanceId"]
    runs: dict[str, int] = {}
    handlers = _counting(runs, "x")
    drain(engine, {"a": handlers["a"]})  # the second child completes its first step only
    drain(engine, {"x": handlers["x"]})
    engine.deliver_pending()
    assert engine.get_instance(mom)["status"] == "FAILED"
    assert engine.get_instance(second)["status"] == "CANCELLED"
    assert [s["status"] for s in steps_of(engine, mom, "shaky")] == ["CANCELLED"]

    (x,) = steps_of(engine, first, "x")
    engine.rerun_instance(first, from_step_execution=x["id"])
    assert engine.get_instance(mom)["status"] == "RUNNING"
    # the cancelled sibling child is retried in place, the cancelled task reset in place
    assert [(s["status"], s["childInstanceId"]) for s in steps_of(engine, mom, "two")] == [
        ("IN_PROGRESS", second)
    ]
    assert engine.get_instance(second)["status"] == "RUNNING"
    assert [s["status"] for s in steps_of(engine, mom, "shaky")] == ["SCHEDULED"]
    drain(engine, handlers)
    engine.deliver_pending()
    drain(engine, handlers)
    engine.deliver_pending()
    assert engine.get_instance(mom)["status"] == "COMPLETED"
    assert [s["childInstanceId"] for s in steps_of(engine, mom, "two")] == [second]
    assert runs == {"a": 1, "x": 2, "b": 1, "shaky": 1, "last": 1}


def test_a_cancelled_child_cancels_its_step_and_its_parent(engine: Engine) -> None:
    """Conductor: a SUB_WORKFLOW whose child was TERMINATED is CANCELED, is not retried, and a
    required CANCELED task terminates its workflow; an optional one is passed over."""
    engine.register_definition({"name": "kid2", "steps": [task("x")]})
    engine.register_definition(
        {
            "name": "mom2",
            "steps": [
                {"id": "c", "type": "SUB_WORKFLOW", "definitionName": "kid2", "retryCount": 2},
                task("after"),
            ],
        }
    )
    engine.register_definition(
        {
            "name": "mom3",
            "steps": [
                {"id": "c", "type": "SUB_WORKFLOW", "definitionName": "kid2", "optional": True},
                task("after"),
            ],
        }
    )
    required, _ = engine.start_instance(definition_name="mom2")
    optional, _ = engine.start_instance(definition_name="mom3")
    for parent in (required, optional):
        kid = steps_of(engine, parent["id"], "c")[0]["childInstanceId"]
        engine.cancel_instance(kid, "stop it")
        engine.deliver_pending()
    got = engine.get_instance(required["id"])
    assert got["status"] == "CANCELLED" and "ended CANCELLED: stop it" in got["reason"]
    assert [s["status"] for s in steps_of(engine, required["id"], "c")] == ["CANCELLED"]
    assert engine.get_instance(optional["id"])["status"] == "RUNNING"
    assert [s["status"] for s in steps_of(engine, optional["id"], "after")] == ["SCHEDULED"]


def test_a_parent_cancelled_by_its_child_starts_its_failure_workflow(engine: Engine) -> None:
    """Conductor's terminateWorkflow starts the failure workflow for a TERMINATED end its
    decider made (a required task CANCELED); a cancel asked for through the API does not."""
    engine.register_definition({"name": "kid4", "steps": [task("x")]})
    engine.register_definition({"name": "tidy", "steps": [task("tidy")]})
    engine.register_definition(
        {
            "name": "mom4",
            "failureWorkflow": "tidy",
            "steps": [{"id": "c", "type": "SUB_WORKFLOW", "definitionName": "kid4"}],
        }
    )
    by_child, _ = engine.start_instance(definition_name="mom4")
    by_api, _ = engine.start_instance(definition_name="mom4")
    kid = steps_of(engine, by_child["id"], "c")[0]["childInstanceId"]
    engine.cancel_instance(kid, "stop it")
    engine.cancel_instance(by_api["id"], "not needed")
    engine.deliver_pending()
    assert engine.get_instance(by_child["id"])["status"] == "CANCELLED"
    (tidy,) = engine.poll("w", ["tidy"], 10)
    started = engine.get_instance(tidy["instanceId"])["input"]
    assert (started["workflowId"], started["failureStatus"]) == (by_child["id"], "TERMINATED")


def test_a_sibling_child_that_cannot_be_retried_is_handed_back_as_it_ended(
    engine: Engine,
) -> None:
    """The parent waits again on a failed sibling child, but that child was ended by its
    TERMINATE step and refuses a retry: the parent is told it ended, and fails again."""
    engine.register_definition(
        {
            "name": "stopper",
            "steps": [{"id": "end", "type": "TERMINATE", "status": "FAILED", "reason": "no"}],
        }
    )
    engine.register_definition({"name": "worker-kid", "steps": [task("x")]})
    engine.register_definition(
        {
            "name": "pair",
            "steps": [
                {
                    "id": "fan",
                    "type": "PARALLEL",
                    "branches": [
                        [{"id": "s", "type": "SUB_WORKFLOW", "definitionName": "stopper"}],
                        [{"id": "w", "type": "SUB_WORKFLOW", "definitionName": "worker-kid"}],
                    ],
                },
            ],
        }
    )
    inst, _ = engine.start_instance(definition_name="pair")
    mom = inst["id"]
    engine.deliver_pending()
    assert engine.get_instance(mom)["status"] == "FAILED"
    kid = steps_of(engine, mom, "w")[0]["childInstanceId"]
    assert engine.get_instance(kid)["status"] == "CANCELLED"
    (x,) = steps_of(engine, kid, "x")
    engine.rerun_instance(kid, from_step_execution=x["id"])
    engine.deliver_pending()
    got = engine.get_instance(mom)
    assert got["status"] == "FAILED" and "no" in got["reason"]
    assert [s["status"] for s in steps_of(engine, mom, "s")] == ["FAILED"]
    assert [s["status"] for s in steps_of(engine, mom, "w")] == ["CANCELLED"]
    ended = [a for a in engine.audit_trail(mom) if a["event"] == "CHILD_ENDED"]
    # the stopper's end reached the parent twice: when it ended, and handed back
    assert [a["detail"]["stepId"] for a in ended].count("s") == 2
