"""Sweeper: enforces timeouts whose due time has passed, fires due timers and schedules' slots,
and delivers events between instances that their own operation could not (every second, looping
in one invocation)."""

from __future__ import annotations

from baton.engine.schedule_firing import ScheduleDuty
from baton.engine.service import Engine
from baton_lambda.scheduled import scheduled


def _duty(engine: Engine) -> dict[str, int]:
    return {**engine.sweep(), **ScheduleDuty(engine).tick()}


handler = scheduled("sweeper", _duty)
