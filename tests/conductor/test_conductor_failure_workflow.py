"""A Conductor ``failureWorkflow`` as teams write compensation (the saga cookbook's shape): it
reads the failed workflow's input keys, ``failureTaskId``, ``reason`` and ``failedWorkflow``,
and runs under the failed workflow's correlation id."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from conductor.client.http.models.start_workflow_request import StartWorkflowRequest
from conductor.client.orkes_clients import OrkesClients

from tests.conductor.test_conductor_client import _model, _wait_terminal
from tests.conductor.test_conductor_operations import (
    _done,
    _poll,
    _register,
    _simple,
    _until_status,
)
from tests.support.helpers import wait_until
from tests.support.http_target import Target, http_target

pytestmark = [pytest.mark.e2e]


@pytest.fixture
def target() -> Iterator[Target]:
    with http_target() as t:
        yield t


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


COOKBOOK = Path(__file__).parent / "cookbook"


def _cookbook(name: str, services: str, prefix: str) -> dict[str, Any]:
    """A definition of the saga cookbook, its services at ``services``, its names prefixed."""
    text = (COOKBOOK / name).read_text().replace("http://localhost:8088", services)
    text = text.replace('"saga_order_', f'"{prefix}_saga_order_')
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def test_the_saga_cookbook_undoes_what_the_failed_workflow_completed(
    clients: OrkesClients, prefix: str, target: Target
) -> None:
    """Conductor's saga recipe as its documentation ships it: the compensation's jq reads
    ``failedWorkflow.tasks`` to undo only the steps that completed, in reverse order."""
    meta = clients.get_metadata_client()
    services = target.url("/saga")
    for name in ("saga-order-compensation.json", "saga-order-fulfillment.json"):
        meta.register_workflow_def(
            _model(_cookbook(name, services, prefix), "WorkflowDef"), overwrite=True
        )
    workflows = clients.get_workflow_client()
    wid = str(
        workflows.start_workflow(
            StartWorkflowRequest(
                name=f"{prefix}_saga_order_fulfillment",
                version=1,
                input={"orderId": "ORD-2", "amount": 49.0, "shipmentStatus": "503"},
            )
        )
    )
    failed = wait_until(
        lambda: (wf := workflows.get_workflow(wid, include_tasks=True)).status == "FAILED" and wf,
        timeout=60,
        interval=0.2,
        what="the order to fail",
    )
    compensation = failed.output["conductor.failure_workflow"]
    done = _wait_terminal(clients, [compensation])[compensation]
    assert done.status == "COMPLETED", done.reason_for_incompletion
    assert done.output["stepsCompleted"] == ["reserve_inventory", "charge_payment"]
    assert done.output["paymentRefunded"] is True and done.output["inventoryReleased"] is True
    assert done.output["compensatedOrder"] == "ORD-2"
    calls = [
        (r["path"].split("?")[0], r["headers"].get("Idempotency-Key")) for r in target.requests
    ]
    assert calls == [
        ("/saga/inventory/reserve", "ORD-2-reserve"),
        ("/saga/payments/charge", "ORD-2-charge"),
        ("/saga/shipping/book", "ORD-2-ship"),
        ("/saga/shipping/book", "ORD-2-ship"),  # retryCount 1
        ("/saga/payments/refund", "ORD-2-refund"),
        ("/saga/inventory/release", "ORD-2-release"),
    ]
    # What it was told: the failed workflow's tasks as its own read shows them, as they ended.
    given = workflows.get_workflow(compensation, include_tasks=False).input
    told = given["failedWorkflow"]
    # Its reason in Conductor's words, as the failed workflow's own read gives it.
    assert failed.reason_for_incompletion.startswith("Task ")
    assert given["reason"] == told["reasonForIncompletion"] == failed.reason_for_incompletion
    assert done.output["originalFailure"] == failed.reason_for_incompletion
    shown = [(t.reference_task_name, t.status, t.task_id) for t in failed.tasks]
    assert [(t["referenceTaskName"], t["status"], t["taskId"]) for t in told["tasks"]] == shown
    assert [s for _, s, _ in shown] == ["COMPLETED", "COMPLETED", "FAILED", "FAILED"]
    charged = next(t for t in told["tasks"] if t["referenceTaskName"] == "charge_payment")
    assert charged["outputData"]["response"]["statusCode"] == 200


def test_a_failure_workflow_version_starts_that_version(
    clients: OrkesClients, api: httpx.Client
) -> None:
    """``failureWorkflowVersion`` starts that version of the failure workflow, not its latest
    (Conductor's ``terminateWorkflow``). Registered as JSON: conductor-python's WorkflowDef has
    no such field."""
    undo, older, newer, broken = (f"fv_{k}_{uuid.uuid4().hex[:6]}" for k in "uonb")
    for version, task_type in ((1, older), (2, newer)):
        body = {"name": undo, "version": version, "tasks": [_simple("undo", task_type)]}
        assert api.post("/metadata/workflow", json=body).status_code in (200, 204)
    main = f"fv_main_{uuid.uuid4().hex[:6]}"
    sent = {
        "name": main,
        "version": 1,
        "tasks": [_simple("broken", broken, retryCount=0)],
        "failureWorkflow": undo,
        "failureWorkflowVersion": 1,
    }
    assert api.post("/metadata/workflow", json=sent).status_code in (200, 204)
    assert api.get(f"/metadata/workflow/{main}").json()["failureWorkflowVersion"] == 1
    wid = str(clients.get_workflow_client().start_workflow_by_name(main, {"orderId": "o-2"}))
    _done(clients, _poll(clients, broken), status="FAILED_WITH_TERMINAL_ERROR")
    failed = _until_status(clients, wid, "FAILED")
    task = _poll(clients, older)
    assert task.workflow_instance_id == failed.output["conductor.failure_workflow"]
    started = clients.get_workflow_client().get_workflow(task.workflow_instance_id, False)
    assert (started.workflow_name, started.workflow_version) == (undo, 1)
    for bad in (0, -1, "x", 2**31):
        hostile = {**sent, "name": f"{main}_bad", "failureWorkflowVersion": bad}
        refused = api.post("/metadata/workflow", json=hostile)
        assert refused.status_code == 400, (bad, refused.text)
        assert "failureWorkflowVersion" in refused.text


def test_the_error_handling_guides_compensation_registers_as_conductor_takes_it(
    api: httpx.Client, prefix: str
) -> None:
    """The guide's ``order_compensation`` reads ``failedWorkflow.tasks[<ref>]``, a path Jayway
    cannot compile: Conductor registers it and reads such a path as null, and so does Baton (it
    was refused 400 as a bad bracket)."""
    sent = json.loads((COOKBOOK / "handling-errors-order-compensation.json").read_text())
    sent["name"] = f"{prefix}_order_compensation"
    answer = api.post("/metadata/workflow", json=sent)
    assert answer.status_code in (200, 204), answer.text
    back = api.get(f"/metadata/workflow/{sent['name']}").json()
    assert [t["inputParameters"] for t in back["tasks"]] == [
        t["inputParameters"] for t in sent["tasks"]
    ]
