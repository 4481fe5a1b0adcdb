"""The SDK package itself: what importing it costs, and that every public name resolves."""

from __future__ import annotations

import subprocess
import sys

import baton_worker
import pytest


def _imports_after(code: str) -> set[str]:
    """The modules loaded by a fresh interpreter after running ``code``."""
    probe = f"{code}\nimport sys\nprint('\\n'.join(sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", probe], check=True, capture_output=True, text=True
    ).stdout
    return set(out.split())


def test_importing_the_package_does_not_load_httpx_or_the_runner() -> None:
    loaded = _imports_after("import baton_worker, baton_worker.env")
    assert "httpx" not in loaded
    assert "baton_worker.runner" not in loaded


def test_every_public_name_resolves() -> None:
    for name in baton_worker.__all__:
        assert getattr(baton_worker, name) is not None, name
    assert baton_worker.Runner.__module__ == "baton_worker.runner"
    assert set(baton_worker.__all__) <= set(dir(baton_worker))


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="NoSuchThing"):
        baton_worker.NoSuchThing  # type: ignore[attr-defined]  # noqa: B018
