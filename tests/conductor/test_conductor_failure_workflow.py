"""A Conductor ``failureWorkflow`` as teams write compensation (the saga cookbook's shape): it
reads the failed workflow's input keys, ``failureTaskId``, ``reason`` and ``failedWorkflow``,
and runs under the failed workflow's correlation id."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from conductor.client.http.models.start_workflow_request import StartWorkflowRequest
from conductor.client.orkes_clients import OrkesClients

from tests.conductor.test_conductor_operations import (
    _done,
    _poll,
    _register,
    _simple,
    _until_status,
)

pytestmark = [pytest.mark.e2e]


def test_a_compensation_workflow_reads_what_conductor_hands_a_failure_workflow(
    clients: OrkesClients,
) -> None:
    charge, ship, refund = (f"fw_{k}_{uuid.uuid4().hex[:6]}" for k in ("charge", "ship", "refund"))
    undo = _register(
        clients,
        [
            {
                "name": "what_completed",
                "taskReferenceName": "what",
                "type": "JSON_JQ_TRANSFORM",
                "inputParameters": {
                    "failed": "${workflow.input.failedWorkflow}",
                    "queryExpression": "{status: .failed.status, order: .failed.input.orderId,"
                    " failedTask: .failed.failedTaskId}",
                },
            },
            _simple(
                "refund",
                refund,
                inputParameters={
                    "orderId": "${workflow.input.orderId}",
                    "fromFailed": "${workflow.input.failedWorkflow.input.orderId}",
                    "failureTaskId": "${workflow.input.failureTaskId}",
                    "failureStatus": "${workflow.input.failureStatus}",
                    "workflowId": "${workflow.input.workflowId}",
                    "seen": "${what.output.result}",
                },
            ),
        ],
    )
    main = _register(
        clients,
        [
            _simple("charge", charge),
            _simple("ship", ship, retryCount=0),
        ],
        failureWorkflow=undo,
    )
    wid = str(
        clients.get_workflow_client().start_workflow(
            StartWorkflowRequest(
                name=main, version=1, input={"orderId": "o-1"}, correlation_id="order-o-1"
            )
        )
    )
    _done(clients, _poll(clients, charge), output={"transactionId": "t-9"})
    _done(
        clients,
        _poll(clients, ship),
        status="FAILED_WITH_TERMINAL_ERROR",
        reason_for_incompletion="no courier",
    )
    failed = _until_status(clients, wid, "FAILED")
    failed_task = next(t for t in failed.tasks if t.reference_task_name == "ship")
    compensation = failed.output["conductor.failure_workflow"]

    task = _poll(clients, refund)
    assert task.workflow_instance_id == compensation
    given: dict[str, Any] = task.input_data
    assert given["orderId"] == given["fromFailed"] == "o-1"
    assert given["failureTaskId"] == failed_task.task_id
    assert (given["failureStatus"], given["workflowId"]) == ("FAILED", wid)
    assert given["seen"] == {"status": "FAILED", "order": "o-1", "failedTask": failed_task.task_id}
    started = clients.get_workflow_client().get_workflow(compensation, include_tasks=False)
    assert started.correlation_id == "order-o-1"
    assert "no courier" in started.input["reason"]
    _done(clients, task)
    _until_status(clients, compensation, "COMPLETED")
