"""Code from users, run bounded: JavaScript (QuickJS) and jq programs in sandbox processes.

A script can fail its task (too slow, too much memory, an exception, a syntax error), never the
engine: it runs in a child process of its own with QuickJS's time, memory and stack limits and a
memory ceiling for the whole process, and the parent kills a child that overruns its time.
"""

from __future__ import annotations

from baton.scripting.sandbox import (
    Sandbox,
    SandboxLimits,
    SandboxUnavailable,
    ScriptFailed,
    default_sandbox,
    shared_sandbox,
)

__all__ = [
    "Sandbox",
    "SandboxLimits",
    "SandboxUnavailable",
    "ScriptFailed",
    "default_sandbox",
    "shared_sandbox",
]
