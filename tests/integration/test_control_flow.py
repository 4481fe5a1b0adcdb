"""Control flow on a real PostgreSQL: each operator alone and nested, timers through the sweeper,
sub-workflows and their events, pause/resume, retry, restart, the failure workflow, and limits."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

import pytest
from baton.engine.service import Engine
from baton.errors import Conflict
from baton.settings import EngineSettings
from baton.store.db import Database

from tests.support.helpers import wait_until

Handler = Callable[[dict[str, Any]], Any]


def task(step_id: str, job_type: str | None = None, **extra: Any) -> dict[str, Any]:
    return {"id": step_id, "type": "SERVICE_TASK", "jobType": job_type or step_id, **extra}


def drain(engine: Engine, handlers: dict[str, Handler], *, rounds: int = 1000) -> int:
    """Play the workers: claim and complete (or fail, when a handler raises) every job of the
    handlers' types until none is left; returns how many jobs ran."""
    ran = 0
    for _ in range(rounds):
        jobs = engine.poll("w", list(handlers), 100)
        if not jobs:
            return ran
        for job in jobs:
            ran += 1
            try:
                output = handlers[job["jobType"]](job["input"])
            except Exception as e:
                engine.fail_job(job["id"], "w", str(e), retryable=False, attempt=job["attempt"])
            else:
                engine.complete_job(job["id"], "w", output, attempt=job["attempt"])
    raise AssertionError("jobs kept coming")


def steps_of(engine: Engine, instance_id: str, step_id: str) -> list[dict[str, Any]]:
    return [s for s in engine.get_instance(instance_id)["steps"] if s["stepId"] == step_id]


@pytest.fixture
def sweeper(engine: Engine) -> Iterator[None]:
    """The scheduled sweeper, looping as it does in its invocation (every 200 ms here)."""
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            engine.sweep()
            stop.wait(0.2)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    yield
    stop.set()
    thread.join(timeout=10)


# --- each operator ----------------------------------------------------------------------------


def test_switch_by_value_and_by_condition(engine: Engine) -> None:
    engine.register_definition(
        {
            "name": "route",
            "steps": [
                {
                    "id": "byValue",
                    "type": "SWITCH",
                    "on": "${workflow.input.tier}",
                    "cases": {"gold": [task("gold")]},
                    "default": [task("other")],
                },
                {
                    "id": "byCondition",
                    "type": "SWITCH",
                    "cases": [
                        {"condition": "workflow.input.amount > 100", "steps": [task("big")]},
                        {"condition": "true", "steps": [task("small")]},
                    ],
                },
            ],
        }
    )
    seen: list[str] = []
    handlers = {
        t: (lambda _i, t=t: seen.append(t) or {"by": t}) for t in ("gold", "other", "big", "small")
    }
    inst, _ = engine.start_instance(definition_name="route", input={"tier": "gold", "amount": 500})
    drain(engine, handlers)
    got = engine.get_instance(inst["id"])
    assert got["status"] == "COMPLETED" and seen == ["gold", "big"]
    route = steps_of(engine, inst["id"], "byCondition")[0]
    assert route["output"] == {"by": "big", "case": "0"}
    inner = steps_of(engine, inst["id"], "big")[0]
    assert inner["parentStepExecutionId"] == route["id"]


def test_parallel_joins_and_its_branch_outputs_are_visible_after_it(engine: Engine) -> None:
    engine.register_definition(
        {
            "name": "fan",
            "steps": [
                {
                    "id": "fan",
                    "type": "PARALLEL",
                    "branches": [[task("a"), task("a2")], [task("b")], [task("c")]],
                },
                task("after", input={"a": "${a2.output.v}", "b": "${fan.output.1.v}"}),
            ],
            "outputParameters": {"after": "${after.output}"},
        }
    )
    inst, _ = engine.start_instance(definition_name="fan")
    drain(
        engine,
        {
            "a": lambda _i: {"v": "a"},
            "a2": lambda _i: {"v": "a2"},
            "b": lambda _i: {"v": "b"},
            "c": lambda _i: {"v": "c"},
            "after": lambda i: i,
        },
    )
    got = engine.get_instance(inst["id"])
    assert got["status"] == "COMPLETED"
    assert got["output"] == {"after": {"a": "a2", "b": "b"}}
    branches = {s["stepId"]: s["branch"] for s in got["steps"] if "branch" in s}
    assert branches == {"a": 0, "a2": 0, "b": 1, "c": 2}


def test_map_runs_every_item_bounded_and_collects_results_in_order(engine: Engine) -> None:
    engine.register_definition(
        {
            "name": "each",
            "steps": [
                {
                    "id": "each",
                    "type": "MAP",
                    "items": "${workflow.input.rows}",
                    "maxConcurrency": 3,
                    "steps": [task("one", input={"row": "${map.item}", "i": "${map.index}"})],
                }
            ],
            "outputParameters": {"out": "${each.output}"},
        }
    )
    inst, _ = engine.start_instance(definition_name="each", input={"rows": list(range(10))})
    assert len(engine.poll("peek", ["one"], 100)) == 3  # claimed: at most maxConcurrency at once
    # (the claimed three come back to the pool as their leases lapse; a fresh instance instead)
    inst, _ = engine.start_instance(definition_name="each", input={"rows": list(range(10))})
    seen: list[int] = []

    def one(i: dict[str, Any]) -> Any:
        seen.append(i["i"])
        return {"sq": i["row"] ** 2}

    drain(engine, {"one": one})
    got = engine.get_instance(inst["id"])
    assert got["status"] == "COMPLETED"
    assert got["output"] == {"out": [{"sq": i * i} for i in range(10)]}
    assert sorted(seen) == list(range(10))
    assert sorted(s["itemIndex"] for s in got["steps"] if s["stepId"] == "one") == list(range(10))


def test_do_while_keeps_every_iteration(engine: Engine) -> None:
    engine.register_definition(
        {
            "name": "loop",
            "steps": [
                {
                    "id": "loop",
                    "type": "DO_WHILE",
                    "while": "count.output.n < 4",
                    "maxIterations": 10,
                    "steps": [task("count")],
                }
            ],
        }
    )
    inst, _ = engine.start_instance(definition_name="loop")
    n = iter(range(1, 100))
    drain(engine, {"count": lambda _i: {"n": next(n)}})
    got = engine.get_instance(inst["id"])
    assert got["status"] == "COMPLETED"
    assert [s["iteration"] for s in got["steps"] if s["stepId"] == "count"] == [1, 2, 3, 4]
    assert steps_of(engine, inst["id"], "loop")[0]["output"] == {"n": 4, "iterations": 4}


def test_a_loop_condition_reads_its_own_iteration(engine: Engine) -> None:
    engine.register_definition(
        {
            "name": "thrice",
            "steps": [
                {
                    "id": "loop",
                    "type": "DO_WHILE",
                    "while": "loop.output.iteration < 3",
                    "maxIterations": 10,
                    "steps": [{"id": "tick", "type": "SET_VARIABLE", "variables": {"t": 1}}],
                }
            ],
        }
    )
    inst, _ = engine.start_instance(definition_name="thrice")
    got = engine.get_instance(inst["id"])
    assert got["status"] == "COMPLETED"
    assert [s["iteration"] for s in got["steps"] if s["stepId"] == "tick"] == [1, 2, 3]
    assert steps_of(engine, inst["id"], "loop")[0]["output"]["iterations"] == 3


def test_a_loop_s_job_input_carries_its_iteration_nested_loops_each_their_own(
    engine: Engine,
) -> None:
    engine.register_definition(
        {
            "name": "rounds",
            "steps": [
                {
                    "id": "round",
                    "type": "DO_WHILE",
                    "while": "round.iteration < workflow.input.rounds",
                    "maxIterations": 10,
                    "steps": [
                        task("fetch", input={"page": "${round.iteration}"}),
                        {
                            "id": "retry",
                            "type": "DO_WHILE",
                            "while": "try.output.again",
                            "maxIterations": 5,
                            "steps": [
                                task(
                                    "try",
                                    input={
                                        "label": "page ${round.iteration} try ${retry.iteration}",
                                        "attempt": "${retry.iteration}",
                                    },
                                )
                            ],
                        },
                    ],
                }
            ],
        }
    )
    inst, _ = engine.start_instance(definition_name="rounds", input={"rounds": 3})
    pages: list[Any] = []
    tries: list[Any] = []

    def fetch(i: dict[str, Any]) -> Any:
        pages.append(i["page"])
        return {}

    def attempt(i: dict[str, Any]) -> Any:
        tries.append(i["label"])
        return {"again": i["attempt"] < 2}  # every page takes two tries

    drain(engine, {"fetch": fetch, "try": attempt})
    got = engine.get_instance(inst["id"])
    assert got["status"] == "COMPLETED"
    assert pages == [1, 2, 3]
    assert tries == [f"page {p} try {t}" for p in (1, 2, 3) for t in (1, 2)]
    assert [s["iteration"] for s in got["steps"] if s["stepId"] == "try"] == [1, 2] * 3


def test_set_variable_and_terminate(engine: Engine) -> None:
    engine.register_definition(
        {
            "name": "stop",
            "steps": [
                {"id": "set", "type": "SET_VARIABLE", "variables": {"k": "${workflow.input.k}"}},
                {
                    "id": "fan",
                    "type": "PARALLEL",
                    "branches": [
                        [task("slow")],
                        [
                            {
                                "id": "end",
                                "type": "TERMINATE",
                                "status": "COMPLETED",
                                "reason": "nothing to do",
                                "output": {"k": "${workflow.variables.k}"},
                            }
                        ],
                    ],
                },
            ],
        }
    )
    inst, _ = engine.start_instance(definition_name="stop", input={"k": 3})
    got = engine.get_instance(inst["id"])
    assert (got["status"], got["output"], got["reason"]) == ("COMPLETED", {"k": 3}, "nothing to do")
    assert steps_of(engine, inst["id"], "slow")[0]["status"] == "CANCELLED"
    assert engine.poll("w", ["slow"], 10) == []


def test_a_timer_fires_through_the_sweeper_within_two_seconds(
    engine: Engine, sweeper: None
) -> None:
    engine.register_definition(
        {"name": "nap", "steps": [{"id": "nap", "type": "TIMER", "duration": "PT1S"}, task("x")]}
    )
    inst, _ = engine.start_instance(definition_name="nap")
    (nap,) = steps_of(engine, inst["id"], "nap")
    assert nap["status"] == "IN_PROGRESS" and "wakeAt" in nap
    wait_until(lambda: steps_of(engine, inst["id"], "nap")[0]["status"] == "COMPLETED", timeout=5)
    (nap,) = steps_of(engine, inst["id"], "nap")
    late = _at(nap["completedAt"]) - _at(nap["wakeAt"])
    assert 0 <= late.total_seconds() < 2
    assert engine.poll("w", ["x"], 1)


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


# --- sub-workflows ----------------------------------------------------------------------------


def test_a_sub_workflow_runs_a_child_and_takes_its_output(engine: Engine) -> None:
    engine.register_definition(
        {"name": "kid", "steps": [task("k", input={"n": "${workflow.input.n}"})]}
    )
    engine.register_definition(
        {
            "name": "parent",
            "steps": [
                {
                    "id": "child",
                    "type": "SUB_WORKFLOW",
                    "definitionName": "kid",
                    "input": {"n": "${workflow.input.n}"},
                },
                task("after", input={"got": "${child.output.doubled}"}),
            ],
        }
    )
    inst, _ = engine.start_instance(definition_name="parent", input={"n": 21})
    (child_step,) = steps_of(engine, inst["id"], "child")
    kid = engine.get_instance(child_step["childInstanceId"])
    assert kid["parentInstanceId"] == inst["id"]
    assert kid["parentStepExecutionId"] == child_step["id"]
    drain(engine, {"k": lambda i: {"doubled": i["n"] * 2}, "after": lambda i: i})
    assert engine.get_instance(kid["id"])["status"] == "COMPLETED"
    got = engine.get_instance(inst["id"])
    assert got["status"] == "COMPLETED"
    assert steps_of(engine, inst["id"], "after")[0]["output"] == {"got": 42}


def test_a_start_answers_with_what_its_child_ending_at_once_made_of_it(engine: Engine) -> None:
    # The child ends inside the start's own transaction; its end reaches the parent after the
    # commit, and the start's answer is the parent after that (not the row its COMMIT left).
    engine.register_definition(
        {"name": "kid", "steps": [{"id": "mark", "type": "SET_VARIABLE", "variables": {"x": 1}}]}
    )
    engine.register_definition(
        {"name": "parent", "steps": [{"id": "c", "type": "SUB_WORKFLOW", "definitionName": "kid"}]}
    )
    inst, created = engine.start_instance(definition_name="parent")
    assert created
    assert inst["status"] == "COMPLETED"
    assert inst == engine.get_instance(inst["id"])


def test_a_start_answers_with_the_instance_as_a_read_returns_it(engine: Engine) -> None:
    engine.register_definition(
        {
            "name": "two",
            "steps": [
                {"id": "set", "type": "SET_VARIABLE", "variables": {"k": "${workflow.input.k}"}},
                task("work"),
            ],
        }
    )
    inst, created = engine.start_instance(
        definition_name="two", input={"k": "v"}, correlation_id="c-1"
    )
    assert created
    assert [s["stepId"] for s in inst["steps"]] == ["set", "work"]
    assert inst == engine.get_instance(inst["id"])
    again, created = engine.start_instance(definition_name="two", input={"k": "w"})
    assert created
    assert again == engine.get_instance(again["id"])
    assert again["id"] != inst["id"]


def test_cancelling_the_parent_cancels_the_child(engine: Engine) -> None:
    engine.register_definition({"name": "kid", "steps": [task("k")]})
    engine.register_definition(
        {"name": "parent", "steps": [{"id": "c", "type": "SUB_WORKFLOW", "definitionName": "kid"}]}
    )
    inst, _ = engine.start_instance(definition_name="parent")
    kid_id = steps_of(engine, inst["id"], "c")[0]["childInstanceId"]
    engine.cancel_instance(inst["id"], "no longer needed")
    kid = engine.get_instance(kid_id)
    assert kid["status"] == "CANCELLED"
    assert engine.poll("w", ["k"], 1) == []


def test_a_do_while_around_a_sub_workflow(engine: Engine) -> None:
    engine.register_definition({"name": "kid", "steps": [task("k")]})
    engine.register_definition(
        {
            "name": "loop",
            "steps": [
                {
                    "id": "loop",
                    "type": "DO_WHILE",
                    "while": "child.output.n < 3",
                    "maxIterations": 5,
                    "steps": [{"id": "child", "type": "SUB_WORKFLOW", "definitionName": "kid"}],
                }
            ],
        }
    )
    inst, _ = engine.start_instance(definition_name="loop")
    n = iter(range(1, 10))
    drain(engine, {"k": lambda _i: {"n": next(n)}})
    got = engine.get_instance(inst["id"])
    assert got["status"] == "COMPLETED"
    children = [s["childInstanceId"] for s in got["steps"] if s["stepId"] == "child"]
    assert len(set(children)) == 3
    assert [s["iteration"] for s in got["steps"] if s["stepId"] == "child"] == [1, 2, 3]


def test_a_failed_child_fails_the_step_after_its_retries(engine: Engine) -> None:
    engine.register_definition({"name": "kid", "steps": [task("k")]})
    engine.register_definition(
        {
            "name": "parent",
            "steps": [
                {"id": "c", "type": "SUB_WORKFLOW", "definitionName": "kid", "retryCount": 1}
            ],
        }
    )
    inst, _ = engine.start_instance(definition_name="parent")

    def boom(_i: dict[str, Any]) -> Any:
        raise RuntimeError("kid broke")

    assert drain(engine, {"k": boom}) == 2  # the first child and the one retry
    got = engine.get_instance(inst["id"])
    assert got["status"] == "FAILED"
    assert "kid broke" in got["reason"]


# --- nesting ----------------------------------------------------------------------------------


def test_a_map_of_parallels_with_a_switch_inside(engine: Engine) -> None:
    engine.register_definition(
        {
            "name": "nested",
            "steps": [
                {
                    "id": "each",
                    "type": "MAP",
                    "items": "${workflow.input.orders}",
                    "maxConcurrency": 2,
                    "steps": [
                        {
                            "id": "fan",
                            "type": "PARALLEL",
                            "branches": [
                                [
                                    {
                                        "id": "route",
                                        "type": "SWITCH",
                                        "cases": [
                                            {
                                                "condition": "map.item.total > 100",
                                                "steps": [
                                                    task("review", input={"o": "${map.item.id}"})
                                                ],
                                            }
                                        ],
                                        "default": [task("auto", input={"o": "${map.item.id}"})],
                                    }
                                ],
                                [task("notify", input={"o": "${map.item.id}"})],
                            ],
                        }
                    ],
                }
            ],
            "outputParameters": {"all": "${each.output}"},
        }
    )
    orders = [{"id": f"o{i}", "total": 50 * i} for i in range(5)]
    inst, _ = engine.start_instance(definition_name="nested", input={"orders": orders})
    drain(
        engine,
        {
            "review": lambda i: {"reviewed": i["o"]},
            "auto": lambda i: {"auto": i["o"]},
            "notify": lambda i: {"sent": i["o"]},
        },
    )
    got = engine.get_instance(inst["id"])
    assert got["status"] == "COMPLETED"
    expected = []
    for o in orders:
        first = (
            {"reviewed": o["id"], "case": "0"}
            if o["total"] > 100
            else {"auto": o["id"], "case": "default"}
        )
        expected.append({"0": first, "1": {"sent": o["id"]}})
    assert got["output"] == {"all": expected}
    assert len(got["steps"]) == 1 + 5 * 4  # the MAP, then per item: PARALLEL, SWITCH, 2 tasks


# --- instance operations ----------------------------------------------------------------------


def test_pause_holds_new_work_and_resume_releases_it_with_due_timers(engine: Engine) -> None:
    engine.register_definition(
        {
            "name": "held",
            "steps": [
                {
                    "id": "fan",
                    "type": "PARALLEL",
                    "branches": [
                        [task("a"), task("b")],
                        [{"id": "nap", "type": "TIMER", "duration": 0}, task("c")],
                        [{"id": "later", "type": "TIMER", "duration": "PT1S"}, task("d")],
                    ],
                }
            ],
        }
    )
    inst, _ = engine.start_instance(definition_name="held")
    assert [j["jobType"] for j in engine.poll("w", ["c"], 5)] == ["c"]  # the 0 s timer fired
    (job_a,) = engine.poll("w", ["a"], 1)
    paused = engine.pause_instance(inst["id"])
    assert paused["status"] == "PAUSED"
    assert engine.pause_instance(inst["id"])["status"] == "PAUSED"  # idempotent
    engine.complete_job(job_a["id"], "w", {}, attempt=job_a["attempt"])  # in flight: finishes
    assert engine.poll("w", ["b"], 1) == []  # ... but what follows it waits
    wait_until(lambda: _due(engine, inst["id"], "later"), timeout=5)
    assert engine.sweep()["timersFired"] == 0  # a due timer of a paused instance waits too
    resumed = engine.resume_instance(inst["id"])
    assert resumed["status"] == "RUNNING"
    assert steps_of(engine, inst["id"], "later")[0]["status"] == "COMPLETED"
    assert {j["jobType"] for j in engine.poll("w", ["b", "d"], 5)} == {"b", "d"}
    assert engine.resume_instance(inst["id"])["status"] == "RUNNING"  # idempotent
    engine.cancel_instance(inst["id"])
    with pytest.raises(Conflict, match="is CANCELLED, not PAUSED"):
        engine.resume_instance(inst["id"])
    with pytest.raises(Conflict, match="is CANCELLED, not RUNNING"):
        engine.pause_instance(inst["id"])


def _due(engine: Engine, instance_id: str, step_id: str) -> bool:
    (step,) = steps_of(engine, instance_id, step_id)
    return _at(step["wakeAt"]) <= datetime.now(_at(step["wakeAt"]).tzinfo)


def test_retry_resumes_from_the_failed_branch_keeping_completed_work(engine: Engine) -> None:
    engine.register_definition(
        {
            "name": "flaky",
            "steps": [
                task("first"),
                {
                    "id": "fan",
                    "type": "PARALLEL",
                    "branches": [[task("ok")], [task("shaky")], [task("slow1"), task("slow2")]],
                },
                task("last"),
            ],
        }
    )
    inst, _ = engine.start_instance(definition_name="flaky")
    runs: dict[str, int] = {}

    def count(name: str, fail: bool = False) -> Handler:
        def run(_i: dict[str, Any]) -> Any:
            runs[name] = runs.get(name, 0) + 1
            if fail:
                raise RuntimeError(f"{name} broke")
            return {name: runs[name]}

        return run

    drain(engine, {"first": count("first"), "ok": count("ok")})
    drain(engine, {"shaky": count("shaky", fail=True)})
    failed = engine.get_instance(inst["id"])
    assert failed["status"] == "FAILED" and "shaky broke" in failed["reason"]
    assert steps_of(engine, inst["id"], "slow1")[0]["status"] == "CANCELLED"
    running, _ = engine.start_instance(definition_name="flaky")
    with pytest.raises(Conflict, match="is RUNNING, not FAILED or TIMED_OUT or CANCELLED"):
        engine.retry_instance(running["id"])

    retried = engine.retry_instance(inst["id"])
    assert retried["status"] == "RUNNING" and "reason" not in retried
    drain(
        engine,
        {
            "shaky": count("shaky"),
            "slow1": count("slow1"),
            "slow2": count("slow2"),
            "last": count("last"),
            "first": count("first"),
            "ok": count("ok"),
        },
        rounds=50,
    )
    got = engine.get_instance(inst["id"])
    assert got["status"] == "COMPLETED"
    # completed work is kept: first and ok ran once for this instance (and once for the other)
    assert [s["status"] for s in got["steps"] if s["stepId"] == "shaky"] == ["FAILED", "COMPLETED"]
    assert [s["status"] for s in got["steps"] if s["stepId"] == "ok"] == ["COMPLETED"]
    assert [s["status"] for s in got["steps"] if s["stepId"] == "first"] == ["COMPLETED"]
    assert [s["status"] for s in got["steps"] if s["stepId"] == "fan"] == ["COMPLETED"]
    events = [a["event"] for a in engine.audit_trail(inst["id"])]
    assert "INSTANCE_RETRIED" in events


def test_a_timed_out_instance_can_be_retried(engine: Engine) -> None:
    engine.register_definition({"name": "slow", "timeoutSeconds": 1, "steps": [task("s")]})
    inst, _ = engine.start_instance(definition_name="slow")
    wait_until(lambda: engine.sweep()["instancesTimedOut"], timeout=5)
    assert engine.get_instance(inst["id"])["status"] == "TIMED_OUT"
    got = engine.retry_instance(inst["id"])
    assert got["status"] == "RUNNING" and got["timeoutAt"] > got["updatedAt"][:19]
    drain(engine, {"s": lambda _i: {}})
    assert engine.get_instance(inst["id"])["status"] == "COMPLETED"


def test_restart_runs_an_ended_instance_again_as_the_next_run_of_the_same_id(
    engine: Engine,
) -> None:
    engine.register_definition({"name": "again", "steps": [task("v1")]})
    inst, _ = engine.start_instance(definition_name="again", input={"x": 1})
    with pytest.raises(Conflict, match="only an ended instance"):
        engine.restart_instance(inst["id"])
    drain(engine, {"v1": lambda i: {"saw": i}})
    done = engine.get_instance(inst["id"])
    assert done["status"] == "COMPLETED" and done["run"] == 1
    restarted = engine.restart_instance(inst["id"])
    assert (restarted["id"], restarted["status"], restarted["run"]) == (inst["id"], "RUNNING", 2)
    assert restarted["input"] == {"x": 1} and restarted["variables"] == {}
    assert [s["status"] for s in restarted["steps"]] == ["SCHEDULED"]
    drain(engine, {"v1": lambda i: {"saw": i}})
    assert engine.get_instance(inst["id"])["status"] == "COMPLETED"
    # a newer version of the definition, when asked for
    engine.register_definition({"name": "again", "steps": [task("v2")]})
    latest = engine.restart_instance(inst["id"], use_latest_definition=True)
    assert latest["definitionVersion"] == 2 and latest["run"] == 3
    assert [s["stepId"] for s in latest["steps"]] == ["v2"]
    events = [a["event"] for a in engine.audit_trail(inst["id"])]
    assert events.count("INSTANCE_RESTARTED") == 2 and events.count("INSTANCE_COMPLETED") == 2


def test_a_failed_instance_starts_its_failure_workflow(engine: Engine) -> None:
    engine.register_definition({"name": "cleanup", "steps": [task("undo")]})
    engine.register_definition(
        {"name": "risky", "failureWorkflow": "cleanup", "steps": [task("risky")]}
    )
    inst, _ = engine.start_instance(
        definition_name="risky", input={"order": 7}, correlation_id="order-7"
    )

    def boom(_i: dict[str, Any]) -> Any:
        raise RuntimeError("declined")

    drain(engine, {"risky": boom})
    (undo,) = engine.poll("w", ["undo"], 1)
    cleanup = engine.get_instance(undo["instanceId"])
    failed = engine.get_instance(inst["id"])
    (step,) = failed["steps"]
    # Conductor's id of the task that failed: its job and attempt (one attempt: no retries).
    (job_id,) = {a["jobId"] for a in engine.audit_trail(inst["id"]) if a["event"] == "JOB_FAILED"}
    task_id = f"{job_id}.1"
    assert cleanup["definitionName"] == "cleanup"
    # As Conductor starts it: the failed input's keys, then what it is told of the failure,
    # the whole failed workflow as it ended, under the failed one's correlation id.
    assert cleanup["correlationId"] == "order-7"
    assert cleanup["input"] == {
        "order": 7,
        "instanceId": inst["id"],
        "workflowId": inst["id"],
        "reason": "step 'risky' failed: declined",
        "failureStatus": "FAILED",
        "failureTaskId": task_id,
        "failedStepExecutionId": step["id"],
        "failedWorkflow": {
            "workflowId": inst["id"],
            "workflowName": "risky",
            "correlationId": "order-7",
            "status": "FAILED",
            "input": {"order": 7},
            "output": {},
            "reasonForIncompletion": "step 'risky' failed: declined",
            "variables": {},
            "failedTaskId": task_id,
        },
        "input": {"order": 7},
    }
    # The failed instance names it in its output, as Conductor's workflow does.
    assert engine.get_instance(inst["id"])["output"] == {
        "conductor.failure_workflow": cleanup["id"]
    }


def _risky_with_cleanup(engine: Engine, steps: list[dict[str, Any]]) -> str:
    engine.register_definition({"name": "cleanup", "steps": [task("undo")]})
    engine.register_definition({"name": "risky", "failureWorkflow": "cleanup", "steps": steps})
    inst, _ = engine.start_instance(definition_name="risky", input={"order": 7})
    return str(inst["id"])


def _declined(_i: dict[str, Any]) -> Any:
    raise RuntimeError("declined")


def test_a_failure_workflow_is_told_of_the_failed_instance_as_it_ended(engine: Engine) -> None:
    # What the failure workflow's start reads is committed: the failed step's end with it.
    seen: list[Any] = []

    def view(instance: dict[str, Any], audit: list[dict[str, Any]], source: Any) -> Any:
        seen.append(source)
        steps = [[s["stepId"], s["status"], s.get("error")] for s in instance["steps"]]
        return {"tasks": [*steps, [a["event"] for a in audit]], "reasonForIncompletion": "said"}

    engine.failed_view = view
    _risky_with_cleanup(engine, [task("ok"), task("risky")])
    drain(engine, {"ok": lambda _i: {"done": 1}, "risky": _declined})
    (undo,) = engine.poll("w", ["undo"], 1)
    told = engine.get_instance(undo["instanceId"])["input"]
    *tasks, events = told["failedWorkflow"]["tasks"]
    assert tasks == [["ok", "COMPLETED", None], ["risky", "FAILED", "declined"]]
    assert events[-1] == "INSTANCE_FAILED"
    # The view's reason is told (a definition written for Conductor gives Conductor's words).
    assert told["reason"] == told["failedWorkflow"]["reasonForIncompletion"] == "said"
    # Its output as it ended, before it named its failure workflow (Conductor's order).
    assert told["failedWorkflow"]["output"] == {}
    assert seen == [None]  # registered on /v1: no Conductor definition


def test_a_failure_workflow_version_starts_that_version(engine: Engine) -> None:
    engine.register_definition({"name": "cleanup", "steps": [task("old_undo")]})
    engine.register_definition({"name": "cleanup", "steps": [task("new_undo")]})
    engine.register_definition(
        {
            "name": "risky",
            "failureWorkflow": "cleanup",
            "failureWorkflowVersion": 1,
            "steps": [task("risky")],
        }
    )
    inst, _ = engine.start_instance(definition_name="risky", input={})
    drain(engine, {"risky": _declined})
    (undo,) = engine.poll("w", ["old_undo", "new_undo"], 2)
    assert undo["jobType"] == "old_undo"
    started = [
        a for a in engine.audit_trail(inst["id"]) if a["event"] == "FAILURE_WORKFLOW_STARTED"
    ]
    assert started[0]["detail"] == {
        "name": "cleanup",
        "version": 1,
        "instanceId": undo["instanceId"],
    }


def test_a_failure_workflow_cut_off_after_the_failure_is_started_by_the_sweeper(
    engine: Engine,
) -> None:
    iid = _risky_with_cleanup(engine, [task("risky")])
    delivered = engine.deliver_pending
    engine.deliver_pending = lambda: None  # type: ignore[method-assign]  # the process dies
    drain(engine, {"risky": _declined})
    engine.deliver_pending = delivered  # type: ignore[method-assign]
    named = engine.get_instance(iid)["output"]["conductor.failure_workflow"]
    assert engine.poll("w", ["undo"], 1) == []  # not started yet: its event waits
    assert engine.sweep()["eventsDelivered"] == 1
    assert engine.sweep()["eventsDelivered"] == 0  # once
    (undo,) = engine.poll("w", ["undo"], 1)
    assert undo["instanceId"] == named
    started = [a for a in engine.audit_trail(iid) if a["event"] == "FAILURE_WORKFLOW_STARTED"]
    assert [a["detail"]["instanceId"] for a in started] == [named]
    assert engine.get_instance(named)["input"]["failureStatus"] == "FAILED"


# --- limits -----------------------------------------------------------------------------------


def test_a_map_over_more_than_ten_thousand_items_fails_the_step(engine: Engine) -> None:
    engine.register_definition(
        {
            "name": "huge",
            "steps": [
                {"id": "m", "type": "MAP", "items": "${workflow.input.xs}", "steps": [task("t")]}
            ],
        }
    )
    inst, _ = engine.start_instance(definition_name="huge", input={"xs": list(range(10_001))})
    got = engine.get_instance(inst["id"])
    assert got["status"] == "FAILED" and "10001 elements" in got["reason"]


def test_a_loop_of_instant_steps_stops_at_the_step_execution_limit(db: Database) -> None:
    engine = Engine(db, EngineSettings(max_step_executions=5_000))
    engine.register_definition(
        {
            "name": "spin",
            "steps": [
                {
                    "id": "loop",
                    "type": "DO_WHILE",
                    "while": "true",
                    "maxIterations": 10_000,
                    "steps": [{"id": "tick", "type": "SET_VARIABLE", "variables": {"t": 1}}],
                }
            ],
        }
    )
    started = time.monotonic()
    inst, _ = engine.start_instance(definition_name="spin")
    assert time.monotonic() - started < 60
    got = engine.get_instance(inst["id"])
    assert got["status"] == "FAILED"
    assert "reached 5000 step executions" in got["reason"]
    assert len(got["steps"]) == 5_000


def test_a_loop_past_max_iterations_fails_naming_the_limit(engine: Engine) -> None:
    engine.register_definition(
        {
            "name": "spin",
            "steps": [
                {
                    "id": "loop",
                    "type": "DO_WHILE",
                    "while": "true",
                    "maxIterations": 10_000,
                    "steps": [{"id": "tick", "type": "SET_VARIABLE", "variables": {"t": 1}}],
                }
            ],
        }
    )
    inst, _ = engine.start_instance(definition_name="spin")
    got = engine.get_instance(inst["id"])
    assert got["status"] == "FAILED"
    assert "maxIterations (10000)" in got["reason"]
    assert len(got["steps"]) == 10_001
