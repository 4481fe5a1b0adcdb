"""``Runner``: polls Baton for jobs and runs their handlers.

The loop follows the engine's worker model (reference 003):

1. Reserve free slots (the parallelism semaphore); poll for at most that many jobs.
2. Dispatch each job on its own slot: call its handler with a :class:`JobContext`.
3. Handler returned: complete the job with the returned variables. Raised
   :class:`~baton_worker.errors.NonRetryableError` (or a ``JobError(non_retryable=True)``): fail it
   with ``retryable=False``. Raised anything else: fail it with ``retryable=True``.
4. Release the slot.

After a poll that came back empty or short, once no job is in flight, the next one is a
long-poll (``long_poll_wait`` seconds, default 10): the server answers as soon as a job is
claimable, so an idle runner sends about one request per wait and still gets a new job within
milliseconds. With jobs in flight it polls short (see ``Runner._next_wait``). Without long-poll
(``long_poll_wait=0``) an empty poll sleeps ``poll_interval``, doubling up to
``max_poll_interval`` while the queue stays empty. A full poll polls again at once. A failed
poll (connection refused, 429, 5xx...) backs off with jitter and never stops the runner. A 401
or 403 at the first poll stops it (:meth:`Runner.run` raises the error, which says where the key
came from): credentials that were never accepted will not become right by waiting. Once a poll
was answered, a 401/403 (a key rotated, a local server restarted with another key) is logged as
an error at each try and backed off like other failures; a key from a local ``baton dev``'s key
file is read again each time, so the runner picks up the new one by itself. Jobs that run longer
than half their lease get heartbeats.

Stopping (SIGINT/SIGTERM under :meth:`Runner.run`, or :meth:`Runner.stop`) starts no poll after
the stop, waits for every in-flight job to finish and be reported, then returns. A long-poll out
at the stop is not abandoned: the runner sends the worker's stop signal, which ends that poll on
the server without claiming again, and the jobs its answer brings (claimed for this worker just
before) run in the drain like any in-flight job. Only a poll still unanswered
``STOP_GRACE_SECONDS`` after the signal is abandoned.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from types import FrameType

import httpx

from baton_worker._execution import JobExecutor, notify
from baton_worker._flusher import MAX_BATCH as MAX_RESULTS_PER_FLUSH
from baton_worker._flusher import ResultFlusher
from baton_worker._loop import EventLoopThread
from baton_worker._slots import Slots
from baton_worker.backoff import Backoff, RetryPolicy
from baton_worker.client import MAX_LONG_POLL_SECONDS, BatonClient, key_auth
from baton_worker.context import job_log_fields
from baton_worker.errors import (
    BatonApiError,
    BatonError,
    is_transient,
)
from baton_worker.metrics import MetricsHook, NoopMetrics
from baton_worker.origins import resolve
from baton_worker.registry import Registry
from baton_worker.transports import JobTransport, PollTransport
from baton_worker.types import Job

log = logging.getLogger("baton_worker.runner")

MAX_JOBS_PER_POLL = 100  # the API's limit
# Long enough that an idle runner costs about one request per wait; short enough that a poll
# abandoned at stop (see Runner._poll) ends soon on the server too.
DEFAULT_LONG_POLL_WAIT = 10.0
# How often a runner waiting on an outstanding long-poll looks whether it is asked to stop.
STOP_CHECK_SECONDS = 0.05
# At stop, how long a long-poll still out may take to answer once the stop signal is sent (the
# server ends its wait at the signal, or within a second behind RDS Proxy) before the runner
# abandons it.
STOP_GRACE_SECONDS = 3.0
# The stop signal at stop: a few quick tries, never holding the stop up for long.
STOP_SIGNAL_RETRY = RetryPolicy(initial_interval=0.1, maximum_attempts=3, maximum_elapsed=2.0)


def default_worker_id() -> str:
    """``<host>-<pid>``: unique per process, and says where a job ran."""
    return f"{socket.gethostname()}-{os.getpid()}"


@dataclass(frozen=True, slots=True, kw_only=True)
class RunnerOptions:
    """How a :class:`Runner` polls and runs jobs.

    ``worker_id`` defaults to ``<host>-<pid>``, ``job_types`` to every type in the registry.
    ``parallelism`` is how many jobs run at once; a poll never asks for more jobs than there are
    free slots, nor more than ``max_jobs_per_poll``. ``poll_interval`` is the pause after an
    empty poll, doubled on each further empty poll up to ``max_poll_interval``. ``poll_errors``
    is the backoff after a failed poll (it never gives up); ``report_retry`` the retries of a
    job's complete/fail call. ``auto_heartbeat`` extends the lease of a job still running at half
    of its lease. ``drain_timeout`` bounds the wait for in-flight jobs at stop (None: no bound).

    ``batch_results`` (on by default) reports results in batches (``POST /v1/jobs/complete-batch``):
    a job thread hands its result over and takes the next job; results are flushed every
    ``flush_interval`` seconds or at ``max_results_per_flush``, and at stop. ``prefetch`` jobs
    (default: ``min(parallelism, max_jobs_per_poll)``) may be claimed beyond the running ones,
    so the next poll overlaps the work and a fast handler never waits on its round trip; their
    leases run while they wait, so keep it small next to a lease.

    ``long_poll_wait`` (0 to 20 s; 0: short polling) is how long the server may hold a poll that
    follows an empty or short one. Stopping does not wait that long: the stop signal ends the
    wait, and the jobs of its answer run before the runner returns.

    ``gather_interval`` (0 to 1 s; 0: poll as soon as a slot frees): while jobs run, how long a
    poll may wait for more slots to free (up to half of ``max_jobs_per_poll``), so that one poll
    asks for several jobs instead of one each (as results are gathered for ``flush_interval``).
    An idle runner polls at once.
    """

    worker_id: str | None = None
    job_types: Sequence[str] | None = None
    parallelism: int = 8
    max_jobs_per_poll: int = 100
    poll_interval: float = 0.5
    max_poll_interval: float = 2.0
    poll_errors: RetryPolicy = field(
        default_factory=lambda: RetryPolicy(
            initial_interval=0.5, maximum_interval=30.0, maximum_attempts=None
        )
    )
    report_retry: RetryPolicy = field(
        default_factory=lambda: RetryPolicy(
            initial_interval=0.2,
            maximum_interval=5.0,
            maximum_attempts=None,
            maximum_elapsed=300.0,
        )
    )
    auto_heartbeat: bool = True
    drain_timeout: float | None = None
    batch_results: bool = True
    flush_interval: float = 0.005
    max_results_per_flush: int = 100
    prefetch: int | None = None
    long_poll_wait: float = DEFAULT_LONG_POLL_WAIT
    gather_interval: float = 0.01

    def __post_init__(self) -> None:
        if not 0 <= self.long_poll_wait <= MAX_LONG_POLL_SECONDS:
            raise ValueError(f"long_poll_wait must be between 0 and {MAX_LONG_POLL_SECONDS}")
        if self.parallelism < 1:
            raise ValueError("parallelism must be at least 1")
        if not 1 <= self.max_jobs_per_poll <= MAX_JOBS_PER_POLL:
            raise ValueError(f"max_jobs_per_poll must be between 1 and {MAX_JOBS_PER_POLL}")
        if self.poll_interval <= 0:
            raise ValueError("poll_interval must be positive")
        if self.max_poll_interval < self.poll_interval:
            raise ValueError("max_poll_interval must be at least poll_interval")
        if self.worker_id is not None and not 1 <= len(self.worker_id) <= 256:
            raise ValueError("worker_id must be 1 to 256 characters")
        if isinstance(self.job_types, str):
            raise TypeError("job_types is a sequence of job types, not a string")
        if not 1 <= self.max_results_per_flush <= MAX_RESULTS_PER_FLUSH:
            raise ValueError(f"max_results_per_flush must be between 1 and {MAX_RESULTS_PER_FLUSH}")
        if not 0 < self.flush_interval <= 1:
            raise ValueError("flush_interval must be more than 0 and at most 1 second")
        if self.prefetch is not None and self.prefetch < 0:
            raise ValueError("prefetch must be 0 or more")
        if not 0 <= self.gather_interval <= 1:
            raise ValueError("gather_interval must be between 0 and 1 second")

    @property
    def prefetched(self) -> int:
        """Jobs claimed beyond those running."""
        if self.prefetch is not None:
            return self.prefetch
        return min(self.parallelism, self.max_jobs_per_poll)

    def idle_backoff(self) -> RetryPolicy:
        """The pauses after consecutive empty polls."""
        return RetryPolicy(
            initial_interval=self.poll_interval,
            maximum_interval=self.max_poll_interval,
            maximum_attempts=None,
            jitter=0.2,
        )


class Runner:
    """Runs the handlers of a :class:`Registry` against a Baton API.

    Give it a ``client`` (a :class:`BatonClient`), or ``url`` and credentials (``api_key`` or an
    ``httpx.Auth`` such as :class:`~baton_worker.auth.AwsSigV4Auth`); unset, they come from
    ``BATON_URL`` and ``BATON_API_KEY``, then ``http://127.0.0.1:8080`` and the key a local
    ``baton dev`` keeps in its data directory.

    :meth:`run` blocks until SIGINT/SIGTERM; :meth:`start` and :meth:`stop` are for embedding
    (or use the runner as a context manager).
    """

    def __init__(
        self,
        registry: Registry,
        *,
        client: BatonClient | None = None,
        url: str | None = None,
        api_key: str | None = None,
        auth: httpx.Auth | None = None,
        options: RunnerOptions | None = None,
        metrics: MetricsHook | None = None,
        transport: JobTransport | None = None,
    ) -> None:
        self.options = options or RunnerOptions()
        self.registry = registry
        if client is not None and (url or api_key or auth):
            raise ValueError("give a client, or url and credentials, not both")
        self._owns_client = client is None
        if client is None:
            url, key, origins = resolve(url, api_key, find_key=auth is None)
            client = BatonClient(
                url,
                auth=auth or key_auth(key, origins),
                origins=origins,
                max_connections=self.options.parallelism + 4,
            )
        self.client = client
        # Where jobs come from: polls (the default), or e.g. an SqsTransport (event-driven mode).
        self.transport: JobTransport = transport or PollTransport(client)
        # The default transport is Baton's own poll, which the runner long-polls itself.
        self._polls = isinstance(self.transport, PollTransport)
        self._stop_signal_sent = False
        self.metrics: MetricsHook = metrics or NoopMetrics()
        self.worker_id = self.options.worker_id or default_worker_id()
        self._log_extra = {"worker_id": self.worker_id}
        # Slots for the running jobs and the prefetched ones (which wait for a job thread).
        self._slots = Slots(self.options.parallelism + self.options.prefetched)
        self._flusher = (
            ResultFlusher(
                self.client,
                retry=self.options.report_retry,
                interval=self.options.flush_interval,
                max_batch=self.options.max_results_per_flush,
            )
            if self.options.batch_results
            else None
        )
        self._stopping = threading.Event()
        self._stopped = threading.Event()
        self._state = threading.Lock()
        self._started = False
        self._job_types: tuple[str, ...] = ()
        self._pool: ThreadPoolExecutor | None = None
        self._loop: EventLoopThread | None = None
        self._poller: threading.Thread | None = None
        # False once the server refused waitSeconds (a server from before long-poll)
        self._long_poll = self.options.long_poll_wait > 0
        # True after the first poll the API answered; a 401/403 before it stops the runner.
        self._let_in = False
        self.error: BaseException | None = None
        """Why the runner stopped by itself: the API refused its credentials at its first poll
        (:meth:`run` raises it)."""
        self._jobs = JobExecutor(
            client=self.client,
            registry=self.registry,
            worker_id=self.worker_id,
            metrics=self.metrics,
            report_retry=self.options.report_retry,
            stopping=self._stopping,
            event_loop=self._event_loop,
            auto_heartbeat=self.options.auto_heartbeat,
            flusher=self._flusher,
        )

    # --- lifecycle -------------------------------------------------------------------------------

    @property
    def job_types(self) -> tuple[str, ...]:
        """The job types polled for (known once started)."""
        return self._job_types

    @property
    def in_flight(self) -> int:
        """Jobs running, plus results handed over and not yet answered."""
        waiting = self._flusher.waiting if self._flusher is not None else 0
        return self._jobs.in_flight + waiting

    @property
    def running(self) -> bool:
        return self._started and not self._stopped.is_set()

    def start(self) -> None:
        """Start polling on a background thread and return at once."""
        job_types = self._resolve_job_types()
        with self._state:
            if self._started:
                raise RuntimeError("this runner was already started (a runner starts once)")
            self._started = True
        self._job_types = job_types
        handlers = [h for h in self.registry if h.job_type in self._job_types]
        self._pool = ThreadPoolExecutor(
            max_workers=self.options.parallelism, thread_name_prefix="baton-job"
        )
        if any(h.is_async for h in handlers):
            self._loop = EventLoopThread()
            self._loop.start()
        if self._jobs.heartbeater is not None:
            self._jobs.heartbeater.start()
        if self._flusher is not None:
            self._flusher.start()
        self._poller = threading.Thread(target=self._serve, name="baton-poller")
        self._poller.start()
        log.info(
            "runner started",
            extra={
                **self._log_extra,
                "url": self.client.url,
                "job_types": list(self._job_types),
                "parallelism": self.options.parallelism,
            },
        )

    def request_stop(self) -> None:
        """Ask the runner to stop (returns at once): no more polls; in-flight jobs finish."""
        if not self._stopping.is_set():
            self._stopping.set()
            self._slots.interrupt()

    def stop(self, *, timeout: float | None = None) -> bool:
        """Stop polling, wait for in-flight jobs to finish and be reported, release resources.

        Returns False if ``timeout`` seconds passed first (the runner goes on draining).
        """
        self.request_stop()
        if not self._started:
            return True
        return self._stopped.wait(timeout)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the runner has stopped (after :meth:`stop` or a signal)."""
        return self._stopped.wait(timeout)

    def run(self, *, handle_signals: bool = True) -> None:
        """Start, then block until stopped. SIGINT/SIGTERM stop gracefully (from the main
        thread); a second signal exits at once, leaving in-flight jobs to their leases."""
        restore = None
        if handle_signals and threading.current_thread() is threading.main_thread():
            restore = self._install_signal_handlers()
        try:
            self.start()
            while not self._stopped.wait(0.5):
                pass
        finally:
            self.request_stop()
            if restore is not None:
                restore()
        if self.error is not None:
            raise self.error

    def __enter__(self) -> Runner:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _install_signal_handlers(self) -> Callable[[], None]:
        signals = (signal.SIGINT, signal.SIGTERM)
        previous = {sig: signal.getsignal(sig) for sig in signals}

        def on_signal(signum: int, frame: FrameType | None) -> None:
            name = signal.Signals(signum).name
            if self._stopping.is_set():
                log.warning(
                    "second signal: exiting without waiting; in-flight jobs will be "
                    "delivered again when their leases expire",
                    extra={**self._log_extra, "signal": name},
                )
                sys.stderr.flush()
                os._exit(128 + signum)
            log.info(
                "stopping: no more polls; draining in-flight jobs",
                extra={**self._log_extra, "signal": name, "in_flight": self.in_flight},
            )
            self.request_stop()

        for sig in signals:
            signal.signal(sig, on_signal)

        def restore() -> None:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

        return restore

    def _resolve_job_types(self) -> tuple[str, ...]:
        wanted = tuple(dict.fromkeys(self.options.job_types or self.registry.job_types))
        if not wanted:
            raise ValueError("no job types: register a handler first (or pass job_types)")
        missing = [t for t in wanted if t not in self.registry]
        if missing:
            raise ValueError(f"no handler registered for job type(s): {', '.join(missing)}")
        return wanted

    # --- the poll loop ---------------------------------------------------------------------------

    def _serve(self) -> None:
        try:
            self._poll_loop()
        except BaseException:  # the loop catches everything it expects; this is a bug
            log.exception("poll loop crashed; draining and stopping", extra=self._log_extra)
            self.request_stop()
        finally:
            if self._polls and not self._stop_signal_sent:
                # Polling is over: say so, so that whoever watches (the server's waits, a test,
                # an operator) knows this worker claims nothing more from here on.
                self._send_stop_signal()
            self._drain_and_close()

    def _poll_loop(self) -> None:
        opts = self.options
        idle = Backoff(opts.idle_backoff())
        errors = Backoff(opts.poll_errors)
        wait = 0.0  # the first poll answers at once; one after an empty or short poll may wait
        while not self._stopping.is_set():
            # While jobs run, gather freed slots a moment so one poll asks for several jobs.
            wanted = self._slots.acquire_up_to(
                opts.max_jobs_per_poll,
                gather=opts.gather_interval,
                # Half of a poll of 100 is more than the slots usually free at once: while jobs
                # run, a poll then waits the whole gather interval and asks for all that freed.
                # Fewer, larger polls drain faster than polls of half the slots, which doubled
                # the polls per job and cost the server more (bench/sdk_polyglot.py).
                enough=max(1, opts.max_jobs_per_poll // 2),
            )
            if wanted == 0:  # interrupted: stopping
                break
            if self._stopping.is_set():
                self._slots.release(wanted)
                break
            started = time.perf_counter()
            try:
                if self._polls:  # Baton's poll, long or short
                    polled = self._poll(wanted, wait)
                else:  # another transport (SQS): it waits for work itself, if at all
                    polled = self.transport.fetch(
                        worker_id=self.worker_id, job_types=self._job_types, max_jobs=wanted
                    )
            except Exception as error:
                self._slots.release(wanted)
                if wait > 0 and _refuses_wait(error):
                    log.warning(
                        "the server does not take waitSeconds; polling short",
                        extra={**self._log_extra, "error": str(error)},
                    )
                    self._long_poll = False
                    wait = 0.0
                    continue
                notify(self.metrics, "poll_failed", error=error)
                if _credentials_refused(error) and not self._let_in:
                    # Never let in: the credentials are wrong, and waiting will not fix them.
                    log.error(
                        "the API refused this worker's credentials; stopping",
                        extra={**self._log_extra, "error": str(error)},
                    )
                    self.error = error
                    self.request_stop()
                    break
                delay = errors.next_delay()
                if isinstance(error, BatonApiError) and error.retry_after:
                    delay = max(delay, min(error.retry_after, opts.poll_errors.maximum_interval))
                self._log_poll_error(error, delay)
                self._stopping.wait(delay)
                continue
            if polled is None:  # stopping: the long-poll was left to the server
                break
            jobs = polled
            self._let_in = True
            errors.reset()
            notify(
                self.metrics,
                "poll_completed",
                requested=wanted,
                received=len(jobs),
                seconds=time.perf_counter() - started,
            )
            if len(jobs) < wanted:
                self._slots.release(wanted - len(jobs))
            for job in jobs:  # also when stopping: they are leased to this worker
                self._dispatch(job)
            if self._stopping.is_set():
                break
            if self._polls and self._long_poll:
                wait = self._next_wait(jobs, wanted, wait, time.perf_counter() - started, idle)
                continue
            if not self._polls and self.transport.waits:
                continue  # the transport waited for work itself (a long poll)
            if not jobs:
                self._stopping.wait(idle.next_delay())
                continue
            idle.reset()
            if len(jobs) < wanted:  # the queue is (nearly) empty: do not spin on it
                self._stopping.wait(opts.poll_interval)

    def _next_wait(
        self, jobs: list[Job], wanted: int, wait: float, took: float, idle: Backoff
    ) -> float:
        """After a poll, with long-poll on: pause if need be, and say how long the next poll
        may wait on the server.

        A full batch: poll again at once. Otherwise the queue is (nearly) empty, and the next
        poll long-polls, but only once no job is in flight: a long-poll outlives a worker that
        crashes, on the server, where it may still claim a job nobody will run (it comes back
        when its lease lapses, at the cost of an attempt). Crashes happen mid-job; with jobs in
        flight the runner polls short, as it would without long-poll, until they are done."""
        if len(jobs) >= wanted:
            idle.reset()
            return 0.0
        if jobs:
            idle.reset()
        elif wait > 0 and took < wait / 2:
            # An empty long-poll that did not wait (a server without long-poll): back off as
            # a short poller would rather than spin.
            self._stopping.wait(idle.next_delay())
        if self._slots.in_use == 0:
            return self.options.long_poll_wait
        if self._slots.wait_idle(idle.next_delay()) and not self._stopping.is_set():
            return self.options.long_poll_wait
        return 0.0

    def _poll(self, wanted: int, wait: float) -> list[Job] | None:
        """Poll for up to ``wanted`` jobs, waiting up to ``wait`` seconds on the server.

        A long-poll runs on a thread of its own so that a stop is seen while it waits. At the
        stop the runner sends the worker's stop signal (``POST /v1/workers/stop``): the server
        ends that wait without claiming again (a server behind API Gateway cannot see a client
        hang up), and answers with what it had claimed before, if anything. That answer is
        returned: its jobs are leased to this worker, and the poll loop dispatches them (the
        poll asked for no more than free slots) so they run in the drain. Aborting the poll at
        once would throw such an answer away, leaving its jobs leased until their leases lapse.

        None means no answer came within ``STOP_GRACE_SECONDS`` of the signal: the poll is
        abandoned, and what it claims goes back to work when its leases lapse, as after a
        crash (logged)."""
        if wait <= 0:
            return self.client.poll_jobs(
                worker_id=self.worker_id,
                job_types=self._job_types,
                max_jobs=wanted,
                retry=None,  # the poll loop is the retry loop
            )
        future: Future[list[Job]] = Future()

        def long_poll() -> None:
            try:
                future.set_result(
                    self.client.poll_jobs(
                        worker_id=self.worker_id,
                        job_types=self._job_types,
                        max_jobs=wanted,
                        wait_seconds=wait,
                        retry=None,
                    )
                )
            except BaseException as e:
                future.set_exception(e)

        threading.Thread(target=long_poll, name="baton-long-poll", daemon=True).start()
        while not self._stopping.is_set():
            try:
                return future.result(timeout=STOP_CHECK_SECONDS)
            except FutureTimeout:
                continue
        if not future.done():
            self._send_stop_signal()
        try:
            return future.result(timeout=STOP_GRACE_SECONDS)
        except FutureTimeout:
            self._slots.release(wanted)
            future.add_done_callback(self._abandoned_poll_done)
            log.warning(
                "stopping: the long-poll was not answered in time after the stop signal; "
                "abandoned it (jobs it claims go back to work when their leases lapse)",
                extra={**self._log_extra, "grace_s": STOP_GRACE_SECONDS},
            )
            return None

    def _send_stop_signal(self) -> None:
        """Tell the server this worker stopped, so the long-poll left waiting claims nothing
        more. Best effort: a server without the route (404/405) or a failure is only logged."""
        self._stop_signal_sent = True
        try:
            self.client.stop_worker(self.worker_id, retry=STOP_SIGNAL_RETRY, timeout=2.0)
        except BatonApiError as e:
            level = logging.DEBUG if e.status in (404, 405) else logging.WARNING
            log.log(level, "stop signal not sent", extra={**self._log_extra, "error": str(e)})
        except Exception as e:
            log.warning("stop signal not sent", extra={**self._log_extra, "error": str(e)})

    def _abandoned_poll_done(self, future: Future[list[Job]]) -> None:
        if future.exception() is None and future.result():
            log.warning(
                "a long-poll abandoned at stop claimed jobs; they run again when their leases "
                "expire",
                extra={**self._log_extra, "job_ids": [j["id"] for j in future.result()]},
            )

    def _log_poll_error(self, error: Exception, delay: float) -> None:
        extra = {**self._log_extra, "error": str(error), "retry_in_s": round(delay, 3)}
        if is_transient(error):
            log.warning("poll failed; backing off", extra=extra)
        elif isinstance(error, BatonError):
            log.error("poll refused; backing off", extra=extra)
        else:
            log.exception("poll failed unexpectedly; backing off", extra=extra)

    def _dispatch(self, job: Job) -> None:
        assert self._pool is not None
        try:
            self._pool.submit(self._execute, job)
        except BaseException:
            self._slots.release()
            raise

    def _drain_and_close(self) -> None:
        opts = self.options
        in_flight = self.in_flight
        if in_flight:
            log.info("draining in-flight jobs", extra={**self._log_extra, "in_flight": in_flight})
        drained = self._slots.wait_idle(opts.drain_timeout)
        if not drained:
            log.warning(
                "drain timed out; unfinished jobs will be delivered again after their leases",
                extra={**self._log_extra, "in_flight": self.in_flight},
            )
        if self._pool is not None:
            self._pool.shutdown(wait=drained, cancel_futures=True)
        if self._flusher is not None and not self._flusher.close(opts.drain_timeout):
            log.warning(
                "results still unflushed at stop; their jobs will be delivered again",
                extra={**self._log_extra, "waiting": self._flusher.waiting},
            )
        if self._jobs.heartbeater is not None:
            self._jobs.heartbeater.stop()
        if self._loop is not None and drained:
            self._loop.stop()
        if self._owns_client and drained:  # jobs still running after a timeout still report
            self.client.close()
        log.info("runner stopped", extra=self._log_extra)
        self._stopped.set()

    # --- one job ---------------------------------------------------------------------------------

    def _execute(self, job: Job) -> None:
        try:
            self._jobs.run(job)
        except BaseException:  # run() reports everything it expects; this is a bug
            log.exception("job execution crashed", extra=job_log_fields(job, self.worker_id))
        finally:
            self._slots.release()

    def _event_loop(self) -> EventLoopThread:
        with self._state:
            if self._loop is None:  # a sync-registered handler returned an awaitable
                self._loop = EventLoopThread()
                self._loop.start()
            return self._loop


def _credentials_refused(error: Exception) -> bool:
    return isinstance(error, BatonApiError) and error.status in (401, 403)


def _refuses_wait(error: Exception) -> bool:
    """A 422 naming waitSeconds: the server predates long-poll."""
    return (
        isinstance(error, BatonApiError)
        and error.status == 422
        and any(e.path == "waitSeconds" for e in error.errors)
    )


__all__ = ["Runner", "RunnerOptions", "default_worker_id"]
