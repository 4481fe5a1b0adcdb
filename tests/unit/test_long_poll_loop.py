"""The long-poll loop's decisions on a fake clock: the re-claim backoff and the deadline."""

from __future__ import annotations

from typing import Any

from baton.engine import long_poll


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def _claims(found_at: int) -> tuple[list[int], Any]:
    calls: list[int] = []

    def claim() -> list[dict[str, Any]]:
        calls.append(1)
        return [{"id": "j"}] if len(calls) >= found_at else []

    return calls, claim


def test_reclaim_backs_off_with_jitter_from_50ms_to_1s_and_stops_at_the_deadline() -> None:
    t = FakeTime()
    calls, claim = _claims(found_at=10**6)
    rows = long_poll.wait_for_jobs(claim, ["a"], 20, None, clock=t.clock, sleep=t.sleep)
    assert rows == []
    assert t.now == 20.0  # not a moment past the deadline
    assert 0.025 <= t.sleeps[0] <= 0.05
    assert all(s <= long_poll.RECLAIM_MAX_DELAY for s in t.sleeps)
    assert max(t.sleeps[:-1]) >= 0.5  # reached the cap's range
    assert 20 <= len(calls) <= 45  # ~30 claims for an idle 20 s wait, not hundreds


def test_a_job_ends_the_wait_at_once() -> None:
    t = FakeTime()
    calls, claim = _claims(found_at=3)
    assert long_poll.wait_for_jobs(claim, ["a"], 20, None, clock=t.clock, sleep=t.sleep)
    assert len(calls) == 3 and t.now < 0.2


def test_the_wait_is_capped_below_api_gateways_29_seconds() -> None:
    t = FakeTime()
    _, claim = _claims(found_at=10**6)
    long_poll.wait_for_jobs(claim, ["a"], 600, None, clock=t.clock, sleep=t.sleep)
    assert t.now == long_poll.MAX_WAIT_SECONDS == 20.0


def test_no_wait_claims_once() -> None:
    t = FakeTime()
    calls, claim = _claims(found_at=10**6)
    assert long_poll.wait_for_jobs(claim, ["a"], 0, None, clock=t.clock, sleep=t.sleep) == []
    assert len(calls) == 1 and t.sleeps == []


def test_a_client_that_left_ends_the_wait_without_claiming_again() -> None:
    """Once the caller hung up (the local server sees it), a job made claimable later is not
    claimed for it: it would sit leased to a worker that stopped until its lease lapsed."""
    t = FakeTime()
    calls, claim = _claims(found_at=2)  # the second claim would find a job
    left = [False]

    def sleep(seconds: float) -> None:
        t.sleep(seconds)
        left[0] = True  # the client closes its connection during the first wait

    rows = long_poll.wait_for_jobs(
        claim, ["a"], 20, None, clock=t.clock, sleep=sleep, gone=lambda: left[0]
    )
    assert rows == [] and len(calls) == 1
    assert t.now < 0.1  # and the wait ended there, not at its deadline


def test_a_client_still_there_waits_as_before() -> None:
    t = FakeTime()
    calls, claim = _claims(found_at=3)
    rows = long_poll.wait_for_jobs(
        claim, ["a"], 20, None, clock=t.clock, sleep=t.sleep, gone=lambda: False
    )
    assert rows and len(calls) == 3
