"""Schema migrations as a CloudFormation custom resource, applied before new code takes traffic.

The migrate function is the provider's ``on_event`` handler. Its properties carry the layer
version ARN (the SQL migrations ship inside ``baton`` in the layer) and the migrate code's
fingerprint, so every deploy that changes either re-runs the migrations; the handler applies
only pending ones and must no-op on Delete. Serving functions depend on this resource, so
CloudFormation updates them only after the schema is current (migrations stay backward
compatible because old and new code overlap during a deploy).
"""

from __future__ import annotations

from aws_cdk import CustomResource
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import custom_resources as cr
from constructs import Construct

from baton_infra.config import DeployConfig
from baton_infra.nag import acknowledge, logical_id

RESOURCE_TYPE = "Custom::BatonSchemaMigration"


class SchemaMigration(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: DeployConfig,
        handler: lambda_.Function,
        layer: lambda_.ILayerVersion,
        code_fingerprint: str,
    ) -> None:
        super().__init__(scope, construct_id)
        log_group = logs.LogGroup(
            self,
            "ProviderLogs",
            retention=config.log_retention,
            removal_policy=config.removal_policy,
        )
        # Our own role instead of the framework's default, which attaches an AWS managed policy.
        role = iam.Role(
            self,
            "ProviderRole",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"baton migration custom-resource framework ({config.stage})",
        )
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[log_group.log_group_arn],
            )
        )
        self.provider = cr.Provider(
            self,
            "Provider",
            on_event_handler=handler,
            log_group=log_group,
            framework_on_event_role=role,
        )
        self.resource = CustomResource(
            self,
            "Resource",
            service_token=self.provider.service_token,
            resource_type=RESOURCE_TYPE,
            properties={
                "LayerVersionArn": layer.layer_version_arn,
                "CodeFingerprint": code_fingerprint,
                "Stage": config.stage,
            },
        )
        acknowledge(
            role,
            f"AwsSolutions-IAM5[Resource::<{logical_id(handler)}.Arn>:*]",
            "The provider framework invokes the migrate function by any version or alias "
            "(the CDK grant); it is limited to that one function.",
        )
