"""Conductor's HTTP task ⇄ Baton's HTTP step: both request forms, settings, read-back as sent,
and what is refused."""

from __future__ import annotations

from typing import Any

import pytest
from baton.conductor.definitions import to_baton_workflow, to_conductor_workflow
from baton.conductor.errors import Untranslatable
from baton.definitions import parse_definition


def _wf(*tasks: dict[str, Any]) -> dict[str, Any]:
    return {"name": "h", "version": 1, "tasks": list(tasks)}


NESTED = {
    "name": "http_task",
    "taskReferenceName": "call",
    "type": "HTTP",
    "retryCount": 2,
    "inputParameters": {
        "http_request": {
            "uri": "https://api.example.com/orders/${workflow.input.id}",
            "method": "PUT",
            "headers": {"Authorization": "Bearer ${workflow.input.token}"},
            "body": {"state": "${prev.output.response.body.state}"},
            "accept": "application/json",
            "contentType": "application/json",
            "connectionTimeOut": 1500,
            "readTimeOut": 4000,
        },
        "note": "${workflow.input.note}",
    },
}
TOP_LEVEL = {
    "name": "get_it",
    "taskReferenceName": "get",
    "type": "HTTP",
    "inputParameters": {"uri": "http://svc/${workflow.input.id}", "method": "GET"},
}
PREV = {
    "name": "prev",
    "taskReferenceName": "prev",
    "type": "HTTP",
    "inputParameters": {"http_request": {"uri": "http://svc/state"}},
    "taskDefinition": {"name": "prev", "retryDelaySeconds": 5, "responseTimeoutSeconds": 0},
}


def test_http_request_translates_to_the_step() -> None:
    steps = to_baton_workflow(_wf(PREV, NESTED))["steps"]
    call = steps[1]
    assert call == {
        "id": "call",
        "name": "http_task",
        "type": "HTTP",
        "request": {
            "uri": "https://api.example.com/orders/${workflow.input.id}",
            "method": "PUT",
            "headers": {"Authorization": "Bearer ${workflow.input.token}"},
            "body": {"state": "${prev.output.response.body.state}"},
            "accept": "application/json",
            "contentType": "application/json",
            "connectionTimeOut": 1500,
            "readTimeOut": 4000,
        },
        "input": {"note": "${workflow.input.note}"},
        "retryCount": 2,
    }
    assert steps[0]["retryDelaySeconds"] == 5
    assert "responseTimeoutSeconds" not in steps[0]
    parse_definition(to_baton_workflow(_wf(PREV, NESTED)))  # and it registers


def test_top_level_form_translates_and_reads_back_as_sent() -> None:
    sent = _wf(TOP_LEVEL)
    step = to_baton_workflow(sent)["steps"][0]
    assert step["request"] == {"uri": "http://svc/${workflow.input.id}", "method": "GET"}
    back = to_conductor_workflow(to_baton_workflow(sent))["tasks"][0]
    assert back["type"] == "HTTP"
    assert back["inputParameters"] == TOP_LEVEL["inputParameters"]
    assert "http_request" not in back["inputParameters"]


def test_http_request_form_reads_back_as_sent() -> None:
    back = to_conductor_workflow(to_baton_workflow(_wf(PREV, NESTED)))["tasks"]
    assert back[1]["type"] == "HTTP"
    assert back[1]["name"] == "http_task"
    assert back[1]["inputParameters"] == NESTED["inputParameters"]
    assert back[1]["retryCount"] == 2
    assert back[0]["taskDefinition"] == {"name": "prev", "retryDelaySeconds": 5}


@pytest.mark.parametrize(
    ("params", "said"),
    [
        ({"method": "GET"}, "needs inputParameters.http_request (or uri)"),
        ({"http_request": 5}, "http_request must be an object"),
    ],
)
def test_an_http_task_without_a_request_is_refused(params: dict[str, Any], said: str) -> None:
    task = {"name": "x", "taskReferenceName": "x", "type": "HTTP", "inputParameters": params}
    with pytest.raises(Untranslatable) as e:
        to_baton_workflow(_wf(task))
    assert said in str(e.value)
