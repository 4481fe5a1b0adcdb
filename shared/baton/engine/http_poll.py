"""HTTP_POLL, as the system-tasks function runs it: after each call that succeeded, the step's
``terminationCondition`` decides (:func:`verdict`): done (the job completes with the call's
output and ``pollCount``), failed, or poll again: the job is handed back, same attempt, due after
the polling interval (:func:`delay`), with the polls so far kept in its step execution's
``state`` (``{"attempt", "polls", "lastStatusCode"}``); a new attempt counts from 1 again."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from baton.scripting import Sandbox, ScriptFailed

# The longest wait between two polls, whatever the strategy.
MAX_DELAY_SECONDS = 24 * 3600


@dataclass(frozen=True, slots=True)
class Verdict:
    """``done``: complete with the call's output; ``failed``: fail (not retried) with it;
    otherwise poll again after ``delay`` seconds."""

    done: bool = False
    failed: str | None = None
    delay: int = 0


def delay(settings: dict[str, Any], polls: int) -> int:
    """Seconds before poll ``polls + 1``, ``polls`` calls made: the interval (FIXED), the
    interval times ``polls`` (LINEAR_BACKOFF) or doubled after each poll (EXPONENTIAL_BACKOFF),
    at most a day."""
    interval = int(settings.get("intervalSeconds") or 60)
    strategy = settings.get("strategy") or "FIXED"
    if strategy == "LINEAR_BACKOFF":
        seconds = interval * polls
    elif strategy == "EXPONENTIAL_BACKOFF":
        seconds = interval * 2 ** min(max(polls - 1, 0), 20)
    else:
        seconds = interval
    return min(seconds, MAX_DELAY_SECONDS)


def verdict(
    sandbox: Sandbox,
    settings: dict[str, Any],
    given: dict[str, Any],
    output: dict[str, Any],
    polls: int,
) -> Verdict:
    """What poll number ``polls`` (from 1) decides, its call having given ``output``: the
    condition runs with ``$`` = ``{output, input}`` (``given``, the job's input, without how to
    poll). True, a truthy value or 1: done; -1: failed; anything else polls again, unless it was
    the last of ``maxPollCount``."""
    bindings = {"output": output, "input": given}
    try:
        value = sandbox.javascript(str(settings["terminationCondition"]), bindings)
    except ScriptFailed as e:
        said = str(e)
        if e.kind == "script":
            said = f"threw {said}"
        return Verdict(failed=f"the terminationCondition {said}")
    if isinstance(value, bool):
        holds = value
    elif isinstance(value, int | float):
        if value == -1:
            return Verdict(failed="the terminationCondition gave -1 (fail)")
        holds = value == 1
    else:
        holds = bool(value)
    if holds:
        return Verdict(done=True)
    most = int(settings.get("maxPollCount") or 1000)
    if polls >= most:
        return Verdict(failed=f"the terminationCondition did not hold after {polls} polls")
    return Verdict(delay=delay(settings, polls))
