"""``baton dev`` with BATON_USAGE_FILE counts what AWS would bill (bench/cost.py reads it): API
requests routed to each function, each invocation's duration rounded up to 1 ms, and the S3/SQS
calls of its boto3 clients; without the variable nothing is counted or written."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from baton.local.usage import UsageMeter
from moto import mock_aws

from tests.support.helpers import one_step, unique, wait_until
from tests.support.servers import TEST_API_KEY

pytestmark = [pytest.mark.e2e]


def test_the_meter_rounds_each_invocation_up_to_a_millisecond_and_counts_boto3_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import boto3

    meter = UsageMeter(tmp_path / "usage.json")
    meter.invocation("jobs", 0.0101)  # 10.1 ms bills 11
    meter.invocation("jobs", 0.0)  # at least 1 ms
    meter.api_request("jobs")
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "testing")
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)
    with mock_aws():
        meter.install_boto3()
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="usage-meter")
        s3.put_object(Bucket="usage-meter", Key="k", Body=b"x")
        s3.get_object(Bucket="usage-meter", Key="k")
    meter.flush()
    first = json.loads((tmp_path / "usage.json").read_text())
    assert first["invocations"] == {"jobs": 2}
    assert first["billedMs"] == {"jobs": math.ceil(10.1) + 1}
    assert first["apiRequests"] == {"jobs": 1}
    assert first["awsRequests"] == {"s3.CreateBucket": 1, "s3.PutObject": 1, "s3.GetObject": 1}
    meter.flush()
    assert json.loads((tmp_path / "usage.json").read_text())["seq"] > first["seq"]


def test_baton_dev_counts_api_requests_and_invocations_into_the_usage_file(
    start_server: Any, tmp_path: Path, e2e_database_url: str | None
) -> None:
    usage = tmp_path / "usage.json"
    server = start_server(
        data_dir=tmp_path / "data",
        functions_dir=None,
        database_url=e2e_database_url,
        extra_env={"BATON_USAGE_FILE": str(usage)},
    )
    name = unique("metered")
    headers = {"x-api-key": TEST_API_KEY}
    server.request("POST", "/v1/definitions", json=one_step(name, name), headers=headers)
    for _ in range(3):
        server.request("POST", "/v1/instances", json={"definitionName": name}, headers=headers)
    server.request("GET", "/v1/definitions", headers={"x-api-key": "wrong"})  # refused: no run

    def counted() -> dict[str, Any] | None:
        doc: dict[str, Any] = json.loads(usage.read_text()) if usage.exists() else {}
        return doc if doc.get("apiRequests", {}).get("instances") == 3 else None

    doc = wait_until(counted, timeout=10, what="three starts counted")
    assert doc["apiRequests"]["definitions"] == 1
    assert doc["invocations"]["instances"] >= 3
    assert doc["billedMs"]["instances"] >= 3
    assert doc["invocations"].get("sweeper", 0) >= 1  # the ticked functions are timed too
