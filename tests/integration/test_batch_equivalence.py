"""Random fan-outs driven twice through the same results, once one result at a time and once in
batches of random sizes: the batches (which decide one instance's results together) leave exactly
the rows the single results leave, and answer each result as the single path did.

The workflows are PARALLELs of short sequences, MAPs (with and without a concurrency cap) of one
or two tasks, and MAPs of PARALLELs, each maybe followed by a task; every job's outcome (done,
failed and retried, failed for good) is a function of the seed, its step, its place and its
attempt, so both runs see the same outcomes in the same order.
"""

from __future__ import annotations

import hashlib
import itertools
import os
from collections.abc import Callable
from typing import Any

from baton.engine.batch_ops import BatchResult, Failure
from baton.engine.service import Engine
from baton.errors import Conflict
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.rows import cohort_rows

RUN = itertools.count()
# Longer, with fresh random examples, when BATON_FUZZ_EXAMPLES asks (as the no-500 fuzz does).
LONGER_RUN = os.environ.get("BATON_FUZZ_EXAMPLES")


def _task(step_id: str, cohort: str, **given: Any) -> dict[str, Any]:
    step = {"id": step_id, "type": "SERVICE_TASK", "jobType": f"eq-{cohort}"}
    step["input"] = {"n": "${workflow.input.n}", **given}  # the instance, to order by
    return {**step, "retryCount": 1, "retryDelaySeconds": 0}


@st.composite
def workflows(draw: st.DrawFn) -> Callable[[str], dict[str, Any]]:
    """A definition (by cohort, so each run has its own job type) of one random fan-out."""
    kind = draw(st.sampled_from(["parallel", "map", "map-of-parallel"]))
    branches = draw(st.lists(st.integers(1, 2), min_size=2, max_size=4))
    body = draw(st.integers(1, 2))
    cap = draw(st.sampled_from([1, 2, 3, 100]))
    then = draw(st.booleans())

    def definition(cohort: str) -> dict[str, Any]:
        at = {"at": "${map.index}"}
        if kind == "parallel":
            lists = [[_task(f"b{b}s{s}", cohort) for s in range(n)] for b, n in enumerate(branches)]
            fan: dict[str, Any] = {"id": "fan", "type": "PARALLEL", "branches": lists}
        else:
            if kind == "map":
                steps = [_task(f"m{s}", cohort, **at) for s in range(body)]
            else:
                pair = [[_task(f"p{b}", cohort, **at)] for b in range(2)]
                steps = [{"id": "inner", "type": "PARALLEL", "branches": pair}]
            fan = {"id": "fan", "type": "MAP", "items": "${workflow.input.items}", "steps": steps}
            fan["maxConcurrency"] = cap
        tail = [_task("after", cohort, fan="${fan.output}")] if then else []
        return {
            "name": f"eq-{cohort}",
            "steps": [fan, *tail],
            "outputParameters": {"who": "${workflow.variables.who}", "fan": "${fan.output}"},
        }

    return definition


def _result(seed: int, job: dict[str, Any]) -> tuple[dict[str, Any] | None, Failure | None]:
    at = (job.get("input") or {}).get("at", -1)
    digest = hashlib.sha256(f"{seed}|{job['stepId']}|{at}|{job['attempt']}".encode()).digest()
    roll = digest[0] % 20
    if roll < 3:
        return None, Failure("broke", retryable=False)
    if roll < 6:
        return None, Failure("flaky", retryable=True)
    return {"who": job["stepId"], f"v{job['stepId']}": at, "roll": roll}, None


def _order(job: dict[str, Any]) -> tuple[int, str, int, int]:
    given = job.get("input") or {}
    return int(given.get("n", 0)), job["stepId"], int(given.get("at", -1)), int(job["attempt"])


def _drive(
    engine: Engine,
    cohort: str,
    definition: dict[str, Any],
    apply: Callable[[list[dict[str, Any]]], None],
) -> None:
    engine.register_definition(definition)
    for n in range(3):
        given = {"n": n, "items": list(range(4))}
        engine.start_instance(definition_name=definition["name"], input=given)
    for _ in range(60):
        jobs = engine.poll("w", [f"eq-{cohort}"], 100)
        if not jobs:
            return
        apply(sorted(jobs, key=_order))
    raise AssertionError("the workflows did not settle in 60 rounds")


def _single(engine: Engine, seed: int, answers: list[str]) -> Callable[[list[Any]], None]:
    def apply(jobs: list[dict[str, Any]]) -> None:
        for job in jobs:
            output, failure = _result(seed, job)
            try:
                if failure is None:
                    engine.complete_job(job["id"], "w", output, attempt=job["attempt"])
                else:
                    error, retryable = failure.error_message, failure.retryable
                    engine.fail_job(job["id"], "w", error, retryable, attempt=job["attempt"])
                answers.append("APPLIED")
            except Conflict:
                answers.append("CONFLICT")

    return apply


def _batched(
    engine: Engine, seed: int, size: int, answers: list[str]
) -> Callable[[list[Any]], None]:
    def apply(jobs: list[dict[str, Any]]) -> None:
        for start in range(0, len(jobs), size):
            items = []
            for job in jobs[start : start + size]:
                output, failure = _result(seed, job)
                items.append(BatchResult(job["id"], "w", job["attempt"], output, failure))
            answers.extend(a["outcome"] for a in engine.complete_batch(items))

    return apply


@settings(
    max_examples=int(LONGER_RUN or "12"),
    derandomize=not LONGER_RUN,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(workflow=workflows(), seed=st.integers(0, 10_000), size=st.sampled_from([2, 3, 7, 100]))
def test_random_fanouts_in_batches_leave_the_rows_single_results_leave(
    engine: Engine,
    database_url: str,
    workflow: Callable[[str], dict[str, Any]],
    seed: int,
    size: int,
) -> None:
    run = next(RUN)
    single, batch = f"s{run}", f"b{run}"
    one_by_one: list[str] = []
    batched: list[str] = []
    _drive(engine, single, workflow(single), _single(engine, seed, one_by_one))
    _drive(engine, batch, workflow(batch), _batched(engine, seed, size, batched))
    assert batched == one_by_one
    # One decision can make several jobs claimable at one moment, which a claim then takes in
    # any order (single results make them claimable one decision, one moment, at a time).
    rows_single = cohort_rows(database_url, single, dispatch_order=False)
    assert cohort_rows(database_url, batch, dispatch_order=False) == rows_single
