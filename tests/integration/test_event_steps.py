"""EVENT steps on a real PostgreSQL, published by the system tasks (``run_system_tasks``): to a
Baton queue (a queue-triggered definition then starts from the message), to an SQS queue (moto's,
standard and FIFO), and a sink that cannot be published to failing the step with the reason."""

from __future__ import annotations

import json
from typing import Any

import pytest
from baton.engine.queue_ops import Queues
from baton.engine.service import Engine
from baton.errors import ValidationFailed

from tests.integration.test_control_flow import steps_of
from tests.integration.test_http_steps import _run_until_ended
from tests.support.sqs import fifo_queue, moto_endpoint, receive_all, sqs_client

__all__ = ["moto_endpoint"]  # the fixture, used by name


def _event(sink: str) -> dict[str, Any]:
    return {
        "id": "publish",
        "type": "EVENT",
        "sink": sink,
        "input": {"order": "${workflow.input.order}", "status": "SHIPPED"},
    }


def _start(engine: Engine, name: str, sink: str, **input: Any) -> str:
    engine.register_definition({"name": name, "version": 3, "steps": [_event(sink)]})
    inst, _ = engine.start_instance(definition_name=name, input=input, correlation_id="corr-1")
    return str(inst["id"])


def test_an_event_to_a_baton_queue_is_a_task_there(engine: Engine) -> None:
    iid = _start(engine, "notify", "queue:orders-out", order=42)
    got = _run_until_ended(engine, iid)
    assert got["status"] == "COMPLETED", got.get("reason")
    (task,) = Queues(engine).dequeue("orders-out", "test")
    message = {
        "order": 42,
        "status": "SHIPPED",
        "workflowInstanceId": iid,
        "workflowType": "notify",
        "correlationId": "corr-1",
    }
    assert json.loads(task["body"]) == message
    assert task["title"] == "notify/publish"
    (step,) = steps_of(engine, iid, "publish")
    assert step["output"] == {**message, "sink": "queue:orders-out", "messageId": task["id"]}
    assert step["input"] == {"order": 42, "status": "SHIPPED", "sink": "queue:orders-out"}


def test_an_event_to_sqs_is_sent_there(engine: Engine, moto_endpoint: str) -> None:
    client = sqs_client(moto_endpoint)
    engine.__dict__["event_sqs_client"] = client  # the function's client, pointed at moto
    standard = client.create_queue(QueueName="order-events")["QueueUrl"]
    fifo = fifo_queue(moto_endpoint, "order-events.fifo")
    by_name = _start(engine, "to-sqs", "sqs:order-events", order=1)
    by_url = _start(engine, "to-fifo", f"sqs:{fifo}", order=2)
    for iid in (by_name, by_url):
        got = _run_until_ended(engine, iid)
        assert got["status"] == "COMPLETED", got.get("reason")
    (sent,) = receive_all(moto_endpoint, standard)
    assert json.loads(sent["Body"])["order"] == 1
    assert json.loads(sent["Body"])["workflowInstanceId"] == by_name
    (sent,) = receive_all(moto_endpoint, fifo)
    assert json.loads(sent["Body"])["order"] == 2
    assert sent["Attributes"]["MessageGroupId"] == by_url
    (step,) = steps_of(engine, by_url, "publish")
    assert step["output"]["messageId"] == sent["MessageId"]


def test_an_event_to_a_missing_sqs_queue_fails_the_step_saying_so(
    engine: Engine, moto_endpoint: str
) -> None:
    engine.__dict__["event_sqs_client"] = sqs_client(moto_endpoint)
    iid = _start(engine, "nowhere", "sqs:no-such-queue", order=1)
    got = _run_until_ended(engine, iid)
    assert got["status"] == "FAILED"
    assert "sqs queue 'no-such-queue': no such queue" in got["reason"]


def test_a_sink_resolved_to_one_baton_cannot_publish_to_fails_the_step(engine: Engine) -> None:
    iid = _start(engine, "dynamic", "${workflow.input.to}", order=1, to="kafka:orders")
    got = engine.get_instance(iid)
    assert got["status"] == "FAILED"
    assert "Baton publishes to queue:<name> (a Baton queue) and sqs:" in got["reason"]


def test_an_event_to_queue_alone_is_the_definition_s_and_step_s_queue(engine: Engine) -> None:
    iid = _start(engine, "test_event.workflow", "queue", order=5)
    assert _run_until_ended(engine, iid)["status"] == "COMPLETED"
    (task,) = Queues(engine).dequeue("test-event-workflow-publish", "test")
    assert json.loads(task["body"])["order"] == 5
    (step,) = steps_of(engine, iid, "publish")
    assert step["output"]["sink"] == "queue:test-event-workflow-publish"


@pytest.mark.parametrize("sink", ["kafka:orders", "queue:no spaces", "sqs:", "orders"])
def test_a_sink_baton_cannot_publish_to_is_refused_at_registration(
    engine: Engine, sink: str
) -> None:
    with pytest.raises(ValidationFailed) as e:
        engine.register_definition({"name": "bad", "steps": [_event(sink)]})
    assert [p.path for p in e.value.problems] == ["steps[0].sink"]
