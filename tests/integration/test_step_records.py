"""Native step features on a real PostgreSQL: an ``optional`` step whose failure is recorded
while its list goes on, a SERVICE_TASK's ``startDelaySeconds``, expressions reading a step's
execution record (``${s.status}``, ``.executionId``, ``.jobId``, ``.attempt``, times) and the
instance's start time, JSONPath brackets, and ``outputParameters`` given as one expression."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
from baton.engine.service import Engine
from baton.errors import ValidationFailed

from tests.integration.test_control_flow import drain, steps_of, task


def _fail(_: Any) -> Any:
    raise RuntimeError("out of stock")


def test_an_optional_step_s_failure_is_recorded_and_the_list_goes_on(engine: Engine) -> None:
    engine.register_definition(
        {
            "name": "opt",
            "steps": [
                task("maybe", "opt_maybe", optional=True, retryCount=0),
                task("after", "opt_after"),
            ],
        }
    )
    inst, _ = engine.start_instance(definition_name="opt", input={})
    drain(engine, {"opt_maybe": _fail, "opt_after": lambda _: {"done": True}})
    got = engine.get_instance(inst["id"])
    assert got["status"] == "COMPLETED", got.get("reason")
    maybe = steps_of(engine, inst["id"], "maybe")[0]
    assert maybe["status"] == "COMPLETED"
    assert "out of stock" in maybe["error"]
    assert steps_of(engine, inst["id"], "after")[0]["status"] == "COMPLETED"
    events = [e["type"] for e in engine.history(inst["id"])["events"]]
    assert "OPTIONAL_STEP_FAILED" in events


def test_optional_given_by_an_expression_is_read_for_each_item_when_it_fails(
    engine: Engine,
) -> None:
    # A Conductor dynamic fork's tasks each say whether they are optional (true, or "true").
    each = task("each", "opt_each", optional="${map.item.optional}", retryCount=0)
    engine.register_definition(
        {
            "name": "opt_items",
            "steps": [
                {"id": "m", "type": "MAP", "items": "${workflow.input.items}", "steps": [each]}
            ],
        }
    )
    flags: list[Any] = [True, "true", " TRUE ", False, "false", None, "yes", 1]
    for n, flag in enumerate(flags):
        inst, _ = engine.start_instance(
            definition_name="opt_items", input={"items": [{"optional": flag}]}
        )
        drain(engine, {"opt_each": _fail})
        got = engine.get_instance(inst["id"])
        expected = "COMPLETED" if n < 3 else "FAILED"
        assert got["status"] == expected, (flag, got.get("reason"))


def test_a_step_that_is_not_optional_still_fails_the_instance(engine: Engine) -> None:
    engine.register_definition(
        {"name": "notopt", "steps": [task("must", "no_must", retryCount=0), task("later")]}
    )
    inst, _ = engine.start_instance(definition_name="notopt", input={})
    drain(engine, {"no_must": _fail})
    assert engine.get_instance(inst["id"])["status"] == "FAILED"


def test_a_start_delay_keeps_the_job_from_workers_until_due(engine: Engine) -> None:
    engine.register_definition(
        {"name": "later", "steps": [task("slow", "delay_slow", startDelaySeconds=3600)]}
    )
    inst, _ = engine.start_instance(definition_name="later", input={})
    assert engine.poll("w", ["delay_slow"], 10) == []
    row = engine.db.autocommit(
        lambda c: c.execute(
            "SELECT run_at - created_at AS delay FROM job WHERE instance_id = %(id)s",
            {"id": inst["id"]},
        ).fetchone()
    )
    assert row is not None and row["delay"].total_seconds() == 3600


def test_expressions_read_a_step_s_record_the_start_time_and_brackets(engine: Engine) -> None:
    engine.register_definition(
        {
            "name": "records",
            "steps": [
                task("first", "rec_first"),
                {
                    "id": "look",
                    "type": "SET_VARIABLE",
                    "variables": {
                        "status": "${first.status}",
                        "execution": "${first.executionId}",
                        "job": "${first.jobId}",
                        "attempt": "${first.attempt}",
                        "started": "${first.startTime}",
                        "ended": "${first.endTime}",
                        "completedAt": "${first.completedAt}",
                        "created": "${workflow.createTime}",
                        "createdAt": "${workflow.createdAt}",
                        "second": "${first.output.rows[1].x}",
                        "odd": "${first.output['odd key']}",
                        "dotted": '${first.output["a.b"]}',
                    },
                },
            ],
            "outputParameters": "${first.output}",
        }
    )
    inst, _ = engine.start_instance(definition_name="records", input={})
    out = {"rows": [{"x": 1}, {"x": 2}], "odd key": "yes", "a.b": "dots"}
    drain(engine, {"rec_first": lambda _: out})
    got = engine.get_instance(inst["id"])
    assert got["status"] == "COMPLETED", got.get("reason")
    assert got["output"] == out  # outputParameters given as one expression
    v = got["variables"]
    first = steps_of(engine, inst["id"], "first")[0]
    assert v["status"] == "COMPLETED"
    assert v["execution"] == first["id"] and v["job"] == first["jobId"]
    assert v["attempt"] == 1
    created = datetime.fromisoformat(got["createdAt"].replace("Z", "+00:00"))
    assert abs(v["created"] - created.timestamp() * 1000) < 1000
    assert int(datetime.fromisoformat(v["createdAt"]).timestamp() * 1000) == v["created"]
    assert v["created"] <= v["started"] <= v["ended"]
    assert int(datetime.fromisoformat(v["completedAt"]).timestamp() * 1000) == v["ended"]
    assert (v["second"], v["odd"], v["dotted"]) == (2, "yes", "dots")


@pytest.mark.parametrize(
    ("expression", "words"),
    [
        ("${first.bogus}", "executionId, jobId"),
        ("${nowhere.status}", "unknown step 'nowhere'"),
        ("${first.output[}", "is not closed"),
    ],
)
def test_a_bad_record_reference_is_refused_at_registration(
    engine: Engine, expression: str, words: str
) -> None:
    with pytest.raises(ValidationFailed) as e:
        engine.register_definition(
            {
                "name": "badrecord",
                "steps": [task("first"), task("second", input={"x": expression})],
            }
        )
    assert words in str(e.value.problems)


def _child(engine: Engine, name: str) -> None:
    engine.register_definition(
        {
            "name": name,
            "steps": [{"id": "mark", "type": "SET_VARIABLE", "variables": {"ran": name}}],
        }
    )


def test_a_sub_workflow_named_by_an_expression_starts_the_one_it_gives(engine: Engine) -> None:
    _child(engine, "kid_a")
    _child(engine, "kid_a")  # version 2
    engine.register_definition(
        {
            "name": "dynparent",
            "steps": [
                {
                    "id": "child",
                    "type": "SUB_WORKFLOW",
                    "definitionName": "${workflow.input.flow}",
                    "definitionVersion": "${workflow.input.version}",
                }
            ],
        }
    )
    ok, _ = engine.start_instance(
        definition_name="dynparent", input={"flow": "kid_a", "version": 1}
    )
    got = engine.get_instance(ok["id"])
    assert got["status"] == "COMPLETED", got.get("reason")
    kid = engine.get_instance(steps_of(engine, ok["id"], "child")[0]["childInstanceId"])
    assert (kid["definitionName"], kid["definitionVersion"]) == ("kid_a", 1)
    bad, _ = engine.start_instance(definition_name="dynparent", input={"flow": "no such!"})
    got = engine.get_instance(bad["id"])
    assert got["status"] == "FAILED"
    assert "gave 'no such!', not a definition name" in got["reason"]


def test_a_failure_workflow_named_by_an_expression_is_started_when_the_run_fails(
    engine: Engine,
) -> None:
    _child(engine, "on_fail_b")
    engine.register_definition(
        {
            "name": "failing",
            "failureWorkflow": "${workflow.input.onFailure}",
            "steps": [task("doomed", "fw_doomed", retryCount=0)],
        }
    )
    inst, _ = engine.start_instance(definition_name="failing", input={"onFailure": "on_fail_b"})
    drain(engine, {"fw_doomed": _fail})
    assert engine.get_instance(inst["id"])["status"] == "FAILED"
    started = [
        e for e in engine.history(inst["id"])["events"] if e["type"] == "FAILURE_WORKFLOW_STARTED"
    ]
    assert len(started) == 1
    none, _ = engine.start_instance(definition_name="failing", input={})
    drain(engine, {"fw_doomed": _fail})
    events = [e["type"] for e in engine.history(none["id"])["events"]]
    assert "FAILURE_WORKFLOW_STARTED" not in events  # no name given: none is started


def test_a_service_task_s_input_reads_its_own_ids(engine: Engine) -> None:
    engine.register_definition(
        {
            "name": "ownids",
            "steps": [
                task(
                    "me",
                    "own_me",
                    input={
                        "job": "${me.jobId}",
                        "execution": "${me.executionId}",
                        "taskId": "${me.jobId}.${me.attempt}",
                    },
                )
            ],
        }
    )
    inst, _ = engine.start_instance(definition_name="ownids", input={})
    (job,) = engine.poll("w", ["own_me"], 1)
    me = steps_of(engine, inst["id"], "me")[0]
    assert job["input"] == {
        "job": job["id"],
        "execution": me["id"],
        "taskId": f"{job['id']}.1",
    }
    with pytest.raises(ValidationFailed) as e:
        engine.register_definition(
            {
                "name": "ownbad",
                "steps": [{"id": "s", "type": "SET_VARIABLE", "variables": {"x": "${s.status}"}}],
            }
        )
    assert "reads its own record in a SERVICE_TASK's input" in str(e.value.problems)
