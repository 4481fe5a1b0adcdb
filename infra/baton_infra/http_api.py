"""The HTTP API option (context ``apiType http``): the same functions and the same route table
(``baton.routes.ROUTED``) behind an API Gateway HTTP API (v2) instead of the REST API. HTTP APIs
bill about 70% less per request ($1.00 against $3.50 per million in us-east-1) and add less
latency; they have no usage plans, API keys or gateway responses, so:

* ``authMode apiKey``: the functions check ``x-api-key`` themselves against SHA-256 hashes kept in
  a Secrets Manager secret this construct creates (``ApiKeysSecretArn``; entries made by ``make
  api-key NAME=...``), read with caching and re-read on a miss, so a key added to the secret
  works without a deploy (``functions/_lib/baton_lambda/api_keys.py``). No key is a 401, a wrong
  one a 403, both problem+json.
* ``authMode iam``: the HTTP API's IAM authorizer checks SigV4 on every guarded route; the
  ``InvokePolicy`` managed policy grants ``execute-api:Invoke`` as with the REST API.

The integrations use payload format 1.0, the REST API's event shape, so the functions serve both
unchanged. One ``$default`` stage (no stage prefix in paths), auto-deployed, with the REST API's
throttle and a JSON access log. Each function gets one invoke permission for the whole API (not
one per route: the Conductor function alone has about sixty).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from aws_cdk import Stack
from aws_cdk import aws_apigatewayv2 as apigw2
from aws_cdk import aws_apigatewayv2_authorizers as authorizers
from aws_cdk import aws_apigatewayv2_integrations as integrations
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from baton.routes import ROUTED, Route
from constructs import Construct

from baton_infra.config import DeployConfig
from baton_infra.nag import acknowledge, logical_id

# API Gateway's path template for a greedy parameter is the same in both API types.
_METHODS = {m.value: m for m in apigw2.HttpMethod}


class BatonHttpApi(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: DeployConfig,
        functions: Mapping[str, lambda_.IFunction],
        routes: Sequence[Route] = ROUTED,
    ) -> None:
        super().__init__(scope, construct_id)
        self._config = config
        self.access_logs = logs.LogGroup(
            self,
            "AccessLogs",
            retention=config.log_retention,
            removal_policy=config.removal_policy,
        )
        self.api = apigw2.HttpApi(
            self,
            "Api",
            api_name=f"baton-{config.stage}",
            description=f"Baton workflow engine ({config.stage}, auth: {config.auth_mode})",
            create_default_stage=False,
        )
        self.stage = apigw2.HttpStage(
            self,
            "DefaultStage",
            http_api=self.api,
            auto_deploy=True,
            throttle=apigw2.ThrottleSettings(
                rate_limit=config.api_throttle_rate_limit,
                burst_limit=config.api_throttle_burst_limit,
            ),
        )
        stage_resource = self.stage.node.default_child
        assert isinstance(stage_resource, apigw2.CfnStage)
        stage_resource.access_log_settings = apigw2.CfnStage.AccessLogSettingsProperty(
            destination_arn=self.access_logs.log_group_arn, format=_access_log_format()
        )
        iam_auth = authorizers.HttpIamAuthorizer() if config.auth_mode == "iam" else None
        bound: dict[str, integrations.HttpLambdaIntegration] = {}
        for route in routes:
            if route.function not in functions:
                raise ValueError(f"{route.method} {route.path}: no function {route.function!r}")
            if route.function not in bound:
                bound[route.function] = integrations.HttpLambdaIntegration(
                    f"{route.function}-integration",
                    functions[route.function],
                    payload_format_version=apigw2.PayloadFormatVersion.VERSION_1_0,
                    scope_permission_to_route=False,
                )
            (added,) = self.api.add_routes(
                path=route.path,
                methods=[_METHODS[route.method]],
                integration=bound[route.function],
                authorizer=iam_auth if route.gateway_auth else None,
            )
            if iam_auth is None or not route.gateway_auth:
                acknowledge(added, "AwsSolutions-APIG4", _why_no_authorizer(route, config))
        self.url = self.api.api_endpoint + "/"
        self.invoke_policy: iam.ManagedPolicy | None = None
        if config.auth_mode == "iam":
            self._invoke_policy()
        acknowledge(
            self.api,
            "AwsSolutions-APIG4",
            "Routes are authorized one by one (IAM authorizer, or the functions' own key check).",
        )

    def _invoke_policy(self) -> None:
        arn = Stack.of(self).format_arn(
            service="execute-api", resource=self.api.api_id, resource_name="*/*/*"
        )
        self.invoke_policy = iam.ManagedPolicy(
            self,
            "InvokePolicy",
            description=f"Call every Baton API route of stage {self._config.stage} (SigV4)",
            statements=[iam.PolicyStatement(actions=["execute-api:Invoke"], resources=[arn])],
        )
        acknowledge(
            self.invoke_policy,
            "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:execute-api:<AWS::Region>:"
            f"<AWS::AccountId>:<{logical_id(self.api)}>/*/*/*]",
            "Workers call every route of this one HTTP API, so the policy names the API and "
            "wildcards only stage, method and path.",
        )


def _why_no_authorizer(route: Route, config: DeployConfig) -> str:
    if route.public:
        return (
            f"{route.method} {route.path} is public on purpose: it returns no workflow data "
            "(liveness, the contract, the viewer's static page)."
        )
    if not route.gateway_auth:
        return (
            f"{route.method} {route.path} is Conductor-compatible: the conductor function checks "
            "its X-Authorization token itself and answers 401/403."
        )
    assert config.auth_mode == "apiKey"
    return (
        f"{route.method} {route.path}: HTTP APIs have no API keys; the function checks "
        "x-api-key against the hashed keys in Secrets Manager and answers 401/403."
    )


def _access_log_format() -> str:
    """One JSON line per request: who, what, how long, what came back."""
    fields = {
        "requestId": "$context.requestId",
        "requestTime": "$context.requestTime",
        "ip": "$context.identity.sourceIp",
        "caller": "$context.identity.userArn",
        "httpMethod": "$context.httpMethod",
        "routeKey": "$context.routeKey",
        "path": "$context.path",
        "status": "$context.status",
        "responseLength": "$context.responseLength",
        "responseLatency": "$context.responseLatency",
        "integrationLatency": "$context.integrationLatency",
        "integrationStatus": "$context.integrationStatus",
        "error": "$context.error.message",
    }
    return json.dumps(fields)
