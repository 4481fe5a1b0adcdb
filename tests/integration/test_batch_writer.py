"""The set-based batch write (``batch_sql.WRITE_DECISIONS``) leaves exactly the rows the single
path leaves: the same workflows driven through the same results, once by single completes and
fails and once by batches, end in the same instances, steps, jobs, audit trails and events."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from baton.engine import writer
from baton.engine.batch_ops import BatchResult, Failure
from baton.engine.service import Engine
from baton.errors import Conflict
from baton.settings import EngineSettings
from baton.store.db import Database
from baton.store.raw_sql import RawStatement

from tests.support.helpers import service_step
from tests.support.rows import cohort_rows


def _definitions(cohort: str) -> list[dict[str, Any]]:
    def task(step_id: str, **extra: Any) -> dict[str, Any]:
        return service_step(step_id, f"{step_id}-{cohort}", **extra)

    return [
        {"name": f"kid-{cohort}", "steps": [task("k")], "outputParameters": {"k": "${k.output}"}},
        {
            "name": f"seq-{cohort}",
            "steps": [task("s1"), task("s2", retryCount=1, retryDelaySeconds=0)],
            "outputParameters": {"s1": "${s1.output}", "s2": "${s2.output}"},
        },
        {
            "name": f"par-{cohort}",
            "steps": [{"id": "fan", "type": "PARALLEL", "branches": [[task("p1")], [task("p2")]]}],
        },
        {
            # Items completed together: one instance's results in one batch, decided in turn.
            "name": f"map-{cohort}",
            "steps": [
                {
                    "id": "each",
                    "type": "MAP",
                    "items": "${workflow.input.items}",
                    "maxConcurrency": 3,
                    "steps": [
                        task(
                            "m",
                            input={
                                "sku": "${map.item}",
                                "at": "${map.index}",
                                "n": "${workflow.input.n}",
                            },
                        )
                    ],
                },
                task("after-map", input={"all": "${each.output}"}),
            ],
        },
        {
            # Branches that write the same variable: the order of the merges shows.
            "name": f"join-{cohort}",
            "steps": [
                {
                    "id": "fan3",
                    "type": "PARALLEL",
                    "branches": [[task("j1")], [task("j2")], [task("j3"), task("j4")]],
                },
                task("after-join"),
            ],
            "outputParameters": {"who": "${workflow.variables.who}"},
        },
        {
            "name": f"parent-{cohort}",
            "steps": [
                {"id": "sub", "type": "SUB_WORKFLOW", "definitionName": f"kid-{cohort}"},
                task("after", input={"kid": "${sub.output}"}),
            ],
        },
    ]


def _result(job: dict[str, Any]) -> tuple[dict[str, Any] | None, Failure | None]:
    """What the worker reports for a job: by its step, its attempt and its input."""
    step, attempt, n = job["stepId"], job["attempt"], (job.get("input") or {}).get("n", 0)
    if step == "s2" and attempt == 1:
        return None, Failure("flaky", retryable=True)
    if step == "s2" and n == 2:
        return None, Failure("fatal", retryable=False)
    if step == "p2":
        return None, Failure("branch broke", retryable=False)
    sku = (job.get("input") or {}).get("sku")
    if sku == "bad":
        return None, Failure("bad item", retryable=False)
    if sku == "flaky" and attempt == 1:
        return None, Failure("try again", retryable=True)
    output = {"step": step, "attempt": attempt, "n": n, "text": "é\u2028", "who": step}
    return ({**output, "sku": sku} if sku is not None else output), None


def _drive(engine: Engine, cohort: str, apply: Callable[[list[dict[str, Any]]], None]) -> None:
    for definition in _definitions(cohort):
        engine.register_definition(definition)
    for n in range(3):
        engine.start_instance(definition_name=f"seq-{cohort}", input={"n": n})
    engine.start_instance(definition_name=f"par-{cohort}", input={"n": 0})
    for n, items in enumerate((["a", "b", "flaky", "d", "e"], ["a", "bad", "c", "d"])):
        engine.start_instance(definition_name=f"map-{cohort}", input={"n": n, "items": items})
    engine.start_instance(definition_name=f"join-{cohort}", input={"n": 0})
    engine.start_instance(definition_name=f"parent-{cohort}", input={"n": 0})
    steps = ("k", "s1", "s2", "p1", "p2", "after", "m", "after-map", "j1", "j2", "j3", "j4")
    types = [f"{s}-{cohort}" for s in (*steps, "after-join")]
    for _ in range(20):
        jobs = engine.poll("w", types, 100)
        if not jobs:
            return
        # Jobs made claimable together come in any order; the order of one instance's results
        # matters (the first of two branches to fail or to set a variable wins), so both runs
        # apply them in the same order.
        apply(sorted(jobs, key=_order))
    raise AssertionError("the workflows did not settle in 20 rounds")


def _order(job: dict[str, Any]) -> tuple[str, int, int, int]:
    given = job.get("input") or {}
    return job["stepId"], int(given.get("n", 0)), int(given.get("at", 0)), int(job["attempt"])


def _single(engine: Engine, outcomes: list[str]) -> Callable[[list[dict[str, Any]]], None]:
    def apply(jobs: list[dict[str, Any]]) -> None:
        for job in jobs:
            output, failure = _result(job)
            try:
                if failure is None:
                    engine.complete_job(job["id"], "w", output, attempt=job["attempt"])
                else:
                    engine.fail_job(
                        job["id"],
                        "w",
                        failure.error_message,
                        failure.retryable,
                        attempt=job["attempt"],
                    )
                outcomes.append("APPLIED")
            except Conflict:  # a branch cancelled by its sibling's failure
                outcomes.append("CONFLICT")

    return apply


def _batched(engine: Engine, outcomes: list[str]) -> Callable[[list[dict[str, Any]]], None]:
    def apply(jobs: list[dict[str, Any]]) -> None:
        items = []
        for job in jobs:
            output, failure = _result(job)
            items.append(BatchResult(job["id"], "w", job["attempt"], output, failure))
        outcomes.extend(a["outcome"] for a in engine.complete_batch(items))

    return apply


def test_batches_leave_the_rows_single_results_leave(engine: Engine, database_url: str) -> None:
    one_by_one: list[str] = []
    batched: list[str] = []
    _drive(engine, "single", _single(engine, one_by_one))
    _drive(engine, "batch", _batched(engine, batched))
    assert batched == one_by_one
    assert one_by_one.count("APPLIED") >= 10
    single, batch = cohort_rows(database_url, "single"), cohort_rows(database_url, "batch")
    text = "\n".join(single)
    assert "'COMPLETED'" in text and "'FAILED'" in text and "'JOB_RETRY_SCHEDULED'" in text
    assert batch == single


def test_batches_write_outbox_jobs_in_the_outbox_mode(db: Database, database_url: str) -> None:
    """A job a batch creates (the next step's) is relayed to SQS like any other in that mode."""
    engine = Engine(db, EngineSettings(dispatch_mode="outbox"))
    engine.register_definition(
        {"name": "two", "steps": [service_step("a", "ob-a"), service_step("b", "ob-b")]}
    )
    for _ in range(3):
        engine.start_instance(definition_name="two")
    first = engine.poll("w", ["ob-a"], 10)
    answers = engine.complete_batch([BatchResult(j["id"], "w", j["attempt"], {}) for j in first])
    assert [a["outcome"] for a in answers] == ["APPLIED"] * 3
    with psycopg.connect(database_url, autocommit=True) as conn:
        rows = conn.execute(
            """SELECT j.dispatch_outbox, count(o.job_id) FROM job j
                 LEFT JOIN dispatch_outbox o ON o.job_id = j.id
                WHERE j.job_type = 'ob-b' GROUP BY j.id, j.dispatch_outbox"""
        ).fetchall()
    assert rows == [(True, 1)] * 3


def test_a_batch_mixing_common_and_cancelling_decisions_writes_both(engine: Engine) -> None:
    """A decision that cancels open work goes out as its own statement in the same
    transaction as the set-based one; both land."""
    engine.register_definition(
        {
            "name": "mixed",
            "steps": [
                {
                    "id": "fan",
                    "type": "PARALLEL",
                    "branches": [[service_step("x", "mx")], [service_step("y", "my")]],
                }
            ],
        }
    )
    engine.register_definition({"name": "plain", "steps": [service_step("only", "mp")]})
    fan = engine.start_instance(definition_name="mixed")[0]["id"]
    plain = [engine.start_instance(definition_name="plain")[0]["id"] for _ in range(3)]
    jobs = {j["stepId"] + j["instanceId"]: j for j in engine.poll("w", ["mx", "my", "mp"], 10)}
    y = jobs["y" + fan]
    items = [BatchResult(y["id"], "w", 1, failure=Failure("broken", retryable=False))]
    items += [BatchResult(jobs["only" + p]["id"], "w", 1, {"p": p}) for p in plain]
    assert [a["outcome"] for a in engine.complete_batch(items)] == ["APPLIED"] * 4
    assert engine.get_instance(fan)["status"] == "FAILED"
    steps = {s["stepId"]: s["status"] for s in engine.get_instance(fan)["steps"]}
    assert steps["x"] == "CANCELLED"
    assert [engine.get_instance(p)["status"] for p in plain] == ["COMPLETED"] * 3
    assert str(uuid.UUID(fan)) == fan


class _Recorded:
    """A batch statement that records its executions (and runs them)."""

    def __init__(self, statement: RawStatement, name: str, used: list[str]) -> None:
        self.statement, self.name, self.used = statement, name, used

    def execute(self, conn: Any, params: Any) -> Any:
        self.used.append(self.name)
        return self.statement.execute(conn, params)


def test_a_batch_that_only_updates_and_ends_is_written_by_the_lean_statement(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Results that need no new jobs, steps or events: WRITE_UPDATES, whose statement PostgreSQL
    sets up without those four writes, or COMPLETE_ONE_STEPS when each is of the common shape
    (engine.one_step: it ends its one-step instance, or the last step of two); a batch that
    opens the next step takes the whole WRITE_DECISIONS."""
    used: list[str] = []
    for name in ("WRITE_UPDATES", "WRITE_DECISIONS", "WRITE_ONE_STEPS"):
        monkeypatch.setattr(writer, name, _Recorded(getattr(writer, name), name, used))
    engine.register_definition({"name": "lean1", "steps": [service_step("a", "lean-1")]})
    engine.register_definition(
        {"name": "lean2", "steps": [service_step("a", "lean-2a"), service_step("b", "lean-2b")]}
    )
    engine.register_definition(  # output parameters: the decider's, not the common shape
        {
            "name": "lean4",
            "steps": [service_step("a", "lean-4")],
            "outputParameters": {"got": "${a.output.ok}"},
        }
    )
    for name in ("lean1", "lean1", "lean2", "lean2", "lean4", "lean4"):
        engine.start_instance(definition_name=name)
    ended: list[dict[str, Any]] = []
    for job_type in ("lean-1", "lean-2a", "lean-2b", "lean-4"):
        jobs = engine.poll("w", [job_type], 10)
        answers = engine.complete_batch(
            [BatchResult(j["id"], "w", j["attempt"], {"ok": True}) for j in jobs]
        )
        assert [a["outcome"] for a in answers] == ["APPLIED", "APPLIED"]
        if job_type != "lean-2a":
            ended += [engine.get_instance(j["instanceId"]) for j in jobs]
    assert used == ["WRITE_ONE_STEPS", "WRITE_DECISIONS", "WRITE_ONE_STEPS", "WRITE_UPDATES"]
    assert [(i["status"], i["output"]) for i in ended] == [
        *[("COMPLETED", {"ok": True})] * 4,
        *[("COMPLETED", {"got": True})] * 2,
    ]


def test_the_lean_statement_refuses_a_job_that_moved_and_writes_nothing(
    engine: Engine, database_url: str
) -> None:
    """Its job guard is checked before anything after it is written, as in WRITE_DECISIONS:
    one ended job whose attempt moved refuses the whole statement (BT409)."""
    engine.register_definition({"name": "lean3", "steps": [service_step("a", "lean-3")]})
    for _ in range(2):
        engine.start_instance(definition_name="lean3")
    assert len(engine.poll("w", ["lean-3"], 10)) == 2
    read = """SELECT j.id, j.instance_id, j.step_execution_id, j.attempt, i.version
                FROM job j JOIN instance i ON i.id = j.instance_id
               WHERE j.job_type = 'lean-3' ORDER BY j.id"""
    state = """SELECT i.status, i.version, j.status, s.status,
                      (SELECT count(*) FROM audit_log a WHERE a.instance_id = i.id)
                 FROM job j JOIN instance i ON i.id = j.instance_id
                 JOIN step_execution s ON s.id = j.step_execution_id
                WHERE j.job_type = 'lean-3' ORDER BY j.id"""
    with psycopg.connect(database_url, autocommit=True) as conn:
        rows = conn.execute(read).fetchall()
        before = conn.execute(state).fetchall()
        stale = rows[1][3] + 1  # the second job's attempt as if it had moved on
        params = {
            "lock": json.dumps(sorted(str(r[1]) for r in rows)),
            "instances": json.dumps(
                [
                    {
                        "id": str(r[1]),
                        "status": "COMPLETED",
                        "variables": {},
                        "output": {},
                        "reason": None,
                        "expected": r[4],
                        "added_steps": 0,
                        "clear_timeout": False,
                        "reset_timeout": None,
                    }
                    for r in rows
                ]
            ),
            "n_instances": 2,
            "ended_jobs": json.dumps(
                [
                    {
                        "id": str(r[0]),
                        "status": "COMPLETED",
                        "g_status": "LOCKED",
                        "g_worker": "w",
                        "g_attempt": stale if k else r[3],
                    }
                    for k, r in enumerate(rows)
                ]
            ),
            "n_ended_jobs": 2,
            "step_updates": json.dumps(
                [{"id": str(r[2]), "status": "COMPLETED", "output": {}} for r in rows]
            ),
            "audit": json.dumps(
                [
                    {"instance_id": str(r[1]), "job_id": str(r[0]), "event": "JOB_COMPLETED"}
                    for r in rows
                ]
            ),
        }
        with pytest.raises(psycopg.Error) as refused:
            writer.WRITE_UPDATES.execute(conn, params)
        assert refused.value.sqlstate == "BT409"
        assert conn.execute(state).fetchall() == before
        params["ended_jobs"] = params["ended_jobs"].replace(
            f'"g_attempt": {stale}', f'"g_attempt": {rows[1][3]}'
        )
        writer.WRITE_UPDATES.execute(conn, params)
        after = conn.execute(state).fetchall()
    assert [r[:4] for r in after] == [
        ("COMPLETED", r[1] + 1, "COMPLETED", "COMPLETED") for r in before
    ]
    assert [r[4] for r in after] == [r[4] + 1 for r in before]
