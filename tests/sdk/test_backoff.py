"""Retry timing of the worker SDK: exponential growth, the cap, jitter bounds, giving up."""

from __future__ import annotations

import pytest
from baton_worker.backoff import Backoff, RetryPolicy
from hypothesis import given
from hypothesis import strategies as st


def test_ceiling_doubles_from_the_initial_interval_up_to_the_maximum() -> None:
    policy = RetryPolicy(initial_interval=0.1, backoff_coefficient=2.0, maximum_interval=1.0)
    assert [policy.ceiling(n) for n in range(6)] == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.0, 1.0])


def test_ceiling_of_a_very_long_outage_stays_at_the_maximum() -> None:
    assert RetryPolicy(maximum_interval=30.0).ceiling(10_000) == 30.0


def test_delay_without_jitter_is_the_ceiling() -> None:
    policy = RetryPolicy(initial_interval=0.5, jitter=0.0)
    assert policy.delay(2, rand=lambda: 0.99) == pytest.approx(2.0)


def test_jitter_takes_off_at_most_its_share() -> None:
    policy = RetryPolicy(initial_interval=1.0, maximum_interval=1.0, jitter=0.5)
    assert policy.delay(0, rand=lambda: 0.0) == pytest.approx(1.0)
    assert policy.delay(0, rand=lambda: 1.0) == pytest.approx(0.5)


@given(
    retry=st.integers(min_value=0, max_value=200),
    jitter=st.floats(min_value=0.0, max_value=1.0),
    draw=st.floats(min_value=0.0, max_value=1.0, exclude_max=True),
)
def test_jittered_delay_is_always_within_its_bounds(retry: int, jitter: float, draw: float) -> None:
    policy = RetryPolicy(initial_interval=0.05, maximum_interval=7.0, jitter=jitter)
    ceiling = policy.ceiling(retry)
    delay = policy.delay(retry, rand=lambda: draw)
    assert (1.0 - jitter) * ceiling - 1e-12 <= delay <= ceiling


def test_backoff_grows_per_failure_and_starts_over_after_reset() -> None:
    backoff = Backoff(RetryPolicy(initial_interval=0.1, jitter=0.0, maximum_interval=10))
    assert [backoff.next_delay() for _ in range(3)] == pytest.approx([0.1, 0.2, 0.4])
    backoff.reset()
    assert backoff.next_delay() == pytest.approx(0.1)


def test_allows_counts_the_first_attempt() -> None:
    policy = RetryPolicy(maximum_attempts=3)
    assert policy.allows(1, 0.0, 0.1)
    assert policy.allows(2, 0.0, 0.1)
    assert not policy.allows(3, 0.0, 0.1)


def test_allows_stops_before_the_elapsed_budget_is_exceeded() -> None:
    policy = RetryPolicy(maximum_attempts=None, maximum_elapsed=5.0)
    assert policy.allows(100, 4.0, 1.0)
    assert not policy.allows(100, 4.0, 1.5)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"initial_interval": 0},
        {"backoff_coefficient": 0.5},
        {"initial_interval": 2.0, "maximum_interval": 1.0},
        {"maximum_attempts": 0},
        {"maximum_elapsed": -1.0},
        {"jitter": 1.5},
    ],
)
def test_nonsense_policies_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        RetryPolicy(**kwargs)  # type: ignore[arg-type]
