"""Identifiers from the outside world (path segments, request fields) parsed into UUIDs."""

from __future__ import annotations

import uuid
from collections.abc import Callable

from baton.errors import NotFound, Problem, ValidationFailed


def parse_uuid(value: str, field: str) -> uuid.UUID:
    """``value`` as a UUID; anything else is a validation problem on ``field`` (an id in a
    request body)."""
    try:
        return uuid.UUID(str(value))
    except ValueError:
        raise ValidationFailed([Problem(field, f"{value!r} is not a UUID")]) from None


def path_uuid(value: str, not_found: Callable[[str], NotFound]) -> uuid.UUID:
    """An id from a URL path as a UUID. A path that is not a UUID names nothing that exists, so
    it is answered like any unknown id: ``not_found(value)`` (a 404), not a validation error."""
    try:
        return uuid.UUID(str(value))
    except ValueError:
        raise not_found(value) from None
