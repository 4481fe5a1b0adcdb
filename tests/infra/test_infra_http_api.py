"""The HTTP API option (context apiType http): the same route table on an API Gateway HTTP API,
payload format 1.0 to the same functions; API keys checked by the functions against a Secrets
Manager secret of hashes, or SigV4 by the HTTP API's IAM authorizer. REST stays the default."""

from __future__ import annotations

from typing import Any

import pytest
from baton.routes import ROUTED
from synth_support import Synth, function_logical_ids

pytestmark = [pytest.mark.infra, pytest.mark.xdist_group("infra")]


def _routes(synth: Synth) -> dict[str, dict[str, Any]]:
    return {p["RouteKey"]: p for p in synth.props("AWS::ApiGatewayV2::Route")}


def test_rest_is_the_default_and_http_replaces_it(dev: Synth, http_keys: Synth) -> None:
    assert dev.of_type("AWS::ApiGateway::RestApi") and not dev.of_type("AWS::ApiGatewayV2::Api")
    assert not http_keys.of_type("AWS::ApiGateway::RestApi")
    (api,) = http_keys.props("AWS::ApiGatewayV2::Api")
    assert api["ProtocolType"] == "HTTP"
    outputs = http_keys.json["Outputs"]
    assert outputs["ApiType"]["Value"] == "http" and "ApiKeysSecretArn" in outputs


def test_every_routed_method_is_a_route_to_its_function(http_keys: Synth) -> None:
    routes = _routes(http_keys)
    assert set(routes) == {f"{r.method} {r.path}" for r in ROUTED}
    integrations = {
        logical_id: resource["Properties"]
        for logical_id, resource in http_keys.of_type("AWS::ApiGatewayV2::Integration").items()
    }
    functions = {v: k for k, v in function_logical_ids(http_keys).items()}
    for route in ROUTED:
        target = routes[f"{route.method} {route.path}"]["Target"]["Fn::Join"][1][1]["Ref"]
        integration = integrations[target]
        assert integration["PayloadFormatVersion"] == "1.0"  # the REST API's event shape
        function_id = integration["IntegrationUri"]["Fn::GetAtt"][0]
        assert functions[function_id] == route.function


def test_api_keys_are_checked_by_the_functions_against_the_hashed_keys_secret(
    http_keys: Synth,
) -> None:
    assert all(r.get("AuthorizationType", "NONE") == "NONE" for r in _routes(http_keys).values())
    (secret_id,) = [
        k
        for k, r in http_keys.of_type("AWS::SecretsManager::Secret").items()
        if "API keys" in r["Properties"].get("Description", "")
    ]
    functions = function_logical_ids(http_keys)
    resources = http_keys.resources
    for name in ("instances", "jobs", "definitions", "queues", "schedules"):
        env = resources[functions[name]]["Properties"]["Environment"]["Variables"]
        assert env["BATON_API_KEYS_SECRET_ARN"] == {"Ref": secret_id}
    for name in ("reaper", "sweeper", "migrate"):
        env = resources[functions[name]]["Properties"]["Environment"]["Variables"]
        assert "BATON_API_KEYS_SECRET_ARN" not in env
    # One invoke permission per function for the whole API, not one per route.
    permissions = http_keys.props("AWS::Lambda::Permission")
    from_api = [p for p in permissions if p.get("Principal") == "apigateway.amazonaws.com"]
    assert len(from_api) == len({r.function for r in ROUTED})


def test_iam_auth_uses_the_http_api_iam_authorizer_on_guarded_routes(http_iam: Synth) -> None:
    routes = _routes(http_iam)
    for route in ROUTED:
        auth = routes[f"{route.method} {route.path}"].get("AuthorizationType", "NONE")
        assert auth == ("AWS_IAM" if route.gateway_auth else "NONE"), route
    assert not [
        r
        for r in http_iam.of_type("AWS::SecretsManager::Secret").values()
        if "API keys" in r["Properties"].get("Description", "")
    ]
    assert "InvokePolicyArn" in http_iam.json["Outputs"]


def test_the_default_stage_has_throttling_and_access_logs(http_keys: Synth) -> None:
    (stage,) = http_keys.props("AWS::ApiGatewayV2::Stage")
    assert stage["StageName"] == "$default" and stage["AutoDeploy"] is True
    assert stage["DefaultRouteSettings"]["ThrottlingRateLimit"] > 0
    assert "DestinationArn" in stage["AccessLogSettings"]
