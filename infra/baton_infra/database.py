"""Aurora PostgreSQL Serverless v2 behind RDS Proxy: all of Baton's state.

Lambdas never connect to the cluster directly: the proxy pools and multiplexes their
connections (one per warm sandbox) onto a bounded number of database connections, and it is
the only client the cluster's security group admits.
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_logs as logs
from aws_cdk import aws_rds as rds
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct, IConstruct

from baton_infra.config import DeployConfig
from baton_infra.nag import acknowledge
from baton_infra.network import Network

DB_NAME = "baton"
DB_PORT = 5432
# Same major version as the embedded local Postgres (pgserver ships 16), so SQL behaves alike.
ENGINE_VERSION = rds.AuroraPostgresEngineVersion.VER_16_13


class Database(Construct):
    def __init__(
        self, scope: Construct, construct_id: str, *, config: DeployConfig, network: Network
    ) -> None:
        super().__init__(scope, construct_id)
        cluster_id = f"baton-{config.stage}"
        cluster_sg = ec2.SecurityGroup(
            self,
            "ClusterSecurityGroup",
            vpc=network.vpc,
            description="Aurora cluster: admits the RDS Proxy only",
            allow_all_outbound=False,
        )
        # Created here (not through the cluster's log-retention option, which adds a Lambda)
        # so the exported PostgreSQL log has a retention.
        postgres_log = logs.LogGroup(
            self,
            "PostgresLog",
            log_group_name=f"/aws/rds/cluster/{cluster_id}/postgresql",
            retention=config.log_retention,
            removal_policy=config.removal_policy,
        )
        self.cluster = rds.DatabaseCluster(
            self,
            "Cluster",
            cluster_identifier=cluster_id,
            engine=rds.DatabaseClusterEngine.aurora_postgres(version=ENGINE_VERSION),
            writer=rds.ClusterInstance.serverless_v2(
                "Writer",
                publicly_accessible=False,
                auto_minor_version_upgrade=True,
                enable_performance_insights=True,
            ),
            serverless_v2_min_capacity=config.db_min_acu,
            serverless_v2_max_capacity=config.db_max_acu,
            vpc=network.vpc,
            vpc_subnets=network.db_subnets,
            security_groups=[cluster_sg],
            port=DB_PORT,
            credentials=rds.Credentials.from_generated_secret("baton"),
            default_database_name=DB_NAME,
            storage_encrypted=True,
            parameters={
                # Statements slower than this land in the exported log: the claim query
                # must stay fast as terminal rows pile up, and this is where it shows first.
                "log_min_duration_statement": "500",
            },
            backup=rds.BackupProps(
                retention=Duration.days(config.db_backup_retention_days),
                preferred_window="03:00-04:00",
            ),
            preferred_maintenance_window="sun:04:30-sun:05:30",
            cloudwatch_logs_exports=["postgresql"],
            enable_performance_insights=True,  # 7 days of Performance Insights are free
            copy_tags_to_snapshot=True,
            deletion_protection=not config.disposable,
            removal_policy=config.removal_policy,
        )
        self.cluster.node.add_dependency(postgres_log)
        secret = self.cluster.secret
        assert secret is not None  # from_generated_secret always creates one
        self.secret: secretsmanager.ISecret = secret
        # A retained cluster is useless without its master password: keep the secret with it.
        generated = self.cluster.node.find_child("Secret")
        assert isinstance(generated, secretsmanager.Secret)
        generated.apply_removal_policy(config.removal_policy)

        self.proxy = self.cluster.add_proxy(
            "Proxy",
            db_proxy_name=f"baton-{config.stage}",
            secrets=[secret],
            vpc=network.vpc,
            vpc_subnets=network.db_subnets,
            security_groups=[
                ec2.SecurityGroup(
                    self,
                    "ProxySecurityGroup",
                    vpc=network.vpc,
                    description="RDS Proxy: admits the Baton functions on 5432",
                )
            ],
            require_tls=True,
            iam_auth=False,
            # Fail a connection attempt well inside the API functions' timeout, so the engine
            # answers 503 + Retry-After instead of the gateway timing out.
            borrow_timeout=Duration.seconds(10),
            max_connections_percent=90,  # headroom for migrations and an operator's psql
            idle_client_timeout=Duration.minutes(30),
        )
        self._acknowledge(config)

    def allow_from(self, peer: ec2.IConnectable) -> None:
        """Let ``peer`` (a function) open connections to the proxy."""
        self.proxy.connections.allow_from(peer, ec2.Port.tcp(DB_PORT), "Baton function to proxy")

    def _acknowledge(self, config: DeployConfig) -> None:
        cluster: IConstruct = self.cluster
        acknowledge(
            cluster,
            "AwsSolutions-RDS6",
            "Functions authenticate to RDS Proxy with the Secrets Manager credentials by design; "
            "IAM database authentication would need a token per connection.",
        )
        acknowledge(
            cluster,  # the generated secret is the cluster's child
            "AwsSolutions-SMG4",
            "Warm functions cache the password read at cold start, so rotation must wait until "
            "the engine re-reads the secret on an authentication failure.",
        )
        if config.disposable:
            acknowledge(
                cluster,
                "AwsSolutions-RDS10",
                "Dev stages are disposable by design; every other stage enables deletion "
                "protection and retains the cluster.",
            )
