"""Each operator of the decider, pure: decisions applied in memory (``tests.support.decisions``)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from baton.payload_ref import is_payload_ref
from baton.status import InstanceStatus, JobStatus, StepStatus

from tests.support.decisions import NOW, Run, small_limits


def task(step_id: str, **extra: Any) -> dict[str, Any]:
    return {"id": step_id, "type": "SERVICE_TASK", "jobType": step_id, **extra}


# --- SWITCH -----------------------------------------------------------------------------------


def _switch_on(kind: str) -> Run:
    return Run(
        {
            "name": "s",
            "steps": [
                {
                    "id": "route",
                    "type": "SWITCH",
                    "on": "${workflow.input.kind}",
                    "cases": {"gold": [task("g")], "silver": [task("s")]},
                    "default": [task("d")],
                },
                task("after", input={"case": "${route.output.case}"}),
            ],
        },
        input={"kind": kind},
    ).start()


def test_switch_on_a_value_runs_the_matching_case_and_records_it() -> None:
    run = _switch_on("silver")
    assert [j.job_type for j in run.open_jobs()] == ["s"]
    run.complete("s", {"paid": True})
    (route,) = run.executions("route")
    assert route.status == StepStatus.COMPLETED
    assert route.output == {"paid": True, "case": "silver"}
    (after,) = run.open_jobs("after")
    assert after.payload == {"case": "silver"}


def test_switch_without_a_matching_case_takes_the_default() -> None:
    run = _switch_on("bronze")
    assert [j.job_type for j in run.open_jobs()] == ["d"]
    run.complete("d")
    assert run.executions("route")[0].output == {"case": "default"}


def test_switch_on_a_non_string_value_matches_its_json_text() -> None:
    run = Run(
        {
            "name": "s",
            "steps": [
                {
                    "id": "route",
                    "type": "SWITCH",
                    "on": "${workflow.input.n}",
                    "cases": {"3": [task("three")], "true": [task("yes")]},
                }
            ],
        },
        input={"n": 3},
    ).start()
    assert [j.job_type for j in run.open_jobs()] == ["three"]


def test_switch_without_a_match_or_default_completes_with_no_case() -> None:
    run = Run(
        {
            "name": "s",
            "steps": [{"id": "r", "type": "SWITCH", "on": "x", "cases": {"y": [task("y")]}}],
        }
    ).start()
    assert run.status == InstanceStatus.COMPLETED
    assert run.executions("r")[0].output == {"case": None}


def test_switch_conditions_are_jsonata_tried_in_order() -> None:
    definition = {
        "name": "s",
        "steps": [
            task("score"),
            {
                "id": "route",
                "type": "SWITCH",
                "cases": [
                    {"condition": "score.output.value > 90", "steps": [task("high")]},
                    {
                        "condition": "score.output.value > 50 and workflow.input.vip",
                        "steps": [task("mid")],
                    },
                    {"condition": "$exists(score.output.value)", "steps": [task("low")]},
                ],
            },
        ],
    }
    for value, vip, expected in [(95, False, "high"), (60, True, "mid"), (60, False, "low")]:
        run = Run(definition, input={"vip": vip}).start()
        run.complete("score", {"value": value})
        assert [j.job_type for j in run.open_jobs()] == [expected]
        assert run.executions("route")[0].state == {
            "case": {"high": "0", "mid": "1"}.get(expected, "2")
        }


def test_a_condition_that_fails_to_evaluate_fails_the_step_with_the_message() -> None:
    run = Run(
        {
            "name": "s",
            "steps": [
                {
                    "id": "route",
                    "type": "SWITCH",
                    "cases": [{"condition": "$number('not a number')", "steps": [task("x")]}],
                }
            ],
        }
    ).start()
    assert run.status == InstanceStatus.FAILED
    (route,) = run.executions("route")
    assert route.status == StepStatus.FAILED
    assert route.error and "route" not in route.error
    assert "step 'route' failed" in (run.state.reason or "")


# --- PARALLEL ---------------------------------------------------------------------------------


def _parallel(fail_fast: bool = True) -> Run:
    return Run(
        {
            "name": "p",
            "steps": [
                {
                    "id": "fan",
                    "type": "PARALLEL",
                    "failFast": fail_fast,
                    "branches": [[task("a1"), task("a2")], [task("b1")], [task("c1")]],
                },
                task("join", input={"a": "${a2.output.v}", "all": "${fan.output}"}),
            ],
        }
    ).start()


def test_parallel_starts_every_branch_and_joins_once_all_have_finished() -> None:
    run = _parallel()
    assert sorted(j.job_type for j in run.open_jobs()) == ["a1", "b1", "c1"]
    assert [r.branch for r in run.executions() if r.step_id != "fan"] == [0, 1, 2]
    fan = run.executions("fan")[0]
    assert all(r.parent_id == fan.id for r in run.executions() if r.step_id != "fan")
    run.complete("b1", {"v": "b"})
    run.complete("a1", {"v": "a1"})
    run.complete("c1", {"v": "c"})
    assert run.open_jobs("join") == []  # branch 0 still has a2 to run
    run.complete("a2", {"v": "a2"})
    assert run.executions("fan")[0].output == {"0": {"v": "a2"}, "1": {"v": "b"}, "2": {"v": "c"}}
    (join,) = run.open_jobs("join")
    assert join.payload["a"] == "a2"  # a step inside a branch is visible after the join
    assert join.payload["all"]["1"] == {"v": "b"}


def test_a_failing_branch_fails_the_parallel_and_cancels_its_siblings() -> None:
    run = _parallel()
    run.complete("b1")
    run.fail("c1", "card stolen")
    assert run.status == InstanceStatus.FAILED
    assert run.statuses("a1") == ["CANCELLED"]
    assert run.jobs_of("a1") == [JobStatus.CANCELLED]
    assert run.statuses("fan") == ["FAILED"]
    assert "card stolen" in (run.state.reason or "")


def test_without_fail_fast_the_other_branches_finish_first() -> None:
    run = _parallel(fail_fast=False)
    run.fail("c1", "no")
    assert run.status == InstanceStatus.RUNNING
    assert run.statuses("a1") == ["SCHEDULED"]
    run.complete("a1")
    run.complete("a2")
    assert run.status == InstanceStatus.RUNNING
    run.complete("b1")
    assert run.status == InstanceStatus.FAILED
    assert run.statuses("fan") == ["FAILED"]


def test_branches_that_finish_at_once_join_in_the_same_decision() -> None:
    run = Run(
        {
            "name": "p",
            "steps": [
                {
                    "id": "fan",
                    "type": "PARALLEL",
                    "branches": [
                        [{"id": "x", "type": "SET_VARIABLE", "variables": {"x": 1}}],
                        [{"id": "y", "type": "SET_VARIABLE", "variables": {"y": 2}}],
                    ],
                }
            ],
        }
    ).start()
    assert run.status == InstanceStatus.COMPLETED
    assert run.executions("fan")[0].output == {"0": {"x": 1}, "1": {"y": 2}}
    assert run.state.variables == {"x": 1, "y": 2}  # an operator's output is not merged


# --- MAP --------------------------------------------------------------------------------------


def _map(items: Any, concurrency: int = 2) -> Run:
    return Run(
        {
            "name": "m",
            "steps": [
                {
                    "id": "each",
                    "type": "MAP",
                    "items": "${workflow.input.items}",
                    "maxConcurrency": concurrency,
                    "steps": [task("one", input={"row": "${map.item}", "i": "${map.index}"})],
                }
            ],
            "outputParameters": {"results": "${each.output}"},
        },
        input={"items": items},
    ).start()


def test_map_runs_at_most_max_concurrency_items_and_starts_the_next_as_one_ends() -> None:
    run = _map(["a", "b", "c", "d", "e"])
    assert [j.payload for j in run.open_jobs()] == [{"row": "a", "i": 0}, {"row": "b", "i": 1}]
    run.complete("one", {"r": "B"}, index=1)
    assert [j.payload["i"] for j in run.open_jobs()] == [0, 2]
    for _ in range(4):
        job = run.open_jobs()[0]
        run.complete("one", {"r": job.payload["row"].upper()})
    assert run.status == InstanceStatus.COMPLETED
    assert run.state.output == {"results": [{"r": x} for x in "ABCDE"]}
    assert [r.item_index for r in run.executions("one")] == [0, 1, 2, 3, 4]


def test_map_outputs_do_not_merge_into_the_variables() -> None:
    run = _map(["a"])
    run.complete("one", {"r": 1})
    assert "r" not in run.state.variables


def test_map_over_an_empty_list_completes_with_an_empty_list() -> None:
    run = _map([])
    assert run.status == InstanceStatus.COMPLETED
    assert run.state.output == {"results": []}


@pytest.mark.parametrize(
    ("items", "why"),
    [
        ("abc", "items resolved to str, not a list"),
        (None, "items resolved to null, not a list"),
        (list(range(10_001)), "items has 10001 elements, more than the 10000 a MAP runs"),
    ],
)
def test_map_over_what_is_not_a_list_within_limits_fails_the_step(items: Any, why: str) -> None:
    run = _map(items)
    assert run.status == InstanceStatus.FAILED
    assert why in (run.executions("each")[0].error or "")


def test_a_failing_item_fails_the_map_and_cancels_the_running_items() -> None:
    run = _map([1, 2, 3])
    run.fail("one", "bad row")
    assert run.status == InstanceStatus.FAILED
    assert run.statuses("one") == ["FAILED", "CANCELLED"]


# --- DO_WHILE ---------------------------------------------------------------------------------


def _loop(max_iterations: int = 5, condition: str = "check.output.more = true") -> Run:
    return Run(
        {
            "name": "l",
            "steps": [
                {
                    "id": "loop",
                    "type": "DO_WHILE",
                    "while": condition,
                    "maxIterations": max_iterations,
                    "steps": [task("check")],
                },
                task("after", input={"n": "${loop.output.iterations}"}),
            ],
        }
    ).start()


def test_do_while_repeats_while_its_condition_holds_and_keeps_each_iteration() -> None:
    run = _loop()
    run.complete("check", {"more": True})
    run.complete("check", {"more": True})
    run.complete("check", {"more": False, "v": 3})
    assert [r.iteration for r in run.executions("check")] == [1, 2, 3]
    assert run.statuses("check") == ["COMPLETED"] * 3
    assert run.executions("loop")[0].output == {"more": False, "v": 3, "iterations": 3}
    assert run.open_jobs("after")[0].payload == {"n": 3}


@pytest.mark.parametrize(("keep", "kept"), [(None, ["1", "2", "3"]), (2, ["2", "3"]), (1, ["3"])])
def test_do_while_with_iteration_outputs_ends_with_each_iteration_s_outputs(
    keep: int | None, kept: list[str]
) -> None:
    loop: dict[str, Any] = {
        "id": "loop",
        "type": "DO_WHILE",
        "while": "check.output.more = true",
        "maxIterations": 5,
        "iterationOutputs": True,
        "steps": [task("check")],
    }
    if keep is not None:
        loop["keepLastIterations"] = keep
    reader = task("after", input={"n": "${loop.output.iteration}", "last": "${loop.output.3}"})
    run = Run({"name": "l", "steps": [loop, reader]}).start()
    for k in (1, 2):
        run.complete("check", {"more": True, "k": k})
    run.complete("check", {"more": False, "k": 3})
    output = run.executions("loop")[0].output
    assert output == {
        "iteration": 3,
        **{str(k): {"check": {"more": k < 3, "k": k}} for k in (1, 2, 3) if str(k) in kept},
    }
    assert run.open_jobs("after")[0].payload == {
        "n": 3,
        "last": {"check": {"more": False, "k": 3}},
    }


def test_do_while_with_a_value_condition_uses_its_truthiness() -> None:
    run = _loop(condition="${check.output.more}")
    run.complete("check", {"more": "yes"})
    run.complete("check", {"more": ""})
    assert run.executions("loop")[0].output["iterations"] == 2


def test_do_while_reaching_max_iterations_while_it_holds_fails_naming_the_limit() -> None:
    run = _loop(max_iterations=2)
    run.complete("check", {"more": True})
    run.complete("check", {"more": True})
    assert run.status == InstanceStatus.FAILED
    assert "maxIterations (2)" in (run.executions("loop")[0].error or "")


def test_a_loop_s_steps_read_its_running_iteration_and_nested_loops_each_their_own() -> None:
    inner = {
        "id": "inner",
        "type": "DO_WHILE",
        "while": "inner.iteration < outer.iteration",  # the inner loop runs `outer` times
        "maxIterations": 5,
        "steps": [task("deep", input={"o": "${outer.iteration}", "i": "${inner.iteration}"})],
    }
    switch = {
        "id": "first",
        "type": "SWITCH",
        "cases": [{"condition": "outer.iteration = 1", "steps": [task("once")]}],
    }
    run = Run(
        {
            "name": "l",
            "steps": [
                {
                    "id": "outer",
                    "type": "DO_WHILE",
                    "while": "${top.output.more}",
                    "maxIterations": 5,
                    "steps": [
                        task("top", input={"n": "${outer.iteration}", "s": "r${outer.iteration}"}),
                        switch,
                        inner,
                    ],
                },
            ],
        }
    ).start()
    seen: list[tuple[str, Any]] = []
    more = iter([True, True, False])
    while run.open_jobs():
        (job,) = run.open_jobs()
        step_id = run.rows[job.step_execution_id].step_id
        seen.append((step_id, job.payload))
        run.complete(step_id, {"more": next(more)} if step_id == "top" else {})
    assert seen == [
        ("top", {"n": 1, "s": "r1"}),
        ("once", {}),
        ("deep", {"o": 1, "i": 1}),
        ("top", {"n": 2, "s": "r2"}),
        ("deep", {"o": 2, "i": 1}),
        ("deep", {"o": 2, "i": 2}),
        ("top", {"n": 3, "s": "r3"}),
        ("deep", {"o": 3, "i": 1}),
        ("deep", {"o": 3, "i": 2}),
        ("deep", {"o": 3, "i": 3}),
    ]
    assert run.status == InstanceStatus.COMPLETED


def test_a_while_reads_the_iteration_that_ended_in_either_spelling() -> None:
    for condition in ("loop.iteration < 3", "loop.output.iteration < 3"):
        run = _loop(condition=condition)
        for _ in range(3):
            run.complete("check")
        assert [r.iteration for r in run.executions("check")] == [1, 2, 3]
        assert run.executions("loop")[0].output == {"iterations": 3}


# --- TIMER ------------------------------------------------------------------------------------


def test_a_timer_waits_with_a_due_time_and_completes_when_fired() -> None:
    run = Run(
        {"name": "t", "steps": [{"id": "wait", "type": "TIMER", "duration": "PT1M30S"}, task("x")]}
    ).start()
    (wait,) = run.executions("wait")
    assert (wait.status, wait.wake_at) == (StepStatus.IN_PROGRESS, NOW + timedelta(seconds=90))
    run.fire_timer("wait")
    assert run.statuses("wait") == ["COMPLETED"]
    assert [j.job_type for j in run.open_jobs()] == ["x"]


def test_a_timer_until_a_past_time_fires_at_once() -> None:
    run = Run(
        {"name": "t", "steps": [{"id": "wait", "type": "TIMER", "until": "${workflow.input.at}"}]},
        input={"at": "2020-01-01T00:00:00Z"},
    ).start()
    assert run.status == InstanceStatus.COMPLETED


def test_a_timer_until_what_is_not_a_timestamp_fails_the_step() -> None:
    run = Run(
        {"name": "t", "steps": [{"id": "wait", "type": "TIMER", "until": "${workflow.input.at}"}]},
        input={"at": "tomorrow"},
    ).start()
    assert run.status == InstanceStatus.FAILED
    assert "tomorrow" in (run.executions("wait")[0].error or "")


# --- SUB_WORKFLOW -----------------------------------------------------------------------------


def _parent(retry_count: int = 0) -> Run:
    return Run(
        {
            "name": "parent",
            "steps": [
                {
                    "id": "child",
                    "type": "SUB_WORKFLOW",
                    "definitionName": "kid",
                    "retryCount": retry_count,
                    "input": {"n": "${workflow.input.n}"},
                },
                task("after", input={"got": "${child.output.r}"}),
            ],
        },
        input={"n": 7},
        children={"kid": {"name": "kid", "steps": [task("k")]}},
    ).start()


def test_a_sub_workflow_starts_a_child_in_the_same_decision_and_takes_its_output() -> None:
    run = _parent()
    (child,) = run.started_children
    step = run.executions("child")[0]
    assert child.state.parent_instance_id == run.state.id
    assert child.state.parent_step_execution_id == step.id
    assert child.state.input == {"n": 7} and child.state.depth == 1
    assert [j.job_type for j in child.changes.new_jobs] == ["k"]
    assert step.child_instance_id == child.state.id
    run.child_ended("child", "COMPLETED", {"r": 1})
    assert run.open_jobs("after")[0].payload == {"got": 1}


def test_a_failed_child_is_started_again_while_retry_count_allows_then_fails_the_step() -> None:
    run = _parent(retry_count=1)
    run.child_ended("child", "FAILED")
    assert len(run.started_children) == 2
    assert run.executions("child")[0].attempt == 2
    run.child_ended("child", "FAILED")
    assert run.status == InstanceStatus.FAILED
    assert "ended FAILED" in (run.state.reason or "")


def test_a_sub_workflow_of_an_unknown_definition_fails_the_step() -> None:
    run = Run(
        {"name": "p", "steps": [{"id": "c", "type": "SUB_WORKFLOW", "definitionName": "nope"}]}
    ).start()
    assert run.status == InstanceStatus.FAILED
    assert "definition 'nope' not found" in (run.executions("c")[0].error or "")


def test_an_ended_child_tells_its_parent_through_an_event() -> None:
    run = Run({"name": "kid", "steps": [task("k")]})
    run.state.parent_instance_id = run.state.id  # any parent will do for the event's shape
    run.start()
    run.complete("k", {"r": 2})
    (event,) = run.events
    assert event.kind == "CHILD_ENDED"
    assert event.payload["status"] == "COMPLETED" and event.payload["output"] == {"r": 2}


def test_a_failed_instance_starts_its_failure_workflow() -> None:
    run = Run(
        {"name": "p", "failureWorkflow": "cleanup", "steps": [task("a")]},
        input={"order": 1},
        children={"cleanup": {"name": "cleanup", "steps": [task("undo")]}},
    ).start()
    run.fail("a", "broke")
    # Started once the failing decision has committed, by the event it left the instance.
    assert run.started_children == []
    run.deliver_failure_workflow({"tasks": [{"referenceTaskName": "a", "status": "FAILED"}]})
    (cleanup,) = run.started_children
    assert cleanup.state.parent_instance_id is None
    assert run.state.output == {"conductor.failure_workflow": str(cleanup.state.id)}
    failed_step = str(run.executions("a")[0].id)
    told = dict(cleanup.state.input)
    # Conductor's id of the failed task: its job's and attempt.
    task_id = told.pop("failureTaskId")
    assert task_id.endswith(".1") and task_id != failed_step + ".1"
    failed = told.pop("failedWorkflow")
    assert failed["failedTaskId"] == task_id
    assert failed["tasks"] == [{"referenceTaskName": "a", "status": "FAILED"}]
    assert told == {
        "order": 1,
        "instanceId": str(run.state.id),
        "workflowId": str(run.state.id),
        "reason": "step 'a' failed: broke",
        "failureStatus": "FAILED",
        "failedStepExecutionId": failed_step,
        "input": {"order": 1},
    }


def test_a_failure_workflow_that_does_not_exist_is_named_in_the_output_as_conductor_does() -> None:
    run = Run({"name": "p", "failureWorkflow": "gone", "steps": [task("a")]}).start()
    run.fail("a", "broke")
    assert not [e for e in run.events if e.kind == "FAILURE_WORKFLOW"]
    assert run.state.output == {
        "conductor.failure_workflow": "Error workflow gone failed to start.  reason: "
        "No such workflow defined. name=gone, version=null"
    }
    assert [a.event for a in run.last.audit][-1] == "FAILURE_WORKFLOW_NOT_FOUND"


def test_a_failure_workflow_after_a_terminate_names_no_failed_task() -> None:
    run = Run(
        {
            "name": "p",
            "failureWorkflow": "cleanup",
            "steps": [{"id": "t", "type": "TERMINATE", "status": "FAILED", "reason": "no stock"}],
        },
        input=[1, 2],
        children={"cleanup": {"name": "cleanup", "steps": [task("undo")]}},
    ).start()
    run.deliver_failure_workflow()
    (cleanup,) = run.started_children
    told = cleanup.state.input
    # No task failed; an input that is not an object is not spread.
    assert "failureTaskId" not in told and "failedTaskId" not in told["failedWorkflow"]
    assert told["input"] == [1, 2] and told["failedWorkflow"]["input"] == [1, 2]
    assert (told["failureStatus"], told["reason"]) == ("FAILED", "no stock")


# --- SET_VARIABLE and TERMINATE ---------------------------------------------------------------


def test_set_variable_writes_resolved_values_into_the_variables() -> None:
    run = Run(
        {
            "name": "v",
            "steps": [
                task("a"),
                {"id": "set", "type": "SET_VARIABLE", "variables": {"total": "${a.output.n}"}},
                task("b", input={"t": "${workflow.variables.total}"}),
            ],
        }
    ).start()
    run.complete("a", {"n": 5})
    assert run.state.variables["total"] == 5
    assert run.open_jobs("b")[0].payload == {"t": 5}


def test_terminate_ends_the_instance_and_cancels_work_in_other_branches() -> None:
    run = Run(
        {
            "name": "t",
            "steps": [
                {
                    "id": "fan",
                    "type": "PARALLEL",
                    "branches": [
                        [task("slow")],
                        [
                            task("check"),
                            {
                                "id": "stop",
                                "type": "TERMINATE",
                                "status": "FAILED",
                                "reason": "${check.output.why}",
                                "output": {"code": 9},
                            },
                        ],
                    ],
                }
            ],
        }
    ).start()
    run.complete("check", {"why": "fraud"})
    assert (run.status, run.state.reason, run.state.output) == ("FAILED", "fraud", {"code": 9})
    assert run.statuses("slow") == ["CANCELLED"]
    assert run.statuses("fan") == ["CANCELLED"]


# --- nesting, limits, pause, retry -------------------------------------------------------------


def test_a_map_of_parallels_with_a_switch_inside_runs_and_collects_every_level() -> None:
    run = Run(
        {
            "name": "n",
            "steps": [
                {
                    "id": "each",
                    "type": "MAP",
                    "items": "${workflow.input.items}",
                    "steps": [
                        {
                            "id": "fan",
                            "type": "PARALLEL",
                            "branches": [
                                [
                                    {
                                        "id": "route",
                                        "type": "SWITCH",
                                        "on": "${map.item.kind}",
                                        "cases": {"a": [task("ka", input={"i": "${map.index}"})]},
                                        "default": [task("kb")],
                                    }
                                ],
                                [task("side", input={"item": "${map.item.kind}"})],
                            ],
                        }
                    ],
                }
            ],
        },
        input={"items": [{"kind": "a"}, {"kind": "b"}]},
    ).start()
    assert sorted(j.job_type for j in run.open_jobs()) == ["ka", "kb", "side", "side"]
    assert run.open_jobs("ka")[0].payload == {"i": 0}
    assert sorted(j.payload["item"] for j in run.open_jobs("side")) == ["a", "b"]
    for step_id in ("ka", "kb", "side", "side"):
        run.complete(step_id, {"by": step_id})
    assert run.status == InstanceStatus.COMPLETED
    (each,) = run.executions("each")
    assert each.output == [
        {"0": {"by": "ka", "case": "a"}, "1": {"by": "side"}},
        {"0": {"by": "kb", "case": "default"}, "1": {"by": "side"}},
    ]


def test_an_instance_past_its_step_execution_limit_fails_the_step_with_a_reason() -> None:
    run = Run(
        {
            "name": "l",
            "steps": [
                {
                    "id": "loop",
                    "type": "DO_WHILE",
                    "while": "true",
                    "maxIterations": 10_000,
                    "steps": [{"id": "set", "type": "SET_VARIABLE", "variables": {"x": 1}}],
                }
            ],
        },
        max_step_executions=50,
    ).start()
    assert run.status == InstanceStatus.FAILED
    assert "reached 50 step executions" in (run.state.reason or "")
    assert len(run.executions()) == 50


def test_a_paused_instance_finishes_work_in_flight_and_holds_what_follows() -> None:
    run = Run({"name": "p", "steps": [task("a"), task("b")]}).start()
    run.decide(lambda d: d.pause())
    run.complete("a", {"v": 1})
    assert run.open_jobs() == [] and run.status == InstanceStatus.PAUSED
    (event,) = run.last.events
    assert event.kind == "CONTINUE"
    e = run.executions("a")[0].exec()
    run.decide(lambda d: (d.resume(), d.continue_after(e, event.payload["output"], 1)))
    assert run.status == InstanceStatus.RUNNING
    assert [j.job_type for j in run.open_jobs()] == ["b"]


def test_retry_reruns_the_failed_branch_and_its_cancelled_sibling_keeping_the_rest() -> None:
    run = _parallel()
    run.complete("b1", {"v": "b"})
    run.complete("a1", {"v": "a1"})
    run.fail("c1", "flaky")
    assert run.status == InstanceStatus.FAILED and run.statuses("a2") == ["CANCELLED"]
    run.retry()
    assert run.status == InstanceStatus.RUNNING
    assert sorted(j.job_type for j in run.open_jobs()) == ["a2", "c1"]
    assert run.statuses("fan") == ["IN_PROGRESS"]
    assert run.statuses("c1") == ["FAILED", "SCHEDULED"]  # the failure stays in the history
    assert run.statuses("b1") == ["COMPLETED"]  # not run again
    run.complete("a2", {"v": "a2"})
    run.complete("c1", {"v": "c"})
    assert run.executions("fan")[0].output == {"0": {"v": "a2"}, "1": {"v": "b"}, "2": {"v": "c"}}
    assert run.open_jobs("join")


def test_retry_of_a_map_reruns_failed_items_and_starts_the_ones_never_started() -> None:
    run = _map(list(range(5)), concurrency=2)
    run.complete("one", {"r": 0})
    run.fail("one", "item 1 broke")
    assert run.status == InstanceStatus.FAILED
    run.retry()
    assert sorted(j.payload["i"] for j in run.open_jobs()) == [1, 2]
    for _ in range(4):
        job = run.open_jobs()[0]
        run.complete("one", {"r": job.payload["i"]})
    assert run.status == InstanceStatus.COMPLETED
    assert run.state.output == {"results": [{"r": i} for i in range(5)]}


def test_retry_of_a_loop_that_hit_its_limit_evaluates_its_condition_again() -> None:
    run = _loop(max_iterations=1)
    run.complete("check", {"more": True})
    assert run.status == InstanceStatus.FAILED
    run.retry()
    assert run.status == InstanceStatus.FAILED  # still past its limit: fails again, saying so
    assert "maxIterations (1)" in (run.state.reason or "")


# --- values the engine builds, offloaded ----------------------------------------------------


def _offloading_map(items: list[Any], soft: int, hard: int) -> Run:
    return Run(
        {
            "name": "m",
            "steps": [
                {
                    "id": "each",
                    "type": "MAP",
                    "items": "${workflow.input.items}",
                    "maxConcurrency": 3,
                    "steps": [task("one", input={"row": "${map.item}"})],
                }
            ],
            "outputParameters": {"results": "${each.output}", "n": "${workflow.input.n}"},
        },
        input={"items": items, "n": len(items)},
        payload_limits=small_limits(soft, hard),
    ).start()


def test_large_map_items_outputs_and_instance_output_are_offloaded_and_read_back() -> None:
    items = [f"row-{i:03d}-" + "x" * 40 for i in range(12)]  # ~600 bytes of items
    run = _offloading_map(items, soft=300, hard=10_000)
    (each,) = run.executions("each")
    assert is_payload_ref(each.input) and run._unref(each.input) == items
    while run.open_jobs():
        job = run.open_jobs()[0]
        assert job.payload == {"row": items[len(run.executions("one")) - len(run.open_jobs())]}
        run.complete("one", {"upper": job.payload["row"].upper()})
    assert run.status == InstanceStatus.COMPLETED
    (each,) = run.executions("each")
    assert is_payload_ref(each.output)  # the collected outputs (~700 bytes) live in the bucket
    assert is_payload_ref(run.state.output)
    assert run._unref(run.state.output) == {
        "results": [{"upper": row.upper()} for row in items],
        "n": 12,
    }


def test_an_instance_output_above_the_hard_limit_fails_the_instance_naming_it() -> None:
    run = Run(
        {"name": "w", "steps": [task("a")]}, payload_limits=small_limits(soft=10, hard=30)
    ).start()
    run.complete("a", {"text": "z" * 40})  # a worker's output: the API checked it already
    assert run.status == InstanceStatus.FAILED
    assert run.state.reason == (
        "its output is 51 bytes, above the workflow output hard limit of 30 bytes"
    )


def test_a_map_whose_items_exceed_the_hard_limit_fails_naming_it() -> None:
    run = _offloading_map(["y" * 50] * 4, soft=50, hard=150)
    assert run.status == InstanceStatus.FAILED
    assert "its items is 213 bytes, above the step input hard limit of 150 bytes" in (
        run.state.reason or ""
    )
    assert ("PayloadRefused", 1, {"Kind": "STEP_INPUT"}) in run.last.dimensioned


# --- an input given as one expression ---------------------------------------------------------


def test_a_map_item_can_be_a_tasks_whole_input() -> None:
    run = Run(
        {
            "name": "m",
            "steps": [
                {
                    "id": "each",
                    "type": "MAP",
                    "items": "${workflow.input.rows}",
                    "steps": [task("one", input="${map.item}")],
                }
            ],
        },
        input={"rows": [{"a": 1}, {"b": 2}]},
    ).start()
    assert [j.payload for j in run.open_jobs()] == [{"a": 1}, {"b": 2}]


def test_a_whole_input_that_is_not_an_object_fails_the_step_saying_so() -> None:
    run = Run(
        {"name": "w", "steps": [task("one", input="${workflow.input.n}")]}, input={"n": 3}
    ).start()
    assert run.status == InstanceStatus.FAILED
    assert run.state.reason == "step 'one' failed: its input resolved to int, not an object"
