"""External payloads: limits from the environment, upload requests refused or granted, and the
terms a presigned PUT commits to (moto checks neither signatures nor expiry: read them here)."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from baton.engine.payloads import (
    KEY_PREFIX,
    PayloadStorageUnconfigured,
    PayloadStore,
    check_upload_request,
    kind_of_key,
    limits_view,
    new_key,
    sha256_b64,
    signed_url_terms,
)
from baton.errors import PayloadTooLarge, ValidationFailed
from baton.metrics import CountingMetrics
from baton.settings import (
    DEFAULT_HARD_LIMIT_BYTES,
    DEFAULT_SOFT_LIMIT_BYTES,
    MAX_PRESIGN_SECONDS,
    PayloadLimit,
    PayloadLimits,
    Settings,
    SettingsError,
)

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def test_default_limits_are_256_kb_soft_and_50_mb_hard_for_every_kind() -> None:
    limits = Settings.from_env({}).engine.payload_limits
    for limit in (limits.workflow_input, limits.step_input, limits.step_output):
        assert limit == PayloadLimit(256 * 1024, 50 * 1024 * 1024)
    assert limits.presign_seconds == MAX_PRESIGN_SECONDS == 900


def test_limits_are_read_per_kind_from_the_environment() -> None:
    env = {
        "BATON_WORKFLOW_INPUT_SOFT_LIMIT_BYTES": "1000",
        "BATON_WORKFLOW_INPUT_HARD_LIMIT_BYTES": "5000",
        "BATON_STEP_OUTPUT_HARD_LIMIT_BYTES": "60000000",
    }
    limits = Settings.from_env(env).engine.payload_limits
    assert limits.workflow_input == PayloadLimit(1000, 5000)
    assert limits.step_input == PayloadLimit()
    assert limits.step_output == PayloadLimit(DEFAULT_SOFT_LIMIT_BYTES, 60_000_000)


@pytest.mark.parametrize(
    "env",
    [
        {"BATON_STEP_INPUT_SOFT_LIMIT_BYTES": "lots"},
        {"BATON_STEP_INPUT_SOFT_LIMIT_BYTES": "0"},
        {"BATON_STEP_INPUT_SOFT_LIMIT_BYTES": str(DEFAULT_HARD_LIMIT_BYTES + 1)},
    ],
)
def test_bad_limits_are_refused_naming_the_variable_or_the_rule(env: dict[str, str]) -> None:
    with pytest.raises(SettingsError):
        Settings.from_env(env)


def test_presign_lifetime_cannot_exceed_15_minutes() -> None:
    with pytest.raises(SettingsError):
        PayloadLimits(presign_seconds=901)


def test_config_view_names_each_kind() -> None:
    view = limits_view(PayloadLimits(step_output=PayloadLimit(10, 20)))
    assert view["payloadLimits"]["stepOutput"] == {"softLimitBytes": 10, "hardLimitBytes": 20}
    assert view["payloadLimits"]["workflowInput"]["hardLimitBytes"] == DEFAULT_HARD_LIMIT_BYTES
    assert view["presignSeconds"] == 900


def test_keys_are_random_under_a_per_kind_prefix() -> None:
    keys = {new_key("STEP_OUTPUT") for _ in range(200)}
    assert len(keys) == 200
    for key in keys:
        assert key.startswith(f"{KEY_PREFIX}step-output/")
        assert len(key.rsplit("/", 1)[1]) >= 32  # 192 random bits
        assert kind_of_key(key) == "STEP_OUTPUT"
    assert kind_of_key(new_key("WORKFLOW_INPUT")) == "WORKFLOW_INPUT"
    for forged in (
        "payloads/step-output/",
        "payloads/other/x",
        "x/step-output/abc",
        "payloads/step-output/a/b",
    ):
        assert kind_of_key(forged) is None


def test_upload_requests_above_the_hard_limit_are_too_large() -> None:
    limits = PayloadLimits(step_output=PayloadLimit(10, 100))
    assert check_upload_request(limits, "STEP_OUTPUT", 100, None) == "STEP_OUTPUT"
    with pytest.raises(PayloadTooLarge) as e:
        check_upload_request(limits, "STEP_OUTPUT", 101, None)
    assert "101" in e.value.detail and "100" in e.value.detail


@pytest.mark.parametrize(
    ("kind", "size", "sha"),
    [
        ("OTHER", 1, None),
        ("STEP_INPUT", -1, None),
        ("STEP_INPUT", 1, "zz" * 32),
        ("STEP_INPUT", 1, "ab"),
    ],
)
def test_malformed_upload_requests_are_validation_failures(
    kind: str, size: int, sha: str | None
) -> None:
    with pytest.raises(ValidationFailed):
        check_upload_request(PayloadLimits(), kind, size, sha)


def _store(**kw: Any) -> PayloadStore:
    import boto3

    client = boto3.client(
        "s3",
        region_name="us-east-1",
        aws_access_key_id="AKIDEXAMPLE",
        aws_secret_access_key="secret",
        endpoint_url="http://127.0.0.1:9",
        config=__import__("botocore.config").config.Config(signature_version="s3v4"),
    )
    return PayloadStore("bucket", PayloadLimits(), client=client, now=lambda: NOW, **kw)


def test_the_presigned_put_signs_the_declared_length_and_lapses_within_15_minutes() -> None:
    grant = _store().grant_upload("WORKFLOW_INPUT", 3_000_000)
    terms = signed_url_terms(grant.upload_url)
    assert terms["algorithm"] == "AWS4-HMAC-SHA256"
    # S3 recomputes the signature over these headers: another Content-Length is refused.
    assert {"content-length", "host"} <= terms["signedHeaders"]
    assert 0 < terms["expiresSeconds"] <= 900
    assert terms["path"] == f"/bucket/{grant.path}"
    assert grant.path.startswith("payloads/workflow-input/")
    assert grant.expires_at == NOW + timedelta(seconds=terms["expiresSeconds"])
    assert grant.upload_headers == {"Content-Length": "3000000"}
    body = grant.as_dict()
    assert body["expiresAt"] == "2026-01-02T03:19:05Z"


def test_a_declared_sha256_is_signed_too() -> None:
    data = b"x" * 1000
    digest = hashlib.sha256(data).hexdigest()
    grant = _store().grant_upload("STEP_OUTPUT", len(data), digest)
    assert "x-amz-checksum-sha256" in signed_url_terms(grant.upload_url)["signedHeaders"]
    assert grant.upload_headers["x-amz-checksum-sha256"] == sha256_b64(digest)


def test_two_grants_never_share_a_key() -> None:
    store = _store()
    assert store.grant_upload("STEP_OUTPUT", 1).path != store.grant_upload("STEP_OUTPUT", 1).path


def test_refusals_are_counted_by_kind() -> None:
    metrics = CountingMetrics()
    with pytest.raises(PayloadTooLarge):
        _store(metrics=metrics).grant_upload("STEP_OUTPUT", DEFAULT_HARD_LIMIT_BYTES + 1)
    assert metrics.totals["PayloadRefused[Kind=STEP_OUTPUT]"] == 1


def test_without_a_bucket_uploads_are_unavailable() -> None:
    store = PayloadStore(None, PayloadLimits())
    with pytest.raises(PayloadStorageUnconfigured):
        store.grant_upload("STEP_OUTPUT", 1)
