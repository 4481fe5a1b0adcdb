"""A MAP's items completed in batches leave what the same results applied one by one leave.

A batch decides the results of one instance together, on one state, written as one decision,
with the instance's columns and the MAP's execution taken from the batch's read: the MAPs here
(items starting as others end, and all at once) are driven twice through the same results, once
one result at a time and once in batches that hold, besides every claimed item's result, a
retried item's failure mid-batch, an item completed twice in the same batch, repeats of an
earlier batch's results and, in one instance, an item's final failure (which fails its MAP and
cancels the items still running). Rows, audit rows and answers must match.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from baton.engine.batch_ops import BatchResult, Failure
from baton.engine.service import Engine
from baton.errors import Conflict

from tests.support.rows import cohort_rows

RUN = itertools.count()


def _definitions(cohort: str) -> list[dict[str, Any]]:
    task: dict[str, Any] = {
        "id": "item",
        "type": "SERVICE_TASK",
        "jobType": f"mb-{cohort}",
        "input": {"n": "${workflow.input.n}", "at": "${map.index}", "v": "${map.item}"},
        "retryCount": 1,
        "retryDelaySeconds": 0,
    }
    after: dict[str, Any] = {"id": "after", "type": "SERVICE_TASK", "jobType": f"mb-{cohort}"}
    after["input"] = {"n": "${workflow.input.n}", "fan": "${fan.output}"}
    out = []
    for cap in (3, 100):
        fan: dict[str, Any] = {
            "id": "fan",
            "type": "MAP",
            "items": "${workflow.input.items}",
            "steps": [task],
        }
        fan["maxConcurrency"] = cap
        out.append({"name": f"mb{cap}-{cohort}", "steps": [fan, after]})
    return out


def _result(job: dict[str, Any]) -> BatchResult:
    """A job's result: a function of its instance, its item and its attempt."""
    given = job["input"]
    n, at, attempt = given["n"], given.get("at", -1), job["attempt"]
    if at in (2, 5) and attempt == 1:
        return BatchResult(job["id"], "w", attempt, failure=Failure("flaky"))
    if n == 2 and at == 4:
        return BatchResult(job["id"], "w", attempt, failure=Failure("broke", retryable=False))
    return BatchResult(job["id"], "w", attempt, output={"item": at, "n": n, "try": attempt})


def _order(job: dict[str, Any]) -> tuple[Any, ...]:
    given = job["input"]
    return (job["stepId"], given["n"], given.get("at", -1), job["attempt"])


def _batches(jobs: list[dict[str, Any]], earlier: list[BatchResult]) -> list[list[BatchResult]]:
    """The poll's results in two batches, with an item completed twice in the first and the
    first two results of the poll before repeated at the start of the second."""
    results = [_result(j) for j in sorted(jobs, key=_order)]
    twice = [r for r in results if r.failure is None][:1]
    half = len(results) // 2
    return [results[:half] + twice, earlier[:2] + results[half:]]


def _drive(engine: Engine, cohort: str, apply: Callable[[list[BatchResult]], None]) -> None:
    for definition in _definitions(cohort):
        engine.register_definition(definition)
        for n in range(3):
            body = {"n": n, "items": [f"x{i}" for i in range(8)]}
            engine.start_instance(definition_name=definition["name"], input=body)
    earlier: list[BatchResult] = []
    for _ in range(40):
        jobs = engine.poll("w", [f"mb-{cohort}"], 100)
        if not jobs:
            return
        batches = _batches(jobs, earlier)
        earlier = batches[0]
        for batch in batches:
            apply(batch)
    raise AssertionError("the workflows did not settle in 40 rounds")


def _one_by_one(engine: Engine, answers: list[tuple[str, Any]]) -> Callable[[Any], None]:
    def apply(batch: list[BatchResult]) -> None:
        for r in batch:
            try:
                if r.failure is None:
                    done = engine.complete_job(r.job_id, r.worker_id, r.output, attempt=r.attempt)
                else:
                    f = r.failure
                    done = engine.fail_job(
                        r.job_id, r.worker_id, f.error_message, f.retryable, attempt=r.attempt
                    )
            except Conflict:
                answers.append(("CONFLICT", None))
                continue
            answers.append(("APPLIED" if done["applied"] else "DUPLICATE", done.get("status")))

    return apply


def _batched(engine: Engine, answers: list[tuple[str, Any]]) -> Callable[[Any], None]:
    def apply(batch: list[BatchResult]) -> None:
        answers.extend((a["outcome"], a.get("status")) for a in engine.complete_batch(batch))

    return apply


def test_map_items_in_batches_leave_the_rows_and_answers_of_one_by_one(
    engine: Engine, database_url: str
) -> None:
    run = next(RUN)
    single, batch = f"s{run}", f"b{run}"
    one_by_one: list[tuple[str, Any]] = []
    batched: list[tuple[str, Any]] = []
    _drive(engine, single, _one_by_one(engine, one_by_one))
    _drive(engine, batch, _batched(engine, batched))
    assert batched == one_by_one
    outcomes = {outcome for outcome, _ in batched}
    assert {"APPLIED", "DUPLICATE"} <= outcomes, outcomes
    statuses = {status for _, status in batched}
    assert {"COMPLETED", "RETRY_SCHEDULED", "FAILED"} <= statuses, statuses
    rows = cohort_rows(database_url, single, dispatch_order=False)
    assert cohort_rows(database_url, batch, dispatch_order=False) == rows
    # Every instance ended: completed, or failed by the final failure of one of its items.
    text = "\n".join(rows)
    assert "'status': 'COMPLETED'" in text and "'status': 'FAILED'" in text
