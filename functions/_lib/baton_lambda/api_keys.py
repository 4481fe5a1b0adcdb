"""API keys checked by the functions themselves: behind an API Gateway HTTP API (CDK context
``apiType http``), which has no usage-plan keys, every route the REST API would guard with a key.

A key is ``bk_<id>_<secret>``: an 8-hex id, then 32 random bytes (URL-safe base64). The Secrets
Manager secret the CDK app creates (``ApiKeysSecretArn``) holds only hashes::

    {"keys": [{"id": "1a2b3c4d", "name": "ci", "sha256": "<hex SHA-256 of the whole key>"}]}

``python -m baton_lambda.api_keys NAME`` (``make api-key NAME=ci``) prints a new key and its
entry. The id finds the entry without trying every hash; the comparison is constant-time. A key is
random and long, so one SHA-256 is enough (no slow hash needed: nothing to guess).

Rotation without a deploy: add the new key's entry to the secret, move the callers, remove the old
entry. A warm function reads the secret once and keeps it for ``CACHE_SECONDS``; a key it does not
know (unknown id, or a hash that differs) makes it read the secret again at once, at most once per
``REREAD_FLOOR_SECONDS`` (a flood of wrong keys costs one GetSecretValue a second per container,
not one per request), so a key just added works on its first request, and a removed one stops
working within ``CACHE_SECONDS``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import secrets
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, Literal

CACHE_SECONDS = 300.0
REREAD_FLOOR_SECONDS = 1.0
_KEY = re.compile(r"bk_([0-9a-f]{8})_[A-Za-z0-9_-]{43}")

Verdict = Literal["ok", "missing", "wrong"]


def digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def new_key(name: str) -> tuple[str, dict[str, str]]:
    """A new key and the entry to add to the secret's ``keys`` (the key itself is not in it)."""
    key_id = secrets.token_hex(4)
    raw = base64.urlsafe_b64encode(secrets.token_bytes(32)).decode().rstrip("=")
    key = f"bk_{key_id}_{raw}"
    return key, {"id": key_id, "name": name, "sha256": digest(key)}


class KeyRing:
    """The hashed keys of one secret, read through ``fetch`` (its SecretString), cached."""

    def __init__(
        self, fetch: Callable[[], str], *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._fetch = fetch
        self._clock = clock
        self._lock = threading.Lock()
        self._hashes: dict[str, list[str]] = {}
        self._read_at: float | None = None

    def check(self, given: str | None) -> Verdict:
        """``ok``, ``missing`` (no key sent: 401) or ``wrong`` (not a current key: 403)."""
        if not given:
            return "missing"
        match = _KEY.fullmatch(given)
        if match is None:
            return "wrong"  # not even shaped like a key: no reason to read the secret again
        key_id, hashed = match.group(1), digest(given)
        with self._lock:
            now = self._clock()
            if self._read_at is None or now - self._read_at >= CACHE_SECONDS:
                self._read(now)
            elif not self._known(key_id, hashed) and now - self._read_at >= REREAD_FLOOR_SECONDS:
                self._read(now)  # a miss: perhaps a key added since the last read
            return "ok" if self._known(key_id, hashed) else "wrong"

    def _known(self, key_id: str, hashed: str) -> bool:
        return any(hmac.compare_digest(hashed, h) for h in self._hashes.get(key_id, ()))

    def _read(self, now: float) -> None:
        document: Any = json.loads(self._fetch())
        hashes: dict[str, list[str]] = {}
        for entry in document.get("keys", []) if isinstance(document, dict) else []:
            if isinstance(entry, dict) and {"id", "sha256"} <= entry.keys():
                hashes.setdefault(str(entry["id"]), []).append(str(entry["sha256"]).lower())
        self._hashes = hashes
        self._read_at = now


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", argv[0]):
        print("usage: python -m baton_lambda.api_keys NAME", file=sys.stderr)
        return 2
    key, entry = new_key(argv[0])
    print(f"key (give it to the caller; it is not stored anywhere): {key}", file=sys.stderr)
    print("entry (add it to the secret's keys list):", file=sys.stderr)
    print(json.dumps(entry))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
