"""The per-commit completion's common shape (``engine.one_step`` decided in ``complete_job``,
written by ``instance_sql.COMPLETE_ONE_STEP``) leaves exactly what the decider and its chained
statement leave: the same results sent one by one, once with the shortcut and once with every
result decided by the decider, write the same rows, audit and versions, give the same answers
and errors and count the same metrics, whether the completion decides on the state kept at the
claim or on a fresh read. And the shortcut is fenced as the decider's write is: a kept state
the instance moved on from is refused and decided again on what is there.

The results mix the shape (one-step workflows, with and without a timeout; the last step of
two-step ones; object, empty, absent and non-object outputs) with what must go to the decider:
output parameters, a retried and a final failure, the first step of two, repeats, a result of
another worker, one of an attempt not yet started, and a MAP's items.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from baton.engine import one_step
from baton.engine.service import Engine
from baton.errors import BatonError
from baton.metrics import CountingMetrics
from baton.settings import EngineSettings
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


def _output(n: int) -> Any:
    choices: list[Any] = [{"v": n, "n": -n}, {}, None, [n, "list"], {"v": {"nested": [n]}}]
    return choices[n % len(choices)]


def _calls(engine: Engine, job: dict[str, Any], round_: int) -> list[Callable[[], Any]]:
    """What is sent for a claimed job (a function of its instance's kind, number and attempt),
    in order, with repeats, refusals and failures mixed in."""
    kind, n, attempt, jid = job["input"]["kind"], job["input"]["n"], job["attempt"], job["id"]
    usual = _output(n)

    def complete(worker: str = "w", at: int = attempt, output: Any = usual) -> Any:
        return lambda: engine.complete_job(jid, worker, output, attempt=at)

    if kind != "plain":
        return [complete()]
    if n == 3 and attempt == 1:
        return [lambda: engine.fail_job(jid, "w", "flaky", attempt=attempt)]
    if n == 4:
        return [lambda: engine.fail_job(jid, "w", "no", retryable=False, attempt=attempt)]
    if n == 5:
        return [complete(worker="other-worker", output={"x": 1}), complete()]
    if n == 6:
        return [complete(at=attempt + 1, output={"x": 1}), complete()]
    if n in (1, 7):
        return [complete(), complete()]  # a repeat at once
    if n == 2 and round_ > 0:
        return [complete(output={"late": "repeat"})]
    return [complete()]


def _answer(call: Callable[[], Any]) -> Any:
    """An answer or an error, without ids or times (each run's own)."""
    try:
        got = call()
    except BatonError as e:
        return (type(e).__name__, UUID.sub("<id>", str(e)))
    return {k: v for k, v in got.items() if k not in ("jobId", "nextAttemptAt")}


def _drive(engine: Engine, cohort: str) -> list[Any]:
    """Start the cohort's instances, then claim and complete one by one until no job is left;
    every call's answer."""
    definitions = definitions_of(cohort, f"oc-{cohort}", timed=True)
    for definition in definitions.values():
        engine.register_definition(definition)
    for kind in definitions:
        for n in range(8):
            body: dict[str, Any] = {"n": n, "kind": kind}
            if kind == "map":
                body["items"] = list(range(3))
            engine.start_instance(definition_name=f"{kind}-{cohort}", input=body)
    answers: list[Any] = []
    for round_ in itertools.count():
        jobs = engine.poll("w", [f"oc-{cohort}"], 100)
        if not jobs:
            break
        jobs.sort(key=lambda j: (j["input"]["kind"], j["input"]["n"], j["attempt"]))
        for job in jobs:
            answers.extend(_answer(call) for call in _calls(engine, job, round_))
    return answers


def _versions(database_url: str, cohort: str) -> list[tuple[str, int, int]]:
    """Each instance's version, with the definition and number it was started with."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        rows = conn.execute(
            """SELECT split_part(definition_name, '-', 1), (input ->> 'n')::int, version
                 FROM instance WHERE definition_name LIKE %s ORDER BY 1, 2""",
            (f"%-{cohort}",),
        ).fetchall()
    return [(r[0], r[1], r[2]) for r in rows]


@pytest.mark.parametrize("kept", [True, False], ids=["kept-state", "read"])
def test_the_per_commit_shortcut_leaves_what_the_decider_leaves(
    db: Database, database_url: str, monkeypatch: pytest.MonkeyPatch, kept: bool
) -> None:
    run = next(RUN)
    settings = EngineSettings() if kept else EngineSettings(claimed_states=0)
    with_metrics = CountingMetrics()
    shortcut: list[str] = []
    real = one_step.settle

    def counted(*args: Any, **kwargs: Any) -> Any:
        one = real(*args, **kwargs)
        if one is not None:
            shortcut.append("shortcut")
        return one

    monkeypatch.setattr(one_step, "settle", counted)
    fast = _drive(Engine(db, settings, metrics=with_metrics), f"fast{run}")
    fast_rows = cohort_rows(database_url, f"fast{run}")

    monkeypatch.setattr(one_step, "settle", lambda *args, **kwargs: None)  # all to the decider
    without_metrics = CountingMetrics()
    slow = _drive(Engine(db, settings, metrics=without_metrics), f"slow{run}")
    slow_rows = cohort_rows(database_url, f"slow{run}")

    # plain but the one failed for good (the retried one at its second attempt), timed, and
    # the last step of two
    assert len(shortcut) == 7 + 8 + 8
    assert fast == slow
    assert fast_rows == slow_rows
    assert _versions(database_url, f"fast{run}") == _versions(database_url, f"slow{run}")
    assert_counted_alike(with_metrics, without_metrics)


def test_a_per_commit_one_step_completion_builds_no_decider(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine.register_definition({"name": "oc-plain", "steps": [task("only", "oc-x")]})
    for n in range(5):
        engine.start_instance(definition_name="oc-plain", input={"n": n, "kind": "plain"})
    built = count_deciders(engine, monkeypatch)
    jobs = engine.poll("w", ["oc-x"], 5)
    answers = [engine.complete_job(j["id"], "w", {"r": 1}) for j in jobs]
    assert [a["applied"] for a in answers] == [True] * 5
    assert built == []
    finished = [engine.get_instance(j["instanceId"]) for j in jobs]
    assert {(i["status"], i["output"]["r"]) for i in finished} == {("COMPLETED", 1)}


def test_a_kept_state_the_instance_moved_on_from_is_refused_and_decided_again(
    engine: Engine, db: Database
) -> None:
    """Claimed (its state kept as RUNNING at version 1), then paused by another process: the
    shortcut's write is refused by the version fence, and the completion is decided again on
    the paused instance (its continuation waits for resume), not written as a completion."""
    engine.register_definition({"name": "oc-paused", "steps": [task("only", "oc-p")]})
    started, _ = engine.start_instance(definition_name="oc-paused", input={"n": 0, "kind": "x"})
    (job,) = engine.poll("w", ["oc-p"], 1)
    assert job["id"] in engine.claimed
    Engine(db).pause_instance(started["id"])
    assert engine.complete_job(job["id"], "w", {"r": 1})["applied"] is True
    paused = engine.get_instance(started["id"])
    assert paused["status"] == "PAUSED"
    assert paused.get("output") is None
    Engine(db).resume_instance(started["id"])
    done = engine.get_instance(started["id"])
    assert (done["status"], done["output"]) == ("COMPLETED", {"r": 1})
