"""A schedule's spec and when it fires: cron expressions (croniter), intervals, a time zone.

- ``cron``: a list of expressions, each of 5 fields, 6 with seconds first, or ``@hourly``,
  ``@daily``, ``@weekly``, ``@monthly``, ``@yearly`` (``@annually``). They are read in wall time
  of ``timeZone`` (default UTC): in a daylight-saving gap a slot fires at the first valid time
  after it (the moment the clocks jump); in a repeated hour it fires once, at the first occurrence.
- ``interval``: ``{everySeconds, offsetSeconds}``, slots at ``epoch + offset + k * every``
  (aligned to the Unix epoch, independent of the time zone).
- ``startAt`` / ``endAt``: no slot before / after; ``jitterSeconds``: each slot is due up to that
  much after its time (the same delay for the same slot, whichever loop computes it).

Everything here is a pure function of its arguments (no clock): the tests drive it with fake times.
"""

from __future__ import annotations

import hashlib
import heapq
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter  # type: ignore[import-untyped]

from baton.errors import Problem

OVERLAP_POLICIES = (
    "SKIP",
    "BUFFER_ONE",
    "BUFFER_ALL",
    "CANCEL_OTHER",
    "TERMINATE_OTHER",
    "ALLOW_ALL",
)
ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
MAX_CRONS = 20
MAX_JITTER_SECONDS = 86_400
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class Spec:
    crons: tuple[str, ...]
    every_seconds: int | None
    offset_seconds: int
    zone: ZoneInfo
    jitter_seconds: int
    start_at: datetime | None
    end_at: datetime | None

    def fire_times(self, after: datetime, until: datetime | None = None) -> Iterator[datetime]:
        """The slot times strictly after ``after`` (and up to ``until``), in order, without
        repeats, within ``startAt``/``endAt``."""
        low = after if self.start_at is None or self.start_at <= after else self.start_at
        low_inclusive = self.start_at is not None and self.start_at > after
        streams = [self._cron_times(c, low) for c in self.crons]
        if self.every_seconds:
            streams.append(self._interval_times(low))
        last: datetime | None = None
        for t in heapq.merge(*streams):
            if t < low or (t == low and not low_inclusive) or t == last:
                continue
            if (self.end_at is not None and t > self.end_at) or (until is not None and t > until):
                return
            last = t
            yield t

    def next_after(self, after: datetime) -> datetime | None:
        """The first slot time strictly after ``after``; None when there is none (``endAt``)."""
        return next(self.fire_times(after), None)

    def due_at(self, schedule_id: str, slot: datetime) -> datetime:
        """When ``slot`` is due: its time plus its jitter (a stable function of the slot)."""
        if not self.jitter_seconds:
            return slot
        digest = hashlib.sha256(f"{schedule_id}|{slot.isoformat()}".encode()).digest()
        millis = int.from_bytes(digest[:8], "big") % (self.jitter_seconds * 1000)
        return slot + timedelta(milliseconds=millis)

    def _interval_times(self, after: datetime) -> Iterator[datetime]:
        assert self.every_seconds
        every = self.every_seconds
        since = (after - _EPOCH).total_seconds() - self.offset_seconds
        k = int(since // every)
        while True:
            yield _EPOCH + timedelta(seconds=k * every + self.offset_seconds)
            k += 1

    def _cron_times(self, expr: str, after: datetime) -> Iterator[datetime]:
        # Iterate in naive wall time (no DST arithmetic inside croniter), from a little before
        # ``after`` (a repeated hour makes wall time go back), then place each wall time.
        start = after.astimezone(self.zone).replace(tzinfo=None) - timedelta(hours=3)
        it = croniter(ALIASES.get(expr, expr), start, second_at_beginning=True)
        previous: datetime | None = None
        while True:
            wall: datetime = it.get_next(datetime)
            t = _place(wall, self.zone)
            if previous is not None and t <= previous:
                continue  # two wall times in one gap land on the same moment
            previous = t
            if t > after - timedelta(seconds=1):
                yield t


def _place(wall: datetime, zone: ZoneInfo) -> datetime:
    """The UTC moment of wall time ``wall`` in ``zone``: the first occurrence of a repeated
    time, and for a time in a gap the moment the clocks jump (the first valid time after it)."""
    first = wall.replace(tzinfo=zone, fold=0).astimezone(UTC)
    if first.astimezone(zone).replace(tzinfo=None) == wall:
        return first
    # In a gap: fold=1 reads it with the offset after the jump (earlier in UTC), fold=0 with
    # the offset before (later); the jump is between them. Find it to the second.
    low = wall.replace(tzinfo=zone, fold=1).astimezone(UTC)
    low, high = min(low, first), max(low, first)
    before = low.astimezone(zone).utcoffset()
    while (high - low) > timedelta(seconds=1):
        mid = low + (high - low) / 2
        if mid.astimezone(zone).utcoffset() == before:
            low = mid
        else:
            high = mid
    return high.replace(microsecond=0)


def _time(value: Any, path: str, problems: list[Problem]) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, str):
        try:
            t = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            t = None
        if t is not None and t.tzinfo is not None:
            return t.astimezone(UTC)
    problems.append(Problem(path, "an ISO 8601 time with an offset, e.g. 2026-01-01T00:00:00Z"))
    return None


def _int(
    value: Any, path: str, low: int, high: int, problems: list[Problem], *, int64: bool = False
) -> int | None:
    if value is None:
        return None
    if int64 and isinstance(value, str) and value.strip().lstrip("-").isdigit():
        # The proto3 JSON mapping writes an int64 as a string: the SDKs' generated types do.
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        problems.append(Problem(path, f"an integer from {low} to {high}"))
        return None
    return value


def check_cron(expr: Any, path: str, problems: list[Problem]) -> None:
    if not isinstance(expr, str) or not expr.strip():
        problems.append(Problem(path, "a cron expression (a string)"))
        return
    text = ALIASES.get(expr.strip(), expr.strip())
    if text.startswith("@"):
        aliases = ", ".join(a for a in ALIASES if a != "@midnight")
        problems.append(Problem(path, f"unknown alias {expr!r}: use one of {aliases}"))
        return
    fields = len(text.split())
    if fields not in (5, 6):
        problems.append(
            Problem(
                path,
                f"{fields} fields: give 5 (minute hour day month weekday) or 6 (seconds first)",
            )
        )
        return
    try:
        croniter(text, datetime(2000, 1, 1), second_at_beginning=True)
    except (ValueError, KeyError, TypeError) as e:
        problems.append(Problem(path, f"not a valid cron expression: {e}"))


def parse_spec(raw: Any, problems: list[Problem], path: str = "spec") -> Spec | None:
    """The spec ``raw`` (its JSON object) as a :class:`Spec`; every problem is added to
    ``problems`` (None then)."""
    if not isinstance(raw, dict):
        problems.append(Problem(path, "an object: {cron: [...]} and/or {interval: {...}}"))
        return None
    before = len(problems)
    known = {"cron", "interval", "timeZone", "jitterSeconds", "startAt", "endAt"}
    problems.extend(Problem(f"{path}.{k}", "unknown field") for k in raw if k not in known)
    cron = raw.get("cron") or []
    if isinstance(cron, str):
        cron = [cron]
    if not isinstance(cron, list) or len(cron) > MAX_CRONS:
        problems.append(Problem(f"{path}.cron", f"a list of at most {MAX_CRONS} expressions"))
        cron = []
    for i, expr in enumerate(cron):
        check_cron(expr, f"{path}.cron[{i}]", problems)
    every, offset = None, 0
    interval = raw.get("interval")
    if interval is not None:
        if not isinstance(interval, dict) or "everySeconds" not in interval:
            problems.append(Problem(f"{path}.interval", "{everySeconds, offsetSeconds?}"))
        else:
            every = _int(
                interval["everySeconds"],
                f"{path}.interval.everySeconds",
                1,
                10**9,
                problems,
                int64=True,
            )
            offset = (
                _int(
                    interval.get("offsetSeconds", 0),
                    f"{path}.interval.offsetSeconds",
                    0,
                    10**9,
                    problems,
                    int64=True,
                )
                or 0
            )
            if every is not None and offset >= every:
                problems.append(Problem(f"{path}.interval.offsetSeconds", "less than everySeconds"))
            unknown = set(interval) - {"everySeconds", "offsetSeconds"}
            problems.extend(
                Problem(f"{path}.interval.{k}", "unknown field") for k in sorted(unknown)
            )
    if not cron and interval is None:
        problems.append(Problem(path, "give cron (a list of expressions) or interval, or both"))
    zone = ZoneInfo("UTC")
    tz = raw.get("timeZone")
    if tz is not None:
        try:
            if not isinstance(tz, str) or not tz:
                raise ValueError(tz)
            zone = ZoneInfo(tz)
        except (ZoneInfoNotFoundError, ValueError):
            problems.append(
                Problem(f"{path}.timeZone", f"{tz!r} is not an IANA time zone (e.g. Europe/Berlin)")
            )
    jitter = _int(
        raw.get("jitterSeconds", 0), f"{path}.jitterSeconds", 0, MAX_JITTER_SECONDS, problems
    )
    start_at = _time(raw.get("startAt"), f"{path}.startAt", problems)
    end_at = _time(raw.get("endAt"), f"{path}.endAt", problems)
    if start_at and end_at and end_at < start_at:
        problems.append(Problem(f"{path}.endAt", "not before startAt"))
    if len(problems) > before:
        return None
    return Spec(
        crons=tuple(str(c).strip() for c in cron),
        every_seconds=every,
        offset_seconds=offset,
        zone=zone,
        jitter_seconds=jitter or 0,
        start_at=start_at,
        end_at=end_at,
    )


def iso(t: datetime) -> str:
    """A slot time as the API and correlation ids spell it: UTC, ``Z``, milliseconds if any."""
    t = t.astimezone(UTC)
    spec = "milliseconds" if t.microsecond else "seconds"
    return t.isoformat(timespec=spec).replace("+00:00", "Z")
