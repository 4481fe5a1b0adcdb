from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psycopg
import pytest
from baton.engine.service import Engine
from baton.errors import Conflict, InstanceNotFound, StepNotFound, ValidationFailed

from tests.support.helpers import one_step, service_step


def _drain(engine: Engine, job_type: str, output: dict[str, Any] | None = None) -> dict[str, Any]:
    jobs = engine.poll("w", [job_type], 1)
    assert jobs, f"no {job_type} job"
    engine.complete_job(jobs[0]["id"], "w", output or {})
    return jobs[0]


def test_expressions_resolve_inputs_variables_and_step_outputs(engine: Engine) -> None:
    engine.register_definition(
        {
            "name": "exprs",
            "steps": [
                service_step("first", "a", input={"who": "${workflow.input.customer.name}"}),
                service_step(
                    "second",
                    "b",
                    input={
                        "receipt": "${first.output.receipt.id}",
                        "whole": "${first.output}",
                        "vars": "${workflow.variables}",
                        "text": "order ${workflow.input.orderId} for ${first.output.receipt.id}",
                        "item": "${workflow.input.items[1]}",
                        "missing": "${workflow.input.nope.deeper}",
                    },
                ),
            ],
            "outputParameters": {"receipt": "${first.output.receipt}"},
        }
    )
    inst, _ = engine.start_instance(
        definition_name="exprs",
        input={"customer": {"name": "Ada"}, "orderId": 7, "items": ["x", "y"]},
    )
    first = _drain(engine, "a", {"receipt": {"id": "R-1"}})
    assert first["input"] == {"who": "Ada"}
    second = _drain(engine, "b", {"done": True})
    assert second["input"] == {
        "receipt": "R-1",
        "whole": {"receipt": {"id": "R-1"}},
        "vars": {"receipt": {"id": "R-1"}},
        "text": "order 7 for R-1",
        "item": "y",
        "missing": None,
    }
    final = engine.get_instance(inst["id"])
    assert final["status"] == "COMPLETED"
    assert final["output"] == {"receipt": {"id": "R-1"}}
    assert final["variables"] == {"receipt": {"id": "R-1"}, "done": True}


def test_task_def_input_template_supplies_defaults_the_step_overrides(engine: Engine) -> None:
    engine.put_task_def("call", {"inputTemplate": {"url": "https://default", "retries": 2}})
    engine.register_definition(
        {"name": "t", "steps": [service_step("s", "call", input={"url": "${workflow.input.u}"})]}
    )
    engine.start_instance(definition_name="t", input={"u": "https://mine"})
    job = engine.poll("w", ["call"], 1)[0]
    assert job["input"] == {"url": "https://mine", "retries": 2}


def test_running_instances_keep_their_definition_snapshot(engine: Engine) -> None:
    engine.register_definition(one_step("flow", "old-type"))
    inst, _ = engine.start_instance(definition_name="flow")
    engine.register_definition(one_step("flow", "new-type"))
    engine.put_task_def("old-type", {"retryCount": 0})  # later task-def edits don't leak in
    job = engine.poll("w", ["old-type"], 1)[0]
    engine.fail_job(job["id"], "w", "boom", retryable=True)
    assert engine.get_instance(inst["id"])["status"] == "RUNNING"  # default 3 retries still
    assert engine.get_instance(inst["id"])["definitionVersion"] == 1


def test_inline_definition_starts_a_dynamic_workflow(engine: Engine) -> None:
    inst, created = engine.start_instance(
        definition={"name": "adhoc", "steps": [{"id": "wait", "type": "SIGNAL"}]},
        input={"k": 1},
    )
    assert created and inst["definitionName"] == "adhoc" and "definitionVersion" not in inst
    engine.signal(inst["id"], "wait", {"go": True})
    done = engine.get_instance(inst["id"])
    assert done["status"] == "COMPLETED"
    assert done["steps"][0]["output"] == {"go": True}


def test_inline_definition_is_validated(engine: Engine) -> None:
    with pytest.raises(ValidationFailed):
        engine.start_instance(definition={"name": "adhoc", "steps": []})


def test_idempotency_key_returns_the_same_instance(engine: Engine) -> None:
    engine.register_definition(one_step("flow"))
    first, created1 = engine.start_instance(definition_name="flow", idempotency_key="k-1")
    again, created2 = engine.start_instance(definition_name="flow", idempotency_key="k-1")
    assert created1 and not created2 and first["id"] == again["id"]
    assert len(engine.poll("w", ["work"], 10)) == 1


def test_an_idempotency_key_reused_for_a_different_request_is_a_conflict(engine: Engine) -> None:
    engine.register_definition(one_step("flow"))
    engine.register_definition(one_step("other"))
    engine.start_instance(definition_name="flow", input={"a": 1}, idempotency_key="k-2")
    with pytest.raises(Conflict, match="first used with a different request"):
        engine.start_instance(definition_name="other", input={"a": 1}, idempotency_key="k-2")
    with pytest.raises(Conflict):
        engine.start_instance(definition_name="flow", input={"a": 2}, idempotency_key="k-2")
    _, created = engine.start_instance(
        definition_name="flow", input={"a": 1}, idempotency_key="k-2"
    )
    assert not created
    assert len(engine.poll("w", ["work"], 10)) == 1  # nothing else was started


def test_concurrent_starts_with_one_idempotency_key_create_one_instance(engine: Engine) -> None:
    engine.register_definition(one_step("flow"))
    with ThreadPoolExecutor(8) as pool:
        results = list(
            pool.map(
                lambda _: engine.start_instance(definition_name="flow", idempotency_key="same"),
                range(8),
            )
        )
    assert len({r[0]["id"] for r in results}) == 1
    assert sum(1 for r in results if r[1]) == 1


def test_user_task_completes_with_variables(engine: Engine) -> None:
    engine.register_definition(
        {"name": "u", "steps": [{"id": "approve", "type": "USER_TASK"}, service_step("s", "x")]}
    )
    inst, _ = engine.start_instance(definition_name="u")
    engine.complete_user_task(inst["id"], "approve", {"approved": True})
    job = engine.poll("w", ["x"], 1)[0]
    assert job["stepId"] == "s"
    assert engine.get_instance(inst["id"])["variables"] == {"approved": True}


def test_waiting_steps_refuse_the_wrong_call_with_conflicts(engine: Engine) -> None:
    engine.register_definition(
        {
            "name": "w",
            "steps": [
                service_step("s", "x"),
                {"id": "approve", "type": "USER_TASK"},
                {"id": "sig", "type": "SIGNAL"},
            ],
        }
    )
    inst, _ = engine.start_instance(definition_name="w")
    with pytest.raises(Conflict, match="not waiting"):
        engine.complete_user_task(inst["id"], "approve", {})  # not reached yet
    with pytest.raises(Conflict, match="not a USER_TASK"):
        engine.complete_user_task(inst["id"], "sig", {})
    with pytest.raises(Conflict, match="not a SIGNAL"):
        engine.signal(inst["id"], "approve", {})
    with pytest.raises(StepNotFound):
        engine.signal(inst["id"], "ghost", {})
    with pytest.raises(InstanceNotFound):
        engine.signal("00000000-0000-0000-0000-000000000000", "sig", {})
    _drain(engine, "x")
    engine.complete_user_task(inst["id"], "approve", {})
    with pytest.raises(Conflict, match="is COMPLETED"):
        engine.complete_user_task(inst["id"], "approve", {})  # twice
    engine.signal(inst["id"], "sig", {"p": 1})
    assert engine.get_instance(inst["id"])["status"] == "COMPLETED"
    with pytest.raises(Conflict, match="not RUNNING"):
        engine.signal(inst["id"], "sig", {})


def test_cancel_stops_open_jobs(engine: Engine) -> None:
    engine.register_definition(one_step("flow"))
    inst, _ = engine.start_instance(definition_name="flow")
    job = engine.poll("w", ["work"], 1)[0]
    cancelled = engine.cancel_instance(inst["id"], "changed my mind")
    assert cancelled["status"] == "CANCELLED"
    assert cancelled["reason"] == "changed my mind"
    assert cancelled["steps"][0]["status"] == "CANCELLED"
    with pytest.raises(Conflict, match="CANCELLED"):
        engine.complete_job(job["id"], "w", {})
    with pytest.raises(Conflict):
        engine.cancel_instance(inst["id"])
    trail = engine.audit_trail(inst["id"])
    cancelled_jobs = [a for a in trail if a["event"] == "JOB_CANCELLED"]
    assert [a["jobId"] for a in cancelled_jobs] == [job["id"]]  # the open job, exactly once
    assert [a["event"] for a in trail].count("INSTANCE_CANCELLED") == 1


def test_racing_cancel_and_user_task_completion_have_one_winner(engine: Engine) -> None:
    engine.register_definition({"name": "r", "steps": [{"id": "u", "type": "USER_TASK"}]})
    for _ in range(10):
        inst, _ = engine.start_instance(definition_name="r")

        def cancel(iid: str = inst["id"]) -> str:
            try:
                engine.cancel_instance(iid)
                return "cancel"
            except Conflict:
                return "lost"

        def complete(iid: str = inst["id"]) -> str:
            try:
                engine.complete_user_task(iid, "u", {"x": 1})
                return "complete"
            except Conflict:
                return "lost"

        with ThreadPoolExecutor(2) as pool:
            outcomes = sorted(f.result() for f in [pool.submit(cancel), pool.submit(complete)])
        assert outcomes.count("lost") == 1, outcomes
        final = engine.get_instance(inst["id"])
        assert final["status"] == ("CANCELLED" if "cancel" in outcomes else "COMPLETED")
        assert final["version"] == 2


def test_search_filters_and_pages(engine: Engine) -> None:
    engine.register_definition(one_step("a"))
    engine.register_definition(one_step("b"))
    ids = [
        engine.start_instance(definition_name="a", correlation_id="c1")[0]["id"] for _ in range(5)
    ]
    engine.start_instance(definition_name="b")
    engine.cancel_instance(ids[0])
    page1 = engine.search_instances(definition_name="a", limit=2)
    page2 = engine.search_instances(definition_name="a", limit=2, page_token=page1["nextPageToken"])
    page3 = engine.search_instances(definition_name="a", limit=2, page_token=page2["nextPageToken"])
    seen = [i["id"] for p in (page1, page2, page3) for i in p["instances"]]
    assert seen == list(reversed(ids)) and "nextPageToken" not in page3
    assert [i["id"] for i in engine.search_instances(status="CANCELLED")["instances"]] == [ids[0]]
    assert len(engine.search_instances(correlation_id="c1")["instances"]) == 5
    with pytest.raises(ValidationFailed):
        engine.search_instances(status="SLEEPING")
    with pytest.raises(ValidationFailed):
        engine.search_instances(page_token="!!!")


def test_every_transition_writes_audit_rows_in_its_transaction(
    engine: Engine, database_url: str
) -> None:
    engine.register_definition(one_step("flow", retryCount=1, retryDelaySeconds=0))
    inst, _ = engine.start_instance(definition_name="flow")
    job = engine.poll("w", ["work"], 1)[0]
    engine.fail_job(job["id"], "w", "flaky", retryable=True)
    job = engine.poll("w", ["work"], 1)[0]
    engine.complete_job(job["id"], "w", {})
    events = [a["event"] for a in engine.audit_trail(inst["id"])]
    assert events == [
        "INSTANCE_STARTED",
        "JOB_CREATED",
        "JOB_DISPATCHED",
        "JOB_FAILED",
        "JOB_RETRY_SCHEDULED",
        "JOB_DISPATCHED",
        "JOB_COMPLETED",
        "INSTANCE_COMPLETED",
    ]
    with psycopg.connect(database_url) as conn:
        # Each audit row was written by the transaction that made the change.
        n = conn.execute(
            "SELECT count(DISTINCT xmin::text) FROM audit_log WHERE instance_id = %s", (inst["id"],)
        ).fetchone()
    assert n is not None and n[0] == 5  # start, claim, fail, claim, complete
