"""Opaque page tokens for list endpoints, and the page envelope (``{<items>, nextPageToken?}``).

A token is the sort key of the last row served with a short checksum, URL-safe base64 encoded. It
carries no secret; the checksum only tells a token this API issued from a made-up or damaged one,
which is refused (422) rather than read as some other position.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from typing import Any

from baton.errors import Problem, ValidationFailed

_SEPARATOR = "\x1f"


def encode_token(*parts: str) -> str:
    """A token for the row whose sort key is ``parts``."""
    body = _SEPARATOR.join(parts).encode()
    return base64.urlsafe_b64encode(_checksum(body) + body).decode().rstrip("=")


def decode_token(token: str, parts: int) -> list[str]:
    """The sort key inside ``token``; a token this API did not issue is a validation problem."""
    values: list[str] = []
    try:
        raw = base64.b64decode(token + "=" * (-len(token) % 4), altchars=b"-_", validate=True)
        check, body = raw[:_CHECK], raw[_CHECK:]
        if check == _checksum(body):
            values = body.decode().split(_SEPARATOR)
    except (binascii.Error, UnicodeDecodeError, ValueError):
        pass
    if len(values) != parts:
        raise ValidationFailed([Problem("pageToken", "not a token this API issued")])
    return values


_CHECK = 4


def _checksum(body: bytes) -> bytes:
    return hashlib.blake2b(body, digest_size=_CHECK, person=b"baton-page").digest()


def page(key: str, items: list[dict[str, Any]], token: str | None) -> dict[str, Any]:
    """The response body of one page: ``{key: items}`` plus ``nextPageToken`` when more follow."""
    out: dict[str, Any] = {key: items}
    if token:
        out["nextPageToken"] = token
    return out


def clamp(limit: int, most: int) -> int:
    """A page size between 1 and ``most``."""
    return max(1, min(limit, most))


# A page stops before its JSON passes this many bytes, so a response stays far below Lambda's
# 6 MB whatever its items hold (at least one item is always served).
PAGE_BUDGET_BYTES = 4_000_000


def json_size(value: Any) -> int:
    """Bytes of ``value`` as the API writes it (compact, ASCII-escaped)."""
    return len(json.dumps(value, separators=(",", ":"), default=str))


def within_budget(items: list[dict[str, Any]], budget: int | None = None) -> int:
    """How many of ``items``, from the first, fit in ``budget`` bytes of JSON (by default
    ``PAGE_BUDGET_BYTES``); at least one."""
    budget = PAGE_BUDGET_BYTES if budget is None else budget
    size = 0
    for n, item in enumerate(items):
        size += json_size(item) + 1
        if n and size > budget:
            return n
    return len(items)
