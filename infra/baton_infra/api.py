"""The REST API, generated from ``baton.routes.ROUTED`` (the /v1 API, Conductor's /api and the
viewer at /ui, and the fallbacks under /v1 and /api): one resource/method per route, a Lambda proxy
integration to the route's function, auth on every method but the route table's public ones
(``auth`` none: liveness, the OpenAPI document and the viewer's static assets), which answer
without credentials. The fallbacks (``ANY`` on each resource and on ``/v1/{proxy+}`` and
``/api/{proxy+}``) let a function answer what the table does not serve (404, or 405 on /v1),
after the prefix's credentials, instead of API Gateway's 403 "Missing Authentication Token".

Auth modes (context ``authMode``):
* ``apiKey``: every method requires an API key (``x-api-key``) of the stage's usage plan; keys
  are named in context ``apiKeys`` so rotating one is a context change and a deploy.
* ``iam``: every method requires SigV4 (``AWS_IAM``); callers need ``execute-api:Invoke``, which
  the ``InvokePolicy`` managed policy grants when attached to a worker's role.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence

from aws_cdk import Size
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from baton.routes import CONDUCTOR_TOKEN, ROUTED, Route
from constructs import Construct

from baton_infra.config import DeployConfig
from baton_infra.nag import acknowledge, logical_id

_PATH_PARAM = re.compile(r"{(\w+)}")
BINARY_MEDIA_TYPES = ("application/proto", "application/x-protobuf", "application/connect+proto")
# Route auth values this construct knows how to enforce.
SUPPORTED_AUTH = frozenset({"api_key_or_iam", "none", "conductor_token"})

# API Gateway's own errors (bad key, throttling, oversized body...) answer in the same
# RFC 9457 problem+json shape as the functions' errors, so clients parse one format.
_GATEWAY_ERRORS: tuple[tuple[apigw.ResponseType, str | None], ...] = (
    (apigw.ResponseType.DEFAULT_4_XX, None),
    (apigw.ResponseType.DEFAULT_5_XX, None),
    (apigw.ResponseType.UNAUTHORIZED, "401"),
    (apigw.ResponseType.ACCESS_DENIED, "403"),
    (apigw.ResponseType.INVALID_API_KEY, "403"),
    (apigw.ResponseType.MISSING_AUTHENTICATION_TOKEN, "403"),
    (apigw.ResponseType.INVALID_SIGNATURE, "403"),
    (apigw.ResponseType.EXPIRED_TOKEN, "403"),
    (apigw.ResponseType.REQUEST_TOO_LARGE, "413"),
    (apigw.ResponseType.THROTTLED, "429"),
    (apigw.ResponseType.QUOTA_EXCEEDED, "429"),
    (apigw.ResponseType.INTEGRATION_TIMEOUT, "504"),
)


def path_parameters(path: str) -> list[str]:
    return _PATH_PARAM.findall(path)


class BatonApi(Construct):
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
        self.api = apigw.RestApi(
            self,
            "Api",
            rest_api_name=f"baton-{config.stage}",
            description=f"Baton workflow engine ({config.stage}, auth: {config.auth_mode})",
            endpoint_types=[apigw.EndpointType.REGIONAL],
            # Execution logging (ERROR level) needs the account-level CloudWatch role.
            cloud_watch_role=True,
            # Poll responses carry batches of job inputs: compress what is worth it.
            min_compression_size=Size.kibibytes(1),
            api_key_source_type=apigw.ApiKeySourceType.HEADER,
            # Connect's binary encoding (/rpc): bodies reach the function base64-encoded, and its
            # base64 answers leave as bytes.
            binary_media_types=list(BINARY_MEDIA_TYPES),
            deploy_options=apigw.StageOptions(
                stage_name=config.stage,
                access_log_destination=apigw.LogGroupLogDestination(self.access_logs),
                access_log_format=_access_log_format(),
                logging_level=apigw.MethodLoggingLevel.ERROR,
                data_trace_enabled=False,  # would log request bodies (workflow data)
                tracing_enabled=True,
                throttling_rate_limit=config.api_throttle_rate_limit,
                throttling_burst_limit=config.api_throttle_burst_limit,
            ),
        )
        # The stack exports the URL as ApiUrl; drop RestApi's own hash-named duplicate output.
        self.api.node.try_remove_child("Endpoint")
        # Bodies are validated by the functions against the pydantic models (422 listing every
        # problem); with no request models attached, body validation here is a no-op, and
        # parameter validation checks the path parameters.
        validator = self.api.add_request_validator(
            "RequestValidator", validate_request_body=True, validate_request_parameters=True
        )
        # One integration per function, permission scoped to this API (not one per method), so
        # the functions' resource policies stay small as routes are added.
        integrations: dict[str, apigw.LambdaIntegration] = {}
        self.methods: list[apigw.Method] = []
        for route in routes:
            if route.auth not in SUPPORTED_AUTH:
                raise ValueError(f"{route.method} {route.path}: unsupported auth {route.auth!r}")
            if route.function not in functions:
                raise ValueError(f"{route.method} {route.path}: no function {route.function!r}")
            if route.function not in integrations:
                integrations[route.function] = apigw.LambdaIntegration(
                    functions[route.function], proxy=True, scope_permission_to_method=False
                )
            resource = self.api.root.resource_for_path(route.path)
            method = resource.add_method(
                route.method,
                integrations[route.function],
                authorization_type=(
                    apigw.AuthorizationType.IAM
                    if config.auth_mode == "iam" and route.gateway_auth
                    else apigw.AuthorizationType.NONE
                ),
                api_key_required=config.auth_mode == "apiKey" and route.gateway_auth,
                request_validator=validator,
                request_parameters={
                    f"method.request.path.{name}": True for name in path_parameters(route.path)
                },
            )
            if route.public:
                acknowledge(
                    method,
                    "AwsSolutions-APIG4",
                    f"{route.method} {route.path} is public on purpose: "
                    + (
                        "the viewer's static page and assets hold no data, and every API call "
                        "the page makes carries the user's API key."
                        if route.function == "ui"
                        else "uptime checks and API clients read it without credentials, and "
                        "it returns no workflow data."
                    ),
                )
            if route.auth == CONDUCTOR_TOKEN:
                acknowledge(
                    method,
                    "AwsSolutions-APIG4",
                    f"{route.method} {route.path} is Conductor-compatible: Conductor's SDKs send "
                    "neither API Gateway keys nor SigV4, so the conductor function checks their "
                    "X-Authorization token (from POST /api/token) itself and answers 401/403.",
                )
            self.methods.append(method)
        self._gateway_responses()
        self.api_keys: list[apigw.IApiKey] = []
        self.invoke_policy: iam.ManagedPolicy | None = None
        if config.auth_mode == "apiKey":
            self._api_keys()
        else:
            self._invoke_policy()
        self._acknowledge()

    @property
    def stage(self) -> apigw.Stage:
        return self.api.deployment_stage

    @property
    def url(self) -> str:
        return self.api.url

    def _api_keys(self) -> None:
        config = self._config
        plan = self.api.add_usage_plan(
            "UsagePlan",
            name=f"baton-{config.stage}",
            description="Every Baton API key; the stage throttle applies per key as well",
            throttle=apigw.ThrottleSettings(
                rate_limit=config.api_throttle_rate_limit,
                burst_limit=config.api_throttle_burst_limit,
            ),
            api_stages=[apigw.UsagePlanPerApiStage(api=self.api, stage=self.stage)],
        )
        for name in config.api_key_names:
            # No value given: API Gateway generates it; read it with get-api-key --include-value.
            key = apigw.ApiKey(
                self,
                f"ApiKey-{name}",
                api_key_name=f"baton-{config.stage}-{name}",
                description=f"Baton API key {name!r} ({config.stage})",
                enabled=True,
            )
            plan.add_api_key(key)
            self.api_keys.append(key)

    def _invoke_policy(self) -> None:
        self.invoke_policy = iam.ManagedPolicy(
            self,
            "InvokePolicy",
            description=f"Call every Baton API route of stage {self._config.stage} (SigV4)",
            statements=[
                iam.PolicyStatement(
                    actions=["execute-api:Invoke"],
                    resources=[self.api.arn_for_execute_api(stage=self._config.stage)],
                )
            ],
        )
        acknowledge(
            self.invoke_policy,
            "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:execute-api:<AWS::Region>:"
            f"<AWS::AccountId>:<{logical_id(self.api)}>/{self._config.stage}/*/*]",
            "Workers call every route of this one API stage, so the policy names the stage "
            "and wildcards only method and path.",
        )

    def _gateway_responses(self) -> None:
        for response_type, status in _GATEWAY_ERRORS:
            body = {
                "type": "about:blank",
                "title": "$context.error.responseType",
                "detail": "__MESSAGE__",
                "requestId": "$context.requestId",
            }
            if status is not None:
                body["status"] = "__STATUS__"
            template = (
                json.dumps(body)
                .replace('"__MESSAGE__"', "$context.error.messageString")
                .replace('"__STATUS__"', status or "")
            )
            headers = {"Content-Type": "'application/problem+json'"}
            if status == "429":
                headers["Retry-After"] = "'1'"
            self.api.add_gateway_response(
                f"{response_type.response_type}Response",
                type=response_type,
                status_code=status,
                response_headers=headers,
                templates={"application/json": template},
            )

    def _acknowledge(self) -> None:
        api: Construct = self.api
        acknowledge(
            api,
            "AwsSolutions-APIG3",
            "No WAF: the API is for machine clients with per-key or IAM auth, and stage and "
            "usage-plan throttling cap request rates.",
        )
        acknowledge(
            api,
            "AwsSolutions-COG4",
            "Callers are workers and services, not end users: they authenticate with API keys "
            "or SigV4 (IAM), never Cognito user tokens.",
        )
        if self._config.auth_mode == "apiKey":
            acknowledge(
                api,
                "AwsSolutions-APIG4",
                "Every method requires an API key of the stage's usage plan (authMode apiKey); "
                "use authMode iam for SigV4 authorization.",
            )
        cloud_watch_role = self.api.node.try_find_child("CloudWatchRole")
        if cloud_watch_role is not None:
            acknowledge(
                cloud_watch_role,
                "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
                "AmazonAPIGatewayPushToCloudWatchLogs]",
                "API Gateway's account-level logging role uses the AWS policy made for exactly "
                "this purpose.",
            )


def _access_log_format() -> apigw.AccessLogFormat:
    """One JSON line per request: who (key or IAM principal), what, how long, what came back."""
    fields = {
        "requestId": "$context.requestId",
        "extendedRequestId": "$context.extendedRequestId",
        "requestTime": "$context.requestTime",
        "ip": "$context.identity.sourceIp",
        "apiKeyId": "$context.identity.apiKeyId",
        "caller": "$context.identity.userArn",
        "httpMethod": "$context.httpMethod",
        "resourcePath": "$context.resourcePath",
        "path": "$context.path",
        "status": "$context.status",
        "responseLength": "$context.responseLength",
        "responseLatency": "$context.responseLatency",
        "integrationLatency": "$context.integration.latency",
        "integrationStatus": "$context.integration.status",
        "error": "$context.error.message",
        "xrayTraceId": "$context.xrayTraceId",
    }
    return apigw.AccessLogFormat.custom(json.dumps(fields))
