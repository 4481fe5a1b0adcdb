"""Retry delays, as Conductor defines them."""

from __future__ import annotations

from baton.model import MAX_SECONDS, RetryLogic


def retry_delay_seconds(
    logic: RetryLogic,
    base_seconds: int,
    retry_number: int,
    cap_seconds: int | None = None,
    scale_factor: int = 1,
) -> int:
    """Delay before retry ``retry_number`` (1 for the first retry).

    FIXED waits ``base``; LINEAR_BACKOFF ``base * scale_factor * n`` (Conductor's
    backoffScaleFactor); EXPONENTIAL_BACKOFF ``base * 2^(n-1)`` (Conductor applies no factor
    there).
    """
    if retry_number < 1:
        raise ValueError("retry_number starts at 1")
    if logic is RetryLogic.FIXED:
        delay = base_seconds
    elif logic is RetryLogic.LINEAR_BACKOFF:
        delay = base_seconds * scale_factor * retry_number
    else:
        # Bound the exponent before computing, so a large attempt count cannot build a huge int.
        delay = base_seconds * (1 << min(retry_number - 1, 40))
    return min(delay, cap_seconds if cap_seconds is not None else MAX_SECONDS)
