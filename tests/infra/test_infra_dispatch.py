"""The event-driven dispatch mode's infrastructure: the SQS FIFO queue and its DLQ, the relay's
least-privilege role and schedule, the SQS endpoint, alarms and the dashboard."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from baton import settings
from baton_infra.config import ConfigError, DeployConfig, load_cdk_json_context
from synth_support import Synth, function_logical_ids, synthesize

pytestmark = [pytest.mark.infra, pytest.mark.xdist_group("infra")]


@pytest.fixture(scope="module")
def outbox(layer_built: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synth]:
    yield synthesize(tmp_path_factory.mktemp("cdk-outbox"), {"dispatchMode": "outbox"})


def _queues(synth: Synth) -> dict[str, dict[str, Any]]:
    return {r["QueueName"]: r for r in synth.props("AWS::SQS::Queue")}


def _variables(synth: Synth, name: str) -> dict[str, Any]:
    fn = synth.resources[function_logical_ids(synth)[name]]
    variables: dict[str, Any] = fn["Properties"]["Environment"]["Variables"]
    return variables


def _relay_rule(synth: Synth) -> dict[str, Any]:
    relay = function_logical_ids(synth)["relay"]
    (rule,) = [
        r
        for r in synth.props("AWS::Events::Rule")
        if any(t["Arn"] == {"Fn::GetAtt": [relay, "Arn"]} for t in r["Targets"])
    ]
    return rule


def test_fifo_queue_with_dead_letter_queue_encrypted_and_tls_only(outbox: Synth) -> None:
    queues = _queues(outbox)
    queue, dlq = queues["baton-dev-dispatch.fifo"], queues["baton-dev-dispatch-dlq.fifo"]
    assert queue["FifoQueue"] is True and dlq["FifoQueue"] is True
    assert queue["ContentBasedDeduplication"] is False  # the relay sends job id + attempt
    assert queue["SqsManagedSseEnabled"] is True and dlq["SqsManagedSseEnabled"] is True
    redrive = queue["RedrivePolicy"]
    assert redrive["maxReceiveCount"] == 5
    dlq_id = next(k for k, r in outbox.of_type("AWS::SQS::Queue").items() if r["Properties"] is dlq)
    assert redrive["deadLetterTargetArn"] == {"Fn::GetAtt": [dlq_id, "Arn"]}
    policies = json.dumps(outbox.props("AWS::SQS::QueuePolicy"))
    assert '"aws:SecureTransport": "false"' in policies


def test_relay_may_only_send_to_the_dispatch_queue(outbox: Synth) -> None:
    ids = function_logical_ids(outbox)
    queue_id = next(
        k
        for k, r in outbox.of_type("AWS::SQS::Queue").items()
        if r["Properties"]["QueueName"] == "baton-dev-dispatch.fifo"
    )
    sqs_statements: dict[str, list[dict[str, Any]]] = {}
    for policy in outbox.props("AWS::IAM::Policy"):
        roles = [r["Ref"] for r in policy.get("Roles", [])]
        for statement in policy["PolicyDocument"]["Statement"]:
            actions = statement["Action"]
            actions = actions if isinstance(actions, list) else [actions]
            if any(a.startswith("sqs:") for a in actions):
                for role in roles:
                    sqs_statements.setdefault(role, []).append(statement)
    relay_role = outbox.resources[ids["relay"]]["Properties"]["Role"]["Fn::GetAtt"][0]
    assert set(sqs_statements) == {relay_role}  # no other function touches the queue
    (statement,) = sqs_statements[relay_role]
    assert statement["Action"] == "sqs:SendMessage"
    assert statement["Resource"] == {"Fn::GetAtt": [queue_id, "Arn"]}


def test_outbox_mode_sets_every_function_and_schedules_the_relay(outbox: Synth) -> None:
    for name in function_logical_ids(outbox):
        assert _variables(outbox, name)[settings.ENV_DISPATCH_MODE] == "outbox", name
    assert settings.ENV_DISPATCH_QUEUE_URL in _variables(outbox, "relay")
    assert settings.ENV_DISPATCH_QUEUE_URL not in _variables(outbox, "jobs")
    assert _relay_rule(outbox)["State"] == "ENABLED"
    endpoints = [
        e for e in outbox.props("AWS::EC2::VPCEndpoint") if "sqs" in json.dumps(e["ServiceName"])
    ]
    assert len(endpoints) == 1 and endpoints[0]["PrivateDnsEnabled"] is True


def test_polling_mode_keeps_the_queue_but_not_the_relay_schedule_or_endpoint(dev: Synth) -> None:
    assert _variables(dev, "jobs")[settings.ENV_DISPATCH_MODE] == "polling"
    assert "baton-dev-dispatch.fifo" in _queues(dev)
    assert _relay_rule(dev)["State"] == "DISABLED"
    assert not [
        e for e in dev.props("AWS::EC2::VPCEndpoint") if "sqs" in json.dumps(e["ServiceName"])
    ]


def test_alarms_on_relay_lag_outbox_depth_and_dead_letters(outbox: Synth) -> None:
    alarms = {a["AlarmName"]: a for a in outbox.props("AWS::CloudWatch::Alarm")}
    lag = alarms["baton-dev-relay-lag"]
    assert lag["Threshold"] == 60_000 and lag["EvaluationPeriods"] == 3
    assert "MAX(RelayLag)" in json.dumps(lag["Metrics"])
    depth = alarms["baton-dev-outbox-depth"]
    assert "MAX(OutboxDepth)" in json.dumps(depth["Metrics"])
    dlq = alarms["baton-dev-dispatch-dead-letters"]
    assert dlq["MetricName"] == "ApproximateNumberOfMessagesVisible" and dlq["Threshold"] == 0
    for alarm in (lag, depth, dlq):
        assert alarm["AlarmActions"] and alarm["OKActions"]


def test_dashboard_shows_dispatch_latency_p50_and_p99_and_the_relay(outbox: Synth) -> None:
    (dashboard,) = outbox.props("AWS::CloudWatch::Dashboard")
    body = json.dumps(dashboard["DashboardBody"])
    for p in ("p50", "p99"):
        assert f'\\"stat\\":\\"{p}\\"' in body
    assert "JobDispatchLatency" in body and "baton-jobs" in body
    assert "MAX(RelayLag)" in body and "MAX(OutboxDepth)" in body


def test_unknown_dispatch_mode_is_refused() -> None:
    merged = {**load_cdk_json_context(), "dispatchMode": "kafka"}
    with pytest.raises(ConfigError, match="dispatchMode"):
        DeployConfig.from_context(merged.get)
