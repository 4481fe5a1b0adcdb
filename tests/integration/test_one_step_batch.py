"""The batch's common shape decided without a decider (``engine.one_step``) leaves exactly what
the decider leaves: the same batches driven twice, once with the shortcut and once with every
result decided by the decider, write the same rows and audit, give the same answers and count
the same metrics; and the shortcut is what a batch of one-step completions takes.

The batches mix the shape (one-step workflows; the last step of two-step ones; object, empty,
absent and non-object outputs) with what must go to the decider: output parameters, a retried
and a final failure, the first step of two, repeats in the same batch and in a later one, a
result of another worker, one of an attempt not yet started, and a MAP's items.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from baton.engine import one_step, writer
from baton.engine.batch_ops import BatchResult, Failure
from baton.engine.service import Engine
from baton.metrics import CountingMetrics
from baton.store.db import Database

from tests.support.one_step_cohorts import (
    UUID,
    assert_counted_alike,
    count_deciders,
    task,
)
from tests.support.one_step_cohorts import definitions as definitions_of
from tests.support.rows import cohort_rows

RUN = itertools.count()


def _output(kind: str, n: int) -> Any:
    """What the worker returns for the job of instance ``n`` of ``kind`` (both runs alike)."""
    choices: list[Any] = [{"v": n, "n": -n}, {}, None, [n, "list"], {"v": {"nested": [n]}}]
    return choices[n % len(choices)]


def _results(jobs: list[dict[str, Any]], round_: int) -> Iterator[BatchResult]:
    """Each claimed job's result (a function of its instance's kind, number and attempt), in
    the order of those, with repeats, refusals and failures mixed in."""
    for job in sorted(jobs, key=lambda j: (j["input"]["kind"], j["input"]["n"], j["attempt"])):
        kind, n, attempt = job["input"]["kind"], job["input"]["n"], job["attempt"]
        result = BatchResult(job["id"], "w", attempt, output=_output(kind, n))
        if kind == "plain" and n == 3 and attempt == 1:
            result = BatchResult(job["id"], "w", attempt, failure=Failure("flaky"))
        if kind == "plain" and n == 4:
            result = BatchResult(job["id"], "w", attempt, failure=Failure("no", retryable=False))
        if kind == "plain" and n == 5:
            yield BatchResult(job["id"], "other-worker", attempt, output={"x": 1})
        if kind == "plain" and n == 6:
            yield BatchResult(job["id"], "w", attempt + 1, output={"x": 1})
        yield result
        if kind == "plain" and n in (1, 7):
            yield result  # a repeat in the same batch
        if kind == "plain" and n == 2 and round_ > 0:
            yield BatchResult(job["id"], "w", attempt, output={"late": "repeat"})


def _comparable(answer: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in answer.items() if k not in ("jobId", "nextAttemptAt")}
    if "error" in out:
        out["error"] = UUID.sub("<id>", out["error"])
    return {**out, "retry": "nextAttemptAt" in answer}


def _drive(engine: Engine, cohort: str) -> list[list[dict[str, Any]]]:
    """Start the cohort's instances, then claim and complete in batches until no job is left;
    every batch's answers."""
    definitions = definitions_of(cohort, f"os-{cohort}")
    for definition in definitions.values():
        engine.register_definition(definition)
    for kind in definitions:
        for n in range(8):
            body: dict[str, Any] = {"n": n, "kind": kind}
            if kind == "map":
                body["items"] = list(range(3))
            engine.start_instance(definition_name=f"{kind}-{cohort}", input=body)
    answers: list[list[dict[str, Any]]] = []
    done: list[BatchResult] = []
    for round_ in itertools.count():
        jobs = engine.poll("w", [f"os-{cohort}"], 100)
        if not jobs:
            break
        batch = list(_results(jobs, round_))
        if round_ == 1:
            batch += done[:3]  # repeats of results a batch before applied
        done = batch
        got = engine.complete_batch(batch)
        # Not the ids, nor the time a retry is due (each run's own clock).
        answers.append([_comparable(a) for a in got])
    return answers


def test_the_shortcut_leaves_what_the_decider_leaves(
    db: Database, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = next(RUN)
    with_metrics = CountingMetrics()
    fast = _drive(Engine(db, metrics=with_metrics), f"fast{run}")
    fast_rows = cohort_rows(database_url, f"fast{run}")

    decided: list[str] = []
    real = one_step.settle

    def counted(*args: Any, **kwargs: Any) -> Any:
        if real(*args, **kwargs) is not None:
            decided.append("shortcut")
        return None  # every result to the decider

    monkeypatch.setattr(one_step, "settle", counted)
    without_metrics = CountingMetrics()
    slow = _drive(Engine(db, metrics=without_metrics), f"slow{run}")
    slow_rows = cohort_rows(database_url, f"slow{run}")

    assert decided, "the shortcut applied to none of the results"
    for b, (one, other) in enumerate(zip(fast, slow, strict=True)):
        for k, (x, y) in enumerate(zip(one, other, strict=True)):
            assert x == y, (b, k)
    assert fast_rows == slow_rows
    assert_counted_alike(with_metrics, without_metrics)


def test_a_batch_of_one_step_completions_builds_no_decider(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine.register_definition({"name": "os-plain", "steps": [task("only", "os-x")]})
    for n in range(10):
        engine.start_instance(definition_name="os-plain", input={"n": n, "kind": "plain"})
    built = count_deciders(engine, monkeypatch)
    jobs = engine.poll("w", ["os-x"], 10)
    answers = engine.complete_batch(
        [BatchResult(j["id"], "w", j["attempt"], output={"r": 1}) for j in jobs]
    )
    assert [a["outcome"] for a in answers] == ["APPLIED"] * 10
    assert built == []
    finished = [engine.get_instance(j["instanceId"]) for j in jobs]
    assert {(i["status"], i["output"]["r"]) for i in finished} == {("COMPLETED", 1)}


def _drive_common(engine: Engine, cohort: str) -> tuple[list[list[dict[str, Any]]], list[str]]:
    """One-step and two-step instances completed in batches, every result applied as it comes
    (object, empty, absent, list and nested outputs): the batch of their last steps holds only
    results of the common shape. Every batch's answers, and the batch statements that ran."""
    definitions = definitions_of(cohort, f"os-{cohort}")
    for kind in ("plain", "two"):
        engine.register_definition(definitions[kind])
        for n in range(10):
            engine.start_instance(definition_name=f"{kind}-{cohort}", input={"n": n, "kind": kind})
    used: list[str] = []
    real = writer.WRITE_ONE_STEPS

    class Recorded:
        def execute(self, conn: Any, params: dict[str, Any]) -> Any:
            used.append("WRITE_ONE_STEPS")
            return real.execute(conn, params)

    answers: list[list[dict[str, Any]]] = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(writer, "WRITE_ONE_STEPS", Recorded())
        while jobs := engine.poll("w", [f"os-{cohort}"], 100):
            got = engine.complete_batch(
                [
                    BatchResult(j["id"], "w", j["attempt"], output=_output("", j["input"]["n"]))
                    for j in jobs
                ]
            )
            answers.append([_comparable(a) for a in got])
    return answers, used


def test_a_batch_of_common_results_only_leaves_what_the_decider_leaves(
    db: Database, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Such a batch is written by one statement from one row per result
    (batch_sql.COMPLETE_ONE_STEPS), not by WRITE_UPDATES's five sets: the same rows, audit,
    answers and metrics as every result decided by the decider."""
    run = next(RUN)
    with_metrics = CountingMetrics()
    fast, used = _drive_common(Engine(db, metrics=with_metrics), f"common{run}")
    fast_rows = cohort_rows(database_url, f"common{run}")
    # The first batch mixes the shape (one-step) with what it is not (a first step of two).
    assert used == ["WRITE_ONE_STEPS"], "the batch of last steps was not written by it"

    monkeypatch.setattr(one_step, "settle", lambda *args, **kwargs: None)
    without_metrics = CountingMetrics()
    slow, unused = _drive_common(Engine(db, metrics=without_metrics), f"slow-common{run}")
    slow_rows = cohort_rows(database_url, f"slow-common{run}")

    assert unused == []
    assert fast == slow
    assert [len(a) for a in fast] == [20, 10]
    assert fast_rows == slow_rows
    assert_counted_alike(with_metrics, without_metrics)


def test_a_batch_of_common_results_refuses_a_result_that_moved_and_writes_nothing(
    engine: Engine, database_url: str
) -> None:
    """One result of such a batch whose job moved on (another worker's attempt) refuses the
    whole statement (its guard: BT409); complete_batch runs the pass again on fresh reads,
    where the moved one is answered for what it is and the others are written."""
    engine.register_definition({"name": "os-moved", "steps": [task("only", "os-moved")]})
    for n in range(3):
        engine.start_instance(definition_name="os-moved", input={"n": n, "kind": "plain"})
    jobs = engine.poll("w", ["os-moved"], 10)
    assert len(jobs) == 3
    moved = jobs[1]["id"]
    with psycopg.connect(database_url, autocommit=True) as conn:
        # The job's lease taken by another worker's next attempt, behind the engine's back (the
        # claim's kept state still says "w", attempt 1).
        conn.execute(
            "UPDATE job SET worker_id = 'other', attempt = attempt + 1 WHERE id = %s", (moved,)
        )
        calls: list[str] = []
        real = writer.WRITE_ONE_STEPS

        class Recorded:
            def execute(self, c: Any, params: dict[str, Any]) -> Any:
                calls.append(params["settled"])
                return real.execute(c, params)

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(writer, "WRITE_ONE_STEPS", Recorded())
            answers = engine.complete_batch(
                [BatchResult(j["id"], "w", j["attempt"], output={"r": 1}) for j in jobs]
            )
        left = conn.execute(
            "SELECT j.id::text, j.status, i.status, (SELECT count(*) FROM audit_log a"
            " WHERE a.job_id = j.id AND a.event = 'JOB_COMPLETED')"
            " FROM job j JOIN instance i ON i.id = j.instance_id WHERE j.job_type = 'os-moved'"
        ).fetchall()
    # All three refused together; the pass run again on fresh reads writes the other two.
    assert [[j["id"] in call for j in jobs] for call in calls] == [
        [True, True, True],
        [True, False, True],
    ]
    outcomes = {a["jobId"]: a["outcome"] for a in answers}
    assert outcomes.pop(moved) not in ("APPLIED", "DUPLICATE")
    assert set(outcomes.values()) == {"APPLIED"}
    by_job = {r[0]: r[1:] for r in left}
    assert by_job.pop(moved) == ("LOCKED", "RUNNING", 0)
    assert set(by_job.values()) == {("COMPLETED", "COMPLETED", 1)}
