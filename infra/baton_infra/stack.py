"""The one stack: a thin composition of the constructs, plus its outputs."""

from __future__ import annotations

from typing import Any

from aws_cdk import Aws, CfnOutput, Fn, Stack
from baton.routes import MIGRATION_FUNCTION
from constructs import Construct

from baton_infra.api import BatonApi
from baton_infra.archive import ArchiveCatalog
from baton_infra.config import DeployConfig
from baton_infra.database import Database
from baton_infra.dispatch import DispatchQueue
from baton_infra.functions import BatonFunctions
from baton_infra.http_api import BatonHttpApi
from baton_infra.migration import SchemaMigration
from baton_infra.network import Network
from baton_infra.observability import Observability
from baton_infra.schedules import Schedules
from baton_infra.storage import LogArchive, PayloadStore


class BatonStack(Stack):
    def __init__(
        self, scope: Construct, construct_id: str, *, config: DeployConfig, **kwargs: Any
    ) -> None:
        super().__init__(
            scope,
            construct_id,
            description=f"Baton workflow engine, stage {config.stage}",
            # Only disposable stages can be deleted with one command.
            termination_protection=not config.disposable,
            tags={"project": "baton", "stage": config.stage},
            **kwargs,
        )
        self.config = config
        log_archive = LogArchive(self, "LogArchive", config=config)
        self.network = Network(self, "Network", config=config, log_bucket=log_archive.bucket)
        self.database = Database(self, "Database", config=config, network=self.network)
        self.payloads = PayloadStore(self, "Payloads", config=config, log_bucket=log_archive.bucket)
        # Athena's view of the archive of instances past their retention (docs/archive.md).
        self.archive = ArchiveCatalog(self, "Archive", config=config, bucket=self.payloads.bucket)
        self.dispatch = DispatchQueue(self, "Dispatch", config=config, network=self.network)
        self.functions = BatonFunctions(
            self,
            "Functions",
            config=config,
            network=self.network,
            database=self.database,
            payload_bucket=self.payloads.bucket,
            dispatch_queue=self.dispatch.queue,
        )
        self.migration = SchemaMigration(
            self,
            "Migration",
            config=config,
            handler=self.functions.migration,
            layer=self.functions.layer,
            code_fingerprint=self.functions.code_fingerprint(MIGRATION_FUNCTION),
        )
        # The migrate function connects through the proxy (its target, its security-group
        # rules) and reads the secret through the VPC endpoint: all must exist before it runs.
        self.migration.resource.node.add_dependency(self.database, self.network)
        for fn in self.functions.serving():
            fn.node.add_dependency(self.migration.resource)
        self.api: BatonApi | BatonHttpApi = (
            BatonHttpApi(self, "HttpApi", config=config, functions=self.functions.by_name)
            if config.api_type == "http"
            else BatonApi(self, "Api", config=config, functions=self.functions.by_name)
        )
        scheduled = self.functions.scheduled()
        # The relay ticks only in outbox mode; in polling mode there is nothing to drain (a
        # job created before switching back is still served by polls).
        paused = frozenset() if config.dispatch_mode == "outbox" else frozenset({"relay"})
        self.schedules = Schedules(self, "Schedules", functions=scheduled, paused=paused)
        self.observability = Observability(
            self,
            "Observability",
            config=config,
            functions=self.functions.by_name,
            scheduled=list(scheduled),
            api_stage=self.api.stage,
            cluster=self.database.cluster,
            proxy=self.database.proxy,
            dispatch=self.dispatch,
        )
        self._outputs()

    def _outputs(self) -> None:
        CfnOutput(self, "ApiUrl", value=self.api.url, description="Base URL (add /v1/...)")
        CfnOutput(self, "AuthMode", value=self.config.auth_mode)
        CfnOutput(self, "ApiType", value=self.config.api_type)
        if self.functions.api_keys is not None:
            CfnOutput(
                self,
                "ApiKeysSecretArn",
                value=self.functions.api_keys.secret_arn,
                description="Hashed API keys the functions check; add entries from make api-key",
            )
        if isinstance(self.api, BatonApi) and self.api.api_keys:
            CfnOutput(
                self,
                "ApiKeyIds",
                value=Fn.join(",", [key.key_id for key in self.api.api_keys]),
                description="aws apigateway get-api-key --include-value --api-key <id>",
            )
        if self.api.invoke_policy is not None:
            CfnOutput(
                self,
                "InvokePolicyArn",
                value=self.api.invoke_policy.managed_policy_arn,
                description="Attach to worker roles to call the API with SigV4",
            )
        CfnOutput(self, "PayloadBucket", value=self.payloads.bucket.bucket_name)
        CfnOutput(
            self,
            "ArchiveTable",
            value=f"{self.archive.database_name}.{self.archive.table_name}",
            description="Athena: the archived instances (docs/archive.md)",
        )
        CfnOutput(self, "DbProxyEndpoint", value=self.database.proxy.endpoint)
        CfnOutput(self, "DbSecretArn", value=self.database.secret.secret_arn)
        CfnOutput(self, "AlarmTopicArn", value=self.observability.topic.topic_arn)
        CfnOutput(
            self,
            "DashboardUrl",
            value=f"https://console.aws.amazon.com/cloudwatch/home?region={Aws.REGION}"
            f"#dashboards:name={self.observability.dashboard.dashboard_name}",
        )
