"""Dashboard, alarms and the alarm topic."""

from __future__ import annotations

import json
from typing import Any

import pytest
from baton.model import TimeoutPolicy
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
    # enforced task definitions
    "TaskTimedOut",
    "TaskPollTimedOut",
    "ConcurrencyLimited",
    "RateLimited",
)
# Totals read the series under `service` alone: a dimensioned metric is also emitted as a series
# of its own with its dimensions, which a plain FROM "Baton" would add to the total.
TOTAL = 'SELECT SUM({}) FROM SCHEMA("Baton", "service")'


def _alarms(synth: Synth) -> dict[str, dict[str, Any]]:
    return {str(p["AlarmName"]): p for p in synth.props("AWS::CloudWatch::Alarm")}


def test_alarms_cover_api_queues_leases_database_and_schedules(dev: Synth) -> None:
    expected = {
        "baton-dev-api-5xx-rate",
        "baton-dev-queue-dead-lettered",
        "baton-dev-leases-expired",
        "baton-dev-task-timed-out",
        "baton-dev-db-cpu-high",
        "baton-dev-db-acu-saturated",
        # The outbox dispatch mode's: silent in polling mode (nothing emits, the DLQ is empty).
        "baton-dev-relay-lag",
        "baton-dev-outbox-depth",
        "baton-dev-dispatch-dead-letters",
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
    assert query["Expression"] == TOTAL.format("QueueDeadLettered")
    assert query["Period"] == 300
    leases = alarms["baton-dev-leases-expired"]
    assert leases["Threshold"] == 50
    assert "LeasesExpired" in json.dumps(leases["Metrics"])


def test_any_task_timeout_in_five_minutes_raises_the_alarm(dev: Synth) -> None:
    alarm = _alarms(dev)["baton-dev-task-timed-out"]
    (query,) = alarm["Metrics"]
    assert query["Expression"] == TOTAL.format("TaskTimedOut")
    assert query["Period"] == 300
    assert alarm["ComparisonOperator"] == "GreaterThanThreshold"
    assert alarm["Threshold"] == dev.stack.config.task_timed_out_alarm_threshold == 0
    assert alarm["EvaluationPeriods"] == 1


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


def _widgets(synth: Synth) -> dict[str, dict[str, Any]]:
    """The dashboard's graph widgets by title, with each reference to a resource as "<ref>"."""
    (dashboard,) = synth.props("AWS::CloudWatch::Dashboard")
    _, parts = dashboard["DashboardBody"]["Fn::Join"]
    body = json.loads("".join(p if isinstance(p, str) else "<ref>" for p in parts))
    return {
        w["properties"]["title"]: w["properties"] for w in body["widgets"] if w["type"] == "metric"
    }


def _expressions(widget: dict[str, Any], axis: str = "left") -> dict[str, str]:
    """label -> Metrics Insights query of a widget's expressions on ``axis``."""
    return {
        m[0]["label"]: m[0]["expression"]
        for m in widget["metrics"]
        if "expression" in m[0] and m[0].get("yAxis", "left") == axis
    }


def test_dashboard_breaks_task_timeouts_down_by_policy(dev: Synth) -> None:
    widget = _widgets(dev)["Task timeouts per minute (by timeoutPolicy)"]
    by_policy = {
        policy.value: 'SELECT SUM(TaskTimedOut) FROM SCHEMA("Baton", "Policy", "service") '
        f"WHERE \"Policy\" = '{policy.value}'"
        for policy in TimeoutPolicy
    }
    assert set(by_policy) == {"RETRY", "TIME_OUT_WF", "ALERT_ONLY"}
    assert _expressions(widget) == {"TaskTimedOut (all)": TOTAL.format("TaskTimedOut"), **by_policy}


def test_dashboard_shows_poll_timeouts_leases_and_task_def_limits(dev: Synth) -> None:
    widgets = _widgets(dev)
    timeouts = _expressions(widgets["Poll and response timeouts per minute"])
    assert sorted(timeouts.values()) == [
        TOTAL.format("LeasesExpired"),
        TOTAL.format("TaskPollTimedOut"),
    ]
    limits = _expressions(widgets["Jobs held back by task definition limits per minute"])
    assert limits == {m: TOTAL.format(m) for m in ("ConcurrencyLimited", "RateLimited")}


def test_scheduled_functions_durations_do_not_flatten_the_api_functions(dev: Synth) -> None:
    widget = _widgets(dev)["Lambda duration p99 (ms; scheduled functions on the right)"]
    axes: dict[str, set[str]] = {"left": set(), "right": set()}
    for metric in widget["metrics"]:
        options = metric[-1]
        axes[options.get("yAxis", "left")].add(options["label"])
    assert axes["right"] == set(SCHEDULED_FUNCTIONS)
    assert axes["left"] and not axes["left"] & axes["right"]
