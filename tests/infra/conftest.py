"""Fixtures for the CDK tests: the layer is built once and each app variant is synthesized once
per session (synthesis costs seconds, and all infra tests share one xdist worker)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
for _path in (ROOT / "shared", ROOT / "infra"):
    if str(_path) not in sys.path:
        sys.path.append(str(_path))
# Must be set before jsii starts its Node process (on the first aws_cdk import).
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

from synth_support import Synth, synthesize  # noqa: E402

PROD_IAM = {"stage": "prod", "authMode": "iam"}


@pytest.fixture(scope="session")
def layer_built() -> Path:
    """The real (arm64) layer the app deploys; cached by build.py's stamp after the first run."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "layers" / "build.py"), "--no-size"],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.fail(f"layers/build.py failed:\n{done.stdout}\n{done.stderr}")
    return ROOT / "layers" / "build"


@pytest.fixture(scope="session")
def dev(layer_built: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synth]:
    """cdk.json's defaults: stage dev, authMode apiKey."""
    yield synthesize(tmp_path_factory.mktemp("cdk-dev"), {})


@pytest.fixture(scope="session")
def prod_iam(layer_built: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synth]:
    """A protected stage with SigV4 auth."""
    yield synthesize(tmp_path_factory.mktemp("cdk-prod"), PROD_IAM)


@pytest.fixture(scope="session")
def http_keys(layer_built: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synth]:
    """The HTTP API option with API keys checked by the functions (context apiType http)."""
    yield synthesize(tmp_path_factory.mktemp("cdk-http"), {"apiType": "http"})


@pytest.fixture(scope="session")
def http_iam(layer_built: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synth]:
    """The HTTP API option on a protected stage with SigV4 (its IAM authorizer)."""
    yield synthesize(tmp_path_factory.mktemp("cdk-http-iam"), {**PROD_IAM, "apiType": "http"})


@pytest.fixture(scope="session", params=["dev", "prod_iam", "http_keys", "http_iam"])
def every_api_type(request: pytest.FixtureRequest) -> Synth:
    """The REST variants and the HTTP API variants, for what must hold whatever the API type
    (cdk-nag, cfn-lint, IAM without wildcard actions)."""
    synth: Synth = request.getfixturevalue(request.param)
    return synth


@pytest.fixture(scope="session", params=["dev", "prod_iam"])
def any_synth(request: pytest.FixtureRequest) -> Synth:
    """Both variants, for properties that must hold whatever the context."""
    synth: Synth = request.getfixturevalue(request.param)
    return synth
