"""The VPC: isolated subnets only (no NAT, no internet route), VPC endpoints for what the
functions call, and flow logs to the log archive.

Functions reach Aurora through RDS Proxy inside the VPC, Secrets Manager through an interface
endpoint and S3 through a gateway endpoint (free). Lambda's own logs and EMF metrics leave through
the Lambda service, not the function's network interface; X-Ray segments go to the daemon Lambda
runs at a link-local address. If traces were missing after a deploy, an X-Ray interface endpoint
(``InterfaceVpcEndpointAwsService.XRAY``) is the fix.
"""

from __future__ import annotations

from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_s3 as s3
from constructs import Construct

from baton_infra.config import DeployConfig

APP_SUBNETS = "app"
DB_SUBNETS = "db"


class Network(Construct):
    def __init__(
        self, scope: Construct, construct_id: str, *, config: DeployConfig, log_bucket: s3.IBucket
    ) -> None:
        super().__init__(scope, construct_id)
        self.vpc = ec2.Vpc(
            self,
            "Vpc",
            ip_addresses=ec2.IpAddresses.cidr("10.40.0.0/16"),
            # Two AZs: Aurora needs subnets in two, and every interface endpoint is billed per AZ.
            max_azs=2,
            nat_gateways=0,
            subnet_configuration=[
                ec2.SubnetConfiguration(
                    name=APP_SUBNETS, subnet_type=ec2.SubnetType.PRIVATE_ISOLATED, cidr_mask=22
                ),
                ec2.SubnetConfiguration(
                    name=DB_SUBNETS, subnet_type=ec2.SubnetType.PRIVATE_ISOLATED, cidr_mask=24
                ),
            ],
            restrict_default_security_group=True,
            flow_logs={
                "FlowLogs": ec2.FlowLogOptions(
                    destination=ec2.FlowLogDestination.to_s3(log_bucket, "vpc-flow-logs/"),
                    traffic_type=ec2.FlowLogTrafficType.ALL,
                )
            },
        )
        self.app_subnets = ec2.SubnetSelection(subnet_group_name=APP_SUBNETS)
        self.db_subnets = ec2.SubnetSelection(subnet_group_name=DB_SUBNETS)

        self.vpc.add_gateway_endpoint(
            "S3Endpoint", service=ec2.GatewayVpcEndpointAwsService.S3, subnets=[self.app_subnets]
        )
        # Interface endpoints admit only the security groups allowed in explicitly
        # (open=False), not the whole VPC CIDR.
        self.interface_endpoints: list[ec2.InterfaceVpcEndpoint] = [
            # Functions read the database secret at cold start.
            self.vpc.add_interface_endpoint(
                "SecretsManagerEndpoint",
                service=ec2.InterfaceVpcEndpointAwsService.SECRETS_MANAGER,
                subnets=self.app_subnets,
                private_dns_enabled=True,
                open=False,
            )
        ]
        if config.vpc_logs_endpoint:
            # Only for code that calls the CloudWatch Logs API itself (Lambda's log delivery
            # does not need it); off saves one endpoint's hourly charge per AZ.
            self.interface_endpoints.append(
                self.vpc.add_interface_endpoint(
                    "LogsEndpoint",
                    service=ec2.InterfaceVpcEndpointAwsService.CLOUDWATCH_LOGS,
                    subnets=self.app_subnets,
                    private_dns_enabled=True,
                    open=False,
                )
            )

    def allow_endpoints_from(self, peer: ec2.IConnectable) -> None:
        for endpoint in self.interface_endpoints:
            endpoint.connections.allow_default_port_from(peer, "Baton functions to AWS APIs")
