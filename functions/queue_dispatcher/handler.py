"""Queue dispatcher: lapses expired claims, starts instances for queue triggers, reports depth."""

from __future__ import annotations

from baton_lambda import runtime
from baton_lambda.scheduled import scheduled

handler = scheduled("queue_dispatcher", lambda engine: runtime.queue_triggers(engine).tick())
