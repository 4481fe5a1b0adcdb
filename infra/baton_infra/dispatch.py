"""The event-driven dispatch mode's broker (docs/dispatch.md): an SQS FIFO queue with a
dead-letter queue, and (in outbox mode) the SQS interface endpoint the relay in the isolated
subnets publishes through.

The queue exists in both modes (an idle queue costs nothing), so switching is the functions'
``BATON_DISPATCH_MODE`` and a deploy, no new resources to wait for; the endpoint, billed per
hour and AZ, and the relay's schedule exist or run only in outbox mode.
"""

from __future__ import annotations

from aws_cdk import CfnOutput, Duration
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from baton_infra.config import DeployConfig
from baton_infra.network import Network

# A message is a wake-up the worker deletes right after its claim: a receive that is neither
# claimed nor deleted within this is delivered again (the claim makes the repeat harmless).
VISIBILITY_TIMEOUT = Duration.seconds(30)
# Deliveries before a message is parked in the DLQ (a worker crashing on the claim round trip,
# or a job type no worker handles). Its job is not lost: polls still serve it.
MAX_RECEIVE_COUNT = 5
RETENTION = Duration.days(4)
DLQ_RETENTION = Duration.days(14)


class DispatchQueue(Construct):
    def __init__(
        self, scope: Construct, construct_id: str, *, config: DeployConfig, network: Network
    ) -> None:
        super().__init__(scope, construct_id)
        name = f"baton-{config.stage}-dispatch"
        self.dead_letters = sqs.Queue(
            self,
            "DeadLetters",
            queue_name=f"{name}-dlq.fifo",
            fifo=True,
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=DLQ_RETENTION,
            removal_policy=config.removal_policy,
        )
        self.queue = sqs.Queue(
            self,
            "Queue",
            queue_name=f"{name}.fifo",
            fifo=True,
            # The relay sends job id + attempt as the deduplication id (never the body's hash).
            content_based_deduplication=False,
            # Dedup and ordering per message group (one per workflow instance), for throughput.
            deduplication_scope=sqs.DeduplicationScope.MESSAGE_GROUP,
            fifo_throughput_limit=sqs.FifoThroughputLimit.PER_MESSAGE_GROUP_ID,
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            visibility_timeout=VISIBILITY_TIMEOUT,
            retention_period=RETENTION,
            dead_letter_queue=sqs.DeadLetterQueue(
                queue=self.dead_letters, max_receive_count=MAX_RECEIVE_COUNT
            ),
            removal_policy=config.removal_policy,
        )
        self.endpoint: ec2.InterfaceVpcEndpoint | None = None
        if config.dispatch_mode == "outbox":
            self.endpoint = network.vpc.add_interface_endpoint(
                "SqsEndpoint",
                service=ec2.InterfaceVpcEndpointAwsService.SQS,
                subnets=network.app_subnets,
                private_dns_enabled=True,
                open=False,
            )
            network.interface_endpoints.append(self.endpoint)
        CfnOutput(
            scope,
            "DispatchQueueUrl",
            value=self.queue.queue_url,
            description="SQS FIFO queue workers receive from in outbox dispatch mode",
        )
        CfnOutput(scope, "DispatchQueueArn", value=self.queue.queue_arn)
