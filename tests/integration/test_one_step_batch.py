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

import pytest
from baton.engine import one_step
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
