"""A function that measured nothing logs no warning (Powertools warns at every empty flush)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FLUSH_NOTHING = """
from aws_lambda_powertools.metrics import EphemeralMetrics
import {module}
EphemeralMetrics(service="s", namespace="n").log_metrics(lambda event, context: None)({{}}, None)
"""


@pytest.mark.parametrize("module", ["baton_lambda.scheduled", "baton_lambda.http"])
def test_an_empty_metrics_flush_is_not_a_warning(module: str) -> None:
    # The reaper's pass that found nothing logged Powertools' UserWarning at every cold start.
    paths = [str(ROOT / "functions" / "_lib"), str(ROOT / "shared")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    done = subprocess.run(
        [sys.executable, "-W", "default", "-c", FLUSH_NOTHING.format(module=module)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "No application metrics" not in done.stderr
