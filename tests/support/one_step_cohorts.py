"""What the one-step shortcut's equivalence tests share (per commit: test_one_step_commit; in
batches: test_one_step_batch): the cohort's definitions, ids masked in answers, the deciders an
engine builds, and the metrics both runs must count alike."""

from __future__ import annotations

import re
from typing import Any

import pytest
from baton.engine.service import Engine
from baton.metrics import CountingMetrics

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
TIMED = ("JobDispatchLatency",)  # each run's own clock


def task(step_id: str, job_type: str, **extra: Any) -> dict[str, Any]:
    step: dict[str, Any] = {"id": step_id, "type": "SERVICE_TASK", "jobType": job_type}
    step["input"] = {"n": "${workflow.input.n}", "kind": "${workflow.input.kind}"}
    return {**step, **extra}


def definitions(cohort: str, job_type: str, *, timed: bool = False) -> dict[str, dict[str, Any]]:
    """One-step definitions (plain, with output parameters, with a timeout when ``timed``),
    a two-step one and a MAP, all of whose jobs have type ``job_type``."""
    one = [task("only", job_type, retryCount=1, retryDelaySeconds=0)]
    out: dict[str, dict[str, Any]] = {
        "plain": {"name": f"plain-{cohort}", "steps": one},
        "params": {
            "name": f"params-{cohort}",
            "steps": one,
            "outputParameters": {"got": "${only.output.v}"},
        },
        "two": {
            "name": f"two-{cohort}",
            "steps": [task("first", job_type), task("last", job_type)],
        },
        "map": {
            "name": f"map-{cohort}",
            "steps": [
                {
                    "id": "fan",
                    "type": "MAP",
                    "items": "${workflow.input.items}",
                    "steps": [task("item", job_type)],
                }
            ],
        },
    }
    if timed:
        out["timed"] = {"name": f"timed-{cohort}", "steps": one, "timeoutSeconds": 600}
    return out


def count_deciders(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The deciders ``engine`` builds from now on (their arguments), appended as it builds them."""
    built: list[object] = []
    real = engine.decider

    def counting(*args: Any, **kwargs: Any) -> Any:
        built.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(engine, "decider", counting)
    return built


def assert_counted_alike(one: CountingMetrics, other: CountingMetrics) -> None:
    """Both runs counted the same metrics (timings aside), and some instances completed."""
    counts = {k: v for k, v in one.totals.items() if k not in TIMED}
    assert counts == {k: v for k, v in other.totals.items() if k not in TIMED}
    assert counts["InstancesCompleted"] > 0
