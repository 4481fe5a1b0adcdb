"""Lambda functions, their schedules and the migration custom resource."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from baton import settings
from baton.engine.system_tasks import PASS_CLAIM_SECONDS
from baton.httpcall import MAX_CONNECT_MS, MAX_READ_MS
from baton.routes import MIGRATION_FUNCTION, SCHEDULED_FUNCTIONS, api_functions
from baton_infra import functions
from baton_infra.config import (
    FUNCTION_SIZING,
    LOOP_HEADROOM_SECONDS,
    TICK_SECONDS,
    ConfigError,
    DeployConfig,
    FunctionSizing,
    load_cdk_json_context,
)
from baton_infra.functions import Kind, UnknownFunctionError, function_specs
from synth_support import Synth, function_logical_ids, synthesize

pytestmark = [pytest.mark.infra, pytest.mark.xdist_group("infra")]

ALL_FUNCTIONS = {*api_functions(), *SCHEDULED_FUNCTIONS, MIGRATION_FUNCTION}


def _function(synth: Synth, name: str) -> dict[str, Any]:
    resource: dict[str, Any] = synth.resources[function_logical_ids(synth)[name]]
    return resource


def test_function_set_comes_from_the_route_table(any_synth: Synth) -> None:
    assert set(function_logical_ids(any_synth)) == ALL_FUNCTIONS


def test_specs_classify_functions_by_role() -> None:
    kinds = {spec.name: spec.kind for spec in function_specs()}
    assert kinds[MIGRATION_FUNCTION] == Kind.MIGRATION
    assert all(kinds[name] == Kind.API for name in api_functions())
    assert all(kinds[name] == Kind.SCHEDULED for name in SCHEDULED_FUNCTIONS)


def test_specs_mark_the_payload_functions() -> None:
    marked = {spec.name for spec in function_specs() if spec.payloads}
    assert marked == functions.PAYLOAD_FUNCTIONS


def test_a_payload_function_the_route_table_lacks_fails_the_synth(
    layer_built: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(functions, "PAYLOAD_FUNCTIONS", frozenset({"jobs", "payloads"}))
    with pytest.raises(UnknownFunctionError, match="PAYLOAD_FUNCTIONS names payloads") as error:
        synthesize(tmp_path, {})
    assert error.value.names == ["payloads"]


@pytest.mark.parametrize("name", sorted(ALL_FUNCTIONS))
def test_function_shape(dev: Synth, name: str) -> None:
    props = _function(dev, name)["Properties"]
    assert props["Runtime"] == "python3.12"
    assert props["Architectures"] == ["arm64"]
    # The Connect function's asset is the functions folder (it runs the REST functions' code).
    assert props["Handler"] == ("rpc.handler.handler" if name == "rpc" else "handler.handler")
    assert props["FunctionName"] == f"baton-dev-{name}"
    assert props["TracingConfig"] == {"Mode": "Active"}
    (layer,) = props["Layers"]
    layer_id = layer["Ref"]
    assert dev.resources[layer_id]["Type"] == "AWS::Lambda::LayerVersion"
    vpc = props["VpcConfig"]
    assert len(vpc["SubnetIds"]) == 2
    assert len(vpc["SecurityGroupIds"]) == 1
    log_group = dev.resources[props["LoggingConfig"]["LogGroup"]["Ref"]]["Properties"]
    assert log_group["LogGroupName"] == f"/aws/lambda/baton-dev-{name}"
    assert log_group["RetentionInDays"] == 30


@pytest.mark.parametrize("name", sorted(ALL_FUNCTIONS))
def test_function_environment_points_at_proxy_secret_and_bucket(dev: Synth, name: str) -> None:
    env = _function(dev, name)["Properties"]["Environment"]["Variables"]
    (proxy_id,) = dev.of_type("AWS::RDS::DBProxy")
    (attachment_id,) = dev.of_type("AWS::SecretsManager::SecretTargetAttachment")
    assert env[settings.ENV_DB_HOST] == {"Fn::GetAtt": [proxy_id, "Endpoint"]}
    assert env[settings.ENV_DB_SECRET_ARN] == {"Ref": attachment_id}
    assert env[settings.ENV_DB_NAME] == "baton"
    assert env[settings.ENV_PAYLOAD_BUCKET]["Ref"].startswith("PayloadsBucket")
    assert env[settings.ENV_STAGE] == "dev"
    assert env["POWERTOOLS_SERVICE_NAME"] == f"baton-{name}"
    assert env["POWERTOOLS_METRICS_NAMESPACE"] == "Baton"
    assert env["POWERTOOLS_LOG_LEVEL"] == "INFO"
    # The payload limits of cdk.json's payloadLimits: every function reads them.
    assert env[settings.ENV_STEP_OUTPUT_SOFT_LIMIT] == str(256 * 1024)
    assert env[settings.ENV_WORKFLOW_INPUT_HARD_LIMIT] == str(50 * 1024 * 1024)


def test_all_functions_share_one_layer_built_for_python_312_arm64(dev: Synth) -> None:
    (layer,) = dev.props("AWS::Lambda::LayerVersion")
    assert layer["CompatibleRuntimes"] == ["python3.12"]
    assert layer["CompatibleArchitectures"] == ["arm64"]


def test_reserved_concurrency_comes_from_context(dev: Synth) -> None:
    reserved = {
        name: _function(dev, name)["Properties"].get("ReservedConcurrentExecutions")
        for name in ALL_FUNCTIONS
    }
    # scheduled functions default to 1 (ticks never overlap); cdk.json adds the rest
    expected = {name: 1 for name in SCHEDULED_FUNCTIONS} | load_cdk_json_context()[
        "reservedConcurrency"
    ]
    assert {n: c for n, c in reserved.items() if c is not None} == expected


def test_hot_path_functions_fit_inside_the_api_gateway_timeout(dev: Synth) -> None:
    for name in api_functions():
        assert _function(dev, name)["Properties"]["Timeout"] < 29


def test_the_conductor_function_outlasts_a_synchronous_executions_wait(dev: Synth) -> None:
    from baton.engine.long_poll import MAX_INSTANCE_WAIT_SECONDS

    timeout = _function(dev, "conductor")["Properties"]["Timeout"]
    assert MAX_INSTANCE_WAIT_SECONDS + 2 <= timeout < 29


# Their duty has a deadline of seconds: timeouts, leases, the relay's dispatch latency.
LOOPING = ("sweeper", "reaper", "relay")


@pytest.mark.parametrize("name", LOOPING)
def test_looping_functions_loop_their_duty_until_the_next_tick(dev: Synth, name: str) -> None:
    props = _function(dev, name)["Properties"]
    loop = int(props["Environment"]["Variables"][settings.ENV_DUTY_LOOP_SECONDS])
    assert loop == 59
    # The next tick's first pass comes within 2 s of this invocation's last one...
    assert TICK_SECONDS - loop <= 2
    # ...and the invocation is not cut short: the loop, its 5 s stop margin and a last pass fit.
    assert props["Timeout"] == 75
    assert props["Timeout"] >= loop + LOOP_HEADROOM_SECONDS
    # An overlapping tick is throttled, never run twice at once.
    assert props["ReservedConcurrentExecutions"] == 1


def test_system_tasks_loop_like_the_sweeper_with_room_for_the_last_calls(dev: Synth) -> None:
    """HTTP steps' calls: a scheduled function of its own, looping its long-polling pass for
    59 s, with a timeout that fits the loop and the longest call (connect 30 s + read 60 s), a
    reserved concurrency of 1, in the VPC's app subnets, ticked every minute."""
    props = _function(dev, "system_tasks")["Properties"]
    loop = int(props["Environment"]["Variables"][settings.ENV_DUTY_LOOP_SECONDS])
    assert loop == 59
    assert props["Timeout"] == 180
    # A pass begun at the end of the loop refills freed places for PASS_CLAIM_SECONDS, then
    # waits for its last calls: that fits too.
    assert props["Timeout"] >= loop + PASS_CLAIM_SECONDS + (MAX_CONNECT_MS + MAX_READ_MS) / 1000
    assert props["ReservedConcurrentExecutions"] == 1
    assert props["Handler"] == "handler.handler"
    assert props["VpcConfig"]["SubnetIds"]
    # it may offload a large answer (the step output's soft limit): the payload bucket's name
    assert settings.ENV_PAYLOAD_BUCKET in props["Environment"]["Variables"]


@pytest.mark.parametrize("name", sorted(ALL_FUNCTIONS - {*LOOPING, "system_tasks"}))
def test_other_functions_do_one_pass_per_invocation(dev: Synth, name: str) -> None:
    props = _function(dev, name)["Properties"]
    assert settings.ENV_DUTY_LOOP_SECONDS not in props["Environment"]["Variables"]
    if name in api_functions():
        assert props["Timeout"] < 29


def test_sizing_exceptions_name_functions_of_the_route_table() -> None:
    assert set(FUNCTION_SIZING) <= ALL_FUNCTIONS
    looping = {name for name, sizing in FUNCTION_SIZING.items() if sizing.duty_loop_seconds}
    assert looping == {*LOOPING, "system_tasks"}
    assert looping <= set(SCHEDULED_FUNCTIONS)


@pytest.mark.parametrize(
    ("timeout", "loop", "problem"),
    [(90, TICK_SECONDS, "overlaps the next tick"), (60, 59, "too short for a 59 s loop")],
)
def test_a_loop_that_overlaps_or_outlives_its_invocation_is_refused(
    timeout: int, loop: int, problem: str
) -> None:
    with pytest.raises(ConfigError, match=problem):
        FunctionSizing(memory_mb=512, timeout_seconds=timeout, duty_loop_seconds=loop)


@pytest.mark.parametrize("name", SCHEDULED_FUNCTIONS)
def test_each_scheduled_function_ticks_every_minute(dev: Synth, name: str) -> None:
    function_id = function_logical_ids(dev)[name]
    rules = [
        rule
        for rule in dev.props("AWS::Events::Rule")
        if any(t["Arn"] == {"Fn::GetAtt": [function_id, "Arn"]} for t in rule["Targets"])
    ]
    assert len(rules) == 1
    (rule,) = rules
    assert rule["ScheduleExpression"] == "rate(1 minute)"
    # The outbox relay ticks only in outbox dispatch mode (cdk.json's default is polling).
    assert rule["State"] == ("DISABLED" if name == "relay" else "ENABLED")
    assert rule["Targets"][0]["RetryPolicy"]["MaximumRetryAttempts"] == 0
    invoke_configs = [
        c
        for c in dev.props("AWS::Lambda::EventInvokeConfig")
        if c["FunctionName"] == {"Ref": function_id}
    ]
    assert invoke_configs == [
        {
            "FunctionName": {"Ref": function_id},
            "MaximumEventAgeInSeconds": 60,
            "MaximumRetryAttempts": 0,
            "Qualifier": "$LATEST",
        }
    ]


def test_only_scheduled_functions_are_scheduled(dev: Synth) -> None:
    assert len(dev.of_type("AWS::Events::Rule")) == len(SCHEDULED_FUNCTIONS)


def test_migration_runs_the_migrate_function_when_layer_or_code_changes(dev: Synth) -> None:
    ((_migration_id, migration),) = dev.of_type("Custom::BatonSchemaMigration").items()
    props = migration["Properties"]
    (layer_id,) = dev.of_type("AWS::Lambda::LayerVersion")
    assert props["LayerVersionArn"] == {"Ref": layer_id}
    assert len(props["CodeFingerprint"]) == 64
    provider_fn = dev.resources[props["ServiceToken"]["Fn::GetAtt"][0]]["Properties"]
    migrate_id = function_logical_ids(dev)[MIGRATION_FUNCTION]
    assert {"Fn::GetAtt": [migrate_id, "Arn"]} in provider_fn["Environment"]["Variables"].values()


def test_serving_functions_wait_for_the_migration(dev: Synth) -> None:
    (migration_id,) = dev.of_type("Custom::BatonSchemaMigration")
    ids = function_logical_ids(dev)
    for name in ALL_FUNCTIONS - {MIGRATION_FUNCTION}:
        assert migration_id in dev.resources[ids[name]]["DependsOn"], name
    assert migration_id not in dev.resources[ids[MIGRATION_FUNCTION]].get("DependsOn", [])


def test_migration_waits_for_the_database_path(dev: Synth) -> None:
    ((_, migration),) = dev.of_type("Custom::BatonSchemaMigration").items()
    depends_on = set(migration["DependsOn"])
    for cfn_type in (
        "AWS::RDS::DBProxyTargetGroup",
        "AWS::RDS::DBInstance",
        "AWS::EC2::SecurityGroupIngress",
        "AWS::EC2::VPCEndpoint",
    ):
        assert set(dev.of_type(cfn_type)) <= depends_on, cfn_type


def _config(**overrides: object) -> DeployConfig:
    context = {**load_cdk_json_context(), **overrides}
    return DeployConfig.from_context(context.get)


def test_payload_limits_come_from_context_per_kind_with_defaults() -> None:
    config = _config(payloadLimits='{"stepOutput": {"hardBytes": 100000000}}')
    env = config.payload_limit_environment()
    assert env[settings.ENV_STEP_OUTPUT_HARD_LIMIT] == "100000000"
    assert env[settings.ENV_STEP_OUTPUT_SOFT_LIMIT] == str(256 * 1024)
    assert env[settings.ENV_STEP_INPUT_HARD_LIMIT] == str(50 * 1024 * 1024)
    assert len(env) == 6
    # The environment the functions get reads back into the same limits.
    assert settings.Settings.from_env(env).engine.payload_limits == config.payload_limits


@pytest.mark.parametrize(
    "limits",
    [
        '{"stepOutput": {"softBytes": 10, "hardBytes": 5}}',
        '{"bigOutput": {}}',
        '{"stepInput": {"softBytes": "many"}}',
        '{"stepInput": {"soft": 1}}',
        "[1]",
    ],
)
def test_bad_payload_limits_are_refused(limits: str) -> None:
    with pytest.raises(ConfigError, match="payloadLimits"):
        _config(payloadLimits=limits)


def test_http_allow_reaches_system_tasks_only(layer_built: Path, tmp_path: Path) -> None:
    synth = synthesize(tmp_path, {"httpAllow": "10.20.0.0/16,orders.internal"})
    variables = _function(synth, "system_tasks")["Properties"]["Environment"]["Variables"]
    assert variables[settings.ENV_HTTP_ALLOW] == "10.20.0.0/16,orders.internal"
    others = _function(synth, "jobs")["Properties"]["Environment"]["Variables"]
    assert settings.ENV_HTTP_ALLOW not in others
    with pytest.raises(ConfigError, match="httpAllow: 'not a host!' is neither"):
        synthesize(tmp_path / "bad", {"httpAllow": "not a host!"})


def test_event_sqs_queues_are_what_system_tasks_may_send_to(
    layer_built: Path, tmp_path: Path
) -> None:
    synth = synthesize(tmp_path, {"eventSqsQueues": "order-events,audit.fifo"})
    statements = [
        s
        for p in synth.template.find_resources("AWS::IAM::Policy").values()
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        if s.get("Action") == ["sqs:GetQueueUrl", "sqs:SendMessage"]
    ]
    (statement,) = statements  # the system_tasks function's role only
    text = json.dumps(statement["Resource"])
    assert ":order-events" in text and ":audit.fifo" in text
    with pytest.raises(ConfigError, match="eventSqsQueues: 'no spaces!' is no SQS queue name"):
        synthesize(tmp_path / "bad", {"eventSqsQueues": "no spaces!"})
