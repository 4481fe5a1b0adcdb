"""How Conductor names a polled job's task (``Engine.task_references``): a task inside a
DO_WHILE carries the iteration of the innermost loop it runs in, however deep it sits in that
iteration's forks and switches, and a task in no loop carries none."""

from __future__ import annotations

from typing import Any

from baton.engine.service import Engine


def _service(step_id: str) -> dict[str, Any]:
    return {"id": step_id, "type": "SERVICE_TASK", "jobType": step_id}


def _switch(step_id: str, steps: list[dict[str, Any]]) -> dict[str, Any]:
    return {"id": step_id, "type": "SWITCH", "on": "x", "cases": {}, "default": steps}


def test_a_task_deep_in_a_loops_iteration_carries_that_iteration(engine: Engine) -> None:
    deep = _switch("outer", [_switch("inner", [_service("deep")])])
    engine.register_definition(
        {
            "name": "nested-loop",
            "steps": [
                _service("before"),
                {
                    "id": "loop",
                    "type": "DO_WHILE",
                    "while": "loop.iteration < 2",
                    "maxIterations": 5,
                    "steps": [
                        _service("direct"),
                        {"id": "fan", "type": "PARALLEL", "branches": [[deep], [_service("side")]]},
                    ],
                },
            ],
        }
    )
    engine.start_instance(definition_name="nested-loop")
    names: list[tuple[str, int | None]] = []
    for _ in range(50):
        jobs = engine.poll("w", ["before", "direct", "deep", "side"], 10)
        if not jobs:
            break
        refs = engine.task_references([j["id"] for j in jobs])
        for j in jobs:
            reference, iteration = refs[j["id"]]
            assert reference is None
            names.append((j["stepId"], iteration))
            engine.complete_job(j["id"], "w", {})
    assert sorted(names) == sorted(
        [("before", None), *((s, k) for s in ("direct", "deep", "side") for k in (1, 2))]
    )
    # (Only the loop's own steps hold the iteration: "deep" finds it three levels up.)
    (instance,) = engine.search_instances(definition_name="nested-loop")["instances"]
    rows = engine.get_instance(instance["id"])["steps"]
    assert {s["stepId"]: s.get("iteration") for s in rows if s["stepId"] in ("deep", "inner")} == {
        "deep": None,
        "inner": None,
    }
