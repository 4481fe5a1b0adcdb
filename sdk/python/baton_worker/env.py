"""The environment variables the SDK reads, the defaults they fall back to, and where the key of
a local ``baton dev`` server is found.

Configuration precedence everywhere in the SDK: an explicit argument, then these variables, then
the defaults. This module imports only light standard modules, so the ``baton`` command can
read it cheaply.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Final
from urllib.parse import urlsplit

ENV_URL: Final = "BATON_URL"
"""The API's base URL (``baton dev``: ``http://127.0.0.1:8080``; an API Gateway stage URL)."""
ENV_API_KEY: Final = "BATON_API_KEY"
"""Sent as ``x-api-key`` (the same variable ``baton dev`` reads for the key it accepts)."""
ENV_DATA_DIR: Final = "BATON_DATA_DIR"
"""The data directory of ``baton dev`` (the same variable it reads), where it keeps its key."""
DEFAULT_URL: Final = "http://127.0.0.1:8080"
DEFAULT_DATA_DIR: Final = ".baton/data"
"""Relative to the working directory, as ``baton dev``'s own default is."""
API_KEY_FILE: Final = "api-key"
"""The file of the data directory holding the key ``baton dev`` generated (0600)."""

_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


def local_api_key_path(env: Mapping[str, str] | None = None) -> str:
    """Where ``baton dev`` keeps its key: ``$BATON_DATA_DIR/api-key``, else
    ``.baton/data/api-key`` in the working directory."""
    e = os.environ if env is None else env
    return os.path.join(e.get(ENV_DATA_DIR) or DEFAULT_DATA_DIR, API_KEY_FILE)


def local_api_key(url: str, env: Mapping[str, str] | None = None) -> str | None:
    """The key a local ``baton dev`` generated, for a ``url`` on this machine (127.0.0.1,
    localhost, ::1); None for any other host, or when there is no readable key file.

    The key is looked for only when ``BATON_API_KEY`` is unset (callers check that first), and
    never sent to another host: it is a local server's credential.
    """
    try:
        host = urlsplit(url).hostname
    except ValueError:
        return None
    if host not in _LOOPBACK:
        return None
    try:
        with open(local_api_key_path(env), encoding="ascii") as f:
            key = f.read().strip()
    except (OSError, UnicodeDecodeError):
        return None
    return key or None


def api_key_from_env(url: str, env: Mapping[str, str] | None = None) -> str | None:
    """``BATON_API_KEY``, else the key of a local ``baton dev`` (see :func:`local_api_key`)."""
    e = os.environ if env is None else env
    return e.get(ENV_API_KEY) or local_api_key(url, e)


__all__ = [
    "API_KEY_FILE",
    "DEFAULT_DATA_DIR",
    "DEFAULT_URL",
    "ENV_API_KEY",
    "ENV_DATA_DIR",
    "ENV_URL",
    "api_key_from_env",
    "local_api_key",
    "local_api_key_path",
]
