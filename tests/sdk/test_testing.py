"""``baton_worker.testing.JobEnvironment``: handlers run with a fake job, without a server."""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from baton_worker import ConflictError, JobContext, JobError, NonRetryableError
from baton_worker.testing import JobEnvironment, RejectedResult

from examples.order_fulfilment import worker as example


def test_a_sync_handler_gets_the_job_and_its_result_comes_back() -> None:
    seen: list[tuple[Any, ...]] = []

    def handler(ctx: JobContext) -> dict[str, Any]:
        seen.append((ctx.input, ctx.job_type, ctx.attempt, ctx.retries_remaining, ctx.step_id))
        return {"doubled": ctx.input["n"] * 2}

    env = JobEnvironment(input={"n": 21}, job_type="double", attempt=3, retries_remaining=1)
    assert env.run(handler) == {"doubled": 42}
    assert seen == [({"n": 21}, "double", 3, 1, "test-step")]
    assert env.context is not None and env.context.job_id == env.job["id"]


def test_an_async_handler_is_run_to_its_end() -> None:
    async def handler(ctx: JobContext) -> dict[str, Any]:
        await asyncio.sleep(0)
        await ctx.heartbeat_async()
        return {"async": True}

    env = JobEnvironment()
    assert env.run(handler) == {"async": True}
    assert len(env.heartbeats) == 1


def test_run_async_serves_tests_that_are_coroutines() -> None:
    async def handler(ctx: JobContext) -> None:
        return None

    async def a_test() -> None:
        env = JobEnvironment()
        assert await env.run_async(handler) is None
        assert await env.run_async(lambda ctx: {"sync": 1}) == {"sync": 1}
        with pytest.raises(RuntimeError, match="run_async"):
            env.run(handler)

    asyncio.run(a_test())


def test_the_handlers_exception_is_raised_as_it_is() -> None:
    def handler(ctx: JobContext) -> None:
        raise JobError("rate limited", next_retry_delay=timedelta(seconds=30))

    with pytest.raises(JobError) as caught:
        JobEnvironment().run(handler)
    assert caught.value.next_retry_delay_seconds == 30.0


def test_heartbeats_are_recorded_and_move_the_lease() -> None:
    expiries: list[datetime] = []

    def handler(ctx: JobContext) -> None:
        first = ctx.lock_expires_at
        for _ in range(3):
            expiries.append(ctx.heartbeat())
        assert ctx.lock_expires_at == expiries[-1] >= first

    env = JobEnvironment(lease=timedelta(minutes=5))
    env.run(handler)
    assert len(env.heartbeats) == 3
    assert all(e - h == timedelta(minutes=5) for e, h in zip(expiries, env.heartbeats, strict=True))
    assert env.heartbeats[0] <= datetime.now(UTC)


def test_a_shutdown_requested_before_the_run_is_visible() -> None:
    env = JobEnvironment()
    env.request_shutdown()
    assert env.run(lambda ctx: {"stopping": ctx.shutting_down}) == {"stopping": True}


def test_a_shutdown_during_the_run_lets_a_long_handler_finish_early() -> None:
    def long_handler(ctx: JobContext) -> dict[str, Any]:
        for done in range(1000):
            if ctx.shutting_down:
                return {"done": done}
            ctx.heartbeat()
        return {"done": 1000}

    env = JobEnvironment()
    env.on_heartbeat = lambda ctx: env.request_shutdown() if len(env.heartbeats) == 3 else None
    assert env.run(long_handler) == {"done": 3}


def test_a_shutdown_from_another_thread_is_seen() -> None:
    env = JobEnvironment()

    def waits(ctx: JobContext) -> dict[str, Any]:
        deadline = time.monotonic() + 5
        while not ctx.shutting_down and time.monotonic() < deadline:
            time.sleep(0.005)
        return {"stopped": ctx.shutting_down}

    threading.Timer(0.05, env.request_shutdown).start()
    assert env.run(waits) == {"stopped": True}


def test_a_lost_lease_makes_heartbeats_raise_a_conflict() -> None:
    def handler(ctx: JobContext) -> dict[str, Any]:
        ctx.heartbeat()
        try:
            ctx.heartbeat()
        except ConflictError:
            return {"lost": ctx.lease_lost}
        return {"lost": False}

    env = JobEnvironment()
    env.on_heartbeat = lambda ctx: env.lose_lease() if len(env.heartbeats) == 2 else None
    assert env.run(handler) == {"lost": True}
    assert len(env.heartbeats) == 2


def test_a_result_the_runner_would_refuse_is_raised_as_rejected() -> None:
    with pytest.raises(RejectedResult, match=r"\$\.ratio is NaN"):
        JobEnvironment().run(lambda ctx: {"ratio": float("nan")})
    with pytest.raises(RejectedResult, match="returned list; return a dict"):
        JobEnvironment().run(lambda ctx: [1, 2])
    unchecked = JobEnvironment(check_result=False)
    assert unchecked.run(lambda ctx: [1, 2]) == [1, 2]


def test_the_examples_charge_is_retried_once_and_refuses_nothing_to_charge() -> None:
    order = {"amount": 42.5}
    with pytest.raises(ConnectionError, match="payment gateway timed out"):
        JobEnvironment(input=order, attempt=1).run(example.charge_card)
    charged = JobEnvironment(input=order, attempt=2, job_type="charge-card").run(
        example.charge_card
    )
    assert charged["charged"] == 42.5
    assert charged["receipt"].startswith("RCPT-")
    with pytest.raises(NonRetryableError, match="must be positive"):
        JobEnvironment(input={"amount": 0}, attempt=2).run(example.charge_card)


def test_the_examples_async_confirmation() -> None:
    env = JobEnvironment(input={"email": "ada@example.com"})
    assert env.run(example.send_confirmation) == {"confirmationSent": True}
