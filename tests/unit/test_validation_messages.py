"""Validation problems in Baton's words: a JSON path and a plain sentence for every error type
our models raise, never pydantic's phrasing or links; unclosed ``${`` refused at registration."""

from __future__ import annotations

import json
from typing import Any

import pytest
from baton.api import models as m
from baton.definitions import (
    TaskDef,
    WorkflowDefinition,
    parse_definition,
    parse_task_def,
    pydantic_problems,
)
from baton.errors import Problem, ValidationFailed
from baton.expressions import unclosed
from baton.steps import STEP_TYPES
from baton.validation import problems
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError, field_validator


def _problems(model: type[BaseModel], raw: Any) -> dict[str, str]:
    with pytest.raises(ValidationError) as e:
        model.model_validate_json(json.dumps(raw), strict=True)
    found = pydantic_problems(e.value)
    return {p.path: p.message for p in found}


STEP = {"id": "s", "type": "SERVICE_TASK", "jobType": "j"}

CASES: list[tuple[str, type[BaseModel], Any, str, str]] = [
    # (error type, model, input, path, message)
    ("missing", m.PollRequest, {"jobTypes": ["a"]}, "workerId", "workerId is required"),
    (
        "missing (a step type's field)",
        WorkflowDefinition,
        {"name": "x", "steps": [{"id": "s", "type": "SERVICE_TASK"}]},
        "steps[0].jobType",
        "jobType is required for a SERVICE_TASK step",
    ),
    (
        "extra_forbidden",
        m.PollRequest,
        {"workerId": "w", "jobTypes": ["a"], "jobtype": 1},
        "jobtype",
        "jobtype is not a field Baton knows here; check its spelling",
    ),
    (
        "int_type",
        m.PollRequest,
        {"workerId": "w", "jobTypes": ["a"], "maxJobs": "5"},
        "maxJobs",
        'maxJobs must be a whole number, not the text "5"',
    ),
    (
        "int_type (a float)",
        TaskDef,
        {"name": "t", "retryCount": 1.5},
        "retryCount",
        "retryCount must be a whole number, not 1.5",
    ),
    (
        "int_type (a boolean)",
        m.PollRequest,
        {"workerId": "w", "jobTypes": ["a"], "maxJobs": True},
        "maxJobs",
        "maxJobs must be a whole number, not true",
    ),
    (
        "string_type",
        m.PollRequest,
        {"workerId": 7, "jobTypes": ["a"]},
        "workerId",
        "workerId must be text (a JSON string), not 7",
    ),
    (
        "bool_type",
        m.FailJobRequest,
        {"jobId": "j", "workerId": "w", "errorMessage": "e", "retryable": "no"},
        "retryable",
        'retryable must be true or false, not the text "no"',
    ),
    (
        "float_type",
        m.FailJobRequest,
        {"jobId": "j", "workerId": "w", "errorMessage": "e", "nextRetryDelaySeconds": [1]},
        "nextRetryDelaySeconds",
        "nextRetryDelaySeconds must be a number, not a list",
    ),
    (
        "list_type",
        m.PollRequest,
        {"workerId": "w", "jobTypes": "a"},
        "jobTypes",
        'jobTypes must be a list (a JSON array), not the text "a"',
    ),
    (
        "dict_type",
        m.StartInstanceRequest,
        {"definitionName": "d", "input": [1, 2]},
        "input",
        "input must be an object, not a list",
    ),
    (
        "model_type",
        WorkflowDefinition,
        {"name": "x", "steps": [STEP], "trigger": "queue"},
        "trigger",
        'trigger must be an object, not the text "queue"',
    ),
    (
        "string_too_short",
        m.PollRequest,
        {"workerId": "", "jobTypes": ["a"]},
        "workerId",
        "workerId must not be empty",
    ),
    (
        "string_too_long",
        m.CancelInstanceRequest,
        {"reason": "r" * 2001},
        "reason",
        "reason must be at most 2000 characters long (it has 2001)",
    ),
    (
        "too_short",
        WorkflowDefinition,
        {"name": "x", "steps": []},
        "steps",
        "steps must not be empty",
    ),
    (
        "too_long",
        m.PollRequest,
        {"workerId": "w", "jobTypes": ["a"] * 51},
        "jobTypes",
        "jobTypes may have at most 50 items (it has 51)",
    ),
    (
        "string_pattern_mismatch",
        WorkflowDefinition,
        {"name": "my flow", "steps": [STEP]},
        "name",
        "name \"my flow\" is not valid: names are 1-128 characters: letters, digits, '_', '.' "
        "and '-', starting with a letter or a digit",
    ),
    (
        "string_pattern_mismatch (a list item)",
        m.PollRequest,
        {"workerId": "w", "jobTypes": ["ok", "not ok"]},
        "jobTypes[1]",
        'jobTypes[1] "not ok" is not valid: job types are 1-128 characters: letters, digits, '
        "'_', '.', ':' and '-', starting with a letter or a digit",
    ),
    (
        "enum",
        TaskDef,
        {"name": "t", "retryLogic": "SOMETIMES"},
        "retryLogic",
        'retryLogic must be one of FIXED, EXPONENTIAL_BACKOFF, LINEAR_BACKOFF, not "SOMETIMES"',
    ),
    (
        "literal_error",
        WorkflowDefinition,
        {"name": "x", "steps": [STEP], "timeoutPolicy": "RETRY"},
        "timeoutPolicy",
        'timeoutPolicy must be one of TIME_OUT_WF, ALERT_ONLY, not "RETRY"',
    ),
    (
        "greater_than_equal",
        TaskDef,
        {"name": "t", "retryDelaySeconds": -1},
        "retryDelaySeconds",
        "retryDelaySeconds must be at least 0, not -1",
    ),
    (
        "less_than_equal",
        m.FailJobRequest,
        {"jobId": "j", "workerId": "w", "errorMessage": "e", "nextRetryDelaySeconds": 1e300},
        "nextRetryDelaySeconds",
        "nextRetryDelaySeconds must be at most 31536000, not 1e+300",
    ),
    (
        "union_tag_invalid",
        WorkflowDefinition,
        {"name": "x", "steps": [{"id": "s", "type": "SERVICE"}]},
        "steps[0].type",
        f'type must be one of {", ".join(STEP_TYPES)}, not "SERVICE"',
    ),
    (
        "union_tag_not_found",
        WorkflowDefinition,
        {"name": "x", "steps": [{"id": "s"}]},
        "steps[0].type",
        f"type is required: one of {', '.join(STEP_TYPES)}",
    ),
]


@pytest.mark.parametrize(
    ("kind", "model", "raw", "path", "message"), CASES, ids=[c[0] for c in CASES]
)
def test_each_error_type_reads_as_a_sentence_in_batons_words(
    kind: str, model: type[BaseModel], raw: Any, path: str, message: str
) -> None:
    found = _problems(model, raw)
    assert found.get(path) == message, found


def test_the_whole_body_of_the_wrong_kind_is_said_so() -> None:
    with pytest.raises(ValidationError) as e:
        m.PollRequest.model_validate_json("[1]", strict=True)
    assert pydantic_problems(e.value) == [
        Problem("$", "the request body must be an object, not a list")
    ]


def test_an_error_type_without_a_sentence_falls_back_to_pydantics_words() -> None:
    class Odd(BaseModel):
        x: int

        @field_validator("x")
        @classmethod
        def even(cls, v: int) -> int:
            raise ValueError("x must be even")

    with pytest.raises(ValidationError) as e:
        Odd.model_validate({"x": 1})
    (problem,) = problems(e.value)
    assert problem.path == "x"
    assert problem.message == "x: value error, x must be even"


PYDANTIC_PHRASES = ("Input should", "Field required", "should have", "errors.pydantic.dev")
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=6,
)
FIELDS = ["name", "version", "steps", "timeoutSeconds", "timeoutPolicy", "trigger", "extra"]
STEP_FIELDS = ["id", "type", "jobType", "retryCount", "retryLogic", "input", "assignee"]


@settings(max_examples=150, deadline=None)
@given(
    top=st.dictionaries(st.sampled_from(FIELDS), json_values, max_size=5),
    step=st.dictionaries(st.sampled_from(STEP_FIELDS), json_values, max_size=5),
)
def test_no_problem_of_a_random_definition_speaks_pydantic(
    top: dict[str, Any], step: dict[str, Any]
) -> None:
    steps = top.get("steps")
    raw = {**top, "steps": [step, *(steps if isinstance(steps, list) else [steps])][:3]}
    try:
        parse_definition(raw)
    except ValidationFailed as e:
        for p in e.problems:
            assert not any(phrase in p.message for phrase in PYDANTIC_PHRASES), p
            assert p.path and p.message


# --- ${ without } ---------------------------------------------------------------------------


def test_unclosed_expressions_are_found_wherever_they_are() -> None:
    template = {"a": "${x}", "b": ["ok", "cost: ${workflow.input.n"], "c": "$${literal"}
    assert list(unclosed(template)) == [(".b[1]", "${workflow.input.n")]
    assert list(unclosed("${a} then ${b")) == [("", "${b")]
    assert list(unclosed("${a ${b}")) == []  # closed (and refused as a bad path elsewhere)


def test_registration_refuses_an_unclosed_expression_naming_the_step_and_field() -> None:
    definition = {
        "name": "x",
        "steps": [
            {"id": "charge", "type": "SERVICE_TASK", "jobType": "j"},
            {
                "id": "ship",
                "type": "SERVICE_TASK",
                "jobType": "j",
                "input": {"address": {"line": "to ${workflow.input.address"}},
            },
        ],
        "outputParameters": {"r": "${charge.output.r"},
    }
    with pytest.raises(ValidationFailed) as e:
        parse_definition(definition)
    found = {p.path: p.message for p in e.value.problems}
    assert found == {
        "steps[1].input.address.line": "step 'ship': input.address.line opens an expression "
        "that is never closed ('${workflow.input.address'); end it with '}', or write '$${' for "
        "a literal '${'",
        "outputParameters.r": "outputParameters.r opens an expression that is never closed "
        "('${charge.output.r'); end it with '}', or write '$${' for a literal '${'",
    }


def test_a_task_definition_input_template_with_an_unclosed_expression_is_refused() -> None:
    with pytest.raises(ValidationFailed) as e:
        parse_task_def({"name": "t", "inputTemplate": {"greeting": "hi ${workflow.input.who"}})
    (problem,) = e.value.problems
    assert problem.path == "inputTemplate.greeting"
    assert "never closed" in problem.message
    assert parse_task_def({"name": "t", "inputTemplate": {"g": "$${kept literally"}})


def test_a_step_input_is_an_object_or_one_whole_expression() -> None:
    base = {"id": "s", "type": "SERVICE_TASK", "jobType": "j"}
    parse_definition({"name": "x", "steps": [{**base, "input": "${workflow.input.order}"}]})
    with pytest.raises(ValidationFailed) as e:
        parse_definition({"name": "x", "steps": [{**base, "input": "order ${workflow.input.n}"}]})
    (problem,) = e.value.problems
    assert (problem.path, problem.message) == (
        "steps[0].input",
        "input is an object, or one ${…} expression giving one",
    )


# --- unions: paths name the document's keys, not pydantic's members --------------------------


def _switch_with(case_steps: Any) -> dict[str, Any]:
    return {
        "name": "w",
        "steps": [{"id": "s", "type": "SWITCH", "on": "${workflow.input.k}", "cases": case_steps}],
    }


def test_a_problem_inside_a_union_names_the_fields_path_not_pydantics_types() -> None:
    bad = {"false": [{"id": "a", "type": "SERVICE_TASK", "jobType": "j", "retryCount": -1}]}
    with pytest.raises(ValidationFailed) as e:
        parse_definition(_switch_with(bad))
    said = [(p.path, p.message) for p in e.value.problems]
    assert said == [("steps[0].cases.false[0].retryCount", "retryCount must be at least 0, not -1")]


def test_a_union_value_of_no_member_says_so_once_per_member_without_type_names() -> None:
    with pytest.raises(ValidationFailed) as e:
        parse_definition(_switch_with(7))
    for p in e.value.problems:
        assert p.path == "steps[0].cases", p
        assert "[" not in p.message and "SwitchCase" not in p.message, p


def test_without_the_document_labels_are_still_left_out_of_paths() -> None:
    from baton.definitions import STEP_TYPES, WorkflowDefinition

    raw = _switch_with(
        {"x": [{"id": "a", "type": "SERVICE_TASK", "jobType": "j", "retryCount": -1}]}
    )
    try:
        WorkflowDefinition.model_validate(raw)
    except ValidationError as err:
        paths = [p.path for p in problems(err, tags=STEP_TYPES)]
    assert "steps[0].cases.x[0].retryCount" in paths
    assert all("[str" not in p and "SwitchCase" not in p for p in paths)


@pytest.mark.parametrize(
    ("steps", "path", "message"),
    [
        (
            [{"id": "a", "type": "SERVICE_TASK"}],
            "steps[0].jobType",
            "jobType is required for a SERVICE_TASK step",
        ),
        (  # the step type nearest the field names it, not the outer SWITCH's
            [
                {
                    "id": "s",
                    "type": "SWITCH",
                    "on": "${workflow.input.x}",
                    "cases": {"a": [{"id": "t", "type": "SERVICE_TASK"}]},
                }
            ],
            "steps[0].cases.a[0].jobType",
            "jobType is required for a SERVICE_TASK step",
        ),
    ],
)
def test_a_missing_field_of_a_definition_is_named_with_its_path(
    steps: list[dict[str, Any]], path: str, message: str
) -> None:
    # Checked against the document (whose keys tell them from union labels), a field the step
    # lacks is still the last part of the path.
    with pytest.raises(ValidationFailed) as refused:
        parse_definition({"name": "x", "steps": steps})
    assert [(p.path, p.message) for p in refused.value.problems] == [(path, message)]
