"""Batch completion: many workers' results applied in as few transactions as correctness allows.

``complete_batch`` reads every job of the batch with its instance in one statement (no locks),
decides each result as the single complete or fail would, and writes all the decisions in one
transaction, pipelined with its BEGIN and COMMIT: one round trip and one commit (one WAL flush)
for the whole batch instead of one per result.

Correctness is the single path's:

- Each decision's write carries the version of the instance it read (the fencing token). If
  anything changed one of the instances meanwhile, the database refuses that statement, the
  transaction rolls back whole, and every result of the pass is applied again on the single
  path (optimistic, then locked): one raced instance costs its neighbours a round trip each,
  never a result.
- A batch holds at most one result per instance in its one transaction; further results for an
  instance (a MAP's items completed together) are applied after it, one at a time, each seeing
  the one before.
- The decisions write their instances in instance-id order, so two batches that share instances
  lock them in the same order and cannot deadlock each other.
- A result that is a repeat (DUPLICATE), refused (CONFLICT), for an unknown job (NOT_FOUND) or
  malformed (INVALID) is answered as such and never affects another item.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from baton.engine import views, writer
from baton.engine.decide import Decider
from baton.engine.job_ops import JobOps, attempt_failed
from baton.engine.verdicts import completion_verdict, failure_verdict
from baton.errors import (
    BatonError,
    Conflict,
    InvalidValue,
    JobNotFound,
    PayloadTooLarge,
    StaleVersion,
    ValidationFailed,
    listed,
)
from baton.store import job_sql
from baton.store.db import RETRYABLE, Conn

Outcome = Literal["APPLIED", "DUPLICATE", "CONFLICT", "NOT_FOUND", "INVALID"]
MAX_BATCH = 100


@dataclass(frozen=True, slots=True)
class Failure:
    error_message: str
    retryable: bool = True
    next_retry_delay_seconds: float | None = None


@dataclass(frozen=True, slots=True)
class BatchResult:
    """One worker's result in a batch: an output (``failure`` None) or a failure."""

    job_id: str
    worker_id: str
    attempt: int | None = None
    output: Any = None
    failure: Failure | None = None


@dataclass(slots=True)
class _Decided:
    index: int
    item: BatchResult
    decider: Decider
    retry_at: datetime | None


class BatchOps(JobOps):
    def complete_batch(self, items: Sequence[BatchResult]) -> list[dict[str, Any]]:
        """Apply ``items`` (completions and failures); one answer per item, in order."""
        answers: list[dict[str, Any] | None] = [None] * len(items)
        ids: dict[int, uuid.UUID] = {}
        for k, item in enumerate(items):
            try:
                ids[k] = uuid.UUID(item.job_id)
                if item.failure is None:
                    self._check_size(item.output or {}, "job output")
            except ValueError:
                answers[k] = _answer(item, "NOT_FOUND", error=f"{item.job_id!r} is not a job id")
                ids.pop(k, None)
            except PayloadTooLarge as e:
                answers[k] = _answer(item, "INVALID", error=e.detail)
                ids.pop(k, None)
            except ValidationFailed as e:
                answers[k] = _answer(item, "INVALID", error=listed(e.problems))
                ids.pop(k, None)
        later: list[int] = []
        if ids:
            try:
                done, later = self._batch_pass(items, ids)
            except (StaleVersion, *RETRYABLE):
                done, later = {}, sorted(ids)  # raced: each result on the single path
            for k, answer in done.items():
                answers[k] = answer
        for k in later:
            answers[k] = self._single(items[k])
        self.deliver_pending()
        return [a for a in answers if a is not None]

    def _batch_pass(
        self, items: Sequence[BatchResult], ids: dict[int, uuid.UUID]
    ) -> tuple[dict[int, dict[str, Any]], list[int]]:
        """Read every job with its instance, decide the first result of each instance, and
        write those decisions in one transaction; the answers, and the items left for after."""

        kept: dict[uuid.UUID, dict[str, Any]] = {}
        for jid in set(ids.values()):
            row = self.claimed.take(jid)
            if row is not None:
                kept[jid] = row

        def run(conn: Conn) -> tuple[dict[int, dict[str, Any]], list[int]]:
            answers: dict[int, dict[str, Any]] = {}
            # The states the jobs were claimed in where this process kept them (engine.claimed:
            # a stale one makes the write refuse the pass, and every result is then applied on
            # the single path, on fresh reads); one read for the others.
            rows = dict(kept)
            wanted = sorted(set(ids.values()) - kept.keys())
            if wanted:
                rows.update(
                    (r["job_id"], r)
                    for r in conn.execute(
                        job_sql.READ_JOBS_WITH_INSTANCES, {"job_ids": wanted}
                    ).fetchall()
                )
            first: dict[uuid.UUID, int] = {}  # instance -> the item decided in this pass
            later: list[int] = []
            for k, jid in ids.items():
                row = rows.get(jid)
                if row is None:
                    answers[k] = _answer(items[k], "NOT_FOUND", error=f"no job {jid}")
                elif row["id"] in first:
                    later.append(k)
                else:
                    first[row["id"]] = k
            decided: list[_Decided] = []
            for _, k in sorted(first.items()):  # instance-id order: batches lock alike
                item = items[k]
                try:
                    one = self._decide_one(conn, k, item, rows[ids[k]])
                except BatonError as e:
                    if isinstance(e, Conflict) and ids[k] not in kept:
                        answers[k] = _answer(item, "CONFLICT", error=e.detail)
                    else:
                        # Perhaps only its kept state's doing, or an error of this one result
                        # (an offloaded output that is not JSON): decided alone after the pass,
                        # where the single path answers it, never failing its neighbours.
                        later.append(k)
                    continue
                if one is None:
                    answers[k] = _answer(item, "DUPLICATE", status=_status_of(item))
                else:
                    decided.append(one)
            try:
                writer.write_many(
                    conn,
                    [(d.decider.instance, d.decider.changes) for d in decided],
                    outbox=self.settings.outbox,
                )
            finally:
                for d in decided:  # written or raced: their versions moved
                    self.claimed.forget_instance(d.decider.instance.id)
            self._report(*(d.decider for d in decided))
            for d in decided:
                self._note_deliveries(d.decider.instance.id, d.decider.changes)
                answers[d.index] = _applied(d)
            return answers, later

        return self.db.autocommit(run, retry=False)

    def _decide_one(
        self, conn: Conn, k: int, item: BatchResult, row: dict[str, Any]
    ) -> _Decided | None:
        """The decision for one result (None: a repeat, nothing to do); raises Conflict."""
        job = writer.job_ref(row)
        event: Callable[[Decider], datetime | None]
        if item.failure is None:
            if completion_verdict(row, item.worker_id, item.attempt) == "duplicate":
                return None
            output = item.output or {}

            def event(d: Decider) -> datetime | None:
                d.job_completed(job, output)
                return None
        else:
            failure = item.failure

            failed = attempt_failed(conn, row)
            if failure_verdict(row, item.worker_id, item.attempt, failed) == "duplicate":
                return None

            def event(d: Decider) -> datetime | None:
                return d.job_failed(
                    job,
                    error=failure.error_message,
                    retryable=failure.retryable,
                    delay_override=failure.next_retry_delay_seconds,
                )

        state = writer.state_from_row(row)
        plan = self.snapshots.plan(conn, row["snapshot_id"])
        decider = self.decider(conn, plan, state, row["now"])
        retry_at = event(decider)
        return _Decided(k, item, decider, retry_at)

    def _single(self, item: BatchResult) -> dict[str, Any]:
        """One result on the single path (its own optimistic or locked decision)."""
        try:
            if item.failure is None:
                done = self.complete_job(
                    item.job_id, item.worker_id, item.output, attempt=item.attempt
                )
            else:
                done = self.fail_job(
                    item.job_id,
                    item.worker_id,
                    item.failure.error_message,
                    item.failure.retryable,
                    attempt=item.attempt,
                    next_retry_delay_seconds=item.failure.next_retry_delay_seconds,
                )
        except JobNotFound as e:
            return _answer(item, "NOT_FOUND", error=e.detail)
        except Conflict as e:
            return _answer(item, "CONFLICT", error=e.detail)
        except (ValidationFailed, PayloadTooLarge, InvalidValue) as e:
            return _answer(item, "INVALID", error=e.detail)
        outcome: Outcome = "APPLIED" if done["applied"] else "DUPLICATE"
        extra = {k: v for k, v in done.items() if k in ("status", "nextAttemptAt")}
        return _answer(item, outcome, **extra)


def _status_of(item: BatchResult) -> str:
    return "COMPLETED" if item.failure is None else "FAILED"


def _applied(d: _Decided) -> dict[str, Any]:
    if d.item.failure is None:
        return _answer(d.item, "APPLIED", status="COMPLETED")
    if d.retry_at is not None:
        return _answer(
            d.item, "APPLIED", status="RETRY_SCHEDULED", nextAttemptAt=views.ts(d.retry_at)
        )
    return _answer(d.item, "APPLIED", status="FAILED")


def _answer(item: BatchResult, outcome: Outcome, **extra: Any) -> dict[str, Any]:
    return {"jobId": item.job_id, "outcome": outcome, **extra}
