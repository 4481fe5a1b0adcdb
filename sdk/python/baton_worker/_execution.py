"""One job, from dispatch to its reported outcome: the right half of the worker model.

``JobExecutor.run(job)`` builds the handler's :class:`JobContext`, keeps the lease alive while the
handler runs, calls it (on the calling thread, or on the event loop for coroutines), and reports
the outcome: complete with the returned variables, or fail (retryable unless the handler said
otherwise). It never raises for anything a handler or the API does.

Reporting follows one rule: only failures that may pass (no answer, 429, 5xx) are retried. A
result that is not strict JSON Baton can store fails the job at once, non-retryably, without being
sent; a completion the server refuses with a 4xx does the same, with the server's reason. A 409 or
404 means the job is no longer this worker's (cancelled, or settled by another worker after a
lapsed lease): the outcome is logged and dropped.
"""

from __future__ import annotations

import inspect
import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from baton_worker._flusher import ResultFlusher
from baton_worker._heartbeat import Heartbeater, parse_timestamp
from baton_worker._loop import EventLoopThread
from baton_worker._results import result_problem
from baton_worker.backoff import RetryPolicy
from baton_worker.client import BatonClient
from baton_worker.context import JobContext
from baton_worker.errors import (
    AuthenticationError,
    BatonApiError,
    BatonError,
    ConflictError,
    JobError,
    NotFoundError,
    PermissionDeniedError,
)
from baton_worker.metrics import MetricsHook
from baton_worker.registry import RegisteredHandler, Registry
from baton_worker.types import BatchOutcome, Job

log = logging.getLogger("baton_worker.runner")

MAX_ERROR_MESSAGE = 10_000  # the API's limit on errorMessage
FALLBACK_LEASE = timedelta(seconds=30)  # only if a job came without a readable lockExpiresAt


def notify(hook: MetricsHook, name: str, **kwargs: Any) -> None:
    """Call a metrics hook; a broken metrics sink must not break job processing."""
    try:
        getattr(hook, name)(**kwargs)
    except Exception:
        log.exception("metrics hook failed", extra={"hook": name})


# The largest failure output sent when the server's soft limit is not known.
MAX_FAILURE_OUTPUT_BYTES = 256 * 1024


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a handler's call came to: variables to complete with, or an error to fail with."""

    variables: Mapping[str, Any] | None = None
    error: str | None = None
    retryable: bool = True
    next_retry_delay_seconds: float | None = None  # None: the step's own retry delay
    seconds: float = 0.0
    failure_output: Mapping[str, Any] | None = None  # what goes with the failure


class JobExecutor:
    """Runs jobs for one runner; thread-safe (each job runs on its own job thread)."""

    def __init__(
        self,
        *,
        client: BatonClient,
        registry: Registry,
        worker_id: str,
        metrics: MetricsHook,
        report_retry: RetryPolicy,
        stopping: threading.Event,
        event_loop: Callable[[], EventLoopThread],
        auto_heartbeat: bool,
        flusher: ResultFlusher | None = None,
    ) -> None:
        self.client = client
        self.registry = registry
        self.worker_id = worker_id
        self.metrics = metrics
        self.report_retry = report_retry
        self._stopping = stopping
        self._event_loop = event_loop
        # Results go out in batches through the flusher (None: one call per result).
        self.flusher = flusher
        self._lock = threading.Lock()
        self._active: dict[str, JobContext] = {}
        self.heartbeater = (
            Heartbeater(self._send_heartbeat, on_lost=self._lease_lost) if auto_heartbeat else None
        )

    @property
    def in_flight(self) -> int:
        with self._lock:
            return len(self._active)

    def run(self, job: Job) -> None:
        """Run one claimed job to a reported outcome."""
        try:
            expires = parse_timestamp(job["lockExpiresAt"])
        except (KeyError, TypeError, ValueError):
            expires = datetime.now(UTC) + FALLBACK_LEASE
        unavailable: str | None = None
        if job.get("inputDownloadUrl") and job.get("input") is None:
            try:  # an offloaded input: the handler sees it as if it had come inline
                job = {**job, "input": self.client.download_payload(job["inputDownloadUrl"])}
            except (BatonError, ValueError) as e:
                unavailable = f"cannot download the job's input: {e}"
        ctx = JobContext(
            job,
            worker_id=self.worker_id,
            lock_expires_at=expires,
            heartbeat=self._manual_heartbeat,
            stopping=self._stopping,
        )
        with self._lock:
            self._active[ctx.job_id] = ctx
        if self.heartbeater is not None:
            self.heartbeater.track(ctx.job_id, expires)
        try:
            handler = self.registry.get(ctx.job_type)
            if unavailable is not None:  # the handler never runs on a partial input
                outcome = Outcome(error=unavailable, retryable=True)
            elif handler is None:  # polled types are checked at start: only a registry edit
                outcome = Outcome(
                    error=f"worker {self.worker_id} has no handler for job type {ctx.job_type!r}"
                )
            else:
                outcome = self._call(handler, ctx)
            self._report(ctx, outcome)
        finally:
            if self.heartbeater is not None:
                self.heartbeater.untrack(ctx.job_id)
            with self._lock:
                self._active.pop(ctx.job_id, None)

    # --- the handler -----------------------------------------------------------------------------

    def _call(self, handler: RegisteredHandler, ctx: JobContext) -> Outcome:
        notify(self.metrics, "job_started", job_type=ctx.job_type)
        ctx.logger.debug("handler started", extra={"handler": handler.name})
        started = time.perf_counter()
        try:
            result = handler.fn(ctx)
            if inspect.isawaitable(result):
                result = self._event_loop().run(result)
        except JobError as e:
            seconds = time.perf_counter() - started
            message = e.message or type(e).__name__
            delay = None if e.non_retryable else e.next_retry_delay_seconds
            ctx.logger.warning(
                "handler failed",
                extra={
                    "error": message,
                    "retryable": not e.non_retryable,
                    "next_retry_delay_s": delay,
                    "handler_s": seconds,
                },
            )
            return Outcome(
                error=message,
                retryable=not e.non_retryable,
                next_retry_delay_seconds=delay,
                seconds=seconds,
                failure_output=self._failure_output(ctx, e.output, handler.name),
            )
        except BaseException as e:  # anything else fails the job as retryable, with its trace
            seconds = time.perf_counter() - started
            ctx.logger.warning(
                "handler raised",
                exc_info=True,
                extra={"error": repr(e), "retryable": True, "handler_s": seconds},
            )
            return Outcome(error=_describe(e), retryable=True, seconds=seconds)
        seconds = time.perf_counter() - started
        problem = result_problem(result, handler.name)
        if problem is not None:
            ctx.logger.error("handler returned a bad result", extra={"error": problem})
            return Outcome(error=problem, retryable=False, seconds=seconds)
        return Outcome(variables=result, seconds=seconds)

    def _failure_output(
        self, ctx: JobContext, output: Mapping[str, Any] | None, handler_name: str
    ) -> Mapping[str, Any] | None:
        """A failure's output as it can be sent: left out (and said why) when it is not
        storable JSON or above the step output's soft limit, so that the failure still goes."""
        if output is None:
            return None
        problem = result_problem(output, handler_name)
        if problem is None:
            size = len(json.dumps(output, separators=(",", ":")))
            # Under the step output's soft limit (the server's inline limit is above it), and
            # never more than what any server takes inline when the limit is unknown.
            limit = min(self.client.soft_limit("stepOutput"), MAX_FAILURE_OUTPUT_BYTES)
            if size > limit:
                problem = f"its failure output is {size} bytes, above the {limit}-byte limit"
        if problem is not None:
            ctx.logger.warning(
                "failure output left out", extra={"error": problem, "handler": handler_name}
            )
            return None
        return output

    # --- the report ------------------------------------------------------------------------------

    def _report(self, ctx: JobContext, outcome: Outcome) -> None:
        if outcome.error is None:
            refused = self._complete(ctx, outcome)
            if refused is None:
                return
            outcome = refused
        if self.flusher is not None:
            self._submit_failure(ctx, outcome, self.flusher)
        else:
            self._fail(ctx, outcome)

    def _complete(self, ctx: JobContext, outcome: Outcome) -> Outcome | None:
        """Report a completion: sent at once, or (batching) handed to the flusher, a large
        output uploaded first on this job's thread. None when that is done (or the outcome was
        logged as unreported); else the failure to report instead (a result the server cannot
        take)."""
        try:
            if self.flusher is None:
                self.client.complete_job(
                    ctx.job_id,
                    worker_id=self.worker_id,
                    variables=outcome.variables,
                    attempt=ctx.attempt,
                    retry=self.report_retry,
                )
                item = None
            else:
                item = self.client.completion(
                    ctx.job_id,
                    worker_id=self.worker_id,
                    variables=outcome.variables,
                    attempt=ctx.attempt,
                )
        except (TypeError, ValueError) as e:  # not JSON after all (result_problem missed it)
            return Outcome(
                error=f"the handler's result cannot be sent: {e}",
                retryable=False,
                seconds=outcome.seconds,
            )
        except BatonApiError as e:  # refused (the completion, or the upload of its output)
            if not _refused(e):
                self._unreported(ctx, e)
                return None
            return Outcome(
                error=f"the server refused the handler's result: {e.summary()}",
                retryable=False,
                seconds=outcome.seconds,
            )
        except BatonError as e:  # no answer, even after the retries
            self._unreported(ctx, e)
            return None
        if item is None:
            self._note_completed(ctx, outcome)
        else:
            assert self.flusher is not None
            self.flusher.submit(
                item,
                lambda answer: self._completed(ctx, outcome, answer),
                lambda error: self._unreported(ctx, error),
            )
        return None

    def _submit_failure(self, ctx: JobContext, outcome: Outcome, flusher: ResultFlusher) -> None:
        assert outcome.error is not None
        flusher.submit(
            self.client.failure(
                ctx.job_id,
                worker_id=self.worker_id,
                error_message=_clip(_storable(outcome.error)),
                retryable=outcome.retryable,
                next_retry_delay_seconds=outcome.next_retry_delay_seconds,
                attempt=ctx.attempt,
                output=outcome.failure_output,
            ),
            lambda answer: self._failed(ctx, outcome, answer),
            lambda error: self._unreported(ctx, error),
        )

    def _completed(self, ctx: JobContext, outcome: Outcome, answer: BatchOutcome) -> None:
        """A batched completion's answer."""
        verdict = answer["outcome"]
        if verdict in ("APPLIED", "DUPLICATE"):
            self._note_completed(ctx, outcome)
        elif verdict == "INVALID":  # refused for its content: fail the job, saying why
            refused = Outcome(
                error=f"the server refused the handler's result: {answer.get('error')}",
                retryable=False,
                seconds=outcome.seconds,
            )
            assert self.flusher is not None
            self._submit_failure(ctx, refused, self.flusher)
        else:
            self._gone(ctx, answer)

    def _failed(self, ctx: JobContext, outcome: Outcome, answer: BatchOutcome) -> None:
        """A batched failure's answer."""
        if answer["outcome"] in ("APPLIED", "DUPLICATE"):
            self._note_failed(ctx, outcome, answer.get("status"), answer.get("nextAttemptAt"))
        elif answer["outcome"] == "INVALID" and outcome.failure_output is not None:
            self._without_output(ctx, outcome, str(answer.get("error") or "INVALID"))
        elif answer["outcome"] == "INVALID":
            error = BatonError(str(answer.get("error") or "INVALID"))
            notify(self.metrics, "outcome_unreported", job_type=ctx.job_type, error=error)
            ctx.logger.error(
                "the server refused the job's outcome; it will be delivered again after its lease",
                extra={"error": str(error)},
            )
        else:
            self._gone(ctx, answer)

    def _without_output(self, ctx: JobContext, outcome: Outcome, why: str) -> None:
        """The server refused a failure with its output: the failure goes again without it (a
        failure is never lost over what came with it)."""
        ctx.logger.warning(
            "the server refused the failure's output; the failure is sent without it",
            extra={"error": why},
        )
        self._fail(ctx, replace(outcome, failure_output=None))

    def _gone(self, ctx: JobContext, answer: BatchOutcome) -> None:
        """CONFLICT or NOT_FOUND: the job is no longer this worker's."""
        error = BatonError(f"{answer['outcome']}: {answer.get('error') or ''}".strip())
        notify(self.metrics, "outcome_unreported", job_type=ctx.job_type, error=error)
        ctx.logger.warning(
            "job is no longer this worker's (cancelled, or its lease expired and another "
            "worker took it); outcome discarded",
            extra={"error": str(error)},
        )

    def _fail(self, ctx: JobContext, outcome: Outcome) -> None:
        assert outcome.error is not None
        try:
            result = self.client.fail_job(
                ctx.job_id,
                worker_id=self.worker_id,
                error_message=_clip(_storable(outcome.error)),
                retryable=outcome.retryable,
                next_retry_delay_seconds=outcome.next_retry_delay_seconds,
                attempt=ctx.attempt,
                retry=self.report_retry,
                output=outcome.failure_output,
            )
        except BatonApiError as e:
            if outcome.failure_output is not None and e.status in (400, 413, 422):
                self._without_output(ctx, outcome, str(e))
            else:
                self._unreported(ctx, e)
            return
        except BatonError as e:
            self._unreported(ctx, e)
            return
        self._note_failed(ctx, outcome, result.get("status"), result.get("nextAttemptAt"))

    def _note_completed(self, ctx: JobContext, outcome: Outcome) -> None:
        seconds = outcome.seconds
        notify(self.metrics, "job_completed", job_type=ctx.job_type, handler_seconds=seconds)
        ctx.logger.info("job completed", extra={"handler_s": round(seconds, 6)})

    def _note_failed(
        self, ctx: JobContext, outcome: Outcome, status: str | None, next_attempt_at: str | None
    ) -> None:
        notify(
            self.metrics,
            "job_failed",
            job_type=ctx.job_type,
            handler_seconds=outcome.seconds,
            retryable=outcome.retryable,
        )
        ctx.logger.info(
            "job failed",
            extra={
                "error": outcome.error,
                "retryable": outcome.retryable,
                "status": status,
                "next_attempt_at": next_attempt_at,
            },
        )

    def _unreported(self, ctx: JobContext, error: BatonError) -> None:
        notify(self.metrics, "outcome_unreported", job_type=ctx.job_type, error=error)
        if isinstance(error, ConflictError | NotFoundError):
            ctx.logger.warning(
                "job is no longer this worker's (cancelled, or its lease expired and another "
                "worker took it); outcome discarded",
                extra={"error": str(error)},
            )
        elif isinstance(error, BatonApiError) and not error.transient:
            ctx.logger.error(
                "the server refused the job's outcome; it will be delivered again after its lease",
                extra={"error": str(error)},
            )
        else:
            ctx.logger.error(
                "could not report the job's outcome; it will be delivered again after its lease",
                extra={"error": str(error)},
            )

    # --- leases ----------------------------------------------------------------------------------

    def _send_heartbeat(self, job_id: str) -> datetime:
        """The automatic heartbeat (the heartbeater retries, so one attempt here)."""
        with self._lock:
            ctx = self._active.get(job_id)
        attempt = ctx.attempt if ctx is not None else None
        result = self.client.heartbeat(
            job_id, worker_id=self.worker_id, attempt=attempt, retry=None
        )
        expires = parse_timestamp(result["lockExpiresAt"])
        if ctx is not None:
            ctx.lock_expires_at = expires
        return expires

    def _manual_heartbeat(self, ctx: JobContext) -> datetime:
        """``ctx.heartbeat()``: extend now, and re-time the automatic heartbeats from it."""
        try:
            result = self.client.heartbeat(
                ctx.job_id, worker_id=self.worker_id, attempt=ctx.attempt
            )
        except (ConflictError, NotFoundError) as e:
            self._lease_lost(ctx.job_id, e)
            raise
        expires = parse_timestamp(result["lockExpiresAt"])
        if self.heartbeater is not None:
            with self._lock:
                active = ctx.job_id in self._active
            if active:
                self.heartbeater.track(ctx.job_id, expires)
        return expires

    def _lease_lost(self, job_id: str, error: BaseException) -> None:
        if self.heartbeater is not None:
            self.heartbeater.untrack(job_id)
        with self._lock:
            ctx = self._active.get(job_id)
        if ctx is not None and not ctx.lease_lost:
            ctx._mark_lease_lost()
            ctx.logger.warning("lease lost", extra={"error": str(error)})


def _refused(error: BatonApiError) -> bool:
    """True when the server refused a completion for its content: a 4xx that neither says the
    job is gone (404, 409), nor is about credentials (401, 403), nor asks to wait (429)."""
    if error.transient or isinstance(
        error, ConflictError | NotFoundError | AuthenticationError | PermissionDeniedError
    ):
        return False
    return 400 <= error.status < 500


def _storable(message: str) -> str:
    """An error message the API can store: NUL and lone surrogates spelled out, not sent."""
    message = message.replace("\x00", "\\x00")
    return message.encode("utf-8", "backslashreplace").decode("utf-8")


def _describe(error: BaseException) -> str:
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _clip(message: str) -> str:
    if len(message) <= MAX_ERROR_MESSAGE:
        return message
    return message[: MAX_ERROR_MESSAGE - 3] + "..."
