"""cdk-nag's AwsSolutions pack and cfn-lint pass on every app variant (REST and HTTP API);
configuration errors are clear."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from baton_infra.application import create_app
from baton_infra.config import (
    ConfigError,
    DeployConfig,
    LayerNotBuiltError,
    load_cdk_json_context,
)
from cdk_nag import AwsSolutionsChecks
from cfnlint.api import ManualArgs, lint  # type: ignore[import-untyped]
from synth_support import Synth

pytestmark = [pytest.mark.infra, pytest.mark.xdist_group("infra")]

# W3005 (DependsOn already implied by a Ref/GetAtt) is how CDK renders explicit dependencies.
CFN_LINT_IGNORED = ["W3005"]


def test_cdk_nag_has_no_unacknowledged_findings(every_api_type: Synth) -> None:
    report = AwsSolutionsChecks().validate_scope(every_api_type.stack)
    findings = [
        f"{v.severity} {v.rule_name}: {r.construct_path}"
        for v in report.violations
        for r in v.violating_resources
    ]
    assert findings == []
    assert report.success


def test_cfn_lint_is_clean(every_api_type: Synth) -> None:
    matches = lint(
        json.dumps(every_api_type.json),
        regions=["us-east-1", "eu-west-1"],
        config=ManualArgs(ignore_checks=CFN_LINT_IGNORED),
    )
    assert [f"{m.rule.id} {m.message}" for m in matches] == []


def test_missing_layer_fails_with_instructions(tmp_path: Path) -> None:
    with pytest.raises(LayerNotBuiltError, match="make layer"):
        create_app({"layerDir": str(tmp_path / "missing")}, outdir=str(tmp_path / "out"))


def _config(**overrides: object) -> DeployConfig:
    context = {**load_cdk_json_context(), **overrides}
    return DeployConfig.from_context(context.get)


def test_cli_string_context_values_are_parsed() -> None:
    config = _config(
        dbMaxAcu="8",
        reservedConcurrency='{"jobs": 5}',
        apiKeys="alice,bob",
        vpcLogsEndpoint="false",
        taskTimedOutAlarmThreshold="10",
    )
    assert config.db_max_acu == 8
    assert config.task_timed_out_alarm_threshold == 10
    assert config.reserved_concurrency == {"jobs": 5}
    assert config.api_key_names == ("alice", "bob")
    assert config.vpc_logs_endpoint is False


@pytest.mark.parametrize(
    "overrides",
    [
        {"authMode": "cognito"},
        {"stage": "Prod"},
        {"dbMinAcu": 8, "dbMaxAcu": 4},
        {"logRetentionDays": 31},
        {"reservedConcurrency": {"jobs": 0}},
        {"authMode": "apiKey", "apiKeys": []},
        {"taskTimedOutAlarmThreshold": -1},
        {"leasesExpiredAlarmThreshold": 2.5},
        {"leasesExpiredAlarmThreshold": "inf"},
    ],
)
def test_bad_context_is_refused(overrides: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        _config(**overrides)


def test_only_dev_is_disposable() -> None:
    assert _config(stage="dev").disposable
    assert not _config(stage="staging").disposable


def test_scheduled_functions_default_to_one_concurrent_tick() -> None:
    config = _config(reservedConcurrency={"jobs": 100, "sweeper": None})
    assert config.reserved_concurrency_of("reaper", scheduled=True) == 1
    assert config.reserved_concurrency_of("sweeper", scheduled=True) is None
    assert config.reserved_concurrency_of("jobs", scheduled=False) == 100
    assert config.reserved_concurrency_of("definitions", scheduled=False) is None
