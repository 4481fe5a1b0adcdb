"""Schedule specs with a fake clock: cron (5 and 6 fields, aliases, several), intervals aligned to
the epoch, time zones with daylight-saving gaps and repeats, start/end, jitter, validation."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import islice
from typing import Any

import pytest
from baton.engine.schedule_ops import validate
from baton.engine.schedule_spec import Spec, iso, parse_spec
from baton.errors import Problem, ValidationFailed


def spec(**raw: Any) -> Spec:
    problems: list[Problem] = []
    parsed = parse_spec(raw, problems)
    assert parsed is not None, problems
    return parsed


def times(s: Spec, after: str, n: int = 5) -> list[str]:
    start = datetime.fromisoformat(after.replace("Z", "+00:00"))
    return [iso(t) for t in islice(s.fire_times(start), n)]


def test_five_field_cron_in_utc() -> None:
    assert times(spec(cron=["*/15 * * * *"]), "2026-03-01T10:07:00Z", 3) == [
        "2026-03-01T10:15:00Z",
        "2026-03-01T10:30:00Z",
        "2026-03-01T10:45:00Z",
    ]


def test_after_is_exclusive() -> None:
    assert times(spec(cron=["0 * * * *"]), "2026-03-01T10:00:00Z", 1) == ["2026-03-01T11:00:00Z"]


def test_six_fields_have_seconds_first() -> None:
    assert times(spec(cron=["30 0 12 * * *"]), "2026-03-01T00:00:00Z", 2) == [
        "2026-03-01T12:00:30Z",
        "2026-03-02T12:00:30Z",
    ]


@pytest.mark.parametrize(
    ("alias", "first"),
    [
        ("@hourly", "2026-03-01T11:00:00Z"),
        ("@daily", "2026-03-02T00:00:00Z"),
        ("@weekly", "2026-03-08T00:00:00Z"),  # a Sunday
        ("@monthly", "2026-04-01T00:00:00Z"),
        ("@yearly", "2027-01-01T00:00:00Z"),
    ],
)
def test_aliases(alias: str, first: str) -> None:
    assert times(spec(cron=[alias]), "2026-03-01T10:30:00Z", 1) == [first]


def test_several_crons_merge_in_order_without_repeats() -> None:
    s = spec(cron=["0 * * * *", "30 * * * *", "0 */2 * * *"])
    assert times(s, "2026-03-01T09:50:00Z", 4) == [
        "2026-03-01T10:00:00Z",
        "2026-03-01T10:30:00Z",
        "2026-03-01T11:00:00Z",
        "2026-03-01T11:30:00Z",
    ]


def test_interval_aligned_to_epoch_plus_offset() -> None:
    s = spec(interval={"everySeconds": 3600, "offsetSeconds": 900})
    assert times(s, "2026-03-01T10:20:00Z", 2) == ["2026-03-01T11:15:00Z", "2026-03-01T12:15:00Z"]
    two = spec(interval={"everySeconds": 2})
    assert times(two, "2026-03-01T10:20:01Z", 2) == ["2026-03-01T10:20:02Z", "2026-03-01T10:20:04Z"]


def test_interval_seconds_may_be_strings_as_proto3_json_writes_int64() -> None:
    # The Go, Java and TypeScript SDKs' generated types send everySeconds as "3600".
    s = spec(interval={"everySeconds": "3600", "offsetSeconds": "900"})
    assert times(s, "2026-03-01T10:20:00Z", 1) == ["2026-03-01T11:15:00Z"]
    problems: list[Problem] = []
    assert parse_spec({"interval": {"everySeconds": "an hour"}}, problems) is None
    assert [p.path for p in problems] == ["spec.interval.everySeconds"]


def test_interval_and_cron_together() -> None:
    s = spec(cron=["5 10 * * *"], interval={"everySeconds": 600})
    assert times(s, "2026-03-01T10:00:00Z", 3) == [
        "2026-03-01T10:05:00Z",
        "2026-03-01T10:10:00Z",
        "2026-03-01T10:20:00Z",
    ]


def test_time_zone_wall_time() -> None:
    s = spec(cron=["0 9 * * 1"], timeZone="Europe/Berlin")  # Mondays 09:00 in Berlin
    assert times(s, "2026-01-01T00:00:00Z", 1) == ["2026-01-05T08:00:00Z"]  # CET, UTC+1
    assert times(s, "2026-07-01T00:00:00Z", 1) == ["2026-07-06T07:00:00Z"]  # CEST, UTC+2


def test_berlin_spring_forward_gap_fires_at_the_first_valid_time_after() -> None:
    # 2026-03-29: Berlin's clocks jump from 02:00 CET to 03:00 CEST (01:00 UTC). 02:30 does
    # not exist that day: it fires at 03:00 CEST, the moment of the jump.
    s = spec(cron=["30 2 * * *"], timeZone="Europe/Berlin")
    assert times(s, "2026-03-27T12:00:00Z", 3) == [
        "2026-03-28T01:30:00Z",  # 02:30 CET
        "2026-03-29T01:00:00Z",  # 03:00 CEST (02:30 is in the gap)
        "2026-03-30T00:30:00Z",  # 02:30 CEST
    ]


def test_gap_slots_landing_on_one_moment_fire_once() -> None:
    # Every 30 minutes: 02:00 and 02:30 are in the gap and 03:00 is the jump itself.
    s = spec(cron=["*/30 * * * *"], timeZone="Europe/Berlin")
    assert times(s, "2026-03-29T00:10:00Z", 4) == [
        "2026-03-29T00:30:00Z",  # 01:30 CET
        "2026-03-29T01:00:00Z",  # 03:00 CEST (02:00 and 02:30 in the gap: once)
        "2026-03-29T01:30:00Z",  # 03:30 CEST
        "2026-03-29T02:00:00Z",
    ]


def test_berlin_fall_back_repeat_fires_once_at_the_first_occurrence() -> None:
    # 2026-10-25: 03:00 CEST goes back to 02:00 CET, 02:30 happens twice (00:30 and 01:30 UTC).
    s = spec(cron=["30 2 * * *"], timeZone="Europe/Berlin")
    assert times(s, "2026-10-24T12:00:00Z", 2) == [
        "2026-10-25T00:30:00Z",  # the first 02:30 (CEST); the second is not fired
        "2026-10-26T01:30:00Z",  # 02:30 CET
    ]
    hourly = spec(cron=["0 * * * *"], timeZone="Europe/Berlin")
    assert times(hourly, "2026-10-24T23:30:00Z", 4) == [
        "2026-10-25T00:00:00Z",  # 02:00 CEST; 02:00 CET (01:00 UTC), the repeat, is not fired
        "2026-10-25T02:00:00Z",  # 03:00 CET
        "2026-10-25T03:00:00Z",
        "2026-10-25T04:00:00Z",
    ]


def test_start_and_end_bound_the_slots() -> None:
    s = spec(cron=["0 * * * *"], startAt="2026-03-01T12:00:00Z", endAt="2026-03-01T14:00:00+00:00")
    assert times(s, "2026-03-01T00:00:00Z", 5) == [
        "2026-03-01T12:00:00Z",
        "2026-03-01T13:00:00Z",
        "2026-03-01T14:00:00Z",
    ]


def test_jitter_is_stable_and_bounded() -> None:
    s = spec(cron=["0 * * * *"], jitterSeconds=30)
    slot = datetime(2026, 3, 1, 10, tzinfo=UTC)
    due = s.due_at("a", slot)
    assert due == s.due_at("a", slot)
    assert slot <= due < slot + timedelta(seconds=30)
    assert spec(cron=["0 * * * *"]).due_at("a", slot) == slot


def test_every_problem_is_listed() -> None:
    with pytest.raises(ValidationFailed) as err:
        validate(
            {
                "id": "bad id!",
                "overlapPolicy": "SOMETIMES",
                "catchupWindowSeconds": -1,
                "spec": {
                    "cron": ["61 * * * *", "* * *", "@fortnightly"],
                    "interval": {"everySeconds": 0},
                    "timeZone": "Mars/Olympus",
                    "jitterSeconds": "5",
                    "startAt": "yesterday",
                    "colour": "red",
                },
            }
        )
    paths = {p.path for p in err.value.problems}
    assert paths >= {
        "id",
        "definitionName",
        "overlapPolicy",
        "catchupWindowSeconds",
        "spec.cron[0]",
        "spec.cron[1]",
        "spec.cron[2]",
        "spec.interval.everySeconds",
        "spec.timeZone",
        "spec.jitterSeconds",
        "spec.startAt",
        "spec.colour",
    }


def test_a_spec_needs_cron_or_interval() -> None:
    problems: list[Problem] = []
    assert parse_spec({"timeZone": "UTC"}, problems) is None
    assert [p.path for p in problems] == ["spec"]
