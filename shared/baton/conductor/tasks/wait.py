"""WAIT ⇄ TIMER (``duration`` or ``until``) or SIGNAL (neither: completed through the API),
HUMAN ⇄ USER_TASK."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from baton.conductor.tasks.common import EXPR, base, fail, label, params_in, task_input

_DURATION = re.compile(
    r"(\d+)\s*(days?|d|hours?|hrs?|h|minutes?|mins?|m|seconds?|secs?|s)\b", re.IGNORECASE
)
_UNIT = {"d": 86400, "h": 3600, "m": 60, "s": 1}


def to_step(task: dict[str, Any], path: str) -> dict[str, Any]:
    where = label(task, path)
    step = base(task, path)
    params = dict(task.get("inputParameters") or {})
    duration = params.pop("duration", None)
    until = params.pop("until", None)
    step["input"] = params_in(params, f"{path}.inputParameters")
    if duration is None and until is None:
        step["type"] = "SIGNAL"
        return step
    step["type"] = "TIMER"
    if duration is not None:
        step["duration"] = duration_seconds(str(duration), where)
    else:
        step["until"] = until_iso(str(until), where)
    return step


def duration_seconds(text: str, where: str) -> int:
    """Conductor's ``"1 days 2 hours 30 minutes"`` / ``"10s"`` as seconds."""
    if EXPR.search(text):
        raise fail(where, "a WAIT duration must be a literal in Baton")
    matches = list(_DURATION.finditer(text))
    left = _DURATION.sub("", text).replace(",", "").strip()
    if not matches or left:
        raise fail(where, f"cannot read the WAIT duration {text!r}")
    return sum(int(m.group(1)) * _UNIT[m.group(2)[0].lower()] for m in matches)


def until_iso(text: str, where: str) -> str:
    """Conductor's ``until`` (``yyyy-MM-dd HH:mm[:ss] z`` or ISO) as an ISO timestamp."""
    if EXPR.search(text):
        return params_in(text, where)  # type: ignore[no-any-return]
    for fmt in ("%Y-%m-%d %H:%M %Z", "%Y-%m-%d %H:%M:%S %Z", "%Y-%m-%d %H:%M", "%Y-%m-%d"):
        try:
            return datetime.strptime(text, fmt).replace(tzinfo=UTC).isoformat()
        except ValueError:
            continue
    try:
        return datetime.fromisoformat(text).isoformat()
    except ValueError:
        raise fail(where, f"cannot read the WAIT until {text!r}") from None


def human(task: dict[str, Any], path: str) -> dict[str, Any]:
    step = base(task, path)
    step.update(type="USER_TASK", input=task_input(task, path))
    return step


def back_wait(s: dict[str, Any], task: dict[str, Any]) -> list[dict[str, Any]]:
    task["type"] = "WAIT"
    if s.get("duration") is not None:
        d = s["duration"]
        task["inputParameters"]["duration"] = f"{d} seconds" if isinstance(d, int) else d
    if s.get("until") is not None:
        task["inputParameters"]["until"] = s["until"]
    return [task]


def back_human(s: dict[str, Any], task: dict[str, Any]) -> list[dict[str, Any]]:
    task["type"] = "HUMAN"
    return [task]
