"""The reference the engine stores in place of a payload offloaded to S3 (pure: no I/O)."""

from __future__ import annotations

from typing import Any

REF_KEY = "$payload"
SIZE_KEY = "sizeBytes"


def payload_ref(path: str, size_bytes: int) -> dict[str, Any]:
    """``{"$payload": path, "sizeBytes": n}``: what an instance input or a step output holds
    when its JSON lives in the payload bucket at ``path``."""
    return {REF_KEY: path, SIZE_KEY: size_bytes}


def is_payload_ref(value: object) -> bool:
    return isinstance(value, dict) and set(value) == {REF_KEY, SIZE_KEY}
