"""Identifiers from the outside world (path segments, request fields) parsed into UUIDs."""

from __future__ import annotations

import uuid

from baton.errors import Problem, ValidationFailed


def parse_uuid(value: str, field: str) -> uuid.UUID:
    """``value`` as a UUID; anything else is a validation problem on ``field``."""
    try:
        return uuid.UUID(str(value))
    except ValueError:
        raise ValidationFailed([Problem(field, f"{value!r} is not a UUID")]) from None
