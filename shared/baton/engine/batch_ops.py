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
- The results for one instance (a MAP's items, a PARALLEL's branches completed together) are
  decided in turn, in the batch's order, on one in-memory state, each seeing the ones before, and
  written as one decision: one fenced write and one version bump for all of them. A result that
  cannot join its instance's decision (a second result for the same job; one for work an earlier
  result of the batch ended, such as a branch its sibling's failure cancelled) is applied after
  the pass on the single path, and answered as it would be alone.
- A pass refused by a fence (another process changed one of its instances between the read and
  the write) is run once more on fresh reads before its results go to the single path.
- The decisions write their instances in instance-id order, so two batches that share instances
  lock them in the same order and cannot deadlock each other.
- A result that is a repeat (DUPLICATE), refused (CONFLICT), for an unknown job (NOT_FOUND) or
  malformed (INVALID) is answered as such and never affects another item.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from baton import jsontext
from baton.engine import one_step, views, writer
from baton.engine.claimed import typed
from baton.engine.decide import Changes, Decider, InstanceState, JobRef
from baton.engine.job_ops import JobOps, attempt_ends
from baton.engine.plan import Plan
from baton.engine.reads import exec_from_row
from baton.engine.verdicts import Late, completion_verdict, duplicate_status, failure_verdict
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


# Plain slotted dataclasses, never changed once made: a frozen one's __init__ sets each field
# through object.__setattr__ (a BatchResult took 2.4 µs to make, 0.6 without; one per result).
@dataclass(slots=True)
class Failure:
    error_message: str
    retryable: bool = True
    next_retry_delay_seconds: float | None = None
    output: dict[str, Any] | None = None  # kept as the step's when the failure ends the step


@dataclass(slots=True)
class BatchResult:
    """One worker's result in a batch: an output (``failure`` None) or a failure."""

    job_id: str
    worker_id: str
    attempt: int | None = None
    output: Any = None
    failure: Failure | None = None


@dataclass(slots=True)
class _Decided:
    """One instance's decision in a pass (its state moved on, and its changes): the results it
    took, each with its retry time."""

    instance: InstanceState
    changes: Changes
    applied: list[tuple[int, BatchResult, datetime | None]]


# Passes of one batch before its results go to the single path: one more after a fence refused
# the first (another process changed one of its instances between the read and the write).
PASSES = 2


class BatchOps(JobOps):
    def complete_batch(self, items: Sequence[BatchResult]) -> list[dict[str, Any]]:
        """Apply ``items`` (completions and failures); one answer per item, in order."""
        answers: list[dict[str, Any] | None] = [None] * len(items)
        ids: dict[int, str] = {}  # item -> its job id's canonical text
        kept = self.claimed
        # The outputs measured together first: when all of them are surely within the limit,
        # so is each (its JSON is a part of theirs), and none is measured alone.
        outputs = [_output_of(item) for item in items]
        each = not jsontext.surely_within(
            [o for o in outputs if o is not None], self.settings.max_payload_bytes
        )
        for k, item in enumerate(items):
            try:
                # A job whose state this process kept has its id as the claim wrote it (the
                # canonical text, as every poll answers it): no parse.
                jid = item.job_id
                ids[k] = jid if jid in kept else _canonical(jid)
                if each and outputs[k] is not None:
                    self._check_size(outputs[k], "job output")
            except ValueError:
                answers[k] = _answer(item, "NOT_FOUND", error=f"{item.job_id!r} is not a job id")
                ids.pop(k, None)
            except PayloadTooLarge as e:
                answers[k] = _answer(item, "INVALID", error=e.detail)
                ids.pop(k, None)
            except ValidationFailed as e:
                answers[k] = _answer(item, "INVALID", error=listed(e.problems))
                ids.pop(k, None)
        done, later = self._passes(items, ids) if ids else ({}, [])
        for k, answer in done.items():
            answers[k] = answer
        for k in later:
            answers[k] = self._single(items[k])
        self.deliver_pending()
        return [a for a in answers if a is not None]

    def _passes(
        self, items: Sequence[BatchResult], ids: dict[int, str]
    ) -> tuple[dict[int, dict[str, Any]], list[int]]:
        """A pass, again on fresh reads if it raced (its kept states were taken); raced every
        time, each result on the single path."""
        for _ in range(PASSES):
            try:
                return self._batch_pass(items, ids)
            except (StaleVersion, *RETRYABLE):
                continue
        return {}, sorted(ids)

    def _batch_pass(
        self, items: Sequence[BatchResult], ids: dict[int, str]
    ) -> tuple[dict[int, dict[str, Any]], list[int]]:
        """Read every job with its instance, decide the first result of each instance, and
        write those decisions in one transaction; the answers, and the items left for after."""

        # Rows by their job's and instance's ids as canonical text: a uuid.UUID's hash and
        # order run Python code, a str's do not (each id is looked up several times per
        # result), and sort alike. A kept row is as the claim gave it (engine.claimed: its ids
        # and times as text), typed only if a decider takes it.
        kept = self.claimed.take_many(set(ids.values()))

        def run(conn: Conn) -> tuple[dict[int, dict[str, Any]], list[int]]:
            answers: dict[int, dict[str, Any]] = {}
            # The states the jobs were claimed in where this process kept them (engine.claimed:
            # a stale one makes the write refuse the pass, and every result is then applied on
            # the single path, on fresh reads); one read for the others.
            rows = dict(kept)
            wanted = sorted({jid for jid in ids.values() if jid not in kept})
            if wanted:
                rows.update(
                    (str(r["job_id"]), r)
                    for r in job_sql.read_jobs_with_instances(
                        conn, [uuid.UUID(jid) for jid in wanted]
                    )
                )
            groups: dict[str, list[int]] = {}  # instance -> its items, in batch order
            for k, jid in ids.items():
                row = rows.get(jid)
                if row is None:
                    answers[k] = _answer(items[k], "NOT_FOUND", error=f"no job {jid}")
                else:
                    groups.setdefault(str(row["id"]), []).append(k)
            decided: list[_Decided] = []
            settled: list[writer.Settled] = []  # results of the common shape (engine.one_step)
            settled_at: list[int] = []  # their items
            later: list[int] = []
            settle = self._one_step_settler(conn)
            for iid in sorted(groups):  # instance-id order: batches lock alike
                ks = groups[iid]
                if len(ks) == 1 and items[ks[0]].failure is None:
                    one_row = settle(items[ks[0]], rows[ids[ks[0]]])
                    if one_row is not None:
                        settled.append(one_row)
                        settled_at.append(ks[0])
                        continue
                group = [
                    (k, items[k], typed(rows[ids[k]]) if ids[k] in kept else rows[ids[k]])
                    for k in ks
                ]
                one = self._decide_instance(conn, group, kept, answers, later)
                if one is not None:
                    decided.append(one)
            try:
                writer.write_many(
                    conn,
                    [(d.instance, d.changes) for d in decided],
                    outbox=self.settings.outbox,
                    settled=settled,
                )
            finally:  # written or raced: their versions moved
                self.claimed.forget_instances(
                    [*(d.instance.id for d in decided), *(s.instance_id for s in settled)]
                )
            ended = Changes()
            if settled:  # each completed its job and its instance
                ended.counters.update(JobsCompleted=len(settled), InstancesCompleted=len(settled))
            self._report_changes(ended, *(d.changes for d in decided))
            for d in decided:
                self._note_deliveries(d.instance.id, d.changes)
                for k, item, retry_at in d.applied:
                    answers[k] = _applied(item, retry_at)
            for k in settled_at:
                answers[k] = {"jobId": items[k].job_id, "outcome": "APPLIED", "status": "COMPLETED"}
            return answers, sorted(later)

        return self.db.autocommit(run, retry=False)

    def _decide_instance(
        self,
        conn: Conn,
        group: list[tuple[int, BatchResult, dict[str, Any]]],
        kept: dict[str, dict[str, Any]],
        answers: dict[int, dict[str, Any]],
        later: list[int],
    ) -> _Decided | None:
        """One instance's results of the pass, decided in turn on one state; repeats and
        refusals answered in ``answers``, results left for the single path added to ``later``.
        None when nothing is to be written."""
        # The freshest state read or kept for the instance (kept states of several claims may
        # differ; the write's fence refuses any that is out of date).
        base = max((row for _, _, row in group), key=lambda row: int(row["version"]))
        decider: Decider | None = None
        applied: list[tuple[int, BatchResult, datetime | None]] = []
        jobs: set[int] = set()
        for k, item, row in group:
            job = writer.job_ref(row)
            if job.id.int in jobs:
                later.append(k)  # a second result for a job: answered by the single path
                continue
            try:
                event = self._event(conn, item, row, job)
            except BatonError as e:
                if isinstance(e, Conflict) and str(job.id) not in kept:
                    answers[k] = _answer(item, "CONFLICT", error=e.detail)
                else:
                    # Perhaps only its kept state's doing: decided alone after the pass.
                    later.append(k)
                continue
            if event is None:
                status = duplicate_status(row, item.failure is not None)
                answers[k] = _answer(item, "DUPLICATE", status=status)
                continue
            if decider is None:
                plan = self.snapshots.plan(conn, base["snapshot_id"])
                decider = self.decider(conn, plan, writer.state_from_row(base), base["now"])
                # The operator executions the batch's read brought (a MAP's, for its items).
                decider.knows(exec_from_row(r["owner"]) for _, _, r in group if r.get("owner"))
            elif not decider.active or decider.closed(job.scope):
                later.append(k)  # an earlier result ended its work: refused on the single path
                continue
            cancels = len(decider.changes.cancel_scopes)
            try:
                retry_at = event(decider)
            except BatonError:
                # An error of this one result (an offloaded output that is not JSON, read by
                # an expression) leaves the shared state half-changed: the instance's results
                # are decided one by one after the pass, never failing their neighbours.
                return self._abandon(group, answers, later)
            if applied and len(decider.changes.cancel_scopes) > cancels:
                # It ends work (a failure that fails its operator or the instance), and what
                # ends is found in the tables, where the work the earlier results of this
                # decision started is not yet: decided one by one, each seeing the one before.
                return self._abandon(group, answers, later)
            jobs.add(job.id.int)
            applied.append((k, item, retry_at))
        if decider is None or not applied:
            return None
        return _Decided(decider.instance, decider.changes, applied)

    def _one_step_settler(
        self, conn: Conn
    ) -> Callable[[BatchResult, dict[str, Any]], writer.Settled | None]:
        """The decision of an instance's one result, when it is of the batch's common shape (it
        completes the instance's only step, ``engine.one_step``): decided without a decider,
        as its rows. Plans looked up once per snapshot for the pass."""
        plans: dict[int, Plan] = {}
        offload = self.offload is not None
        limits = self.settings.payload_limits

        def settle(item: BatchResult, row: dict[str, Any]) -> writer.Settled | None:
            sid = row["snapshot_id"]
            plan = plans.get(sid)
            if plan is None:
                plan = plans[sid] = self.snapshots.plan(conn, sid)
            return one_step.settle(
                plan,
                row,
                worker_id=item.worker_id,
                attempt=item.attempt,
                output=item.output or {},
                offload=offload,
                payload_limits=limits,
            )

        return settle

    @staticmethod
    def _abandon(
        group: list[tuple[int, BatchResult, dict[str, Any]]],
        answers: dict[int, dict[str, Any]],
        later: list[int],
    ) -> None:
        """Leave the instance's unanswered results to the single path; nothing to write."""
        undecided = set(later) | answers.keys()
        later.extend(k for k, _, _ in group if k not in undecided)

    def _event(
        self, conn: Conn, item: BatchResult, row: dict[str, Any], job: JobRef
    ) -> Callable[[Decider], datetime | None] | None:
        """What ``item`` does to its instance's decision (None: a repeat, nothing to do);
        raises Conflict when it is refused."""
        ends = attempt_ends(conn, row)
        if item.failure is None:
            verdict = completion_verdict(row, item.worker_id, item.attempt, ends)
            if verdict == "duplicate":
                return None
            output = item.output or {}
            late = (verdict.attempt, verdict.worker_id) if isinstance(verdict, Late) else None

            def completed(d: Decider) -> datetime | None:
                d.job_completed(job, output, late=late)
                return None

            return completed
        failure = item.failure
        if failure_verdict(row, item.worker_id, item.attempt, ends) == "duplicate":
            return None

        def failed_event(d: Decider) -> datetime | None:
            return d.job_failed(
                job,
                error=failure.error_message,
                retryable=failure.retryable,
                delay_override=failure.next_retry_delay_seconds,
                output=failure.output or None,
            )

        return failed_event

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
                    output=item.failure.output,
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


# A job id as Baton writes it: a result of a job this process claimed carries it so, and is
# looked up as it is; any other form uuid.UUID reads is written so first.
_CANONICAL_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _output_of(item: BatchResult) -> Any:
    """The output ``item`` carries, as its size is checked (None: a failure without one)."""
    if item.failure is None:
        return item.output or {}
    return item.failure.output or None


def _canonical(job_id: str) -> str:
    """``job_id``'s canonical text (ValueError: not a UUID)."""
    if _CANONICAL_ID.fullmatch(job_id):
        return job_id
    return str(uuid.UUID(job_id))


def _applied(item: BatchResult, retry_at: datetime | None) -> dict[str, Any]:
    if item.failure is None:
        return _answer(item, "APPLIED", status="COMPLETED")
    if retry_at is not None:
        return _answer(item, "APPLIED", status="RETRY_SCHEDULED", nextAttemptAt=views.ts(retry_at))
    return _answer(item, "APPLIED", status="FAILED")


def _answer(item: BatchResult, outcome: Outcome, **extra: Any) -> dict[str, Any]:
    return {"jobId": item.job_id, "outcome": outcome, **extra}
