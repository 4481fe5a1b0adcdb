"""Sweeper: enforces timeouts whose due time has passed, fires due timers, and delivers events
between instances that their own operation could not (every second, looping in one invocation)."""

from __future__ import annotations

from baton_lambda.scheduled import scheduled

handler = scheduled("sweeper", lambda engine: engine.sweep())
