"""Jobs, the workers' side: poll (claim), complete, fail and heartbeat.

Round trips on the hot path: a poll is one statement for a whole batch; a complete or fail is one
in the process that claimed the job (decided on the state the claim returned, ``engine.claimed``)
and two elsewhere (an unlocked read, then every write in one statement), falling back to a fresh
read, then to a locked decision, only when something else changed the instance in between.
"""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter
from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

from baton.engine import long_poll, one_step, views, writer
from baton.engine.claimed import typed
from baton.engine.core import EngineCore, log
from baton.engine.ids import parse_uuid
from baton.engine.verdicts import (
    AttemptEnds,
    Late,
    completion_verdict,
    duplicate_status,
    failure_verdict,
)
from baton.errors import AttemptNotCurrent, BatonError, JobNotFound, LeaseNotHeld, StaleVersion
from baton.store import job_sql
from baton.store.db import RETRYABLE, Conn, first_in_transaction

T = TypeVar("T")
# Where a claimed job's list (job_sql.claim) says whether its lease was taken over, and how long
# it waited to be claimed.
_RECLAIMED = job_sql.CLAIMED_KEYS.index("reclaimed")
_LATENCY_MS = job_sql.CLAIMED_KEYS.index("latency_ms")
# How long the set of limited job types is trusted before it is read again.
LIMITS_CACHE_SECONDS = 2.0


class JobOps(EngineCore):
    def poll(
        self,
        worker_id: str,
        job_types: list[str],
        max_jobs: int = 1,
        *,
        wait_seconds: float = 0.0,
        gone: Callable[[], bool] | None = None,
    ) -> list[dict[str, Any]]:
        """Claim up to ``max_jobs`` jobs of ``job_types`` for ``worker_id``; with
        ``wait_seconds``, wait that long at most for one to become claimable (long-poll), and
        claim nothing more once ``gone()`` says the client left or the worker sent its stop
        signal (:meth:`stop_worker`) after the wait began.

        Types without limits: one statement. Types with a concurrency or rate limit: one
        transaction in one round trip that counts against the limits inside it.
        """
        max_jobs = max(1, min(max_jobs, self.settings.max_jobs_per_poll))
        types = list(dict.fromkeys(job_types))

        if wait_seconds > 0:
            watch = _StopWatch(self, worker_id, since=time.time())

            def claim() -> list[dict[str, Any]]:
                # After its first look, each claim takes nothing once the worker stopped.
                return self._claim(worker_id, types, max_jobs, stops_seen=watch.baseline)

            rows = long_poll.wait_for_jobs(
                claim,
                types,
                wait_seconds,
                self.wakeups,
                gone=_either(gone, watch),
                also=(long_poll.worker_wakeup(worker_id),),
            )
        else:
            rows = self._claim(worker_id, types, max_jobs)
        if not rows:  # (a claim that found jobs reported them: once per poll)
            self.metrics.add("JobPollEmpty", 1)
        return rows

    def stop_worker(self, worker_id: str) -> dict[str, Any]:
        """The worker's stop signal: a long-poll of ``worker_id`` waiting now claims nothing more
        (the signal notifies ``worker/<id>``, which wakes the wait at once; behind RDS Proxy it
        looks within a second) and ends empty; polls sent afterwards are unaffected. Behind API
        Gateway a wait cannot see its client hang up, so a stopping worker says it (the SDK
        does, at stop)."""
        row = self.db.autocommit(
            lambda c: c.execute(job_sql.STOP_WORKER, {"worker_id": worker_id}).fetchone()
        )
        assert row is not None  # an upsert returns its row
        log.info("worker stopped", extra={"worker_id": worker_id, "stops": row["stops"]})
        return {"workerId": worker_id, "stoppedAt": views.ts(row["stopped_at"])}

    def _claim(
        self, worker_id: str, types: list[str], max_jobs: int, stops_seen: int | None = None
    ) -> list[dict[str, Any]]:
        """The jobs of one claim, as the poll answers them (their metrics reported); with
        ``stops_seen``, none once the worker's count of stop signals differs from it."""
        limited = self._limited_types()
        plain = [t for t in types if t not in limited]
        capped = [t for t in types if t in limited]
        answers: list[dict[str, Any]] = []
        reclaimed = 0
        latencies_ms: list[float] = []
        budget = self.settings.max_poll_response_bytes
        if plain:
            keep = self.claimed.max_entries > 0
            now, jobs = self.db.autocommit(
                lambda c: job_sql.claim(
                    c,
                    worker_id=worker_id,
                    job_types=plain,
                    max_jobs=max_jobs,
                    max_bytes=budget,
                    with_state=keep,
                    stops_seen=stops_seen,
                )
            )
            if jobs:
                if keep:
                    self.claimed.keep(jobs, worker_id, now)
                answers = views.claimed_answers(jobs)
                reclaimed = sum(1 for j in jobs if j[_RECLAIMED])
                latencies_ms = [j[_LATENCY_MS] for j in jobs]
        if capped and len(answers) < max_jobs:
            left = max_jobs - len(answers)
            used = sum(len(json.dumps(a["input"])) for a in answers)
            more, grants = self.db.autocommit(
                lambda c: job_sql.claim_limited(
                    c,
                    worker_id=worker_id,
                    job_types=capped,
                    max_jobs=left,
                    max_bytes=max(1, budget - used),
                    stops_seen=stops_seen,
                )
            )
            answers += views.claimed_jobs(more)
            reclaimed += sum(1 for r in more if r["reclaimed"])
            latencies_ms += _latencies_ms(more)
            self._report_limits(more, grants)
        if answers:
            self._report_claims(reclaimed, latencies_ms)
        return answers

    def _limited_types(self) -> frozenset[str]:
        """Job types with a concurrency or rate limit, cached for a couple of seconds (a stale
        answer is safe: the plain claim skips limited types itself, and the limited claim serves
        a type without limits as one)."""
        at, types = self._limits
        if time.monotonic() - at > LIMITS_CACHE_SECONDS:
            rows = self.db.autocommit(lambda c: c.execute(job_sql.LIMITED_TYPES).fetchall())
            types = frozenset(r["job_type"] for r in rows)
            self._limits = (time.monotonic(), types)
        return types

    def _report_limits(self, claimed: list[dict[str, Any]], grants: list[dict[str, Any]]) -> None:
        got = Counter(r["job_type"] for r in claimed)
        for g in grants:
            if got[g["job_type"]] < g["grant_now"]:
                continue  # fewer jobs were ready than allowed: no limit held anything back
            dimensions = {"JobType": g["job_type"]}
            if g["by_concurrency"]:
                self.metrics.add("ConcurrencyLimited", 1, dimensions=dimensions)
            if g["by_rate"]:
                self.metrics.add("RateLimited", 1, dimensions=dimensions)

    def _report_claimed_rows(self, rows: list[dict[str, Any]]) -> None:
        """``_report_claims`` for a claim's typed rows (the claim by id, the limited claim)."""
        if not rows:
            self.metrics.add("JobPollEmpty", 1)
            return
        self._report_claims(sum(1 for r in rows if r["reclaimed"]), _latencies_ms(rows))

    def _report_claims(self, reclaimed: int, latencies_ms: list[float]) -> None:
        """A claim's jobs: how many, how many leases it took over, and each one's wait."""
        m = self.metrics
        m.add("JobsClaimed", len(latencies_ms))
        if reclaimed:
            m.add("LeasesExpired", reclaimed)
        for ms in latencies_ms:
            m.add("JobDispatchLatency", ms, "Milliseconds")

    def complete_job(
        self,
        job_id: str,
        worker_id: str,
        variables: dict[str, Any] | None = None,
        *,
        attempt: int | None = None,
    ) -> dict[str, Any]:
        """Complete a claimed job with its output; a repeat is answered ``applied: false``.

        A completion whose lease lapsed is applied while the job is not settled, even if the job
        was re-queued or claimed again; the attempt in flight is then superseded (see
        ``engine.verdicts``)."""
        # A job whose state this process kept has its id as the claim wrote it (the canonical
        # text, as every poll answers it): no parse.
        key = job_id if job_id in self.claimed else str(parse_uuid(job_id, "jobId"))
        output = variables or {}
        self._check_size(output, "job output")
        offload = self.offload is not None
        limits = self.settings.payload_limits

        def shortcut(conn: Conn, row: dict[str, Any]) -> bool | None:
            # The common shape (the result completes the only step of a running top-level
            # instance, engine.one_step): its rows written without a decider; None: decided.
            plan = self.snapshots.plan(conn, row["snapshot_id"])
            one = one_step.settle(
                plan,
                row,
                worker_id=worker_id,
                attempt=attempt,
                output=output,
                offload=offload,
                payload_limits=limits,
            )
            if one is None:
                return None
            try:
                writer.write_settled(conn, one)
            finally:  # written or raced: its version moved
                self.claimed.forget_instance(one.instance_id)
            self._report_settled(1)
            return True

        def decide(conn: Conn, row: dict[str, Any], optimistic: bool) -> bool:
            verdict = completion_verdict(row, worker_id, attempt, attempt_ends(conn, row))
            if verdict == "duplicate":
                return False
            job = writer.job_ref(row)
            late = (verdict.attempt, verdict.worker_id) if isinstance(verdict, Late) else None
            self._decide(
                conn, row, lambda d: d.job_completed(job, output, late=late), optimistic=optimistic
            )
            if late is not None:
                log.info(
                    "late completion applied",
                    extra={
                        "job_id": job_id,
                        "worker_id": worker_id,
                        "attempt": late[0],
                        "superseded_attempt": job.attempt,
                    },
                )
            return True

        applied = self._on_job(key, decide, shortcut)
        self.deliver_pending()
        return {"jobId": job_id, "status": "COMPLETED", "applied": applied}

    def fail_job(
        self,
        job_id: str,
        worker_id: str,
        error_message: str,
        retryable: bool = True,
        *,
        attempt: int | None = None,
        next_retry_delay_seconds: float | None = None,
        output: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Fail a claimed job: a retry is scheduled while retries remain, else the step fails.
        ``output``: what the worker gave with the failure (Conductor's failed task's
        ``outputData``), kept as the step's output when this attempt fails the step."""
        key = job_id if job_id in self.claimed else str(parse_uuid(job_id, "jobId"))
        if output:
            self._check_size(output, "job output")

        def decide(conn: Conn, row: dict[str, Any], optimistic: bool) -> dict[str, Any]:
            if failure_verdict(row, worker_id, attempt, attempt_ends(conn, row)) == "duplicate":
                return {"jobId": job_id, "status": duplicate_status(row, True), "applied": False}
            job = writer.job_ref(row)
            retry_at: datetime | None = self._decide(
                conn,
                row,
                lambda d: d.job_failed(
                    job,
                    error=error_message,
                    retryable=retryable,
                    delay_override=next_retry_delay_seconds,
                    output=output or None,
                ),
                optimistic=optimistic,
            )
            if retry_at is not None:
                return {
                    "jobId": job_id,
                    "status": "RETRY_SCHEDULED",
                    "applied": True,
                    "nextAttemptAt": views.ts(retry_at),
                }
            return {"jobId": job_id, "status": "FAILED", "applied": True}

        outcome = self._on_job(key, decide)
        self.deliver_pending()
        return outcome

    def heartbeat(
        self, job_id: str, worker_id: str, *, attempt: int | None = None
    ) -> dict[str, Any]:
        """Extend the lease of a job ``worker_id`` holds (one statement)."""
        jid = parse_uuid(job_id, "jobId")

        def work(conn: Conn) -> datetime:
            row = conn.execute(
                job_sql.HEARTBEAT, {"job_id": jid, "worker_id": worker_id, "attempt": attempt}
            ).fetchone()
            if row is not None:
                expires: datetime = row["lock_expires_at"]
                return expires
            state = conn.execute(job_sql.JOB_STATE, {"job_id": jid}).fetchone()
            if state is None:
                raise JobNotFound(job_id)
            if attempt is not None and attempt != state["attempt"]:
                raise AttemptNotCurrent(job_id, attempt, state["attempt"], "no lease to extend")
            raise LeaseNotHeld(job_id, worker_id, f"the job is {state['status']}")

        expires = self.db.autocommit(work)
        return {"jobId": job_id, "lockExpiresAt": views.ts(expires)}

    def _on_job(
        self,
        job_id: str,
        decide: Callable[[Conn, dict[str, Any], bool], T],
        shortcut: Callable[[Conn, dict[str, Any]], T | None] | None = None,
    ) -> T:
        """Run a job decision (``job_id``: the id's canonical text): optimistic first, under
        locks if that was raced.

        Optimistic: read job and instance without locks, decide, and write everything in one
        atomic statement whose instance update carries the version read (the fencing token).
        If anything changed the instance meanwhile, the database refuses the write and nothing
        of it lands; the decision is then made again on a locked, current state. Two round
        trips and two statements per completion, with no lock held between them; one when this
        process kept the state the job was claimed in (engine.claimed), which stands in for
        the read and is fenced alike.

        ``shortcut``: tried first on an optimistic row (kept as claimed, its ids as text, or
        read), it decides and writes the common shape without a decider, or returns None for
        ``decide`` to decide the row (a locked decision always goes to ``decide``).
        """

        kept = self.claimed.take_as_claimed(job_id)
        if kept is not None:
            # Decided on the state the job was claimed in (no read): a write refused because
            # something moved since, or any error that state led to, is decided again below on
            # a fresh read, so the kept state never changes an outcome (see engine.claimed).
            def on_kept(conn: Conn) -> T:
                if shortcut is not None:
                    done = shortcut(conn, kept)
                    if done is not None:
                        return done
                return decide(conn, typed(kept), True)

            try:
                return self.db.autocommit(on_kept, retry=False)
            except (BatonError, *RETRYABLE):
                pass
        jid = uuid.UUID(job_id)

        def optimistic(conn: Conn) -> T:
            row = conn.execute(job_sql.READ_JOB_WITH_INSTANCE, {"job_id": jid}).fetchone()
            if row is None:
                raise JobNotFound(job_id)
            if shortcut is not None:
                done = shortcut(conn, row)
                if done is not None:
                    return done
            return decide(conn, row, True)

        def locked(conn: Conn) -> T:
            row = first_in_transaction(conn, job_sql.LOCK_JOB_WITH_INSTANCE, {"job_id": jid})
            if row is None:
                raise JobNotFound(job_id)
            return decide(conn, row, False)

        try:
            return self.db.autocommit(optimistic, retry=False)
        except (StaleVersion, *RETRYABLE):
            return self.db.transaction(locked, explicit_begin=True)


def attempt_ends(conn: Conn, row: dict[str, Any]) -> Callable[[], AttemptEnds]:
    """How the earlier attempts of the job in ``row`` ended, read once when first asked (a
    verdict asks only about a report that is not from the current attempt's holder)."""
    read: list[AttemptEnds] = []

    def ends() -> AttemptEnds:
        if not read:
            rows = conn.execute(
                job_sql.ATTEMPT_ENDS, {"instance_id": row["id"], "job_id": row["job_id"]}
            ).fetchall()
            read.append(AttemptEnds((r["event"], r["attempt"], r["worker_id"]) for r in rows))
        return read[0]

    return ends


def _latencies_ms(rows: list[dict[str, Any]]) -> list[float]:
    """How long each claimed job (a typed row) waited to be claimed, in milliseconds."""
    return [r["dispatch_latency"].total_seconds() * 1000 for r in rows]


class _StopWatch:
    """Whether ``worker_id`` sent a stop signal since ``since`` (the poll's arrival, epoch
    seconds) or since the first time this is asked (a long-poll asks first just after its
    first, empty claim, then before each claim). ``since`` covers the signal that came while
    that first claim ran: a runner stopping with this poll out sends it at once. ``baseline``:
    the worker's count of stops at that first look (None before it), which the poll's later
    claims carry, so that a stop landing between a look and a claim is seen by the claim."""

    def __init__(self, ops: JobOps, worker_id: str, since: float | None = None) -> None:
        self._ops, self._worker_id, self._since = ops, worker_id, since
        self.baseline: int | None = None

    def __call__(self) -> bool:
        worker_id = self._worker_id
        row = self._ops.db.autocommit(
            lambda c: c.execute(job_sql.WORKER_STOPS, {"worker_id": worker_id}).fetchone()
        )
        stops = 0 if row is None else int(row["stops"])
        if self.baseline is None:
            self.baseline = stops
            return row is not None and self._since is not None and float(row["at"]) >= self._since
        return stops != self.baseline


def _either(first: Callable[[], bool] | None, second: Callable[[], bool]) -> Callable[[], bool]:
    """``first() or second()``, the cheap one first (``first`` may be absent)."""
    if first is None:
        return second
    return lambda: first() or second()
