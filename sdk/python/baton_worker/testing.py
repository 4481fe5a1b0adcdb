"""Run a handler in a test, without a server: a fake job, the context the runner would give it,
and a record of what the handler did with it (like Temporal's ``ActivityEnvironment``).

    env = JobEnvironment(input={"amount": 42}, attempt=2)
    assert env.run(charge) == {"receipt": "R-1001"}  # its result, or it raises its exception
    assert len(env.heartbeats) == 1  # the heartbeats it sent

``request_shutdown()`` and ``lose_lease()`` simulate the runner being stopped and the job being
taken away, before the run or during it (from ``on_heartbeat``, or another thread).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from baton_worker._results import result_problem
from baton_worker.context import JobContext
from baton_worker.errors import ConflictError
from baton_worker.types import Job


class RejectedResult(Exception):
    """The handler returned something the runner would not send; it would fail the job,
    non-retryably, with this message (a dict that is not strict JSON, a list...)."""


class JobEnvironment:
    """A fake job to run handlers with, as the runner would run them.

    Every option is the job's field of the same name; ids not given are random UUIDs.
    ``lease`` is how far each heartbeat moves ``ctx.lock_expires_at``. ``on_heartbeat`` is called
    with the context at each ``ctx.heartbeat()``, before the heartbeat answers (it may call
    :meth:`request_shutdown` or :meth:`lose_lease`). ``check_result`` makes :meth:`run` check
    the result as the runner would, raising :class:`RejectedResult` where the runner would fail
    the job.
    """

    def __init__(
        self,
        *,
        input: Any = None,
        job_type: str = "test-job",
        attempt: int = 1,
        retries_remaining: int = 0,
        step_id: str = "test-step",
        worker_id: str = "test-worker",
        job_id: str | None = None,
        instance_id: str | None = None,
        input_payload_path: str | None = None,
        lease: timedelta = timedelta(seconds=30),
        on_heartbeat: Callable[[JobContext], None] | None = None,
        logger: logging.Logger | None = None,
        check_result: bool = True,
    ) -> None:
        self.job: Job = {
            "id": job_id or str(uuid.uuid4()),
            "instanceId": instance_id or str(uuid.uuid4()),
            "stepId": step_id,
            "stepExecutionId": str(uuid.uuid4()),
            "jobType": job_type,
            "attempt": attempt,
            "retriesRemaining": retries_remaining,
            "lockExpiresAt": "",  # set per run
            "input": {} if input is None else input,
        }
        if input_payload_path is not None:
            self.job["inputPayloadPath"] = input_payload_path
        self.worker_id = worker_id
        self.lease = lease
        self.on_heartbeat = on_heartbeat
        self.logger = logger
        self.check_result = check_result
        self.heartbeats: list[datetime] = []
        """When each ``ctx.heartbeat()`` was sent, over every run."""
        self.context: JobContext | None = None
        """The context of the latest run."""
        self._stopping = threading.Event()
        self._lease_lost = threading.Event()

    # --- simulations -----------------------------------------------------------------------------

    def request_shutdown(self) -> None:
        """As if the runner were asked to stop: ``ctx.shutting_down`` turns True."""
        self._stopping.set()

    def lose_lease(self) -> None:
        """As if the job were taken away (instance cancelled, lease expired): ``ctx.lease_lost``
        turns True and every later ``ctx.heartbeat()`` raises ``ConflictError``."""
        self._lease_lost.set()
        if self.context is not None:
            self.context._mark_lease_lost()

    # --- running ---------------------------------------------------------------------------------

    def run(self, handler: Callable[[JobContext], Any]) -> Any:
        """Call ``handler`` with a new context; its result (a coroutine is run to its end), or
        the exception it raised. From inside an event loop, use :meth:`run_async`."""
        result = handler(self._new_context())
        if inspect.isawaitable(result):
            try:
                asyncio.get_running_loop()
            except RuntimeError:
                result = asyncio.run(_wait(result))
            else:
                if inspect.iscoroutine(result):
                    result.close()  # never awaited: close it rather than leak a warning
                raise RuntimeError(
                    "JobEnvironment.run was called inside an event loop: "
                    "await env.run_async(handler) instead"
                )
        return self._checked(handler, result)

    async def run_async(self, handler: Callable[[JobContext], Any]) -> Any:
        """:meth:`run` for tests that are coroutines themselves."""
        result = handler(self._new_context())
        if inspect.isawaitable(result):
            result = await result
        return self._checked(handler, result)

    def _new_context(self) -> JobContext:
        expires = datetime.now(UTC) + self.lease
        self.job["lockExpiresAt"] = expires.isoformat().replace("+00:00", "Z")
        self.context = JobContext(
            self.job,
            worker_id=self.worker_id,
            lock_expires_at=expires,
            heartbeat=self._heartbeat,
            stopping=self._stopping,
            logger=self.logger,
        )
        if self._lease_lost.is_set():
            self.context._mark_lease_lost()
        return self.context

    def _heartbeat(self, ctx: JobContext) -> datetime:
        sent = datetime.now(UTC)
        self.heartbeats.append(sent)
        if self.on_heartbeat is not None:
            self.on_heartbeat(ctx)
        if self._lease_lost.is_set():
            ctx._mark_lease_lost()
            raise ConflictError(
                409,
                "Conflict",
                f"job {ctx.job_id} is not locked by worker {self.worker_id} (simulated)",
            )
        return sent + self.lease

    def _checked(self, handler: Callable[[JobContext], Any], result: Any) -> Any:
        if self.check_result:
            name = getattr(handler, "__qualname__", None) or repr(handler)
            problem = result_problem(result, name)
            if problem is not None:
                raise RejectedResult(problem)
        return result


async def _wait(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


__all__ = ["JobEnvironment", "RejectedResult"]
