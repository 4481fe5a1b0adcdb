"""The SDK's version (also the package version: ``pyproject.toml`` reads it from here)."""

from __future__ import annotations

__version__ = "0.1.0"
