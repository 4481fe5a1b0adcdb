"""The translation of the forms Conductor's own definitions use that Baton's native checks would
refuse as written: each is read the way Conductor's server reads it (sources in the docstrings of
the translator modules)."""

from __future__ import annotations

from typing import Any

import pytest
from baton.conductor import definitions as cd
from baton.conductor.errors import Untranslatable
from baton.definitions import parse_definition
from baton.errors import ValidationFailed

from tests.conductor.test_translation import simple


def _translate(tasks: list[dict[str, Any]], **workflow: Any) -> dict[str, Any]:
    out = cd.to_baton_workflow({"name": "w", "version": 1, "tasks": tasks, **workflow})
    parse_definition(out)
    return out


def test_a_legacy_dollar_failure_workflow_reads_the_third_part_as_an_input_key() -> None:
    out = _translate([simple("a")], failureWorkflow="$workflow.input.failureWfName")
    assert out["failureWorkflow"] == "${workflow.input['failureWfName']}"
    # WorkflowExecutor reads the third dot-separated part whatever the first two are.
    out = _translate([simple("a")], failureWorkflow="$anything.at.all")
    assert out["failureWorkflow"] == "${workflow.input['all']}"
    with pytest.raises(Untranslatable) as e:
        _translate([simple("a")], failureWorkflow="$workflow.input")
    assert "names no input parameter" in str(e.value)


@pytest.mark.parametrize(
    ("value", "on"),
    [
        ("gold", "gold"),
        ("{workflow.input.finalCase}", "{workflow.input.finalCase}"),
        ("task_3.output.oddEven", "task_3.output.oddEven"),
        ("case-${workflow.input.k}", "case-${workflow.input.k}"),
        (5, "5"),
        (True, "true"),
        (None, "null"),
    ],
)
def test_a_value_param_matches_its_parameters_value_whatever_it_holds(value: Any, on: str) -> None:
    switch = {
        "name": "s",
        "taskReferenceName": "s",
        "type": "SWITCH",
        "evaluatorType": "value-param",
        "expression": "choice",
        "inputParameters": {"choice": value},
        "decisionCases": {"x": [simple("x")]},
    }
    assert _translate([switch])["steps"][0]["on"] == on


def test_numbers_and_booleans_given_as_text_are_coerced_as_jackson_does() -> None:
    task = simple(
        "a",
        retryCount="2",
        startDelay="5",
        optional="true",
        taskDefinition={"name": "work", "timeoutSeconds": "60", "retryDelaySeconds": "1"},
    )
    (got,) = _translate([task], timeoutSeconds="120")["steps"]
    assert got["retryCount"] == 2 and got["startDelaySeconds"] == 5 and got["optional"] is True
    assert got["timeoutSeconds"] == 60 and got["retryDelaySeconds"] == 1
    assert cd.to_baton_task_def({"name": "t", "retryCount": "4"})["retryCount"] == 4
    # What Jackson would not read as a number stays as it is, and is refused as it is.
    with pytest.raises(ValidationFailed) as e:
        _translate([simple("a", retryCount="two")])
    assert [p.path for p in e.value.problems] == ["steps[0].retryCount"]


def test_a_reference_to_no_task_is_null_and_null_inside_text() -> None:
    out = _translate(
        [simple("a", inputParameters={"x": "${ghost.output.x}", "t": "at ${ghost.taskId}"})],
        outputParameters={"fact": "${get_random_fact.output.fact}", "known": "${a.output}"},
    )
    assert out["steps"][0]["input"] == {"x": None, "t": "at null"}
    assert out["outputParameters"] == {"fact": None, "known": "${a.output}"}


def test_a_path_jayway_cannot_compile_is_null_as_conductor_reads_it() -> None:
    # Conductor's error-handling guide: a list indexed by a bare name (ParametersUtils reads a
    # path that throws as null; registration takes it).
    out = _translate(
        [
            simple(
                "a",
                inputParameters={
                    "shipmentId": "${workflow.input.failedWorkflow.tasks[ship_ref].output.id}",
                    "said": "id ${workflow.input.x[ ship ]} of ${workflow.input.orderId}",
                    "indexed": "${workflow.input.items[0]}",
                    "quoted": "${workflow.input.m['k']}",
                    "filtered": "${workflow.input.xs[?(@.n > 1)]}",
                },
            )
        ]
    )
    assert out["steps"][0]["input"] == {
        "shipmentId": None,
        "said": "id null of ${workflow.input.orderId}",
        "indexed": "${workflow.input.items[0]}",
        "quoted": "${workflow.input.m['k']}",
        "filtered": "${workflow.input.xs[?(@.n > 1)]}",
    }


def test_a_blank_or_absent_loop_condition_runs_the_loop_once() -> None:
    for condition in ("", "  ", None):
        loop = {
            "name": "l",
            "taskReferenceName": "l",
            "type": "DO_WHILE",
            "loopCondition": condition,
            "loopOver": [simple("b")],
        }
        assert _translate([loop])["steps"][0]["while"] == "false"


def test_a_loop_task_reads_the_loops_output_so_far() -> None:
    loop = {
        "name": "l",
        "taskReferenceName": "l",
        "type": "DO_WHILE",
        "loopCondition": "$.l['iteration'] < 3",
        "loopOver": [
            simple("b", inputParameters={"so_far": "${l.output}", "one": "${l.output.1}"})
        ],
    }
    assert _translate([loop])["steps"][0]["steps"][0]["input"] == {
        "so_far": "${l.output}",
        "one": "${l.output.1}",
    }


def test_a_dynamic_fork_over_literal_lists() -> None:
    fork = {
        "name": "f",
        "taskReferenceName": "f",
        "type": "FORK_JOIN_DYNAMIC",
        "inputParameters": {"forkTaskName": "w0", "forkTaskInputs": [1, {"n": 2}]},
    }
    join = {"name": "j", "taskReferenceName": "j", "type": "JOIN"}
    # Written as JSON text: a step's fields are the same over REST and protobuf.
    assert _translate([fork, join])["steps"][0]["items"] == '[1,{"n":2}]'
    tasks = {
        **fork,
        "inputParameters": {
            "dynamicTasks": [{"name": "w0", "taskReferenceName": "a", "type": "SIMPLE"}],
            "dynamicTasksInput": {"a": {"x": "${workflow.input.x}"}},
        },
        "dynamicForkTasksParam": "dynamicTasks",
        "dynamicForkTasksInputParamName": "dynamicTasksInput",
    }
    out = _translate([tasks, join])["steps"][0]
    assert out["items"] == '[{"name":"w0","taskReferenceName":"a","type":"SIMPLE"}]'
    back = cd.to_conductor_workflow({"name": "w", "steps": [out]})
    assert back["tasks"][0]["inputParameters"]["dynamicTasks"] == [
        {"name": "w0", "taskReferenceName": "a", "type": "SIMPLE"}
    ]
    with pytest.raises(ValidationFailed) as e:
        parse_definition({"name": "m", "steps": [{**out, "items": "[1, 2"}]})
    assert "a list written as JSON text" in e.value.problems[0].message


def test_a_sub_workflow_version_0_runs_the_latest() -> None:
    sub = {
        "name": "s",
        "taskReferenceName": "s",
        "type": "SUB_WORKFLOW",
        "subWorkflowParam": {"name": "child", "version": 0},
    }
    assert "definitionVersion" not in _translate([sub])["steps"][0]


def test_an_inline_response_timeout_past_the_timeout_is_the_timeout() -> None:
    task = simple(
        "a", taskDefinition={"name": "work", "timeoutSeconds": 120, "responseTimeoutSeconds": 3600}
    )
    (got,) = _translate([task])["steps"]
    assert got["timeoutSeconds"] == 120 and got["responseTimeoutSeconds"] == 120


def test_programs_with_expressions_are_resolved_when_they_run() -> None:
    inline = {
        "name": "i",
        "taskReferenceName": "i",
        "type": "INLINE",
        "inputParameters": {"evaluatorType": "javascript", "expression": "${a.output.code}"},
    }
    text = {
        "name": "t",
        "taskReferenceName": "t",
        "type": "INLINE",
        "inputParameters": {"evaluatorType": "javascript", "expression": "${a.output.n} + 1"},
    }
    jq = {
        "name": "q",
        "taskReferenceName": "q",
        "type": "JSON_JQ_TRANSFORM",
        "inputParameters": {"queryExpression": "${a.output.filter}"},
    }
    lam = {
        "name": "l",
        "taskReferenceName": "l",
        "type": "LAMBDA",
        "inputParameters": {"scriptExpression": "return ${a.output.n};"},
    }
    _, whole, inside, query, body = _translate([simple("a"), inline, text, jq, lam])["steps"]
    assert whole["script"] == "${a.output.code}" and whole["input"] == {}
    assert inside["input"] == {"expression": "${a.output.n} + 1"}
    assert inside["script"] == '(0, eval)($["expression"])'
    assert query["query"] == "${a.output.filter}"
    assert body["input"] == {"expression": "return ${a.output.n};"}
    assert "scriptFun" in body["script"]


def test_a_retry_count_conductor_allows_is_accepted_up_to_batons_bound() -> None:
    _translate([simple("a", retryCount=50000)])
    with pytest.raises(ValidationFailed) as e:
        _translate([simple("a", retryCount=100001)])
    assert [p.message for p in e.value.problems] == [
        "retryCount must be at most 100000, not 100001"
    ]


def test_a_long_reference_name_is_kept_up_to_128_characters() -> None:
    """Conductor sets no bound on reference names; its own e2e tests use 70 characters."""
    ref = "fork_retry-resume-fork-parent-FAILED_WITH_TERMINAL_ERROR-1795787852968"
    longest = "r" * 128
    got = _translate([simple(ref), simple(longest, "other")])["steps"]
    assert [s["id"] for s in got] == [ref, longest]
    parse_definition(_translate([simple(ref)]))
    with pytest.raises(Untranslatable, match="128 characters"):
        _translate([simple("r" * 129)])
