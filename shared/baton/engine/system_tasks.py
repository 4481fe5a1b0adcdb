"""System tasks: jobs the engine runs itself, outside any decision. An HTTP step creates a job of
the reserved type ``baton:http``; the system-tasks function claims such jobs with the claim every
worker uses (SKIP LOCKED, leases, attempts), makes the calls on a few threads, and reports each
through ``complete_job`` / ``fail_job``, so retries, timeouts, lease expiry and the audit trail
are exactly a SERVICE_TASK's. Nothing here holds a transaction while a call is in flight."""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from functools import cached_property
from typing import Any

from baton import httpcall
from baton.engine.core import log
from baton.engine.job_ops import JobOps
from baton.errors import BatonError
from baton.settings import ENV_HTTP_ALLOW, SettingsError

# How long one pass waits for a job to arrive when none is waiting (a NOTIFY wakes it at once).
PASS_WAIT_SECONDS = 1.0


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

    def run_system_tasks(self, wait_seconds: float = PASS_WAIT_SECONDS) -> dict[str, int]:
        """One pass: claim up to ``http_concurrency`` HTTP jobs (waiting up to ``wait_seconds``
        for one), make the calls at once, report each. Counts by outcome."""
        policy = self.address_policy
        jobs = self.poll(
            self.system_worker_id,
            [httpcall.HTTP_JOB_TYPE],
            max_jobs=self.settings.http_concurrency,
            wait_seconds=wait_seconds,
        )
        if not jobs:
            return {}
        with ThreadPoolExecutor(len(jobs), thread_name_prefix="baton-http") as pool:
            outcomes = list(pool.map(lambda job: self._run_http(job, policy), jobs))
        return dict(Counter(outcomes))

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
            },
        )
        try:
            if outcome == "httpCompleted":
                self.complete_job(job["id"], self.system_worker_id, output, attempt=job["attempt"])
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
