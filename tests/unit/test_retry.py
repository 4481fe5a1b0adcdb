"""Retry delays (FIXED, LINEAR_BACKOFF, EXPONENTIAL_BACKOFF), as Conductor defines them."""

from __future__ import annotations

import pytest
from baton.engine.retry import retry_delay_seconds
from baton.model import RetryLogic
from hypothesis import given
from hypothesis import strategies as st


@pytest.mark.parametrize(
    ("logic", "delays"),
    [
        (RetryLogic.FIXED, [5, 5, 5, 5]),
        (RetryLogic.LINEAR_BACKOFF, [5, 10, 15, 20]),
        (RetryLogic.EXPONENTIAL_BACKOFF, [5, 10, 20, 40]),
    ],
)
def test_retry_delays_follow_the_logic(logic: RetryLogic, delays: list[int]) -> None:
    assert [retry_delay_seconds(logic, 5, n) for n in range(1, 5)] == delays


@given(base=st.integers(0, 10_000), n=st.integers(1, 10_000), cap=st.integers(1, 100_000))
def test_backoff_never_exceeds_its_cap(base: int, n: int, cap: int) -> None:
    for logic in RetryLogic:
        assert 0 <= retry_delay_seconds(logic, base, n, cap) <= cap


def test_a_scale_factor_multiplies_linear_backoff_only() -> None:
    """Conductor's backoffScaleFactor: LINEAR_BACKOFF waits delay x factor x n; FIXED and
    EXPONENTIAL_BACKOFF do not use it; the cap still holds."""
    linear = [retry_delay_seconds(RetryLogic.LINEAR_BACKOFF, 1, n, None, 2) for n in (1, 2, 3)]
    assert linear == [2, 4, 6]
    assert retry_delay_seconds(RetryLogic.LINEAR_BACKOFF, 1, 3, 5, 2) == 5
    assert retry_delay_seconds(RetryLogic.FIXED, 3, 2, None, 7) == 3
    assert retry_delay_seconds(RetryLogic.EXPONENTIAL_BACKOFF, 3, 2, None, 7) == 6
