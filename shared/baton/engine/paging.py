"""Opaque page tokens for list endpoints, and the page envelope (``{<items>, nextPageToken?}``).

A token is the sort key of the last row served, URL-safe base64 encoded; it carries no secret and
is validated on the way back in like any other input.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from baton.errors import Problem, ValidationFailed

_SEPARATOR = "\x1f"


def encode_token(*parts: str) -> str:
    """A token for the row whose sort key is ``parts``."""
    return base64.urlsafe_b64encode(_SEPARATOR.join(parts).encode()).decode().rstrip("=")


def decode_token(token: str, parts: int) -> list[str]:
    """The sort key inside ``token``; a token this API did not issue is a validation problem."""
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raw = None
    values = raw.split(_SEPARATOR) if raw is not None else []
    if len(values) != parts:
        raise ValidationFailed([Problem("pageToken", "not a token this API issued")])
    return values


def page(key: str, items: list[dict[str, Any]], token: str | None) -> dict[str, Any]:
    """The response body of one page: ``{key: items}`` plus ``nextPageToken`` when more follow."""
    out: dict[str, Any] = {key: items}
    if token:
        out["nextPageToken"] = token
    return out


def clamp(limit: int, most: int) -> int:
    """A page size between 1 and ``most``."""
    return max(1, min(limit, most))
