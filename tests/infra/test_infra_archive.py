"""The archive in the CDK app: the Glue table Athena queries (partition projection over the key
layout the engine writes), the sweeper's retention, and who may touch the archive prefix."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from baton import settings
from baton.engine.archive_store import document_key
from baton_infra.archive import COLUMNS, TABLE_NAME
from baton_infra.config import ConfigError, DeployConfig, load_cdk_json_context
from synth_support import Synth, function_logical_ids

pytestmark = [pytest.mark.infra, pytest.mark.xdist_group("infra")]


def _table(synth: Synth) -> dict[str, Any]:
    (table,) = synth.props("AWS::Glue::Table")
    return table


def test_a_glue_table_projects_the_archive_layout(any_synth: Synth) -> None:
    (database,) = synth_dbs = any_synth.props("AWS::Glue::Database")
    assert len(synth_dbs) == 1
    table = _table(any_synth)
    assert table["DatabaseName"] == database["DatabaseInput"]["Name"]
    given = table["TableInput"]
    assert given["Name"] == TABLE_NAME and given["TableType"] == "EXTERNAL_TABLE"
    p = given["Parameters"]
    assert p["projection.enabled"] == "true"
    assert p["projection.definition.type"] == "injected"
    assert (p["projection.month.digits"], p["projection.day.digits"]) == ("2", "2")
    assert [k["Name"] for k in given["PartitionKeys"]] == ["year", "month", "day", "definition"]
    # The template is the engine's key layout with the partitions in place of the values.
    template = p["storage.location.template"]["Fn::Join"][1]
    assert template[-1] == "/archive/${year}/${month}/${day}/${definition}/"
    key = document_key("orders", datetime(2026, 3, 4, 5, 6, tzinfo=UTC), uuid.uuid4())
    filled = template[-1].replace("${year}", "2026").replace("${month}", "03")
    filled = filled.replace("${day}", "04").replace("${definition}", "orders")
    assert key.startswith(filled.removeprefix("/"))
    serde = given["StorageDescriptor"]["SerdeInfo"]
    assert serde["SerializationLibrary"] == "org.openx.data.jsonserde.JsonSerDe"
    assert [c["Name"] for c in given["StorageDescriptor"]["Columns"]] == [c[0] for c in COLUMNS]


def test_the_sweeper_archives_after_the_configured_retention(dev: Synth) -> None:
    days = int(load_cdk_json_context()["retentionDays"])
    for name, logical_id in function_logical_ids(dev).items():
        env = dev.resources[logical_id]["Properties"]["Environment"]["Variables"]
        got = env.get(settings.ENV_RETENTION_SECONDS)
        assert got == (str(days * 86_400) if name == "sweeper" else None), name


def test_retention_must_end_before_the_payloads_expire() -> None:
    context = {**load_cdk_json_context(), "retentionDays": 30, "payloadExpiryDays": 30}
    with pytest.raises(ConfigError, match="retentionDays"):
        DeployConfig.from_context(context.get)
    off = DeployConfig.from_context({**context, "retentionDays": 0}.get)
    assert off.retention_seconds == 0
