"""Smoke test of the Lambda layer build: a fresh interpreter that sees only the layer (plus the
boto3 family, which Lambda's runtime provides) imports everything a handler needs.

Built for this machine's architecture and Python, since the test has to execute it; the
deployed arm64/3.12 layer comes from the same script and pins. Needs PyPI the first time;
the wheels are kept under ~/.cache/baton/pip, and later builds need no network (tested with an
unreachable index). Skip with BATON_SKIP_LAYER_TEST=1.
"""

from __future__ import annotations

import importlib.util
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = [
    pytest.mark.infra,
    pytest.mark.xdist_group("infra"),
    pytest.mark.skipif(
        os.environ.get("BATON_SKIP_LAYER_TEST") == "1", reason="BATON_SKIP_LAYER_TEST=1"
    ),
]

ROOT = Path(__file__).resolve().parents[2]
# What /var/runtime holds on Lambda besides the runtime's own code.
RUNTIME_PROVIDED = ("boto3", "botocore", "s3transfer", "dateutil", "urllib3", "six")

SMOKE = """
import sys
sys.path[:0] = [{layer!r}, {runtime!r}]
import importlib.util
import baton, baton_lambda.http, baton_lambda.scheduled
import pydantic, psycopg, psycopg_pool, aws_lambda_powertools
from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.event_handler import APIGatewayRestResolver
assert psycopg.pq.__impl__ == "binary", psycopg.pq.__impl__
for name in ("baton", "pydantic", "psycopg", "aws_lambda_powertools"):
    origin = sys.modules[name].__file__
    assert origin.startswith({layer!r}), (name, origin)
Logger(service="smoke"); Metrics(namespace="Smoke")
# No function uses Powertools' Tracer: its aws-xray-sdk extra stays out of the layer (2 MB).
assert importlib.util.find_spec("aws_xray_sdk") is None
# Every function's handler module imports with only the layer (as Lambda loads it).
import pathlib
handlers = {{}}
for folder in sorted(pathlib.Path({functions!r}).iterdir()):
    if folder.name.startswith("_") or not (folder / "handler.py").exists():
        continue
    spec = importlib.util.spec_from_file_location("handler_" + folder.name, folder / "handler.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert callable(module.handler), folder.name
    handlers[folder.name] = module
# The rpc function loads its REST twins and the proto's messages at its first calls.
from baton.rpc import bridge
for function in ("jobs", "instances", "definitions", "queues", "schedules"):
    handlers["rpc"].function._twin(function)
assert bridge.find("PollJobs") is not None
# Versions are read from the slimmed metadata as before.
import importlib.metadata
assert importlib.metadata.version("pydantic") == pydantic.VERSION
assert importlib.metadata.requires("psycopg")
# The script sandbox: its child process (sys.executable -m baton.scripting._child, with this
# sys.path) runs QuickJS and jq from the layer.
import quickjs, jq
for module in (quickjs, jq):
    assert module.__file__.startswith({layer!r}), module.__file__
from baton.scripting import Sandbox
box = Sandbox(size=1)
assert box.javascript("function () {{ return $.a + 1; }}", {{"a": 1}}) == 2
assert box.jq(".a, .a * 2", {{"a": 3}}) == [3, 6]
box.close()
print("ok", pydantic.VERSION, psycopg.__version__, psycopg.pq.version())
"""


# pip pointed at a port nothing listens on, no retries, no local wheel folders: no network.
OFFLINE = {"PIP_INDEX_URL": "http://127.0.0.1:9/", "PIP_RETRIES": "0", "PIP_FIND_LINKS": ""}


def _build_here(out: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """layers/build.py for this machine's architecture and Python into ``out``."""
    python_version = f"{sys.version_info.major}.{sys.version_info.minor}"
    return subprocess.run(
        [
            sys.executable,
            str(ROOT / "layers" / "build.py"),
            *("--arch", platform.machine(), "--python-version", python_version),
            *("--out", str(out)),
        ],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **(env or {})},
    )


@pytest.fixture(scope="module")
def local_layer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("layer")
    done = _build_here(out)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    assert "MB zipped" in done.stdout
    return out


@pytest.fixture(scope="module")
def lambda_runtime(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A stand-in for /var/runtime: links to this venv's boto3 and its dependencies only."""
    runtime = tmp_path_factory.mktemp("runtime")
    for name in RUNTIME_PROVIDED:
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.origin is not None, name
        origin = Path(spec.origin)
        source = origin.parent if origin.name == "__init__.py" else origin
        (runtime / source.name).symlink_to(source)
    return runtime


def test_layer_imports_in_an_isolated_interpreter(local_layer: Path, lambda_runtime: Path) -> None:
    code = SMOKE.format(
        layer=str(local_layer / "python"),
        runtime=str(lambda_runtime),
        functions=str(ROOT / "functions"),
    )
    # -I: no user site, no PYTHON* env; -S: not even this venv's site-packages.
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code],
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": os.environ.get("PATH", ""), "POWERTOOLS_TRACE_DISABLED": "true"},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok ")


def test_layer_ships_bytecode_but_no_sources_junk(local_layer: Path) -> None:
    site = local_layer / "python"
    assert (site / "baton" / "__init__.py").is_file()
    assert list((site / "baton").glob("__pycache__/__init__.*.pyc"))
    assert not (site / "bin").exists()
    assert not [p for p in (site / "baton").rglob("tests") if p.is_dir()]
    assert not (site / "boto3").exists() and not (site / "botocore").exists()


def test_rebuild_skips_pip_when_requirements_are_unchanged(local_layer: Path) -> None:
    python_version = f"{sys.version_info.major}.{sys.version_info.minor}"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "layers" / "build.py"),
            "--arch",
            platform.machine(),
            "--python-version",
            python_version,
            "--out",
            str(local_layer),
            "--no-size",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "skipping pip" in done.stdout
    # unchanged sources leave the tree alone (a concurrent synth may be hashing it); sources
    # edited since the first build are copied again
    assert "baton packages unchanged" in done.stdout or "copied shared/baton" in done.stdout


def test_a_cold_build_without_network_takes_the_wheels_from_the_cache(
    local_layer: Path, tmp_path: Path
) -> None:
    """After one online build (the fixture's), a build into an empty folder needs no index."""
    done = _build_here(tmp_path / "offline", OFFLINE)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    assert "pinned wheels in the cache" in done.stdout
    assert (tmp_path / "offline" / "python" / "pydantic").is_dir()


def test_a_build_without_network_or_cache_says_what_to_do(tmp_path: Path) -> None:
    done = _build_here(tmp_path / "out", {**OFFLINE, "XDG_CACHE_HOME": str(tmp_path / "cache")})
    assert done.returncode == 1
    said = done.stdout + done.stderr
    assert "Traceback" not in said
    assert "the package index (http://127.0.0.1:9/) cannot be reached" in done.stderr
    assert "pydantic==" in done.stderr and str(tmp_path / "cache" / "baton" / "pip") in done.stderr
    assert "Run `make layer` (or `make synth`) once with access to PyPI" in done.stderr


def test_deployed_layer_targets_lambda_arm64_python_312(layer_built: Path) -> None:
    """The layer the stack deploys (not executable here): binaries and bytecode for Lambda."""
    site = layer_built / "python"
    for package in ("pydantic_core", "psycopg_binary"):
        binaries = list((site / package).glob("*.so"))
        assert binaries, package
        assert all("cpython-312-aarch64-linux-gnu" in b.name for b in binaries), binaries
    assert not (site / "botocore").exists()
    if _build_module().python_for("3.12") is not None:  # else shipped without .pyc, with a warning
        assert list((site / "baton" / "__pycache__").glob("*.cpython-312.pyc"))


def test_deployed_layer_stays_within_its_size_limit(layer_built: Path) -> None:
    """The layer counts against Lambda's 250 MB and every cold start reads it: Baton keeps it
    within 40 MB unzipped, by dropping what no function imports (``UNUSED``)."""
    build = _build_module()
    site = layer_built / "python"
    size = sum(p.stat().st_size for p in site.rglob("*") if p.is_file())
    assert size <= build.SIZE_LIMIT_BYTES, f"{size / 1e6:.2f} MB unzipped"
    for relative in build.UNUSED:
        assert not (site / relative).exists(), relative
    assert not list(site.rglob("*.pyi"))
    for info in site.glob("*.dist-info"):
        assert (info / "METADATA").is_file() and not (info / "RECORD").exists(), info.name


def test_dropped_packages_must_stay_unnamed(tmp_path: Path) -> None:
    """A release that starts importing a dropped package fails the build, naming the module."""
    build = _build_module()
    package = next(u for u in build.UNUSED if not Path(u).suffix)
    module = tmp_path / "somepkg" / "uses.py"
    module.parent.mkdir()
    module.write_text(f"from {package.replace('/', '.')} import thing\n")
    with pytest.raises(SystemExit, match=r"somepkg/uses\.py names"):
        build.check_unreferenced(tmp_path)
    module.write_text("import json\n")
    build.check_unreferenced(tmp_path)


def test_metadata_keeps_its_headers_only() -> None:
    build = _build_module()
    data = b"Metadata-Version: 2.4\r\nName: x\r\nVersion: 1.0\r\n\r\n# x\n\nA long README.\n"
    assert build.metadata_headers(data) == b"Metadata-Version: 2.4\nName: x\nVersion: 1.0\n"
    assert build.metadata_headers(b"Name: x\nVersion: 1") == b"Name: x\nVersion: 1"


def _build_module() -> Any:
    spec = importlib.util.spec_from_file_location("layer_build", ROOT / "layers" / "build.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module
