"""Durations and timestamps as definitions write them: ISO-8601 durations (``PT30S``, ``P1DT2H``,
``P2W``) or plain seconds, and ISO-8601 timestamps with a time zone."""

from __future__ import annotations

import re
from datetime import datetime

_DURATION = re.compile(
    r"P(?!$)(?:(?P<weeks>\d+(?:\.\d+)?)W)?(?:(?P<days>\d+(?:\.\d+)?)D)?"
    r"(?:T(?=\d)(?:(?P<hours>\d+(?:\.\d+)?)H)?(?:(?P<minutes>\d+(?:\.\d+)?)M)?"
    r"(?:(?P<seconds>\d+(?:\.\d+)?)S)?)?"
)
_UNIT_SECONDS = {"weeks": 604_800, "days": 86_400, "hours": 3_600, "minutes": 60, "seconds": 1}
MAX_DURATION_SECONDS = 366 * 86_400


def duration_seconds(value: str | int | float) -> float:
    """Seconds in ``value``: a number of seconds, or an ISO-8601 duration (years and months are
    refused: their length varies)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str):
        m = _DURATION.fullmatch(value.strip().upper())
        if m is None:
            raise ValueError(
                f"{value!r} is not an ISO-8601 duration such as PT30S, PT5M, P1DT2H or P2W "
                "(or a number of seconds)"
            )
        seconds = sum(float(v) * _UNIT_SECONDS[k] for k, v in m.groupdict().items() if v)
    else:
        raise ValueError(f"{value!r} is not a duration")
    if not 0 <= seconds <= MAX_DURATION_SECONDS:
        raise ValueError(f"a duration is between 0 seconds and 366 days, not {seconds:g} s")
    return seconds


def parse_timestamp(value: str) -> datetime:
    """An ISO-8601 timestamp with a time zone (``Z`` or an offset)."""
    try:
        at = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{value!r} is not an ISO-8601 timestamp") from None
    if at.tzinfo is None:
        raise ValueError(f"{value!r} has no time zone (end it with Z or an offset)")
    return at
