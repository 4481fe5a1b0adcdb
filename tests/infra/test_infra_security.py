"""Least privilege: IAM statements, bucket policies and security groups."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from baton.engine.payloads import RETENTION_ENDED, RETENTION_TAG
from baton.routes import MIGRATION_FUNCTION, SCHEDULED_FUNCTIONS, api_functions
from baton_infra.functions import (
    ARCHIVE_READERS,
    ARCHIVE_WRITER,
    BUCKET_PROBE_FUNCTIONS,
    DATABASE_FREE_FUNCTIONS,
    PAYLOAD_FUNCTIONS,
    RETENTION_FUNCTIONS,
)
from synth_support import Synth, function_logical_ids

pytestmark = [pytest.mark.infra, pytest.mark.xdist_group("infra")]

ALL_FUNCTIONS = {*api_functions(), *SCHEDULED_FUNCTIONS, MIGRATION_FUNCTION}


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _statements(synth: Synth) -> Iterator[tuple[str, dict[str, Any]]]:
    """(logical ID of the policy or role, statement) for every identity-based IAM statement."""
    for cfn_type in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
        for logical_id, resource in synth.of_type(cfn_type).items():
            for statement in resource["Properties"]["PolicyDocument"]["Statement"]:
                yield logical_id, statement
    for logical_id, role in synth.of_type("AWS::IAM::Role").items():
        for policy in role["Properties"].get("Policies", []):
            for statement in policy["PolicyDocument"]["Statement"]:
                yield logical_id, statement


def _role_statements(synth: Synth, function: str) -> list[dict[str, Any]]:
    """Statements of the policies attached to a Baton function's role."""
    fn = synth.resources[function_logical_ids(synth)[function]]["Properties"]
    role_id = fn["Role"]["Fn::GetAtt"][0]
    return [
        statement
        for policy in synth.props("AWS::IAM::Policy")
        if {"Ref": role_id} in policy["Roles"]
        for statement in policy["PolicyDocument"]["Statement"]
    ]


def _actions(statement: dict[str, Any]) -> list[str]:
    return [str(a) for a in _as_list(statement.get("Action", []))]


def test_no_iam_statement_uses_wildcard_actions(every_api_type: Synth) -> None:
    any_synth = every_api_type
    offenders = [
        (logical_id, action)
        for logical_id, statement in _statements(any_synth)
        for action in _actions(statement)
        if "*" in action
    ]
    assert offenders == []


def test_only_the_database_secret_is_readable(any_synth: Synth) -> None:
    """...and the /api key secret, by the conductor function alone."""
    (attachment_id,) = any_synth.of_type("AWS::SecretsManager::SecretTargetAttachment")
    (conductor_key,) = [
        lid for lid in any_synth.of_type("AWS::SecretsManager::Secret") if "ConductorKey" in lid
    ]
    readers = conductor_readers = 0
    for _, statement in _statements(any_synth):
        if any(a.startswith("secretsmanager:") for a in _actions(statement)):
            assert sorted(_actions(statement)) == [
                "secretsmanager:DescribeSecret",
                "secretsmanager:GetSecretValue",
            ]
            resources = statement["Resource"]
            for resource in resources if isinstance(resources, list) else [resources]:
                if resource == {"Ref": conductor_key}:
                    conductor_readers += 1
                    continue
                assert resource == {"Ref": attachment_id}
                readers += 1
    # every function but the viewer's reads it at cold start, and RDS Proxy authenticates with it
    assert readers == len(ALL_FUNCTIONS - DATABASE_FREE_FUNCTIONS) + 1
    assert conductor_readers == 1


def test_the_viewer_function_cannot_read_the_database_secret(dev: Synth) -> None:
    assert {"ui"} == DATABASE_FREE_FUNCTIONS
    for statement in _role_statements(dev, "ui"):
        assert not any(a.startswith("secretsmanager:") for a in _actions(statement))


@pytest.mark.parametrize("name", sorted(ALL_FUNCTIONS))
def test_function_role_grants_only_what_the_function_uses(dev: Synth, name: str) -> None:
    fn = dev.resources[function_logical_ids(dev)[name]]["Properties"]
    role = dev.resources[fn["Role"]["Fn::GetAtt"][0]]["Properties"]
    assert "ManagedPolicyArns" not in role
    assert role["AssumeRolePolicyDocument"]["Statement"][0]["Principal"] == {
        "Service": "lambda.amazonaws.com"
    }
    statements = _role_statements(dev, name)
    log_statement = next(s for s in statements if "logs:PutLogEvents" in _actions(s))
    assert log_statement["Resource"] == {
        "Fn::GetAtt": [fn["LoggingConfig"]["LogGroup"]["Ref"], "Arn"]
    }
    s3_statements = [s for s in statements if any(a.startswith("s3:") for a in _actions(s))]
    if name in BUCKET_PROBE_FUNCTIONS:  # GET /v1/health: HeadBucket on the bucket, no objects
        probe = next(s for s in s3_statements if _actions(s) == ["s3:ListBucket"])
        assert probe["Resource"] == {"Fn::GetAtt": [_payload_bucket_id(dev), "Arn"]}
        s3_statements.remove(probe)
    archive = [s for s in s3_statements if json.dumps(s["Resource"]).endswith('"/archive/*"]]}')]
    if name == ARCHIVE_WRITER:  # writes documents, moves payloads in
        assert [sorted(_actions(s)) for s in archive] == [
            ["s3:DeleteObject", "s3:GetObject", "s3:PutObject", "s3:PutObjectTagging"]
        ]
    elif name in ARCHIVE_READERS:  # reads and deletes archived runs
        assert [sorted(_actions(s)) for s in archive] == [["s3:DeleteObject", "s3:GetObject"]]
    else:
        assert archive == []
    s3_statements = [s for s in s3_statements if s not in archive]
    if name in PAYLOAD_FUNCTIONS:
        expected = {"s3:GetObject", "s3:PutObject"}
        if name in RETENTION_FUNCTIONS:  # tags ended instances' objects, revives, deletes
            expected |= {"s3:DeleteObject", "s3:DeleteObjectTagging", "s3:PutObjectTagging"}
        assert {a for s in s3_statements for a in _actions(s)} == expected
        for s3_statement in s3_statements:
            resource = json.dumps(s3_statement["Resource"])
            assert "PayloadsBucket" in resource
            # Only the payload prefix: never other objects of the bucket.
            assert resource.endswith('"/payloads/*"]]}')
    else:
        assert s3_statements == []
    # "*" resources only where AWS offers no scoping (ENIs for VPC access, X-Ray)
    for statement in statements:
        if statement["Resource"] == "*":
            assert all(a.split(":")[0] in ("ec2", "xray") for a in _actions(statement))


def _payload_bucket_id(synth: Synth) -> str:
    return next(lid for lid in synth.of_type("AWS::S3::Bucket") if lid.startswith("PayloadsBucket"))


def test_payload_bucket_is_granted_to_exactly_the_payload_functions(dev: Synth) -> None:
    granted = {
        name
        for name in ALL_FUNCTIONS
        if any(
            a in ("s3:GetObject", "s3:PutObject")
            for s in _role_statements(dev, name)
            for a in _actions(s)
        )
    }
    # A name in PAYLOAD_FUNCTIONS that is no function would be missing here.
    assert granted == PAYLOAD_FUNCTIONS


@pytest.mark.parametrize("bucket_prefix", ["PayloadsBucket", "LogArchiveBucket"])
def test_buckets_block_public_access_encrypt_and_refuse_plain_http(
    any_synth: Synth, bucket_prefix: str
) -> None:
    ((bucket_id, bucket),) = (
        (lid, r)
        for lid, r in any_synth.of_type("AWS::S3::Bucket").items()
        if lid.startswith(bucket_prefix)
    )
    props = bucket["Properties"]
    assert props["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    (encryption,) = props["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert encryption["ServerSideEncryptionByDefault"]["SSEAlgorithm"] == "AES256"
    (policy,) = (
        p for p in any_synth.props("AWS::S3::BucketPolicy") if p["Bucket"] == {"Ref": bucket_id}
    )
    denials = [s for s in policy["PolicyDocument"]["Statement"] if s["Effect"] == "Deny"]
    assert {"Bool": {"aws:SecureTransport": "false"}} in [s["Condition"] for s in denials]
    assert any("s3:TlsVersion" in json.dumps(s["Condition"]) for s in denials)


def test_payloads_expire_and_are_access_logged(dev: Synth) -> None:
    ((_, bucket),) = (
        (lid, r)
        for lid, r in dev.of_type("AWS::S3::Bucket").items()
        if lid.startswith("PayloadsBucket")
    )
    props = bucket["Properties"]
    rules = {r["Id"]: r for r in props["LifecycleConfiguration"]["Rules"]}
    # The objects of ended instances: tagged by the sweeper (their age restarted), deleted
    # payloadExpiryDays later.
    ended = rules["expire-ended-payloads"]
    assert ended["ExpirationInDays"] == 30
    assert ended["Prefix"] == "payloads/"
    assert ended["TagFilters"] == [{"Key": RETENTION_TAG, "Value": RETENTION_ENDED}]
    # The backstop for objects no instance references, longer than any retention.
    backstop = rules["expire-unreferenced-payloads"]
    assert backstop["Prefix"] == "payloads/"
    assert "TagFilters" not in backstop
    assert backstop["ExpirationInDays"] == 400
    assert backstop["AbortIncompleteMultipartUpload"]["DaysAfterInitiation"] == 1
    assert all(r["Status"] == "Enabled" for r in rules.values())
    assert props["LoggingConfiguration"]["DestinationBucketName"]["Ref"].startswith(
        "LogArchiveBucket"
    )


def test_no_security_group_admits_the_internet(any_synth: Synth) -> None:
    ingress = [
        rule
        for sg in any_synth.props("AWS::EC2::SecurityGroup")
        for rule in sg.get("SecurityGroupIngress", [])
    ] + any_synth.props("AWS::EC2::SecurityGroupIngress")
    assert ingress, "expected explicit ingress rules"
    for rule in ingress:
        assert "CidrIp" not in rule and "CidrIpv6" not in rule, rule
        assert "SourceSecurityGroupId" in rule


def test_database_is_reachable_only_through_the_proxy(dev: Synth) -> None:
    (cluster,) = dev.props("AWS::RDS::DBCluster")
    (cluster_sg,) = [g["Fn::GetAtt"][0] for g in cluster["VpcSecurityGroupIds"]]
    (proxy,) = dev.props("AWS::RDS::DBProxy")
    (proxy_sg,) = [g["Fn::GetAtt"][0] for g in proxy["VpcSecurityGroupIds"]]
    rules = dev.props("AWS::EC2::SecurityGroupIngress")
    into_cluster = [r for r in rules if r["GroupId"] == {"Fn::GetAtt": [cluster_sg, "GroupId"]}]
    (cluster_id,) = dev.of_type("AWS::RDS::DBCluster")
    cluster_port = {"Fn::GetAtt": [cluster_id, "Endpoint.Port"]}  # the cluster's port, 5432
    assert cluster["Port"] == 5432
    assert [(r["SourceSecurityGroupId"]["Fn::GetAtt"][0], r["FromPort"]) for r in into_cluster] == [
        (proxy_sg, cluster_port)
    ]
    (function_sg,) = {
        tuple(g["Fn::GetAtt"][0] for g in fn["VpcConfig"]["SecurityGroupIds"])
        for fn in dev.props("AWS::Lambda::Function")
        if "VpcConfig" in fn
    }
    into_proxy = [r for r in rules if r["GroupId"] == {"Fn::GetAtt": [proxy_sg, "GroupId"]}]
    assert [(r["SourceSecurityGroupId"]["Fn::GetAtt"][0], r["FromPort"]) for r in into_proxy] == [
        (function_sg[0], 5432)
    ]


def test_vpc_has_no_route_to_the_internet(any_synth: Synth) -> None:
    for cfn_type in ("AWS::EC2::NatGateway", "AWS::EC2::InternetGateway", "AWS::EC2::EIP"):
        assert any_synth.of_type(cfn_type) == {}
    for subnet in any_synth.props("AWS::EC2::Subnet"):
        assert subnet["MapPublicIpOnLaunch"] is False
    services = [json.dumps(e["ServiceName"]) for e in any_synth.props("AWS::EC2::VPCEndpoint")]
    assert any(".s3" in s for s in services)
    assert any("secretsmanager" in s for s in services)
    assert any(".logs" in s for s in services)
    (flow_log,) = any_synth.props("AWS::EC2::FlowLog")
    assert flow_log["LogDestinationType"] == "s3"
