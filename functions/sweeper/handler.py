"""Sweeper: enforces timeouts whose due time has passed (every minute)."""

from __future__ import annotations

from baton_lambda.scheduled import scheduled

handler = scheduled("sweeper", lambda engine: engine.sweep())
