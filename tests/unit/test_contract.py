"""The pydantic models (source of the OpenAPI document) and the proto file agree."""

from __future__ import annotations

from typing import Any

import pytest
from baton.api import models as m
from baton.api import schedule_models as sm
from baton.api.openapi import OPERATIONS, document
from baton.routes import ROUTES
from google.protobuf import json_format
from openapi_spec_validator import validate
from pydantic import BaseModel

from tests.support.proto_contract import RESPONSES, message, parse

# (model, message[, fields the proto takes from the path rather than the body])
PAIRS: list[Any] = [
    (m.Instance, "Instance"),
    (m.StepExecution, "StepExecution"),
    (m.InstancePage, "InstancePage"),
    (m.StepExecutionPage, "StepExecutionPage"),
    (m.HistoryEvent, "HistoryEvent"),
    (m.HistoryPage, "HistoryPage"),
    (m.Job, "Job"),
    (m.PollResponse, "PollJobsResponse"),
    (m.CompleteJobResponse, "CompleteJobResponse"),
    (m.FailJobResponse, "FailJobResponse"),
    (m.HeartbeatResponse, "HeartbeatResponse"),
    (m.Definition, "Definition"),
    (m.DefinitionPage, "DefinitionPage"),
    (m.TaskDefinition, "TaskDef"),
    (m.TaskDefPage, "TaskDefPage"),
    (m.ProblemDetails, "Problem"),
    (m.PollRequest, "PollJobsRequest"),
    (m.CompleteJobRequest, "CompleteJobRequest"),
    (m.FailJobRequest, "FailJobRequest"),
    (m.HeartbeatRequest, "HeartbeatRequest"),
    (m.ClaimJobRequest, "ClaimJobRequest", {"id"}),
    (m.StartInstanceRequest, "StartInstanceRequest"),
    (m.StartInstancesRequest, "StartInstancesRequest"),
    (m.StartOutcome, "StartOutcome"),
    (m.StartInstancesResponse, "StartInstancesResponse"),
    (m.PushResponse, "PushResponse"),
    (m.QueueStats, "QueueStats"),
    (m.QueueTask, "QueueTask"),
    (m.QueueTaskList, "QueueTaskList"),
    (m.PurgeResponse, "PurgeResponse"),
    (m.SettleResponse, "SettleResponse"),
    (m.AckRequest, "AckRequest", {"name", "taskId"}),
    (m.NackRequest, "NackRequest", {"name", "taskId"}),
    (m.DequeueRequest, "DequeueRequest", {"name"}),
    (m.PushRequest, "PushRequest", {"name"}),
    (m.CompleteUserTaskRequest, "CompleteUserTaskRequest", {"id", "stepId"}),
    (m.SignalRequest, "SignalRequest", {"id", "stepId"}),
    (m.InstanceOperationRequest, "InstanceOperationRequest", {"id"}),
    (m.RestartInstanceRequest, "RestartInstanceRequest", {"id"}),
    (m.RerunInstanceRequest, "RerunInstanceRequest", {"id"}),
    (m.Health, "Health"),
    (m.DeletedInstance, "DeletedInstance"),
    (m.QueueSummary, "QueueSummary"),
    (m.QueuePage, "QueuePage"),
    (m.QueueTaskDetail, "QueueTaskDetail"),
    (m.QueueTaskPage, "QueueTaskPage"),
    (m.RedriveRequest, "RedriveRequest", {"name"}),
    (m.RedriveSkipped, "RedriveSkipped"),
    (m.RedriveResponse, "RedriveResponse"),
    (m.HealthCheck, "HealthCheck"),
    (m.CreatePayloadRequest, "CreatePayloadRequest"),
    (m.PayloadUpload, "PayloadUpload"),
    (m.PayloadLimitView, "PayloadLimit"),
    (m.PayloadLimitsView, "PayloadLimits"),
    (m.ServerConfig, "ServerConfig"),
    (sm.ScheduleInterval, "ScheduleInterval"),
    (sm.ScheduleSpec, "ScheduleSpec"),
    (sm.ScheduleRequest, "ScheduleRequest"),
    (sm.ScheduleAction, "ScheduleAction"),
    (sm.Schedule, "Schedule"),
    (sm.SchedulePage, "SchedulePage"),
    (sm.PauseScheduleRequest, "PauseScheduleRequest", {"id"}),
    (sm.ScheduleTriggered, "ScheduleTriggered"),
    (sm.BackfillRequest, "BackfillRequest", {"id"}),
    (sm.BackfillResponse, "BackfillResponse"),
    (sm.DeletedSchedule, "DeletedSchedule"),
]


def test_queue_trigger_message_matches_the_model() -> None:
    from baton.definitions import QueueTrigger

    assert _json_fields(QueueTrigger) == _proto_fields("QueueTrigger")


def _json_fields(model: type[BaseModel]) -> set[str]:
    return {f.alias or name for name, f in model.model_fields.items()}


def _proto_fields(name: str) -> set[str]:
    """A message's JSON fields, less the deprecated ``legacy_*`` ones (old numbers of widened
    fields, which REST JSON never shows: see baton.rpc.convert)."""
    return {
        f.json_name
        for f in message(name).DESCRIPTOR.fields
        if not (f.name.startswith("legacy_") and f.GetOptions().deprecated)
    }


@pytest.mark.parametrize("pair", PAIRS, ids=[p[1] for p in PAIRS])
def test_model_and_proto_message_have_the_same_json_fields(pair: Any) -> None:
    model, proto, from_path = pair if len(pair) == 3 else (*pair, set())
    assert _json_fields(model) | from_path == _proto_fields(proto)


def test_step_message_covers_every_step_type_field() -> None:
    import typing

    from baton.steps import STEP_TYPES, Step

    types = typing.get_args(typing.get_args(Step)[0])
    assert len(types) == len(STEP_TYPES)
    fields = set().union(*(_json_fields(t) for t in types))
    assert fields == _proto_fields("Step")


def test_definition_message_matches_the_model() -> None:
    from baton.definitions import WorkflowDefinition

    assert _json_fields(WorkflowDefinition) | {"createdAt"} == _proto_fields("Definition")


def test_every_route_has_a_proto_response_and_an_openapi_operation() -> None:
    keys = {(r.method, r.path) for r in ROUTES}
    assert keys == set(RESPONSES) == set(OPERATIONS)
    service = message("Instance").DESCRIPTOR.file.services_by_name["WorkflowEngine"]
    assert len(service.methods) >= len({v for v in RESPONSES.values()})


def test_openapi_document_is_valid_and_covers_the_route_table() -> None:
    doc: dict[str, Any] = document()
    validate(doc)  # raises on an invalid OpenAPI 3.1 document
    for r in ROUTES:
        op = doc["paths"][r.path][r.method.lower()]
        if r.public:
            assert op["security"] == []
            assert not {"401", "403"} & set(op["responses"])
        else:
            assert op["security"] == [{"apiKey": []}]
            assert {"401", "403"} <= set(op["responses"])
        assert {"400", "404", "409", "413", "422", "503"} <= set(op["responses"])


def test_only_liveness_and_the_contract_are_public() -> None:
    assert {(r.method, r.path) for r in ROUTES if r.public} == {
        ("GET", "/v1/health"),
        ("GET", "/v1/openapi.json"),
    }


def test_unknown_fields_are_refused_by_the_contract() -> None:
    with pytest.raises(json_format.ParseError):
        parse(
            "CompleteJobResponse",
            {"jobId": "x", "status": "COMPLETED", "applied": True, "extra": 1},
        )
