"""Results reported in batches: a job thread hands its result over and moves on; one flusher
thread sends what has gathered with ``POST /v1/jobs/complete-batch`` every few milliseconds, or at
once when ``max_batch`` results (or ``max_bytes`` of them) are waiting, and whatever is left when
the runner stops.

A failed flush is sent again, the same items, per the report retry policy: a result the server
already applied answers DUPLICATE, so a flush that reached the server before the connection broke
is never applied twice, and none is dropped while the policy still allows retries. A server
without the batch route (404/405) gets each result on its own instead.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from baton_worker.backoff import RetryPolicy
from baton_worker.client import BatonClient
from baton_worker.errors import BatonApiError, BatonError
from baton_worker.types import BatchOutcome

log = logging.getLogger("baton_worker.runner")

MAX_BATCH = 100  # the API's limit on results per call
DEFAULT_MAX_BYTES = 1_000_000  # a flush's body stays well under the API's inline limit


@dataclass(slots=True)
class Pending:
    """One result waiting for its flush: the item sent, and what to do with the answer."""

    item: dict[str, Any]
    size: int
    on_answer: Callable[[BatchOutcome], None]
    on_unreported: Callable[[BatonError], None]


class ResultFlusher:
    def __init__(
        self,
        client: BatonClient,
        *,
        retry: RetryPolicy,
        interval: float = 0.005,
        max_batch: int = 32,
        max_bytes: int = DEFAULT_MAX_BYTES,
    ) -> None:
        if not 1 <= max_batch <= MAX_BATCH:
            raise ValueError(f"max_batch must be between 1 and {MAX_BATCH}")
        self.client = client
        self.retry = retry
        self.interval = interval
        self.max_batch = max_batch
        self.max_bytes = max_bytes
        self._pending: list[Pending] = []
        self._bytes = 0
        self._cond = threading.Condition()
        self._closing = False
        self._in_flight = 0
        self._batch_supported = True
        self._thread = threading.Thread(target=self._run, name="baton-results", daemon=True)
        self.flushes = 0

    def start(self) -> None:
        self._thread.start()

    @property
    def waiting(self) -> int:
        """Results handed over and not yet answered."""
        with self._cond:
            return len(self._pending) + self._in_flight

    def submit(
        self,
        item: Mapping[str, Any],
        on_answer: Callable[[BatchOutcome], None],
        on_unreported: Callable[[BatonError], None],
    ) -> None:
        body = dict(item)
        size = len(json.dumps(body, ensure_ascii=False, separators=(",", ":")))
        with self._cond:
            if self._closing and not self._thread.is_alive():
                raise RuntimeError("the result flusher is closed")
            self._pending.append(Pending(body, size, on_answer, on_unreported))
            self._bytes += size
            self._cond.notify_all()

    def close(self, timeout: float | None = None) -> bool:
        """Flush what is left and stop; False if ``timeout`` passed first."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        if not self._thread.is_alive():
            return True
        self._thread.join(timeout)
        return not self._thread.is_alive()

    # --- the flusher thread ------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            batch = self._next_batch()
            if batch is None:
                return
            try:
                self._send(batch)
            except BaseException:  # _send reports everything it expects; this is a bug
                log.exception("result flush crashed")
            finally:
                with self._cond:
                    self._in_flight -= len(batch)
                    self._cond.notify_all()

    def _next_batch(self) -> list[Pending] | None:
        """Wait for results, then up to ``interval`` for more (unless full or closing)."""
        with self._cond:
            while not self._pending:
                if self._closing:
                    return None
                self._cond.wait()
            deadline = time.monotonic() + self.interval
            while not self._full() and not self._closing:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            batch: list[Pending] = []
            size = 0
            for p in self._pending:
                if batch and (len(batch) >= self.max_batch or size + p.size > self.max_bytes):
                    break
                batch.append(p)
                size += p.size
            del self._pending[: len(batch)]
            self._bytes -= size
            self._in_flight += len(batch)
            return batch

    def _full(self) -> bool:
        return len(self._pending) >= self.max_batch or self._bytes >= self.max_bytes

    def _send(self, batch: list[Pending]) -> None:
        self.flushes += 1
        if self._batch_supported:
            try:
                answers = self.client.complete_batch([p.item for p in batch], retry=self.retry)
            except BatonApiError as e:
                if e.status in (400, 413, 422) and len(batch) > 1:
                    # The body as a whole was refused (an item the server cannot read): each
                    # result on its own, so the bad one is answered alone and the rest land.
                    log.warning("a batch of results was refused whole; sending them one by one")
                    for p in batch:
                        self._send_one(p)
                    return
                if e.status not in (404, 405):
                    self._unreported(batch, e)
                    return
                log.warning("the server has no batch completion; reporting results one by one")
                self._batch_supported = False
            except BatonError as e:  # no answer, even after the retries
                self._unreported(batch, e)
                return
            else:
                for p, answer in zip(batch, answers, strict=False):
                    _call(p.on_answer, answer)
                return
        for p in batch:
            self._send_one(p)

    def _send_one(self, p: Pending) -> None:
        item = p.item
        try:
            if "failure" in item:
                f = item["failure"]
                done: Mapping[str, Any] = self.client.fail_job(
                    item["jobId"],
                    worker_id=item["workerId"],
                    error_message=f["errorMessage"],
                    retryable=f.get("retryable", True),
                    next_retry_delay_seconds=f.get("nextRetryDelaySeconds"),
                    attempt=item.get("attempt"),
                    retry=self.retry,
                    output=f.get("output"),
                )
            else:
                done = self.client.send_completion(item, retry=self.retry)
        except BatonApiError as e:
            outcome = {404: "NOT_FOUND", 409: "CONFLICT"}.get(e.status)
            if outcome is None and not e.transient and 400 <= e.status < 500:
                outcome = None if e.status in (401, 403) else "INVALID"
            if outcome is None:
                p.on_unreported(e)
            else:
                error = e.summary()
                _call(p.on_answer, {"jobId": item["jobId"], "outcome": outcome, "error": error})
            return
        except BatonError as e:
            p.on_unreported(e)
            return
        answer: dict[str, Any] = {
            "jobId": item["jobId"],
            "outcome": "APPLIED" if done.get("applied") else "DUPLICATE",
            "status": done.get("status"),
        }
        _call(p.on_answer, answer)

    def _unreported(self, batch: list[Pending], error: BatonError) -> None:
        for p in batch:
            _call(p.on_unreported, error)


def _call(fn: Callable[[Any], None], arg: Any) -> None:
    try:
        fn(arg)
    except Exception:
        log.exception("result callback failed")
