"""Tokens for Conductor's key-id/secret flow: ``POST /api/token {keyId, keySecret}`` answers a
token when ``keySecret`` is a Baton API key; the token, sent as ``X-Authorization``, is
``bct1.<expiry>.<HMAC-SHA256 of the expiry under the key>``, good for a day (the SDK refreshes
every 45 minutes). The API key itself is accepted as a token too (``x-api-key`` for curl users)."""

from __future__ import annotations

import hashlib
import hmac

TOKEN_TTL_SECONDS = 24 * 3600
_PREFIX = "bct1"


def _sign(key: str, expiry: int) -> str:
    return hmac.new(key.encode(), f"conductor:{expiry}".encode(), hashlib.sha256).hexdigest()


def issue(key: str, now: float) -> str:
    expiry = int(now) + TOKEN_TTL_SECONDS
    return f"{_PREFIX}.{expiry}.{_sign(key, expiry)}"


def key_matches(given: str, key: str) -> bool:
    return hmac.compare_digest(given.encode(), key.encode())


def valid(token: str, key: str, now: float) -> bool:
    """``token`` is a live token signed with ``key``, or ``key`` itself."""
    if key_matches(token, key):
        return True
    parts = token.split(".")
    if len(parts) != 3 or parts[0] != _PREFIX or not parts[1].isdigit():
        return False
    expiry = int(parts[1])
    return expiry > now and hmac.compare_digest(parts[2].encode(), _sign(key, expiry).encode())
