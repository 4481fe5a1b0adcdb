"""On a real PostgreSQL: a SUB_WORKFLOW whose child definition an expression gives when the child
starts, read in its dialect (a Baton definition, or a Conductor WorkflowDef through the
translator the Conductor surface registers: ``baton.dialects``); a document that is no
definition fails the step saying why, and the engine goes on. And a keyed MAP's ``indexAs``
(Conductor's dynamic fork's ``__index``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from baton import dialects
from baton.conductor import definitions as cdefs
from baton.conductor import dialect as conductor_dialect
from baton.engine.service import Engine
from baton.errors import ValidationFailed

from tests.integration.test_control_flow import drain


@pytest.fixture(autouse=True)
def registered_dialect() -> Iterator[None]:
    conductor_dialect.register()  # as the functions' runtime does when a process starts
    yield


def _parent(dialect: str | None) -> dict[str, Any]:
    sub: dict[str, Any] = {
        "id": "sub",
        "type": "SUB_WORKFLOW",
        "definition": "${workflow.input.child}",
        "input": {"x": "${workflow.input.x}"},
    }
    if dialect is not None:
        sub["definitionDialect"] = dialect
    return {"name": "parent", "steps": [sub], "outputParameters": {"got": "${sub.output}"}}


BATON_CHILD = {
    "name": "child",
    "steps": [
        {
            "id": "work",
            "type": "SERVICE_TASK",
            "jobType": "double",
            "input": {"x": "${workflow.input.x}"},
        }
    ],
    "outputParameters": {"y": "${work.output.y}"},
}
CONDUCTOR_CHILD = {
    "name": "child",
    "version": 1,
    "tasks": [
        {
            "name": "double",
            "taskReferenceName": "work",
            "type": "SIMPLE",
            "inputParameters": {"x": "${workflow.input.x}"},
        }
    ],
    "outputParameters": {"y": "${work.output.y}"},
}


@pytest.mark.parametrize(
    ("dialect", "child"),
    [(None, BATON_CHILD), ("baton", BATON_CHILD), ("conductor", CONDUCTOR_CHILD)],
)
def test_a_child_definition_given_at_run_time_runs_in_its_dialect(
    engine: Engine, dialect: str | None, child: dict[str, Any]
) -> None:
    engine.register_definition(_parent(dialect))
    inst, _ = engine.start_instance(definition_name="parent", input={"child": child, "x": 4})
    assert drain(engine, {"double": lambda i: {"y": i["x"] * 2}}) == 1
    got = engine.get_instance(inst["id"])
    assert got["status"] == "COMPLETED" and got["output"] == {"got": {"y": 8}}
    (sub,) = [s for s in got["steps"] if s["stepId"] == "sub"]
    kid = engine.get_instance(sub["childInstanceId"])
    assert kid["definitionName"] == "child" and kid["status"] == "COMPLETED"


@pytest.mark.parametrize(
    ("dialect", "child", "reason"),
    [
        ("conductor", None, "${workflow.input.child} gave nothing, not a conductor definition"),
        ("conductor", [1], "gave list, not a conductor definition"),
        (
            "conductor",
            {"name": "child", "tasks": []},
            "gave no conductor definition Baton can run: tasks: a workflow definition needs "
            "at least one task",
        ),
        (
            "conductor",
            {"name": "child", "tasks": [{"name": "x", "taskReferenceName": "x", "type": "NOPE"}]},
            "gave no conductor definition Baton can run",
        ),
        ("conductor", {"name": "child", "tasks": "all"}, "gave no conductor definition"),
        ("baton", "text", "gave str, not a definition"),
        (
            "baton",
            {"name": "child", "steps": [{"id": "a", "type": "SERVICE_TASK"}]},
            "gave an invalid definition: steps[0]",
        ),
    ],
)
def test_a_bad_definition_at_run_time_fails_the_step_saying_why(
    engine: Engine, dialect: str, child: Any, reason: str
) -> None:
    engine.register_definition(_parent(dialect))
    inst, _ = engine.start_instance(definition_name="parent", input={"child": child, "x": 1})
    got = engine.get_instance(inst["id"])
    assert got["status"] == "FAILED", got
    assert reason in got["reason"]
    assert engine.poll("w", ["double"], 10) == []  # no child ran
    # The engine goes on: the next instance with a good document runs.
    ok, _ = engine.start_instance(
        definition_name="parent",
        input={"child": CONDUCTOR_CHILD if dialect == "conductor" else BATON_CHILD, "x": 2},
    )
    drain(engine, {"double": lambda i: {"y": i["x"] * 2}})
    assert engine.get_instance(ok["id"])["output"] == {"got": {"y": 4}}


def test_a_dialect_is_for_a_definition_given_at_run_time(engine: Engine) -> None:
    definition = _parent("conductor")
    definition["steps"][0]["definition"] = BATON_CHILD
    with pytest.raises(ValidationFailed) as e:
        engine.register_definition(definition)
    assert "an inline definition is a Baton one" in str(e.value.problems)
    definition["steps"][0].update(definition="${nowhere.output}", definitionDialect="baton")
    with pytest.raises(ValidationFailed) as e:
        engine.register_definition(definition)
    assert "unknown step 'nowhere'" in str(e.value.problems)


def test_an_unregistered_dialect_fails_the_step_not_the_engine(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dialects, "_registered", {})
    engine.register_definition(_parent("conductor"))
    inst, _ = engine.start_instance(
        definition_name="parent", input={"child": CONDUCTOR_CHILD, "x": 1}
    )
    got = engine.get_instance(inst["id"])
    assert got["status"] == "FAILED"
    assert "no translator for them runs here" in got["reason"]


def _indexed(**extra: Any) -> dict[str, Any]:
    return {
        "name": "fan",
        "steps": [
            {
                "id": "fan",
                "type": "MAP",
                "items": "${workflow.input.items}",
                "key": "_w_${map.index}",
                "indexAs": "__index",
                "steps": [
                    {"id": "w", "type": "SERVICE_TASK", "jobType": "w", "input": "${map.input}"}
                ],
                **extra,
            }
        ],
        "outputParameters": "${fan.output}",
    }


def test_index_as_hands_each_item_with_its_index(engine: Engine) -> None:
    engine.register_definition(_indexed())
    items = [{"n": 1}, "two", None, {"n": 4, "__index": 99}]
    inst, _ = engine.start_instance(definition_name="fan", input={"items": items})
    assert drain(engine, {"w": lambda i: i}) == 4
    got = engine.get_instance(inst["id"])
    assert got["status"] == "COMPLETED"
    assert got["output"] == {
        "_w_0": {"n": 1, "__index": 0},
        "_w_1": {"input": "two", "__index": 1},
        "_w_2": {"input": None, "__index": 2},
        "_w_3": {"n": 4, "__index": 3},  # the index wins, as Conductor puts it last
    }


@pytest.mark.parametrize("extra", [{"key": None}, {"inputs": "${workflow.input.inputs}"}])
def test_index_as_needs_a_key_and_no_inputs(engine: Engine, extra: dict[str, Any]) -> None:
    definition = _indexed(**extra)
    if extra.get("key", "") is None:
        del definition["steps"][0]["key"]
    with pytest.raises(ValidationFailed) as e:
        engine.register_definition(definition)
    assert "indexAs gives each item of a keyed MAP its index" in str(e.value.problems)


def test_with_a_name_the_stored_definition_runs_when_the_expression_gives_none(
    engine: Engine,
) -> None:
    """Conductor's ``subWorkflowParam``: the ``workflowDefinition`` when it resolves to one, else
    the definition its ``name`` (and ``version``) names."""
    engine.register_definition(BATON_CHILD)
    parent = _parent("conductor")
    parent["steps"][0]["definitionName"] = "child"
    engine.register_definition(parent)
    named, _ = engine.start_instance(definition_name="parent", input={"x": 5})
    inline, _ = engine.start_instance(
        definition_name="parent",
        input={"x": 6, "child": {**CONDUCTOR_CHILD, "name": "inline_child"}},
    )
    assert drain(engine, {"double": lambda i: {"y": i["x"] * 2}}) == 2
    for inst, y, child in ((named, 10, "child"), (inline, 12, "inline_child")):
        got = engine.get_instance(inst["id"])
        assert got["status"] == "COMPLETED" and got["output"] == {"got": {"y": y}}
        (sub,) = [s for s in got["steps"] if s["stepId"] == "sub"]
        assert engine.get_instance(sub["childInstanceId"])["definitionName"] == child


def test_an_inline_definition_object_takes_no_name(engine: Engine) -> None:
    parent = _parent(None)
    parent["steps"][0].update(definition=BATON_CHILD, definitionName="child")
    with pytest.raises(ValidationFailed) as e:
        engine.register_definition(parent)
    assert "an inline definition names its child itself" in str(e.value.problems)


def test_an_inline_conductor_definition_is_snapshotted_as_a_registered_one(
    engine: Engine,
) -> None:
    """Given its Conductor source, an inline start keeps it with its snapshot, and a system
    task with no task definition is not retried, as Conductor's ad-hoc definition says; the
    same definition inline on /v1 keeps Baton's default retries."""
    source = {
        "name": "inline-http",
        "version": 1,
        "tasks": [
            {
                "name": "call",
                "taskReferenceName": "call",
                "type": "HTTP",
                "inputParameters": {
                    "http_request": {"uri": "http://127.0.0.1:9/x", "method": "GET"}
                },
            }
        ],
    }
    definition = cdefs.to_baton_workflow(source)
    from_api, _ = engine.start_instance(definition=definition, conductor_source=source)
    from_v1, _ = engine.start_instance(definition=definition)

    def kept(instance_id: str) -> Any:
        return engine.get_instance(instance_id, conductor_view=True).get("conductorSource")

    assert kept(from_api["id"]) == source
    assert kept(from_v1["id"]) is None

    def retries(instance_id: str) -> int:
        with engine.db.source.connection() as conn:
            row = conn.execute(
                "SELECT snapshot_id FROM instance WHERE id = %(id)s", {"id": instance_id}
            ).fetchone()
            assert row is not None
            return engine.snapshots.plan(conn, row["snapshot_id"]).policy("call").retry_count

    assert (retries(from_api["id"]), retries(from_v1["id"])) == (0, 3)
