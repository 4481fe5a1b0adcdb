"""System tasks: makes the HTTP calls of HTTP steps. Each pass claims the waiting ``baton:http``
jobs (waiting up to a second for one), makes the calls on a few threads and reports each through
the engine's normal completion and failure (looping in one invocation, like the sweeper)."""

from __future__ import annotations

from baton_lambda.scheduled import scheduled

handler = scheduled("system_tasks", lambda engine: engine.run_system_tasks())
