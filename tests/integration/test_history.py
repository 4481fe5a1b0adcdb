"""An instance's history (every attempt, in order), its steps a page at a time, and a view that
stays within its byte budget whatever the run holds; on real PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest
from baton.engine import paging
from baton.engine.service import Engine
from baton.errors import InstanceNotFound, ValidationFailed

from tests.support.helpers import one_step, unique


def _all_events(engine: Engine, instance_id: str, limit: int) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    token: str | None = None
    while True:
        page = engine.history(instance_id, limit=limit, page_token=token)
        assert len(page["events"]) <= limit
        events += page["events"]
        token = page.get("nextPageToken")
        if token is None:
            return events


def _run_with_two_failures(engine: Engine) -> str:
    job_type = unique("flaky")
    engine.put_task_def(job_type, {"retryCount": 2, "retryDelaySeconds": 0})
    name = unique("hist")
    engine.register_definition(one_step(name, job_type))
    inst, _ = engine.start_instance(definition_name=name)
    for n in (1, 2):
        job = engine.poll(f"w{n}", [job_type], 1)[0]
        engine.fail_job(job["id"], f"w{n}", f"boom {n}", attempt=n)
    job = engine.poll("w3", [job_type], 1)[0]
    engine.complete_job(job["id"], "w3", {"ok": True}, attempt=3)
    return str(inst["id"])


def test_every_attempt_of_a_retried_step_is_in_the_history_in_order(engine: Engine) -> None:
    iid = _run_with_two_failures(engine)
    events = _all_events(engine, iid, limit=100)
    assert [e["type"] for e in events] == [
        "INSTANCE_STARTED",
        "JOB_CREATED",
        "JOB_DISPATCHED",
        "JOB_FAILED",
        "JOB_RETRY_SCHEDULED",
        "JOB_DISPATCHED",
        "JOB_FAILED",
        "JOB_RETRY_SCHEDULED",
        "JOB_DISPATCHED",
        "JOB_COMPLETED",
        "INSTANCE_COMPLETED",
    ]
    seqs = [e["seq"] for e in events]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    failed = [e for e in events if e["type"] == "JOB_FAILED"]
    assert [(e["attempt"], e["workerId"], e["message"]) for e in failed] == [
        (1, "w1", "boom 1 (retryable)"),
        (2, "w2", "boom 2 (retryable)"),
    ]
    dispatched = [e for e in events if e["type"] == "JOB_DISPATCHED"]
    assert [(e["attempt"], e["workerId"]) for e in dispatched] == [(1, "w1"), (2, "w2"), (3, "w3")]
    retries = [e["message"] for e in events if e["type"] == "JOB_RETRY_SCHEDULED"]
    assert retries == ["attempt 2 in 0s", "attempt 3 in 0s"]
    step = engine.get_instance(iid)["steps"][0]
    job_events = [e for e in events if "jobId" in e]
    assert {e["stepId"] for e in job_events} == {"only"}
    assert {e["stepExecutionId"] for e in job_events} == {step["id"]}
    assert (step["attempt"], step["attempts"]) == (3, 3)


def test_paging_the_history_serves_each_event_once(engine: Engine) -> None:
    iid = _run_with_two_failures(engine)
    whole = _all_events(engine, iid, limit=1000)
    for limit in (1, 3, 4):
        assert _all_events(engine, iid, limit=limit) == whole


def test_signals_user_tasks_and_the_instances_own_transitions_are_in_the_history(
    engine: Engine,
) -> None:
    name = unique("waits")
    engine.register_definition(
        {
            "name": name,
            "steps": [
                {"id": "approve", "type": "USER_TASK"},
                {"id": "go", "type": "SIGNAL"},
            ],
        }
    )
    inst, _ = engine.start_instance(definition_name=name)
    iid = str(inst["id"])
    engine.pause_instance(iid)
    engine.resume_instance(iid)
    engine.complete_user_task(iid, "approve", {"ok": True})
    engine.signal(iid, "go", {"at": 1})
    events = _all_events(engine, iid, limit=100)
    assert [e["type"] for e in events] == [
        "INSTANCE_STARTED",
        "INSTANCE_PAUSED",
        "INSTANCE_RESUMED",
        "USER_TASK_COMPLETED",
        "SIGNAL_RECEIVED",
        "INSTANCE_COMPLETED",
    ]
    steps = {s["stepId"]: s["id"] for s in engine.get_instance(iid)["steps"]}
    assert [(e.get("stepId"), e.get("stepExecutionId")) for e in events[3:5]] == [
        ("approve", steps["approve"]),
        ("go", steps["go"]),
    ]


def test_a_failed_instance_says_why_in_its_history(engine: Engine) -> None:
    job_type = unique("fatal")
    name = unique("dies")
    engine.register_definition(one_step(name, job_type))
    inst, _ = engine.start_instance(definition_name=name)
    job = engine.poll("w", [job_type], 1)[0]
    engine.fail_job(job["id"], "w", "card declined", retryable=False, attempt=1)
    last = _all_events(engine, str(inst["id"]), limit=100)[-1]
    assert last["type"] == "INSTANCE_FAILED"
    assert last["message"] == "step 'only' failed: card declined"


def test_history_and_steps_of_an_unknown_instance_are_not_found(engine: Engine) -> None:
    for call in (engine.history, engine.list_steps):
        with pytest.raises(InstanceNotFound):
            call("7f0e7a58-54d4-4c4b-9d8e-0d7cf0e1a111")
        with pytest.raises(InstanceNotFound):
            call("not-a-uuid")


def test_a_page_token_this_api_did_not_issue_is_refused(engine: Engine) -> None:
    iid = _run_with_two_failures(engine)
    other = paging.encode_token("2024-01-01T00:00:00+00:00", "x")  # a token of another listing
    for call in (engine.history, engine.list_steps):
        for token in ("made-up", other, paging.encode_token("-1")):
            with pytest.raises(ValidationFailed) as e:
                call(iid, page_token=token)
            assert e.value.problems[0].path == "pageToken"


def _map_of(engine: Engine, items: int) -> str:
    name = unique("fan")
    engine.register_definition(
        {
            "name": name,
            "steps": [
                {
                    "id": "each",
                    "type": "MAP",
                    "items": "${workflow.input.rows}",
                    "maxConcurrency": 1000,
                    "steps": [{"id": "mark", "type": "SET_VARIABLE", "variables": {"x": 1}}],
                }
            ],
        }
    )
    inst, _ = engine.start_instance(definition_name=name, input={"rows": list(range(items))})
    return str(inst["id"])


def test_the_steps_of_a_large_run_page_in_creation_order(engine: Engine) -> None:
    iid = _map_of(engine, 250)
    whole = engine.get_instance(iid)
    assert whole["status"] == "COMPLETED" and len(whole["steps"]) == 251
    paged: list[dict[str, Any]] = []
    token: str | None = None
    while True:
        page = engine.list_steps(iid, limit=60, page_token=token)
        paged += page["steps"]
        token = page.get("nextPageToken")
        if token is None:
            break
    assert paged == whole["steps"]
    assert [s.get("itemIndex") for s in paged[1:]] == list(range(250))


def test_the_instance_view_stays_within_its_budget_and_says_so(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    iid = _map_of(engine, 300)
    bare = engine.get_instance(iid, include_steps=False)
    assert "steps" not in bare and bare["status"] == "COMPLETED"
    monkeypatch.setattr(paging, "PAGE_BUDGET_BYTES", 20_000)
    view = engine.get_instance(iid)
    assert view["stepsTruncated"] is True
    assert 0 < len(view["steps"]) < 301
    assert paging.json_size(view) <= 20_000 + paging.json_size(view["steps"][-1])
    page = engine.list_steps(iid, limit=1000)
    assert paging.json_size(page) < 21_000 and "nextPageToken" in page


def test_search_by_creation_time(engine: Engine) -> None:
    name = unique("when")
    engine.register_definition(one_step(name, unique("j")))
    first, _ = engine.start_instance(definition_name=name)
    second, _ = engine.start_instance(definition_name=name)

    def ids(**kw: str) -> list[str]:
        return [i["id"] for i in engine.search_instances(definition_name=name, **kw)["instances"]]

    assert ids() == [second["id"], first["id"]]
    assert ids(created_after=second["createdAt"]) == [second["id"]]  # inclusive
    assert ids(created_before=second["createdAt"]) == [first["id"]]  # exclusive
    assert ids(created_after="2999-01-01T00:00:00Z") == []
    assert ids(created_before="2999-01-01T00:00:00") == [second["id"], first["id"]]  # UTC
    for bad in ("yesterday", "2026-13-01", "\u00001"):
        with pytest.raises(ValidationFailed) as e:
            ids(created_after=bad)
        assert e.value.problems[0].path == "createdAfter"
