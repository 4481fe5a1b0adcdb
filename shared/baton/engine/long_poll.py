"""Long-poll: claim now, or wait up to ``waitSeconds`` for a job to become claimable.

Two ways to wait, neither holding a database connection while it sleeps:

- notify (a direct connection: ``baton dev``, or AWS without RDS Proxy): subscribe to the job
  types on the process's LISTEN connection (:class:`~baton.store.job_listener.JobWakeups`) and
  claim again when one is notified. Jobs that become claimable without a notifying transaction
  (a delayed retry coming due, a lease lapsing) are found by a backstop re-claim every
  ``BACKSTOP_SECONDS``.
- reclaim (behind RDS Proxy, where LISTEN would pin a connection): claim again with jittered
  exponential backoff from ``RECLAIM_FIRST_DELAY`` to ``RECLAIM_MAX_DELAY``.

Once ``gone()`` says the client went away (the local server sees the connection close; Lambda
behind API Gateway cannot) or its worker sent its stop signal (``POST /v1/workers/stop``), a wait
ends without claiming again: a job claimed for a worker that stopped would sit leased until its
lease lapsed, then run again as a new attempt, counted against its retries.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from typing import Any

from baton.store.job_listener import JobWakeups

# API Gateway gives up on a request after 29 s: the wait stays well under it.
MAX_WAIT_SECONDS = 20.0
# A synchronous execution (Conductor's POST /api/workflow/execute) waits up to this: the answer,
# started and read in the same request, must still beat the gateway's 29 s.
MAX_INSTANCE_WAIT_SECONDS = 25.0
BACKSTOP_SECONDS = 1.0
RECLAIM_FIRST_DELAY = 0.05
RECLAIM_MAX_DELAY = 1.0

Rows = list[dict[str, Any]]


def wait_for_jobs(
    claim: Callable[[], Rows],
    job_types: Sequence[str],
    wait_seconds: float,
    wakeups: JobWakeups | None,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    gone: Callable[[], bool] | None = None,
    max_wait: float = MAX_WAIT_SECONDS,
    also: Sequence[str] = (),
) -> Rows:
    """Claim with ``claim()``; while it finds nothing, wait until a job may be claimable and
    claim again, for at most ``wait_seconds`` (cut to ``max_wait``). Empty at the deadline, or
    as soon as ``gone()`` says the client that asked is no longer there (or its worker stopped):
    asked once as soon as the first claim found nothing, before the wait begins, then before
    each claim after a wait. A notification of an ``also`` key (``worker_wakeup``) ends a wait
    too, so ``gone()`` is asked at once rather than at the next backstop.
    """
    deadline = clock() + min(max(wait_seconds, 0.0), max_wait)
    rows = claim()
    if rows or clock() >= deadline:
        return rows
    client_left = gone or _never
    if wakeups is None:
        if client_left():  # (a watch on the worker's stop signal takes its baseline here)
            return []
        return _reclaim_loop(claim, deadline, clock, sleep, client_left)
    with wakeups.subscribe(job_types, also) as sub:
        # Subscribed (listening, types and ``also`` registered): a job or a stop committed from
        # now on is notified; a job committed before is found by this claim, and a stop by this
        # look (where a watch on the worker's stop signal takes its baseline), which comes after
        # the subscription so that a stop in between cannot be missed by both.
        if client_left():
            return []
        while True:
            rows = claim()
            if rows:
                return rows
            left = deadline - clock()
            if left <= 0:
                return rows
            sub.wait(min(left, BACKSTOP_SECONDS))
            if client_left():
                return []


def instance_wakeup(instance_id: str) -> str:
    """The wake-up key of an instance's changes (migration 0019): every write of its row (a
    decision that adds steps or changes its status, variables or output) notifies it while
    someone waits. A '/' is in no job type, so it never wakes a long-poll, nor is woken by one."""
    return f"instance/{instance_id}"


def worker_wakeup(worker_id: str) -> str:
    """The wake-up key of a worker's stop signal: ``POST /v1/workers/stop`` notifies it, so the
    worker's waiting long-poll looks at its stop at once (a '/' is in no job type)."""
    return f"worker/{worker_id}"


def wait_for_instance(
    read: Callable[[], dict[str, Any]],
    done: Callable[[dict[str, Any]], bool],
    instance_id: str,
    wait_seconds: float,
    wakeups: JobWakeups | None,
    *,
    gone: Callable[[], bool] | None = None,
) -> dict[str, Any]:
    """The instance as ``read()`` gives it, once ``done`` says so or after at most
    ``wait_seconds`` (cut to ``MAX_INSTANCE_WAIT_SECONDS``): read again each time its row
    changes (notify, with the backstop re-read every second) or with backoff (reclaim)."""
    last: list[dict[str, Any]] = []

    def look() -> Rows:
        last[:] = [read()]
        return last if done(last[0]) else []

    wait_for_jobs(
        look,
        [instance_wakeup(instance_id)],
        wait_seconds,
        wakeups,
        gone=gone,
        max_wait=MAX_INSTANCE_WAIT_SECONDS,
    )
    return last[0]


def _never() -> bool:
    return False


def _reclaim_loop(
    claim: Callable[[], Rows],
    deadline: float,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
    client_left: Callable[[], bool],
) -> Rows:
    delay = RECLAIM_FIRST_DELAY
    while True:
        left = deadline - clock()
        if left <= 0:
            return []
        sleep(min(left, random.uniform(delay / 2, delay)))
        if client_left():
            return []
        rows = claim()
        if rows:
            return rows
        delay = min(delay * 2, RECLAIM_MAX_DELAY)
