"""``convert``: messages made from the engine's answers (``from_view``, the direct RPCs' path)
are the messages protobuf's own JSON parser makes of the same values (``from_json``, the
bridge's path), and messages read as JSON refuse what JSON cannot hold."""

from __future__ import annotations

import math
from typing import Any

import pytest
from baton.rpc import convert, schema

VIEWS: tuple[tuple[str, dict[str, Any]], ...] = (
    (
        "workflow.v1.PollJobsResponse",
        {
            "jobs": [
                {
                    "id": "j1",
                    "instanceId": "i1",
                    "stepId": "a",
                    "stepExecutionId": "e1",
                    "jobType": "t",
                    "attempt": 2,
                    "retriesRemaining": 0,
                    "lockExpiresAt": "2026-11-26T10:50:01.123456Z",
                    "input": {"n": 1, "f": 2.5, "l": [1, None, "x", {"k": []}], "o": {}},
                },
                {"id": "j2", "lockExpiresAt": "2026-11-26T10:50:01Z", "input": {}},
                {"id": "j3", "lockExpiresAt": "2026-11-26T10:50:01.123456789+02:00"},
                {"id": "j4", "input": None, "inputPayloadPath": "p", "unknownKey": 3},
                {"id": "j5", "input": [1, "two"], "step_id": "snake"},
                {"id": "j6", "input": "text"},
            ]
        },
    ),
    ("workflow.v1.PollJobsResponse", {"jobs": []}),
    (
        "workflow.v1.CompleteBatchResponse",
        {
            "results": [
                {
                    "jobId": "j",
                    "outcome": "APPLIED",
                    "status": "RETRY_SCHEDULED",
                    "nextAttemptAt": "2026-11-26T11:00:00Z",
                },
                {"jobId": None, "outcome": "INVALID", "error": "results[1].attempt: ..."},
            ]
        },
    ),
    ("workflow.v1.FailJobResponse", {"jobId": "j", "status": "FAILED", "applied": False}),
    ("workflow.v1.HeartbeatResponse", {"jobId": "j", "lockExpiresAt": "2026-11-26T11:00:00Z"}),
    ("workflow.v1.StopWorkerResponse", {"workerId": "w", "stoppedAt": "2026-11-26T11:00:00Z"}),
    ("workflow.v1.PollJobsRequest", {"workerId": "w", "jobTypes": ["a", "b"], "maxJobs": 3}),
    ("workflow.v1.QueueStats", {"pending": 2**40, "processing": "7", "completed": 0}),
    ("workflow.v1.Definition", {"name": "d", "steps": [{"id": "a", "steps": [{"id": "b"}]}]}),
)


@pytest.mark.parametrize(("type_name", "view"), VIEWS, ids=[v[0] for v in VIEWS])
def test_from_view_makes_what_from_json_makes(type_name: str, view: dict[str, Any]) -> None:
    cls = schema.message_class(type_name)
    made = convert.from_view(cls, view)
    assert made == convert.from_json(cls, view)
    assert made.SerializeToString(deterministic=True) == convert.from_json(
        cls, view
    ).SerializeToString(deterministic=True)


def test_an_empty_input_is_present_not_absent() -> None:
    job = convert.from_view(schema.message_class("workflow.v1.Job"), {"id": "j", "input": {}})
    assert job.HasField("input") and convert.to_json(job) == {"id": "j", "input": {}}


@pytest.mark.parametrize("number", [math.nan, math.inf, -math.inf])
def test_a_struct_number_json_cannot_hold_is_not_json(number: float) -> None:
    request = schema.message_class("workflow.v1.CompleteJobRequest")(job_id="j", worker_id="w")
    request.variables_to_set.update({"deep": {"list": [1, number]}})
    with pytest.raises(convert.NotJson, match="not a JSON number"):
        convert.to_json(request)


def test_to_json_writes_the_rest_shapes() -> None:
    request = schema.message_class("workflow.v1.CompleteBatchRequest")()
    item = request.results.add(job_id="j", worker_id="w", attempt=1)
    item.variables_to_set.update({"n": 3, "f": 0.5, "s": "x", "b": False, "z": None})
    item.failure.retryable = False
    assert convert.to_json(request) == {
        "results": [
            {
                "jobId": "j",
                "workerId": "w",
                "attempt": 1,
                "variablesToSet": {"n": 3, "f": 0.5, "s": "x", "b": False, "z": None},
                "failure": {"retryable": False},
            }
        ]
    }
    stats = schema.message_class("workflow.v1.QueueStats")(pending=5)
    assert convert.to_json(stats) == {"pending": 5}
    assert convert.to_json(stats, int64_as_string=True) == {"pending": "5"}


# A definition whose steps use each widened field both ways: a value the old type holds, and one
# ${…} it cannot (as a translated Conductor dynamic fork's steps do).
WIDENED = {
    "name": "d",
    "steps": [
        {
            "id": "a",
            "type": "SERVICE_TASK",
            "jobType": "w",
            "input": {"x": 1, "deep": {"l": [1, "t"]}},
            "optional": True,
            "permissive": "${a.input.p}",
        },
        {
            "id": "b",
            "type": "SUB_WORKFLOW",
            "definitionName": "c",
            "definitionVersion": 3,
            "input": "${workflow.input.m}",
            "optional": "${workflow.input.o}",
            "permissive": False,
            "steps": [{"id": "n", "type": "NOOP", "input": {}}],
        },
        {"id": "c", "type": "SUB_WORKFLOW", "definitionVersion": "${workflow.input.v}"},
    ],
}


@pytest.mark.parametrize("make", [convert.from_json, convert.from_view])
def test_widened_fields_carry_expressions_and_set_their_old_fields_where_the_value_fits(
    make: Any,
) -> None:
    definition = make(schema.message_class("workflow.v1.Definition"), WIDENED)
    a, b, c = definition.steps
    # Code generated from the older proto reads the old numbers: set wherever the value fits.
    assert convert.to_json(a.legacy_input) == {"x": 1, "deep": {"l": [1, "t"]}}
    assert a.HasField("legacy_optional") and a.legacy_optional is True
    assert not a.HasField("legacy_permissive")
    assert not b.HasField("legacy_input") and not b.HasField("legacy_optional")
    assert b.legacy_definition_version == 3 and b.HasField("legacy_permissive")
    assert b.steps[0].HasField("legacy_input")  # {} is a value, nested steps too
    assert not c.HasField("legacy_definition_version")
    # REST JSON never shows the old fields, in either encoding's reading.
    again = type(definition).FromString(definition.SerializeToString())
    assert convert.to_json(again) == WIDENED
    assert convert.to_json(again, int64_as_string=True) == WIDENED


def test_a_request_from_code_generated_from_the_older_proto_reads_as_its_new_fields() -> None:
    step = schema.message_class("workflow.v1.Step")(
        id="x", type="SUB_WORKFLOW", legacy_optional=False, legacy_definition_version=2
    )
    step.legacy_input.update({"k": "v"})
    step.legacy_permissive = True
    step.permissive.string_value = "${workflow.input.p}"  # the new field wins when both are set
    assert convert.to_json(step) == {
        "id": "x",
        "type": "SUB_WORKFLOW",
        "input": {"k": "v"},
        "definitionVersion": 2,
        "optional": False,
        "permissive": "${workflow.input.p}",
    }


def test_a_value_past_the_old_types_range_sets_no_old_field() -> None:
    step = convert.from_view(
        schema.message_class("workflow.v1.Step"),
        {"id": "x", "definitionVersion": 2**31, "optional": 1, "input": [1]},
    )
    assert not step.HasField("legacy_definition_version")
    assert not step.HasField("legacy_optional") and not step.HasField("legacy_input")
