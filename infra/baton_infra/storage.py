"""S3 buckets: the payload store (large inputs/outputs behind presigned URLs) and the log archive.

Both block public access, encrypt at rest, refuse plain HTTP and expire objects on a lifecycle
rule. The log archive receives the payload bucket's server access logs and the VPC flow logs.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import Duration
from aws_cdk import aws_s3 as s3
from baton.engine.payloads import KEY_PREFIX as PAYLOAD_KEY_PREFIX
from baton.engine.payloads import RETENTION_ENDED, RETENTION_TAG
from constructs import Construct

from baton_infra.config import DeployConfig

# Every bucket of the stack: private, encrypted at rest (SSE-S3: server access log delivery
# supports no SSE-KMS), TLS 1.2+ only, no ACLs.
PRIVATE_BUCKET: dict[str, Any] = {
    "block_public_access": s3.BlockPublicAccess.BLOCK_ALL,
    "encryption": s3.BucketEncryption.S3_MANAGED,
    "enforce_ssl": True,
    "minimum_tls_version": 1.2,
    "object_ownership": s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
}


class LogArchive(Construct):
    """Destination of S3 server access logs and VPC flow logs (not logged itself: it would loop;
    cdk-nag's S1 recognizes a log destination)."""

    def __init__(self, scope: Construct, construct_id: str, *, config: DeployConfig) -> None:
        super().__init__(scope, construct_id)
        self.bucket = s3.Bucket(
            self,
            "Bucket",
            **PRIVATE_BUCKET,
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="expire-logs",
                    expiration=Duration.days(config.log_retention_days),
                    abort_incomplete_multipart_upload_after=Duration.days(1),
                )
            ],
            removal_policy=config.removal_policy,
            # A dev stack must delete cleanly even with objects left in its buckets.
            auto_delete_objects=config.disposable,
        )


class PayloadStore(Construct):
    """Large workflow/job payloads, uploaded and read through presigned URLs the API issues."""

    def __init__(
        self, scope: Construct, construct_id: str, *, config: DeployConfig, log_bucket: s3.IBucket
    ) -> None:
        super().__init__(scope, construct_id)
        self.bucket = s3.Bucket(
            self,
            "Bucket",
            **PRIVATE_BUCKET,
            server_access_logs_bucket=log_bucket,
            server_access_logs_prefix="s3-access/payloads/",
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="expire-ended-payloads",
                    # The sweeper copies an ended instance's objects onto themselves with this
                    # tag (engine.retention_ops), which restarts their age: they are deleted
                    # payloadExpiryDays after the instance ended, however long it ran.
                    prefix=PAYLOAD_KEY_PREFIX,
                    tag_filters={RETENTION_TAG: RETENTION_ENDED},
                    expiration=Duration.days(config.payload_expiry_days),
                ),
                s3.LifecycleRule(
                    id="expire-unreferenced-payloads",
                    # The backstop: uploads no instance took, values offloaded by a decision
                    # that rolled back. Also the longest a running instance's payloads live.
                    prefix=PAYLOAD_KEY_PREFIX,
                    expiration=Duration.days(config.payload_orphan_expiry_days),
                    # Presigned uploads that never finished leave parts that are billed.
                    abort_incomplete_multipart_upload_after=Duration.days(1),
                ),
            ],
            removal_policy=config.removal_policy,
            # A dev stack must delete cleanly even with objects left in its buckets.
            auto_delete_objects=config.disposable,
        )
