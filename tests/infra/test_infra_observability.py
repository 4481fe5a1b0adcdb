"""Dashboard, alarms and the alarm topic."""

from __future__ import annotations

import json
from typing import Any

import pytest
from baton.routes import SCHEDULED_FUNCTIONS
from synth_support import Synth

pytestmark = [pytest.mark.infra, pytest.mark.xdist_group("infra")]

ENGINE_METRICS = (
    "JobsClaimed",
    "JobPollEmpty",
    "JobDispatchLatency",
    "JobsCompleted",
    "JobsFailed",
    "JobsRetried",
    "JobsTimedOut",
    "LeasesExpired",
    "QueueDepth",
    "QueueDeadLettered",
    "InstancesStarted",
    "InstancesCompleted",
    "InstancesFailed",
)


def _alarms(synth: Synth) -> dict[str, dict[str, Any]]:
    return {str(p["AlarmName"]): p for p in synth.props("AWS::CloudWatch::Alarm")}


def test_alarms_cover_api_queues_leases_database_and_schedules(dev: Synth) -> None:
    expected = {
        "baton-dev-api-5xx-rate",
        "baton-dev-queue-dead-lettered",
        "baton-dev-leases-expired",
        "baton-dev-db-cpu-high",
        "baton-dev-db-acu-saturated",
        *(f"baton-dev-{name}-failing" for name in SCHEDULED_FUNCTIONS),
    }
    assert set(_alarms(dev)) == expected


def test_every_alarm_notifies_the_topic(dev: Synth) -> None:
    (topic_id,) = dev.of_type("AWS::SNS::Topic")
    for name, alarm in _alarms(dev).items():
        assert alarm["AlarmActions"] == [{"Ref": topic_id}], name
        assert alarm["OKActions"] == [{"Ref": topic_id}], name
        assert alarm["TreatMissingData"] == "notBreaching", name


def test_engine_alarms_sum_over_every_service(dev: Synth) -> None:
    alarms = _alarms(dev)
    (query,) = alarms["baton-dev-queue-dead-lettered"]["Metrics"]
    assert query["Expression"] == 'SELECT SUM(QueueDeadLettered) FROM "Baton"'
    assert query["Period"] == 300
    leases = alarms["baton-dev-leases-expired"]
    assert leases["Threshold"] == 50
    assert "LeasesExpired" in json.dumps(leases["Metrics"])


def test_api_5xx_alarm_is_a_rate(dev: Synth) -> None:
    alarm = _alarms(dev)["baton-dev-api-5xx-rate"]
    metrics = json.dumps(alarm["Metrics"])
    assert "100 * errors / requests" in metrics
    assert '"5XXError"' in metrics and '"Count"' in metrics


def test_alarm_topic_is_encrypted_and_ssl_only(dev: Synth) -> None:
    (topic,) = dev.props("AWS::SNS::Topic")
    key_id = topic["KmsMasterKeyId"]["Fn::GetAtt"][0]
    key = dev.resources[key_id]["Properties"]
    assert key["EnableKeyRotation"] is True
    cloudwatch = [
        s
        for s in key["KeyPolicy"]["Statement"]
        if s.get("Principal") == {"Service": "cloudwatch.amazonaws.com"}
    ]
    assert cloudwatch and sorted(cloudwatch[0]["Action"]) == ["kms:Decrypt", "kms:GenerateDataKey"]
    (policy,) = dev.props("AWS::SNS::TopicPolicy")
    (deny,) = [s for s in policy["PolicyDocument"]["Statement"] if s["Effect"] == "Deny"]
    assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}


def test_dashboard_shows_engine_lambda_api_and_aurora_metrics(dev: Synth) -> None:
    (dashboard,) = dev.props("AWS::CloudWatch::Dashboard")
    assert dashboard["DashboardName"] == "baton-dev"
    body = json.dumps(dashboard["DashboardBody"])
    for metric in ENGINE_METRICS:
        assert metric in body, metric
    for metric in ("Errors", "Throttles", "Duration", "5XXError", "4XXError", "Latency"):
        assert f'\\"{metric}\\"' in body, metric
    for metric in ("CPUUtilization", "DatabaseConnections", "ServerlessDatabaseCapacity"):
        assert metric in body, metric
