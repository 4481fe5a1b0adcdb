"""Joins under concurrency: the last branches of a PARALLEL (or the last items of a MAP) finishing
at the same moment in different transactions fire the continuation exactly once.

Every branch's completion is a decision on the same instance; the fencing token serialises them
(an optimistic write that lost the race is refused whole and made again under the row lock), so
exactly one decision sees every branch ended. The ``racing`` fixture also fails on any deadlock.
"""

from __future__ import annotations

import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from baton.engine.service import Engine

BRANCHES = 50
ROUNDS = 100


def _complete_all_at_once(engine: Engine, jobs: list[dict[str, Any]]) -> None:
    barrier = threading.Barrier(len(jobs))

    def complete(job: dict[str, Any]) -> bool:
        barrier.wait()
        result = engine.complete_job(job["id"], "w", {"b": job["stepId"]}, attempt=job["attempt"])
        return bool(result["applied"])

    with ThreadPoolExecutor(len(jobs)) as pool:
        assert all(pool.map(complete, jobs))


def _check_joined_once(engine: Engine, instance_id: str, operator: str) -> None:
    got = engine.get_instance(instance_id)
    by_step = Counter(s["stepId"] for s in got["steps"])
    assert by_step[operator] == 1 and by_step["after"] == 1, by_step
    (op,) = [s for s in got["steps"] if s["stepId"] == operator]
    assert op["status"] == "COMPLETED"
    events = Counter(a["event"] for a in engine.audit_trail(instance_id))
    assert events["JOB_CREATED"] == BRANCHES + 1  # the branches' jobs and one for "after"


def test_fifty_branches_completing_together_join_exactly_once_a_hundred_times(
    racing: Engine,
) -> None:
    racing.register_definition(
        {
            "name": "fan",
            "steps": [
                {
                    "id": "fan",
                    "type": "PARALLEL",
                    "branches": [
                        [{"id": f"b{i}", "type": "SERVICE_TASK", "jobType": "branch"}]
                        for i in range(BRANCHES)
                    ],
                },
                {"id": "after", "type": "SERVICE_TASK", "jobType": "after"},
            ],
        }
    )
    for _ in range(ROUNDS):
        inst, _ = racing.start_instance(definition_name="fan")
        jobs = racing.poll("w", ["branch"], 100)
        assert len(jobs) == BRANCHES
        _complete_all_at_once(racing, jobs)
        _check_joined_once(racing, inst["id"], "fan")
        (after,) = racing.poll("w", ["after"], 10)
        assert after["input"] == {}
        got = racing.get_instance(inst["id"])
        fan = next(s for s in got["steps"] if s["stepId"] == "fan")
        assert fan["output"] == {str(i): {"b": f"b{i}"} for i in range(BRANCHES)}
        racing.complete_job(after["id"], "w", {}, attempt=after["attempt"])


def test_map_items_completing_together_join_exactly_once(racing: Engine) -> None:
    racing.register_definition(
        {
            "name": "each",
            "steps": [
                {
                    "id": "each",
                    "type": "MAP",
                    "items": "${workflow.input.xs}",
                    "maxConcurrency": BRANCHES,
                    "steps": [{"id": "one", "type": "SERVICE_TASK", "jobType": "item"}],
                },
                {"id": "after", "type": "SERVICE_TASK", "jobType": "after"},
            ],
        }
    )
    for _ in range(10):
        inst, _ = racing.start_instance(definition_name="each", input={"xs": list(range(BRANCHES))})
        jobs = racing.poll("w", ["item"], 100)
        assert len(jobs) == BRANCHES
        _complete_all_at_once(racing, jobs)
        _check_joined_once(racing, inst["id"], "each")
        (after,) = racing.poll("w", ["after"], 10)
        racing.complete_job(after["id"], "w", {}, attempt=after["attempt"])
