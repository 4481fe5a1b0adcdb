"""The API Gateway REST API is the route table, with auth on every method."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk.assertions import Match
from baton.routes import (
    CONDUCTOR_ROUTES,
    FALLBACK_ROUTES,
    ROUTED,
    ROUTES,
    SERVED_ROUTES,
    UI_ROUTES,
    Route,
)
from baton_infra.api import path_parameters
from synth_support import Synth, function_logical_ids

pytestmark = [pytest.mark.infra, pytest.mark.xdist_group("infra")]


def _resource_paths(synth: Synth) -> dict[str, str]:
    """Logical ID of every API Gateway resource -> its full path (/v1/...)."""
    resources = synth.of_type("AWS::ApiGateway::Resource")
    paths: dict[str, str] = {}

    def path_of(logical_id: str) -> str:
        if logical_id not in paths:
            props = resources[logical_id]["Properties"]
            parent = props["ParentId"]
            prefix = path_of(parent["Ref"]) if "Ref" in parent else ""
            paths[logical_id] = f"{prefix}/{props['PathPart']}"
        return paths[logical_id]

    for logical_id in resources:
        path_of(logical_id)
    return paths


def _methods(synth: Synth) -> dict[tuple[str, str], dict[str, Any]]:
    """(HTTP method, path) -> method properties."""
    paths = _resource_paths(synth)

    def path(resource_id: dict[str, Any]) -> str:
        # The API's root resource is no AWS::ApiGateway::Resource: RootResourceId of the API.
        return paths[resource_id["Ref"]] if "Ref" in resource_id else "/"

    return {
        (props["HttpMethod"], path(props["ResourceId"])): props
        for props in synth.props("AWS::ApiGateway::Method")
    }


def _function_of(synth: Synth, method: dict[str, Any]) -> str:
    """The logical ID of the Lambda function a proxy integration invokes."""
    parts = method["Integration"]["Uri"]["Fn::Join"][1]
    return str(next(p["Fn::GetAtt"][0] for p in parts if isinstance(p, dict) and "Fn::GetAtt" in p))


# Conductor's routes are checked by their function (below), not by the gateway.
PRIVATE = [r for r in ROUTES + UI_ROUTES if not r.public]
PRIVATE += [r for r in FALLBACK_ROUTES if r.gateway_auth]  # /v1's: the key first, then 404/405
PUBLIC = [r for r in SERVED_ROUTES if r.public]


@pytest.mark.parametrize("route", PRIVATE, ids=lambda r: f"{r.method} {r.path}")
def test_every_route_is_a_method_requiring_an_api_key(dev: Synth, route: Route) -> None:
    method = _methods(dev)[(route.method, route.path)]
    assert method["ApiKeyRequired"] is True
    assert method["AuthorizationType"] == "NONE"
    assert method["Integration"]["Type"] == "AWS_PROXY"
    assert _function_of(dev, method) == function_logical_ids(dev)[route.function]
    assert method["RequestParameters"] == {
        f"method.request.path.{name}": True for name in path_parameters(route.path)
    }
    assert "RequestValidatorId" in method


@pytest.mark.parametrize("route", PRIVATE, ids=lambda r: f"{r.method} {r.path}")
def test_every_route_requires_sigv4_in_iam_mode(prod_iam: Synth, route: Route) -> None:
    method = _methods(prod_iam)[(route.method, route.path)]
    assert method["AuthorizationType"] == "AWS_IAM"
    assert method.get("ApiKeyRequired", False) is False
    assert _function_of(prod_iam, method) == function_logical_ids(prod_iam)[route.function]


@pytest.mark.parametrize("route", PUBLIC, ids=lambda r: f"{r.method} {r.path}")
def test_public_routes_need_no_credentials_in_either_mode(any_synth: Synth, route: Route) -> None:
    method = _methods(any_synth)[(route.method, route.path)]
    assert method["AuthorizationType"] == "NONE"
    assert method.get("ApiKeyRequired", False) is False
    assert _function_of(any_synth, method) == function_logical_ids(any_synth)[route.function]


CONDUCTOR_CHECKED = [r for r in CONDUCTOR_ROUTES if not r.public]
CONDUCTOR_CHECKED += [r for r in FALLBACK_ROUTES if r.function == "conductor"]


@pytest.mark.parametrize("route", CONDUCTOR_CHECKED, ids=lambda r: f"{r.method} {r.path}")
def test_conductor_routes_are_checked_by_their_function_in_either_mode(
    any_synth: Synth, route: Route
) -> None:
    """Conductor's SDKs send neither API keys nor SigV4: the conductor function checks the
    X-Authorization token itself."""
    method = _methods(any_synth)[(route.method, route.path)]
    assert method["AuthorizationType"] == "NONE"
    assert method.get("ApiKeyRequired", False) is False
    assert _function_of(any_synth, method) == function_logical_ids(any_synth)["conductor"]


def test_the_conductor_function_reads_a_key_secret_of_its_own(dev: Synth) -> None:
    secrets = [
        lid
        for lid, r in dev.resources.items()
        if r["Type"] == "AWS::SecretsManager::Secret" and "ConductorKey" in lid
    ]
    assert len(secrets) == 1
    fn = dev.resources[function_logical_ids(dev)["conductor"]]["Properties"]
    env = fn["Environment"]["Variables"]
    assert env["BATON_CONDUCTOR_KEY_SECRET_ARN"] == {"Ref": secrets[0]}


def test_api_has_exactly_the_routes_of_the_table(any_synth: Synth) -> None:
    assert set(_methods(any_synth)) == {(r.method, r.path) for r in ROUTED}


def test_unserved_paths_under_v1_and_api_reach_a_function_not_api_gateways_403(
    dev: Synth,
) -> None:
    """Without a catch-all, API Gateway answers a path it has no resource for with its own 403
    "Missing Authentication Token", even to a valid key or token."""
    methods = _methods(dev)
    for greedy, function in (("/v1/{proxy+}", "definitions"), ("/api/{proxy+}", "conductor")):
        method = methods[("ANY", greedy)]
        assert _function_of(dev, method) == function_logical_ids(dev)[function]
    assert methods[("ANY", "/v1/{proxy+}")]["ApiKeyRequired"] is True
    assert methods[("ANY", "/api/{proxy+}")].get("ApiKeyRequired", False) is False
    # Every resource of /v1 and /api answers the methods it does not serve through its function.
    served = {r.path for r in ROUTES + CONDUCTOR_ROUTES}
    assert served <= {path for (verb, path) in methods if verb == "ANY"}


def test_path_parameters_come_from_braces() -> None:
    assert path_parameters("/v1/instances/{id}/user-tasks/{stepId}/complete") == ["id", "stepId"]
    assert path_parameters("/v1/jobs/poll") == []


def test_api_key_mode_has_a_usage_plan_with_every_named_key(dev: Synth) -> None:
    dev.template.resource_count_is("AWS::ApiGateway::ApiKey", 1)
    dev.template.has_resource_properties(
        "AWS::ApiGateway::ApiKey", {"Name": "baton-dev-default", "Enabled": True}
    )
    dev.template.has_resource_properties(
        "AWS::ApiGateway::UsagePlan",
        {
            "Throttle": {"RateLimit": 500, "BurstLimit": 1000},
            "ApiStages": [Match.object_like({"Stage": Match.any_value()})],
        },
    )
    dev.template.resource_count_is("AWS::ApiGateway::UsagePlanKey", 1)
    assert "ApiKeyIds" in dev.json["Outputs"]


def test_iam_mode_has_no_keys_and_an_invoke_policy_for_workers(prod_iam: Synth) -> None:
    prod_iam.template.resource_count_is("AWS::ApiGateway::ApiKey", 0)
    prod_iam.template.resource_count_is("AWS::ApiGateway::UsagePlan", 0)
    (policy,) = prod_iam.props("AWS::IAM::ManagedPolicy")
    (statement,) = policy["PolicyDocument"]["Statement"]
    assert statement["Action"] == "execute-api:Invoke"
    assert "/prod/*/*" in json.dumps(statement["Resource"])
    assert "InvokePolicyArn" in prod_iam.json["Outputs"]


def test_stage_logs_access_throttles_and_traces(dev: Synth) -> None:
    (stage,) = dev.props("AWS::ApiGateway::Stage")
    assert stage["StageName"] == "dev"
    assert stage["TracingEnabled"] is True
    access_format = json.loads(stage["AccessLogSetting"]["Format"])
    assert {"requestId", "status", "apiKeyId", "caller", "responseLatency"} <= set(access_format)
    (settings,) = stage["MethodSettings"]
    assert settings["LoggingLevel"] == "ERROR"
    assert settings["DataTraceEnabled"] is False
    assert settings["ThrottlingRateLimit"] == 500
    assert settings["ThrottlingBurstLimit"] == 1000
    destination = json.dumps(stage["AccessLogSetting"]["DestinationArn"])
    (log_group_id,) = (lid for lid in dev.of_type("AWS::Logs::LogGroup") if lid in destination)
    assert dev.resources[log_group_id]["Properties"]["RetentionInDays"] == 30


def test_request_validator_checks_parameters_and_bodies(any_synth: Synth) -> None:
    any_synth.template.has_resource_properties(
        "AWS::ApiGateway::RequestValidator",
        {"ValidateRequestBody": True, "ValidateRequestParameters": True},
    )


def test_gateway_errors_are_problem_json(dev: Synth) -> None:
    responses = {r["ResponseType"]: r for r in dev.props("AWS::ApiGateway::GatewayResponse")}
    assert {"DEFAULT_4XX", "DEFAULT_5XX", "INVALID_API_KEY", "THROTTLED"} <= set(responses)
    for response in responses.values():
        headers = response["ResponseParameters"]
        assert headers["gatewayresponse.header.Content-Type"] == "'application/problem+json'"
    throttled = responses["THROTTLED"]
    assert throttled["StatusCode"] == "429"
    assert throttled["ResponseParameters"]["gatewayresponse.header.Retry-After"] == "'1'"
    template = throttled["ResponseTemplates"]["application/json"]
    assert '"status": 429' in template
    assert '"detail": $context.error.messageString' in template


def test_one_api_scoped_permission_per_api_function(any_synth: Synth) -> None:
    api_permissions = [
        p
        for p in any_synth.props("AWS::Lambda::Permission")
        if p["Principal"] == "apigateway.amazonaws.com"
    ]
    assert len(api_permissions) == len({r.function for r in SERVED_ROUTES})
