"""System tasks: jobs the engine runs itself, outside any decision. An HTTP step creates a job of
the reserved type ``baton:http`` (``baton:http:<task definition>`` when its task definition sets a
concurrency or rate limit); the system-tasks function claims such jobs with the claim every
worker uses (SKIP LOCKED, leases, attempts, and the limited claim for limited types), makes
the calls on a bounded pool of threads (a freed place is refilled at once, so a slow target holds
up nothing else), and reports each through ``complete_job`` / ``fail_job``, so retries, timeouts,
lease expiry and the audit trail are exactly a SERVICE_TASK's. Nothing here holds a transaction
while a call is in flight."""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections import Counter
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from functools import cached_property
from typing import Any

from psycopg.types.json import Jsonb

from baton import httpcall
from baton.engine import event_sink, http_poll
from baton.engine.core import log
from baton.engine.ids import parse_uuid
from baton.engine.job_ops import JobOps
from baton.errors import BatonError
from baton.settings import ENV_HTTP_ALLOW, SettingsError
from baton.store import http_poll_sql

# How long one pass waits for a job to arrive when none is waiting (a NOTIFY wakes it at once).
PASS_WAIT_SECONDS = 1.0
# While calls are in flight, how long a pass keeps refilling the places they free, and how long
# each of those long-polls waits. The system-tasks function's timeout allows a pass begun at the
# end of its loop this long plus the longest call (infra config).
PASS_CLAIM_SECONDS = 20.0
REFILL_WAIT_SECONDS = 0.5


class SystemTasks(JobOps):
    @cached_property
    def system_worker_id(self) -> str:
        """This process's worker id in the jobs it claims (its host and pid, and a nonce)."""
        return f"baton:system-tasks:{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"

    @cached_property
    def address_policy(self) -> httpcall.AddressPolicy:
        try:
            return httpcall.AddressPolicy.of(
                self.settings.http_allow, private_allowed=self.settings.http_private_allowed
            )
        except ValueError as e:
            raise SettingsError(f"{ENV_HTTP_ALLOW}: {e}") from None

    def run_system_tasks(
        self, wait_seconds: float = PASS_WAIT_SECONDS, claim_seconds: float = PASS_CLAIM_SECONDS
    ) -> dict[str, int]:
        """One pass: claim HTTP jobs, up to ``http_concurrency`` in flight (waiting up to
        ``wait_seconds`` for the first), each call on a thread of its own with its own timeouts
        and reported as soon as it ends. While calls are in flight the pass refills every freed
        place at once (a long-poll, woken by NOTIFY) for up to ``claim_seconds``, then waits for
        the calls still in flight: a slow target holds up its own place only, never the calls
        claimed beside it or after it. Counts by outcome."""
        policy = self.address_policy
        limit = self.settings.http_concurrency
        until = time.monotonic() + max(claim_seconds, 0.0)
        outcomes: Counter[str] = Counter()
        running: set[Future[str]] = set()
        first = True
        with ThreadPoolExecutor(limit, thread_name_prefix="baton-http") as pool:
            while True:
                left = until - time.monotonic()
                claiming = first or left > 0
                if claiming and len(running) < limit:
                    jobs = self.poll(
                        self.system_worker_id,
                        [*self._http_job_types(), httpcall.EVENT_JOB_TYPE],
                        max_jobs=limit - len(running),
                        wait_seconds=wait_seconds if first else min(REFILL_WAIT_SECONDS, left),
                    )
                    running |= {pool.submit(self._run_one, job, policy) for job in jobs}
                first = False
                if not running:
                    break
                if not claiming:
                    timeout = None  # claiming is over: the calls in flight end the pass
                elif len(running) < limit:
                    timeout = 0.0  # a place is free: claim again (that poll does the waiting)
                else:
                    timeout = max(0.0, until - time.monotonic())  # full: until a place frees
                done, running = wait(running, timeout=timeout, return_when=FIRST_COMPLETED)
                outcomes.update(self._outcome(f) for f in done)
        return dict(outcomes)

    def _http_job_types(self) -> list[str]:
        """``baton:http``, and the ``baton:http:<task definition>`` types of the HTTP steps
        whose task definitions limit them: claimed with the limited claim every worker's
        limited types go through (``JobOps.poll``), which counts them against the limits."""
        prefix = f"{httpcall.HTTP_JOB_TYPE}:"
        limited = sorted(t for t in self._limited_types() if t.startswith(prefix))
        return [httpcall.HTTP_JOB_TYPE, *limited]

    def _polls_so_far(self, job: dict[str, Any]) -> int:
        """The polls this attempt of an HTTP_POLL job made before this one."""
        sid = parse_uuid(job["stepExecutionId"], "stepExecutionId")
        row = self.db.autocommit(
            lambda c: c.execute(http_poll_sql.POLLS_SO_FAR, {"step_execution_id": sid}).fetchone()
        )
        state = (row or {}).get("state") or {}
        if not isinstance(state, dict) or state.get("attempt") != job["attempt"]:
            return 0
        return int(state.get("polls") or 0)

    def _poll_again(self, job: dict[str, Any], polls: int, seconds: int, status: Any) -> bool:
        """Hand the job back, due in ``seconds``, keeping the count (False: no longer held)."""
        state = {"attempt": job["attempt"], "polls": polls, "lastStatusCode": status}
        detail = {"attempt": job["attempt"], "polls": polls, "seconds": seconds}
        params = {
            "job_id": parse_uuid(job["id"], "jobId"),
            "worker_id": self.system_worker_id,
            "attempt": job["attempt"],
            "seconds": seconds,
            "state": Jsonb(state),
            "detail": Jsonb(detail),
        }
        row = self.db.autocommit(lambda c: c.execute(http_poll_sql.POLL_AGAIN, params).fetchone())
        return row is not None

    @staticmethod
    def _outcome(call: Future[str]) -> str:
        error = call.exception()
        if error is None:
            return call.result()
        # Reporting failed beyond the engine's refusals (the database away): the job's lease
        # lapses and the call is made again; the other calls of the pass are unaffected.
        log.error("http call not reported: %r", error)
        return "httpNotReported"

    def _run_one(self, job: dict[str, Any], policy: httpcall.AddressPolicy) -> str:
        if job["jobType"] == httpcall.EVENT_JOB_TYPE:
            return self._run_event(job)
        return self._run_http(job, policy)

    @cached_property
    def event_sqs_client(self) -> Any:
        """The SQS client EVENT steps publish with (``BATON_SQS_ENDPOINT`` locally: moto)."""
        import boto3
        from botocore.config import Config

        config = Config(retries={"max_attempts": 3, "mode": "standard"})
        return boto3.client("sqs", endpoint_url=self.settings.sqs_endpoint, config=config)

    def _run_event(self, job: dict[str, Any]) -> str:
        """Publish an EVENT step's message: its input with the instance's fields."""
        ids = {"job_id": job["id"], "instance_id": job["instanceId"], "step_id": job["stepId"]}
        given = job["input"]
        if self.payloads is not None:
            given = self.payloads(given)
        given = dict(given or {})
        fields = dict(given.pop(httpcall.EVENT_KEY, None) or {})
        sink = str(fields.pop("sink", ""))
        message = {**given, **fields}
        outcome, error, retryable, output = "eventPublished", "", True, {}
        try:
            message_id = event_sink.publish(
                self.db,
                lambda: self.event_sqs_client,  # made at the first sqs: sink
                sink,
                message,
                group=job["instanceId"],
                dedup=f"{job['id']}.{job['attempt']}",
                title=f"{fields.get('workflowType')}/{job['stepId']}",
            )
            output = {**message, "sink": sink, "messageId": message_id}
        except event_sink.PublishFailed as e:
            outcome, error, retryable = "eventFailed", str(e), e.retryable
        self.metrics.add("EventsPublished", 1, dimensions={"Outcome": outcome})
        log.info("event", extra={**ids, "outcome": outcome, "sink": sink, "error": error or None})
        try:
            if outcome == "eventPublished":
                self.complete_job(job["id"], self.system_worker_id, output, attempt=job["attempt"])
            else:
                self.fail_job(
                    job["id"], self.system_worker_id, error, retryable, attempt=job["attempt"]
                )
        except BatonError as e:
            log.warning("event result not applied: %s", e, extra=ids)
            return "eventNotApplied"
        return outcome

    def _run_http(self, job: dict[str, Any], policy: httpcall.AddressPolicy) -> str:
        ids = {"job_id": job["id"], "instance_id": job["instanceId"], "step_id": job["stepId"]}
        started = time.monotonic()
        given = job["input"]
        if self.payloads is not None:
            given = self.payloads(given)
        limits = httpcall.Limits(max_response_bytes=self.settings.http_max_response_bytes)
        outcome, error, retryable = "httpCompleted", "", True
        output: dict[str, Any] = {}
        try:
            request = httpcall.parse_request((given or {}).get("request"))
            output = httpcall.call(request, policy, limits)
        except httpcall.RequestInvalid as e:
            outcome, error, retryable = "httpFailed", f"the request cannot be sent: {e}", False
        except httpcall.CallFailed as e:
            outcome, error, retryable = "httpFailed", str(e), e.retryable
            if str(e).startswith("refused:"):
                outcome = "httpRefused"
        millis = round((time.monotonic() - started) * 1000)
        status = output.get("response", {}).get("statusCode")
        poll = (given or {}).get(httpcall.POLL_KEY)
        polls, again = 0, 0
        if outcome == "httpCompleted" and isinstance(poll, dict):
            # An HTTP_POLL step's call: its terminationCondition says whether it is done.
            polls = self._polls_so_far(job) + 1
            shown = {k: v for k, v in given.items() if k != httpcall.POLL_KEY}
            verdict = http_poll.verdict(self.sandbox, poll, shown, output, polls)
            if verdict.failed is not None:
                outcome, error, retryable = "httpPollFailed", verdict.failed, False
            elif verdict.done:
                output = {**output, "pollCount": polls}
            else:
                outcome, again = "httpPolled", verdict.delay
        self.metrics.add("HttpCalls", 1, dimensions={"Outcome": outcome})
        self.metrics.add("HttpCallLatency", millis, "Milliseconds")
        log.info(
            "http call",
            extra={
                **ids,
                "outcome": outcome,
                "status_code": status,
                "millis": millis,
                "error": error or None,
                "polls": polls or None,
            },
        )
        try:
            if outcome == "httpCompleted":
                self.complete_job(job["id"], self.system_worker_id, output, attempt=job["attempt"])
            elif outcome == "httpPolled":
                if not self._poll_again(job, polls, again, status):
                    return "httpNotApplied"
            else:
                self.fail_job(
                    job["id"],
                    self.system_worker_id,
                    error,
                    retryable,
                    attempt=job["attempt"],
                )
        except BatonError as e:
            # The job moved on meanwhile (cancelled, timed out, its lease lapsed and it ran
            # again): the engine refused the report, as it would a worker's.
            log.warning("http call result not applied: %s", e, extra=ids)
            return "httpNotApplied"
        return outcome
