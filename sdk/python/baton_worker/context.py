"""``JobContext``: what a handler receives for one job."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, MutableMapping
from datetime import datetime
from typing import Any

from baton_worker.types import Job, JsonObject

JOB_LOGGER = "baton_worker.job"


class JobLogger(logging.LoggerAdapter):  # type: ignore[type-arg]
    """A logger that adds the job's ids to every record (``extra``), merged with the caller's
    own ``extra``, so structured log handlers see ``job_id``, ``instance_id``..."""

    def process(
        self, msg: Any, kwargs: MutableMapping[str, Any]
    ) -> tuple[Any, MutableMapping[str, Any]]:
        kwargs["extra"] = {**(self.extra or {}), **(kwargs.get("extra") or {})}
        return msg, kwargs


def job_log_fields(job: Job, worker_id: str) -> dict[str, Any]:
    """The ids every log line about a job carries."""
    return {
        "job_id": job["id"],
        "job_type": job["jobType"],
        "instance_id": job["instanceId"],
        "step_id": job["stepId"],
        "attempt": job["attempt"],
        "worker_id": worker_id,
    }


class JobContext:
    """One claimed job, as its handler sees it.

    Attributes mirror the job (``input``, ``job_id``, ``instance_id``, ``step_id``, ``attempt``,
    ``retries_remaining``...). ``logger`` logs with the job's ids attached. ``heartbeat()``
    extends the lease now (the runner also does so on its own at half of each lease, so calling
    it is only needed to learn early that the lease was lost). ``shutting_down`` turns True when
    the runner is asked to stop: a long handler may use it to finish early.
    """

    def __init__(
        self,
        job: Job,
        *,
        worker_id: str,
        lock_expires_at: datetime,
        heartbeat: Callable[[JobContext], datetime],
        stopping: threading.Event,
        logger: logging.Logger | None = None,
    ) -> None:
        self.job = job
        self.worker_id = worker_id
        self.lock_expires_at = lock_expires_at
        self._heartbeat = heartbeat
        self._stopping = stopping
        self._lease_lost = threading.Event()
        raw = job.get("input")
        # Step inputs are JSON objects; anything else (never sent today) is wrapped, not lost.
        self.input: JsonObject = (
            raw if isinstance(raw, dict) else ({} if raw is None else {"value": raw})
        )
        self.logger: logging.LoggerAdapter[logging.Logger] = JobLogger(
            logger or logging.getLogger(JOB_LOGGER), job_log_fields(job, worker_id)
        )

    # --- the job ---------------------------------------------------------------------------------

    @property
    def job_id(self) -> str:
        return self.job["id"]

    @property
    def job_type(self) -> str:
        return self.job["jobType"]

    @property
    def instance_id(self) -> str:
        return self.job["instanceId"]

    @property
    def step_id(self) -> str:
        return self.job["stepId"]

    @property
    def step_execution_id(self) -> str:
        return self.job["stepExecutionId"]

    @property
    def attempt(self) -> int:
        """1 for the first delivery of this step's job, 2 after one retry, and so on."""
        return self.job["attempt"]

    @property
    def retries_remaining(self) -> int:
        """How many more retries a retryable failure would leave (0: this is the last try)."""
        return self.job["retriesRemaining"]

    @property
    def input_payload_path(self) -> str | None:
        """Set when the input was too large to send inline (external payload storage)."""
        return self.job.get("inputPayloadPath")

    # --- the lease -------------------------------------------------------------------------------

    def heartbeat(self) -> datetime:
        """Extend the lease now; returns its new end.

        Raises :class:`~baton_worker.errors.ConflictError` (or ``NotFoundError``) when the lease
        is no longer this worker's: the instance was cancelled, or the lease expired and another
        worker took the job. A handler may then stop early: its result would be discarded.
        """
        expires = self._heartbeat(self)
        self.lock_expires_at = expires
        return expires

    async def heartbeat_async(self) -> datetime:
        """:meth:`heartbeat` for ``async`` handlers (does not block the event loop)."""
        return await asyncio.to_thread(self.heartbeat)

    @property
    def lease_lost(self) -> bool:
        """True once a heartbeat learned that the job is no longer this worker's."""
        return self._lease_lost.is_set()

    def _mark_lease_lost(self) -> None:
        self._lease_lost.set()

    @property
    def shutting_down(self) -> bool:
        """True once the runner has been asked to stop (it still waits for this handler)."""
        return self._stopping.is_set()

    def __repr__(self) -> str:
        return (
            f"JobContext(job_id={self.job_id!r}, job_type={self.job_type!r}, "
            f"instance_id={self.instance_id!r}, attempt={self.attempt})"
        )


__all__ = ["JOB_LOGGER", "JobContext", "JobLogger", "job_log_fields"]
