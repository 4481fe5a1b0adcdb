"""Aurora Serverless v2, RDS Proxy and what a protected stage keeps."""

from __future__ import annotations

import pytest
from synth_support import Synth

pytestmark = [pytest.mark.infra, pytest.mark.xdist_group("infra")]


def test_cluster_is_encrypted_backed_up_serverless_postgres_16(any_synth: Synth) -> None:
    (cluster,) = any_synth.props("AWS::RDS::DBCluster")
    assert cluster["Engine"] == "aurora-postgresql"
    assert cluster["EngineVersion"].startswith("16.")
    assert cluster["StorageEncrypted"] is True
    assert cluster["BackupRetentionPeriod"] == 7
    assert cluster["ServerlessV2ScalingConfiguration"] == {"MinCapacity": 0.5, "MaxCapacity": 4}
    assert cluster["DatabaseName"] == "baton"
    assert cluster["EnableCloudwatchLogsExports"] == ["postgresql"]
    (instance,) = any_synth.props("AWS::RDS::DBInstance")
    assert instance["DBInstanceClass"] == "db.serverless"
    assert instance["PubliclyAccessible"] is False


def test_credentials_live_in_secrets_manager(any_synth: Synth) -> None:
    (cluster,) = any_synth.props("AWS::RDS::DBCluster")
    assert "{{resolve:secretsmanager:" in str(cluster["MasterUserPassword"])
    # The other secret is the /api key of the conductor function (test_infra_api).
    (secret,) = [
        s
        for s in any_synth.props("AWS::SecretsManager::Secret")
        if "GenerateStringKey" in s["GenerateSecretString"]
    ]
    assert "password" in secret["GenerateSecretString"]["GenerateStringKey"]


def test_proxy_requires_tls_and_authenticates_with_the_secret(any_synth: Synth) -> None:
    (proxy,) = any_synth.props("AWS::RDS::DBProxy")
    (attachment_id,) = any_synth.of_type("AWS::SecretsManager::SecretTargetAttachment")
    assert proxy["RequireTLS"] is True
    assert proxy["EngineFamily"] == "POSTGRESQL"
    assert proxy["Auth"] == [
        {"AuthScheme": "SECRETS", "IAMAuth": "DISABLED", "SecretArn": {"Ref": attachment_id}}
    ]
    (target_group,) = any_synth.props("AWS::RDS::DBProxyTargetGroup")
    assert target_group["ConnectionPoolConfigurationInfo"]["ConnectionBorrowTimeout"] == 10


def test_prod_is_protected_and_retained(prod_iam: Synth) -> None:
    (cluster_id,) = prod_iam.of_type("AWS::RDS::DBCluster")
    cluster = prod_iam.resources[cluster_id]
    assert cluster["Properties"]["DeletionProtection"] is True
    assert cluster["DeletionPolicy"] == "Retain"
    assert cluster["UpdateReplacePolicy"] == "Retain"
    for cfn_type in ("AWS::S3::Bucket", "AWS::SecretsManager::Secret", "AWS::Logs::LogGroup"):
        for resource in prod_iam.of_type(cfn_type).values():
            assert resource["DeletionPolicy"] == "Retain", cfn_type
    assert prod_iam.of_type("Custom::S3AutoDeleteObjects") == {}
    assert prod_iam.stack.termination_protection is True


def test_dev_is_disposable(dev: Synth) -> None:
    (cluster_id,) = dev.of_type("AWS::RDS::DBCluster")
    cluster = dev.resources[cluster_id]
    assert cluster["Properties"]["DeletionProtection"] is False
    assert cluster["DeletionPolicy"] == "Delete"
    for bucket in dev.of_type("AWS::S3::Bucket").values():
        assert bucket["DeletionPolicy"] == "Delete"
    assert len(dev.of_type("Custom::S3AutoDeleteObjects")) == 2
    assert dev.stack.termination_protection is False
