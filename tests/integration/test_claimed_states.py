"""The claimed-state cache (engine.claimed): a completion in the process that claimed its job is
decided on the state the claim returned, without reading it again, and never decided differently
from a fresh read when something moved in between (another process's completion, a cancel, a
duplicate, a lease that ran out)."""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from baton.engine import views
from baton.engine.batch_ops import BatchResult
from baton.engine.claimed import ClaimedStates
from baton.engine.service import Engine
from baton.errors import InvalidValue
from baton.settings import EngineSettings
from baton.store import job_sql
from baton.store.db import Database

from tests.support.helpers import one_step, service_step

PARALLEL = {
    "name": "kept-parallel",
    "steps": [
        {
            "id": "fan",
            "type": "PARALLEL",
            "branches": [[service_step("a", "kp")], [service_step("b", "kp")]],
        },
        service_step("after", "kp-after", input={"fan": "${fan.output}"}),
    ],
}


@pytest.fixture
def other(database_url: str) -> Iterator[Engine]:
    """A second engine on its own connections: another process (another Lambda container)."""
    db = Database.pooled(database_url, min_size=1, max_size=4)
    yield Engine(db)
    db.close()


@pytest.fixture
def no_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    """A completion that reads its job and instance fails loudly: the read is a division by 0,
    which the store reports as InvalidValue."""
    monkeypatch.setattr(job_sql, "READ_JOB_WITH_INSTANCE", "SELECT 1/0")
    monkeypatch.setattr(job_sql, "READ_JOBS_WITH_INSTANCES", "SELECT 1/0")


def test_a_completion_in_the_claiming_process_reads_nothing_first(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine.register_definition(one_step("kept-one", "k1"))
    iids = [engine.start_instance(definition_name="kept-one")[0]["id"] for _ in range(3)]
    jobs = engine.poll("w", ["k1"], 3)
    assert len(engine.claimed) == 3
    monkeypatch.setattr(job_sql, "READ_JOB_WITH_INSTANCE", "SELECT 1/0")
    monkeypatch.setattr(job_sql, "READ_JOBS_WITH_INSTANCES", "SELECT 1/0")
    assert engine.complete_job(jobs[0]["id"], "w", {"n": 0})["applied"] is True
    answers = engine.complete_batch(
        [BatchResult(j["id"], "w", 1, output={"n": k}) for k, j in enumerate(jobs[1:], 1)]
    )
    assert [a["outcome"] for a in answers] == ["APPLIED", "APPLIED"]
    assert len(engine.claimed) == 0
    monkeypatch.undo()
    for k, iid in enumerate(iids):
        found = engine.get_instance(iid)
        assert found["status"] == "COMPLETED"
        assert found["variables"] == {"n": k}
    # A repeat, its state taken by the first result, is read and answered as one.
    assert engine.complete_job(jobs[0]["id"], "w", {"n": 0})["applied"] is False


def test_a_state_moved_by_another_process_is_decided_again_on_a_fresh_read(
    engine: Engine, other: Engine
) -> None:
    """Both branches claimed here; the other process completes one (the instance's version moves
    past the kept one): this process's completion of the other is refused, read again and
    applied, and the join sees both outputs."""
    engine.register_definition(PARALLEL)
    iid = engine.start_instance(definition_name="kept-parallel")[0]["id"]
    a, b = sorted(engine.poll("w", ["kp"], 2), key=lambda j: j["stepId"])
    assert len(engine.claimed) == 0  # branches are not kept (below): keep them for this test
    engine.claimed.keep(_kept_rows(engine, [a["id"], b["id"]]), "w", NOW)
    assert len(engine.claimed) == 2
    assert other.complete_job(a["id"], "w", {"from": "a"})["applied"] is True
    assert engine.complete_job(b["id"], "w", {"from": "b"})["applied"] is True
    (after,) = engine.poll("w", ["kp-after"], 1)
    assert after["input"]["fan"] == {"0": {"from": "a"}, "1": {"from": "b"}}
    assert engine.complete_job(after["id"], "w", {})["applied"] is True
    assert engine.get_instance(iid)["status"] == "COMPLETED"


def test_a_decision_here_drops_the_kept_states_of_its_instances_other_jobs(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine.register_definition(PARALLEL)
    engine.start_instance(definition_name="kept-parallel")
    a, b = engine.poll("w", ["kp"], 2)
    engine.claimed.keep(_kept_rows(engine, [a["id"], b["id"]]), "w", NOW)
    assert len(engine.claimed) == 2
    monkeypatch.setattr(job_sql, "READ_JOB_WITH_INSTANCE", "SELECT 1/0")
    assert engine.complete_job(a["id"], "w", {})["applied"] is True
    with pytest.raises(InvalidValue, match="division by zero"):
        # b's kept state is gone with a's decision: b's completion has to read (and here fails).
        engine.complete_job(b["id"], "w", {})
    assert len(engine.claimed) == 0


def test_a_job_completed_elsewhere_is_a_duplicate_here_not_a_second_completion(
    engine: Engine, other: Engine
) -> None:
    engine.register_definition(one_step("kept-dup", "kd"))
    iid = engine.start_instance(definition_name="kept-dup")[0]["id"]
    (job,) = engine.poll("w", ["kd"], 1)
    assert other.complete_job(job["id"], "w", {"first": True})["applied"] is True
    assert engine.complete_job(job["id"], "w", {"second": True})["applied"] is False
    assert engine.get_instance(iid)["variables"] == {"first": True}
    events = [e["event"] for e in engine.audit_trail(iid)]
    assert events.count("JOB_COMPLETED") == 1


def test_a_batch_with_a_stale_kept_state_still_applies_every_result(
    engine: Engine, other: Engine
) -> None:
    engine.register_definition(one_step("kept-batch", "kb"))
    iids = [engine.start_instance(definition_name="kept-batch")[0]["id"] for _ in range(4)]
    jobs = engine.poll("w", ["kb"], 4)
    # Another process cancels one instance between the claim and the batch.
    cancelled = jobs[2]["instanceId"]
    other.cancel_instance(cancelled, reason="test")
    answers = engine.complete_batch([BatchResult(j["id"], "w", 1, output={}) for j in jobs])
    by_job = {a["jobId"]: a["outcome"] for a in answers}
    assert by_job[jobs[2]["id"]] in ("CONFLICT", "DUPLICATE")
    assert [by_job[j["id"]] for k, j in enumerate(jobs) if k != 2] == ["APPLIED"] * 3
    statuses = {iid: engine.get_instance(iid)["status"] for iid in iids}
    assert statuses.pop(cancelled) == "CANCELLED"
    assert set(statuses.values()) == {"COMPLETED"}


def test_a_cancel_by_another_process_is_not_overwritten_by_a_kept_state(
    engine: Engine, other: Engine
) -> None:
    engine.register_definition(one_step("kept-cancel", "kc"))
    iid = engine.start_instance(definition_name="kept-cancel")[0]["id"]
    (job,) = engine.poll("w", ["kc"], 1)
    other.cancel_instance(iid, reason="test")
    with pytest.raises(Exception) as raised:
        engine.complete_job(job["id"], "w", {})
    assert type(raised.value).__name__ in ("LeaseNotHeld", "JobNotClaimable", "Conflict")
    assert engine.get_instance(iid)["status"] == "CANCELLED"


def test_a_large_instance_is_not_kept(engine: Engine) -> None:
    assert "<= %(state_max_bytes)s AS fits" in job_sql.CLAIM_AS_JSON  # CLAIMED_STATE_MAX_BYTES
    engine.register_definition(one_step("kept-large", "kl"))
    big = os.urandom(20_000).hex()  # incompressible: above CLAIMED_STATE_MAX_BYTES as stored
    engine.start_instance(definition_name="kept-large", input={"big": big})
    engine.start_instance(definition_name="kept-large", input={"small": 1})
    assert len(engine.poll("w", ["kl"], 2)) == 2
    assert len(engine.claimed) == 1


def test_steps_inside_a_parallel_are_not_kept(engine: Engine) -> None:
    """Their siblings' completions move the instance's version: kept, they would mostly be
    refused and read again."""
    engine.register_definition(PARALLEL)
    engine.start_instance(definition_name="kept-parallel")
    engine.register_definition(one_step("kept-top", "kp"))
    engine.start_instance(definition_name="kept-top")
    assert len(engine.poll("w", ["kp"], 3)) == 3
    assert len(engine.claimed) == 1


def test_the_cache_can_be_turned_off(db: Database, no_reads: None) -> None:
    engine = Engine(db, EngineSettings(claimed_states=0))
    engine.register_definition(one_step("kept-off", "ko"))
    engine.start_instance(definition_name="kept-off")
    (job,) = engine.poll("w", ["ko"], 1)
    assert len(engine.claimed) == 0
    with pytest.raises(InvalidValue, match="division by zero"):
        engine.complete_job(job["id"], "w", {})


def _kept_rows(engine: Engine, job_ids: list[str]) -> list[list[Any]]:
    """Claimed jobs as the claim returns them (``job_sql.claim``: its values, then the state),
    as if the claim had kept their states."""
    found = engine.db.autocommit(
        lambda c: job_sql.read_jobs_with_instances(c, [uuid.UUID(j) for j in job_ids])
    )
    return [_as_claimed(json.loads(json.dumps(r, default=_text))) for r in found]


NOW = "2026-01-01T00:00:00+00:00"  # the claim's clock, as its JSON writes it


def _text(value: Any) -> str:
    """A UUID or a time as the claim's JSON writes it."""
    return value.isoformat() if isinstance(value, datetime) else str(value)


def _as_claimed(state: dict[str, Any], *, fits: bool = True, size: int = 100) -> list[Any]:
    head = {
        "id": state["job_id"],
        "instanceId": state["id"],
        "stepId": state["step_id"],
        "stepExecutionId": state["step_execution_id"],
        "attempt": state["attempt"],
        "retriesRemaining": state["retries_remaining"],
        "reclaimed": False,
        "latency_ms": 0.0,
        "state_bytes": size,
    }
    values = [head.get(k) for k in job_sql.CLAIMED_KEYS]
    return [*values, [state.get(k) for k in job_sql.CLAIMED_STATE_KEYS] if fits else None]


# --- the cache alone -----------------------------------------------------------------------------


def _claim_row(lease_seconds: int, *, fits: bool = True) -> list[Any]:
    state: dict[str, Any] = {k: None for k in job_sql.CLAIMED_STATE_KEYS}
    state.update(
        lease_seconds=lease_seconds,
        scope="",
        created_at="2025-12-31T23:59:00+00:00",
        job_id=str(uuid.uuid4()),
        id=str(uuid.uuid4()),
        step_execution_id=str(uuid.uuid4()),
        attempt=1,
        retries_remaining=3,
        step_id="s",
    )
    return _as_claimed(state, fits=fits, size=1000)


def _job_id(claimed: list[Any]) -> uuid.UUID:
    return uuid.UUID(claimed[job_sql.CLAIMED_KEYS.index("id")])


def test_a_kept_state_is_taken_once_with_its_clock_moved_on() -> None:
    cache = ClaimedStates(10)
    row = _claim_row(30)
    cache.keep([row], "w", NOW)
    time.sleep(0.01)  # a measurable interval for the clock (not a wait for a condition)
    taken = cache.take(_job_id(row))
    assert taken is not None
    assert taken["now"] - datetime(2026, 1, 1, tzinfo=UTC) >= timedelta(seconds=0.01)
    assert (taken["job_id"], str(taken["id"]), taken["worker_id"]) == (
        _job_id(row),
        row[job_sql.CLAIMED_KEYS.index("instanceId")],
        "w",
    )
    assert taken["created_at"] == datetime(2025, 12, 31, 23, 59, tzinfo=UTC)
    assert cache.take(_job_id(row)) is None


def test_kept_states_are_bounded_and_dropped_near_their_lease() -> None:
    cache = ClaimedStates(2)
    rows = [_claim_row(30) for _ in range(3)]
    cache.keep(rows, "w", NOW)
    assert len(cache) == 2
    assert cache.take(_job_id(rows[0])) is None  # the oldest went first
    short = _claim_row(1)  # a lease within the margin: another worker may hold it any moment
    cache.keep([short, _claim_row(30, fits=False)], "w", NOW)
    assert cache.take(_job_id(short)) is None
    assert len(cache) == 1
    by_bytes = ClaimedStates(100, max_bytes=2500)  # 1,000 stored bytes each
    rows = [_claim_row(30) for _ in range(4)]
    by_bytes.keep(rows, "w", NOW)
    assert len(by_bytes) == 2
    assert by_bytes.take(_job_id(rows[3])) is not None


def test_the_poll_answers_each_job_as_its_row_reads(engine: Engine) -> None:
    """The claim returns its jobs as one JSON value (ids and times as PostgreSQL writes them in
    JSON); the poll answers them exactly as ``views.claimed_job`` answers the job's row."""
    given = {"n": "${workflow.input.n}", "big": "${workflow.input.big}"}
    engine.register_definition(
        {"name": "kept-view", "steps": [service_step("s", "kv", input=given)]}
    )
    for n in range(5):
        engine.start_instance(definition_name="kept-view", input={"n": n, "big": 2**70})
    answers = engine.poll("w", ["kv"], 5)
    assert len(answers) == 5
    rows = engine.db.autocommit(
        lambda c: c.execute(
            "SELECT j.id, j.instance_id, s.step_id, j.step_execution_id, j.job_type, j.attempt,"
            "       j.retries_remaining, j.lock_expires_at, j.payload"
            "  FROM job j JOIN step_execution s ON s.id = j.step_execution_id"
            " WHERE j.job_type = 'kv' ORDER BY j.created_at"
        ).fetchall()
    )
    assert answers == [views.claimed_job(r) for r in rows]
    assert answers[0]["input"]["big"] == 2**70  # (exact: not a float)


def test_a_kept_state_is_what_the_completions_read_would_return(engine: Engine) -> None:
    """The claim's JSON state, typed (``claimed.typed``: UUIDs, times), is the row
    READ_JOB_WITH_INSTANCE reads for the job right after the claim, but for the clock."""
    given = {"n": "${workflow.input.n}"}
    engine.register_definition(
        {"name": "kept-typed", "steps": [service_step("s", "kt", input=given)]}
    )
    iid = engine.start_instance(
        definition_name="kept-typed", input={"n": 1, "big": 2**70}, correlation_id="c-1"
    )[0]["id"]
    (job,) = engine.poll("w", ["kt"], 1)
    kept = engine.claimed.take(uuid.UUID(job["id"]))
    assert kept is not None
    read = engine.db.autocommit(
        lambda c: c.execute(
            job_sql.READ_JOB_WITH_INSTANCE, {"job_id": uuid.UUID(job["id"])}
        ).fetchone()
    )
    assert read is not None
    assert str(kept["id"]) == iid
    assert timedelta(0) <= read["now"] - kept["now"] < timedelta(seconds=30)
    assert {k: v for k, v in kept.items() if k not in ("now", "elapsed")} == {
        k: v for k, v in read.items() if k != "now"
    }
    assert type(kept["input"]["big"]) is int
