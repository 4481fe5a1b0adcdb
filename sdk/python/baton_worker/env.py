"""The environment variables the SDK reads, and the defaults they fall back to.

Configuration precedence everywhere in the SDK: an explicit argument, then these variables, then
the defaults. This module imports nothing, so the ``baton`` command can read it cheaply.
"""

from __future__ import annotations

from typing import Final

ENV_URL: Final = "BATON_URL"
"""The API's base URL (``baton dev``: ``http://127.0.0.1:8080``; an API Gateway stage URL)."""
ENV_API_KEY: Final = "BATON_API_KEY"
"""Sent as ``x-api-key`` (the same variable ``baton dev`` reads for the key it accepts)."""
DEFAULT_URL: Final = "http://127.0.0.1:8080"

__all__ = ["DEFAULT_URL", "ENV_API_KEY", "ENV_URL"]
