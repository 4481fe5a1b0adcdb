"""SQL for jobs: the claim (the most important statement in the project), leases, completion.

Claim = one statement: lock up to N claimable rows with FOR UPDATE SKIP LOCKED (never waiting on
another poller), flip them to LOCKED, mark their steps IN_PROGRESS and write the audit rows. A row
is claimable when UNLOCKED and due (``run_at <= now()``), or LOCKED with an expired lease, so an
expired job goes back to work at the very next poll even if the reaper has not run yet. Each
branch reads its own partial index (``job_claimable``, ``job_lease_expiry``).
"""

from __future__ import annotations

import functools
import re
import uuid
from collections.abc import Iterable
from typing import Any

from baton.store.db import Conn
from baton.store.raw_sql import RawStatement, unsized_array

_CLAIM_FIND = """
WITH types AS (
    -- Types with a concurrency or rate limit are claimed by CLAIM_LIMITED instead (one probe of
    -- a tiny table per type: an unlimited type pays nothing else).
    -- ``LIMIT``: the number of types given, written into the text by ``claim_sql`` (see there).
    SELECT t.job_type FROM unnest(%(job_types)s::text[]) AS t(job_type)
     WHERE NOT EXISTS (SELECT 1 FROM job_type_limit l WHERE l.job_type = t.job_type)
     LIMIT %(n_types)s
), expired AS (
    -- A lapsed lease is a new attempt at once, in its old place in line (it counts against
    -- the job's retries; one with none left is the reaper's, which fails its step).
    SELECT e.id, e.payload_bytes, e.lock_expires_at AS due, 0 AS branch
      FROM types t
     CROSS JOIN LATERAL (
            SELECT id, payload_bytes, lock_expires_at
              FROM job
             WHERE job.job_type = t.job_type
               AND status = 'LOCKED'
               AND lock_expires_at < now()
               AND retries_remaining > 0
             ORDER BY lock_expires_at
             LIMIT %(max_jobs)s
               FOR UPDATE SKIP LOCKED
           ) e
), ready AS (
    -- One ordered, bounded index range scan per job type (an ANY() over the index would
    -- have to sort every claimable row of those types).
    SELECT r.id, r.payload_bytes, r.run_at AS due, 1 AS branch
      FROM types t
     CROSS JOIN LATERAL (
            SELECT id, payload_bytes, run_at
              FROM job
             WHERE job.job_type = t.job_type
               AND status = 'UNLOCKED'
               AND run_at <= now()
             ORDER BY run_at
             LIMIT %(max_jobs)s
               FOR UPDATE SKIP LOCKED
           ) r
), ranked AS (
    -- Cap the batch by bytes as well as by count: a response must fit in Lambda's 6 MB.
    SELECT id, branch,
           row_number() OVER w AS n,
           sum(payload_bytes) OVER w AS running_bytes
      FROM (SELECT * FROM expired UNION ALL SELECT * FROM ready) c
    WINDOW w AS (ORDER BY branch, due ROWS UNBOUNDED PRECEDING)
), picked AS (
    SELECT id
      FROM ranked
     WHERE n <= %(max_jobs)s AND (n = 1 OR running_bytes <= %(max_bytes)s)
       /* stop guard */
"""

# Where both claims' ``picked`` takes the long-poll's stop guard (``_guarded``).
_STOP_GUARD = "/* stop guard */"

# A long-poll's claims after its first look at the worker's stop signal take nothing once the
# worker's count of stops is no longer the one that look saw (``stops_seen``): a stop committed
# before the claim's snapshot is seen by the claim itself, not only by a look before it (a stop
# landing between that look and the claim would otherwise hand the stopping worker a job).
_UNLESS_STOPPED = """AND NOT EXISTS (SELECT 1 FROM worker_stop w
                        WHERE w.worker_id = %(worker_id)s AND w.stops <> %(stops_seen)s)"""


def _guarded(claim: str, guarded: bool) -> str:
    """``claim`` taking nothing once its worker's stops moved past ``stops_seen`` (``guarded``),
    else as it is."""
    return claim.replace(_STOP_GUARD, _UNLESS_STOPPED) if guarded else claim


# Taking the lease on what the find picked: shared by the poll's claim and the claim by id.
_CLAIM_TAKE = """), claimed AS (
    UPDATE job
       SET status = 'LOCKED',
           worker_id = %(worker_id)s,
           -- (A LOCKED row here is a lapsed lease the find picked: ``expired``'s.)
           attempt = job.attempt + CASE WHEN job.status = 'LOCKED' THEN 1 ELSE 0 END,
           retries_remaining = job.retries_remaining
                               - CASE WHEN job.status = 'LOCKED' THEN 1 ELSE 0 END,
           locked_at = now(),
           lock_expires_at = now() + make_interval(secs => job.lease_seconds),
           deadline_at = CASE WHEN job.timeout_seconds > 0
                              THEN now() + make_interval(secs => job.timeout_seconds) END,
           deliveries = job.deliveries + 1
     WHERE job.id = ANY(ARRAY(SELECT id FROM picked))
    RETURNING job.id, job.instance_id, job.step_execution_id, job.job_type, job.attempt,
              job.retries_remaining, job.lock_expires_at, job.payload, job.created_at,
              job.lease_seconds, job.id = ANY(ARRAY(SELECT id FROM expired)) AS reclaimed,
              now() - job.created_at AS dispatch_latency
), expired_holders AS (
    SELECT e.id, j.worker_id FROM expired e JOIN job j ON j.id = e.id
), steps_started AS (
    UPDATE step_execution s
       SET status = 'IN_PROGRESS', attempt = claimed.attempt,
           started_at = coalesce(s.started_at, now()), updated_at = now()
      FROM claimed
     WHERE s.id = ANY(ARRAY(SELECT step_execution_id FROM claimed))
       AND s.id = claimed.step_execution_id
    RETURNING s.id, s.step_id, s.scope
), audited AS (
    INSERT INTO audit_log (instance_id, job_id, event, detail)
    SELECT c.instance_id, c.id, 'JOB_LEASE_EXPIRED',
           jsonb_build_object('workerId', h.worker_id, 'attempt', c.attempt - 1)
      FROM claimed c JOIN expired_holders h ON h.id = c.id
     WHERE c.reclaimed
    UNION ALL
    SELECT instance_id, id, 'JOB_DISPATCHED',
           jsonb_build_object('workerId', %(worker_id)s::text, 'attempt', attempt)
      FROM claimed
)
"""

_CLAIMED = """
SELECT c.*, s.step_id
  FROM claimed c JOIN steps_started s ON s.id = c.step_execution_id
 ORDER BY c.created_at
"""

# Largest instance input + variables (as stored, compressed) a claim returns for the claimed-state
# cache (engine.claimed): a larger instance is read again when its job completes, as without it.
CLAIMED_STATE_MAX_BYTES = 16_384

# What the poll's claim returns for each job, in this order: the job as the poll answers it (the
# first nine), what the poll's metrics count, and (``STATE``) the rest of the state its
# completion's decision reads, or null. The state is the columns of READ_JOB_WITH_INSTANCE: the
# job's own values above (``STATE_FROM_JOB``), the claim's clock (``now()``, once per claim),
# the constants (the job LOCKED by the claiming worker, its lease not lapsed), and
# ``CLAIMED_STATE_KEYS``, for the process that claimed the job to decide its
# completion without reading it again (engine.claimed); its write stays fenced by the instance
# version, so a state that changed since the claim is refused and read again. Only for
# top-level steps (scope ''): a step inside a PARALLEL, MAP or loop has siblings whose
# completions (by any worker) move the instance's version, so its kept state would mostly be
# refused (a PARALLEL of 10 drained 12% slower with them kept); and only for instances whose
# input and variables are small (``state_max_bytes``; -1: no state at all).
CLAIMED_FIELDS = (
    ("id", "c.id"),
    ("instanceId", "c.instance_id"),
    ("stepId", "s.step_id"),
    ("stepExecutionId", "c.step_execution_id"),
    ("jobType", "c.job_type"),
    ("attempt", "c.attempt"),
    ("retriesRemaining", "c.retries_remaining"),
    ("lockExpiresAt", "c.lock_expires_at"),
    ("input", "c.payload"),
    ("reclaimed", "c.reclaimed"),
    ("latency_ms", "date_part('epoch', c.dispatch_latency) * 1000"),
    ("state_bytes", "f.bytes"),
)
CLAIMED_STATE_FIELDS = (
    ("lease_seconds", "c.lease_seconds"),
    ("scope", "s.scope"),
    ("definition_name", "i.definition_name"),
    ("status", "i.status"),
    ("version", "i.version"),
    ("input", "i.input"),
    ("variables", "i.variables"),
    ("correlation_id", "i.correlation_id"),
    ("snapshot_id", "i.snapshot_id"),
    ("queue_task_id", "i.queue_task_id"),
    ("parent_instance_id", "i.parent_instance_id"),
    ("parent_step_execution_id", "i.parent_step_execution_id"),
    ("step_count", "i.step_count"),
    ("depth", "i.depth"),
    ("created_at", "i.created_at"),
)
CLAIMED_KEYS = tuple(name for name, _ in CLAIMED_FIELDS)
CLAIMED_STATE_KEYS = tuple(name for name, _ in CLAIMED_STATE_FIELDS)
STATE = len(CLAIMED_FIELDS)  # the position of a job's state (a list, or None)
# The state's values the job's own carry (READ_JOB_WITH_INSTANCE's name, the job's position).
STATE_FROM_JOB = tuple(
    (name, CLAIMED_KEYS.index(field))
    for name, field in (
        ("job_id", "id"),
        ("id", "instanceId"),
        ("step_id", "stepId"),
        ("step_execution_id", "stepExecutionId"),
        ("attempt", "attempt"),
        ("retries_remaining", "retriesRemaining"),
    )
)

# The whole claim as ONE value: ``[now(), [job, ...]]``, a JSON array per job (positional:
# json_build_array costs the server about 2 us a job more than 30 typed columns, and
# json_build_object twice that), oldest job first; the jobs null when nothing was claimed. One
# text parsed by orjson costs the client about a third of what psycopg's loaders and a dict per
# row cost for the same columns.
_CLAIMED_AS_JSON = (
    """
SELECT json_build_array(now(), json_agg(json_build_array("""  # noqa: S608 (constant SQL only)
    + ", ".join(sql for _, sql in CLAIMED_FIELDS)
    + """,
                CASE WHEN f.fits THEN json_build_array("""
    + ", ".join(sql for _, sql in CLAIMED_STATE_FIELDS)
    + """) END)
                ORDER BY c.created_at)) AS claim
  FROM claimed c JOIN steps_started s ON s.id = c.step_execution_id
  JOIN instance i ON i.id = c.instance_id
 CROSS JOIN LATERAL (
        SELECT b.bytes, s.scope = '' AND b.bytes <= %(state_max_bytes)s AS fits
          FROM (SELECT pg_column_size(i.input) + coalesce(pg_column_size(i.variables), 0)
                    AS bytes) b
       ) f
"""
)
CLAIM_AS_JSON = _CLAIM_FIND + _CLAIM_TAKE + _CLAIMED_AS_JSON

# What a decision on a job reads: the job, its step execution and its instance.
_JOB_AND_INSTANCE_COLUMNS = """
SELECT j.id AS job_id, j.status AS job_status, j.worker_id, j.attempt, j.retries_remaining,
       j.lease_seconds, j.lock_expires_at < now() AS lease_lapsed,
       j.step_execution_id, s.step_id, s.scope,
       i.id, i.definition_name, i.status, i.version, i.input, i.variables, i.correlation_id,
       i.snapshot_id, i.queue_task_id, i.parent_instance_id, i.parent_step_execution_id,
       i.step_count, i.depth, i.created_at, now() AS now"""

_JOB_AND_INSTANCE_FROM = """
  FROM instance i
  JOIN job j ON j.instance_id = i.id
  JOIN step_execution s ON s.id = j.step_execution_id
 WHERE j.id = %(job_id)s
   AND i.id = (SELECT instance_id FROM job WHERE id = %(job_id)s)
"""

_JOB_WITH_INSTANCE = _JOB_AND_INSTANCE_COLUMNS + _JOB_AND_INSTANCE_FROM

# The optimistic read: no lock. The write that follows is fenced by the instance version, so a
# decision made on a state that changed meanwhile is refused and made again under locks.
READ_JOB_WITH_INSTANCE = _JOB_WITH_INSTANCE

# A batch's optimistic read: every job of the batch with its instance and the operator execution
# its step runs in (a MAP's, a PARALLEL's), in one statement. An instance's columns come once, on
# its first job's row (``whole``), and an operator execution once, on the first row of its jobs:
# a MAP's items share both, and loading them for each item was most of the read's client CPU
# (``read_jobs_with_instances`` gives the other rows the same values).
READ_JOBS_WITH_INSTANCES = (
    """
WITH b AS (
    SELECT j.id AS job_id, j.status AS job_status, j.worker_id, j.attempt, j.retries_remaining,
           j.lease_seconds, j.lock_expires_at < now() AS lease_lapsed,
           j.step_execution_id, s.step_id, s.scope, j.instance_id AS id,
           row_number() OVER (PARTITION BY j.instance_id) = 1 AS whole,
           s.parent_step_execution_id AS owner_id,
           row_number() OVER (PARTITION BY s.parent_step_execution_id) = 1 AS owner_first
      FROM job j
      JOIN step_execution s ON s.id = j.step_execution_id
     WHERE j.id = ANY("""  # noqa: S608 (constant SQL only)
    + unsized_array("job_ids", "uuid")
    + """)
)
SELECT b.job_id, b.job_status, b.worker_id, b.attempt, b.retries_remaining, b.lease_seconds,
       b.lease_lapsed, b.step_execution_id, b.step_id, b.scope, b.id, b.whole,
       i.definition_name, i.status, i.version, i.input, i.variables, i.correlation_id,
       i.snapshot_id, i.queue_task_id, i.parent_instance_id, i.parent_step_execution_id,
       i.step_count, i.depth, i.created_at, CASE WHEN b.whole THEN now() END AS now,
       CASE WHEN o.id IS NOT NULL THEN jsonb_build_object(
           'id', o.id, 'step_id', o.step_id, 'scope', o.scope, 'status', o.status,
           'attempt', o.attempt, 'state', o.state, 'input', o.input,
           'child_instance_id', o.child_instance_id, 'output', o.output) END AS owner
  FROM b
  LEFT JOIN instance i ON i.id = b.id AND b.whole
  LEFT JOIN step_execution o ON o.id = b.owner_id AND b.owner_first
"""
)

# The instance's columns of a READ_JOBS_WITH_INSTANCES row (those of READ_JOB_WITH_INSTANCE).
_INSTANCE_COLUMNS = (
    "definition_name",
    "status",
    "version",
    "input",
    "variables",
    "correlation_id",
    "snapshot_id",
    "queue_task_id",
    "parent_instance_id",
    "parent_step_execution_id",
    "step_count",
    "depth",
    "created_at",
    "now",
)


def read_jobs_with_instances(conn: Conn, job_ids: list[uuid.UUID]) -> list[dict[str, Any]]:
    """READ_JOBS_WITH_INSTANCES's rows in READ_JOB_WITH_INSTANCE's shape, each with its
    instance's columns (the same objects for the jobs of one instance), and ``owner``: the
    operator execution the job's step runs in (EXECUTION's columns) on the first row of its
    jobs, else None."""
    rows = conn.execute(READ_JOBS_WITH_INSTANCES, {"job_ids": uuid_array(job_ids)}).fetchall()
    instances = {r["id"].int: {c: r[c] for c in _INSTANCE_COLUMNS} for r in rows if r["whole"]}
    for r in rows:
        if not r["whole"]:
            r.update(instances[r["id"].int])
        owner = r["owner"]
        if owner is not None:  # its ids as the other reads give them
            owner["id"] = uuid.UUID(owner["id"])
            child = owner["child_instance_id"]
            owner["child_instance_id"] = None if child is None else uuid.UUID(child)
    return rows


def uuid_array(ids: Iterable[uuid.UUID]) -> str:
    """``ids`` as one ``uuid[]`` parameter's text (``{hex,hex}``): psycopg dumps a list element
    by element in Python, about 3.5 µs per id (a batch read of 32 jobs spent more on its list of
    ids than on the rest of its execute); one string is dumped at once."""
    return "{" + ",".join([u.hex for u in ids]) + "}"


_UUID_TEXT = re.compile(r"[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}\Z")


def uuid_text_array(ids: Iterable[str]) -> str:
    """``uuid_array`` for ids already in text (a claim's answer gives them so), each checked to
    be a UUID's hyphenated text (either case), so nothing else can reach the array's text
    (~0.3 µs per id against psycopg's ~3.5 for a list of str)."""
    ids = list(ids)
    for i in ids:
        if not _UUID_TEXT.match(i):
            raise ValueError(f"not a UUID: {i!r}")
    return "{" + ",".join(ids) + "}"


# The pessimistic read: lock the instance first, then the job, in the same order as every other
# instance mutation (cancel, timeouts), so two transactions can never deadlock on the pair.
LOCK_JOB_WITH_INSTANCE = _JOB_WITH_INSTANCE + "   FOR UPDATE OF i, j\n"

# The sweeper's lock of a job past a deadline: the pessimistic read, whether a deadline has
# passed and whether it was the attempt's own (else its step's totalTimeoutSeconds budget). A
# row another sweeper (or a decision) holds is skipped, never waited on, so two overlapping
# sweepers never act twice on one job.
LOCK_JOB_PAST_DEADLINE_OR_SKIP = (
    _JOB_AND_INSTANCE_COLUMNS
    + """,
       least(j.deadline_at, j.total_deadline_at) <= now() AS past_deadline,
       j.deadline_at <= now() AS own_deadline_passed"""
    + _JOB_AND_INSTANCE_FROM
    + "   FOR UPDATE OF i, j SKIP LOCKED\n"
)

# Jobs whose deadline passed: never claimed in time (UNLOCKED), or an attempt running too long.
PAST_DEADLINE = """
SELECT id FROM job
 WHERE status IN ('UNLOCKED', 'LOCKED')
   AND (deadline_at IS NOT NULL OR total_deadline_at IS NOT NULL)
   AND least(deadline_at, total_deadline_at) <= now()
 ORDER BY least(deadline_at, total_deadline_at)
 LIMIT %(limit)s
"""

HEARTBEAT = """
UPDATE job
   SET lock_expires_at = now() + make_interval(secs => lease_seconds)
 WHERE id = %(job_id)s AND status = 'LOCKED' AND worker_id = %(worker_id)s
   AND (%(attempt)s::int IS NULL OR attempt = %(attempt)s::int)
RETURNING lock_expires_at
"""

# A worker's stop signal (POST /v1/workers/stop): its count of stops moves, and a long-poll it
# left waiting, which read the count when it began to wait, ends without claiming.
# It also notifies the worker's wake-up key (engine.long_poll.worker_wakeup), so the wait looks at
# once instead of at its next backstop; nobody listens behind RDS Proxy, where that costs nothing.
STOP_WORKER = """
WITH s AS (
    INSERT INTO worker_stop AS w (worker_id) VALUES (%(worker_id)s)
    ON CONFLICT (worker_id) DO UPDATE SET stops = w.stops + 1, stopped_at = now()
    RETURNING stops, stopped_at
)
SELECT s.stops, s.stopped_at, pg_notify('baton_job', 'worker/' || %(worker_id)s::text) AS notified
  FROM s
"""

WORKER_STOPS = """
SELECT stops, extract(epoch FROM stopped_at) AS at FROM worker_stop WHERE worker_id = %(worker_id)s
"""

# A stop matters only to the waits of that moment (20 s at most): older rows are forgotten.
FORGET_WORKER_STOPS = """
DELETE FROM worker_stop WHERE stopped_at < now() - make_interval(secs => %(seconds)s)
"""

JOB_STATE = "SELECT status, worker_id, attempt FROM job WHERE id = %(job_id)s"

# How each ended attempt of a job ended, oldest first: a report that is not from the current
# attempt's holder is judged on it (engine.verdicts.AttemptEnds). Read only for such a report.
ATTEMPT_ENDS = """
SELECT event, (detail ->> 'attempt')::int AS attempt, detail ->> 'workerId' AS worker_id
  FROM audit_log
 WHERE instance_id = %(instance_id)s AND job_id = %(job_id)s
   AND event IN ('JOB_COMPLETED', 'JOB_FAILED', 'JOB_LEASE_EXPIRED', 'JOB_TIMED_OUT')
 ORDER BY id
"""

# --- a decision's job writes: chained CTEs of one statement (see engine.writer) ---------------
# ``/*after*/`` is where the writer adds the dependency on the previous write, so the rows of a
# decision are locked in one order everywhere: instance, then jobs, then steps. The job the
# decision is about is guarded by the state it was decided on: if a claim, the reaper or a timeout
# moved it meanwhile, the write touches no row and the whole decision is refused.
_GUARD = """
 WHERE id = %(id)s AND status = %(g_status)s AND worker_id IS NOT DISTINCT FROM %(g_worker)s
   AND attempt = %(g_attempt)s /*after*/
RETURNING 1"""

MARK_COMPLETED = (
    """
UPDATE job SET status = 'COMPLETED', completed_at = now(), lock_expires_at = NULL"""
    + _GUARD
)

MARK_FAILED = (
    """
UPDATE job SET status = 'FAILED', completed_at = now(), lock_expires_at = NULL"""
    + _GUARD
)

MARK_TIMED_OUT = (
    """
UPDATE job SET status = 'TIMED_OUT', completed_at = now(), lock_expires_at = NULL,
       deadline_at = NULL"""
    + _GUARD
)

MARK_CANCELLED = (
    """
UPDATE job SET status = 'CANCELLED', completed_at = now(), lock_expires_at = NULL,
       deadline_at = NULL"""
    + _GUARD
)

# A timeout with ALERT_ONLY: alerted once, the attempt keeps its lease (or its place in line).
CLEAR_DEADLINE = (
    """
UPDATE job SET deadline_at = CASE WHEN deadline_at <= now() THEN NULL ELSE deadline_at END,
       total_deadline_at = CASE WHEN total_deadline_at <= now() THEN NULL
                                ELSE total_deadline_at END"""
    + _GUARD
)

# The next attempt, due at run_at; it must be claimed within poll_timeout_seconds of that.
SCHEDULE_RETRY = (
    """
UPDATE job
   SET status = 'UNLOCKED', worker_id = NULL, locked_at = NULL, lock_expires_at = NULL,
       run_at = %(run_at)s, attempt = attempt + 1, retries_remaining = retries_remaining - 1,
       deadline_at = CASE WHEN poll_timeout_seconds > 0
                          THEN %(run_at)s::timestamptz
                               + make_interval(secs => poll_timeout_seconds) END"""
    + _GUARD
)

INSERT = """
INSERT INTO job (id, instance_id, step_execution_id, job_type, status, lease_seconds,
                 retries_remaining, payload, payload_bytes, timeout_seconds,
                 poll_timeout_seconds, deadline_at, run_at, created_at, dispatch_outbox,
                 total_deadline_at)
VALUES (%(id)s, %(instance_id)s, %(step_execution_id)s, %(job_type)s, %(status)s,
        %(lease_seconds)s, %(retries_remaining)s, %(payload)s::jsonb, %(payload_bytes)s,
        %(timeout)s, %(poll_timeout)s,
        CASE WHEN %(poll_timeout)s::int > 0
             THEN now() + make_interval(secs => %(start_delay)s::int + %(poll_timeout)s::int)
        END,
        now() + make_interval(secs => %(start_delay)s::int), now(), %(dispatch_outbox)s,
        CASE WHEN %(total_timeout)s::int > 0
             THEN now() + make_interval(secs => %(total_timeout)s::int) END)
"""

# Many new jobs at once (a fan-out): one insert from one JSON parameter (see INSERT_STEPS).
INSERT_MANY = """
INSERT INTO job (id, instance_id, step_execution_id, job_type, status, lease_seconds,
                 retries_remaining, payload, payload_bytes, timeout_seconds,
                 poll_timeout_seconds, deadline_at, run_at, created_at, dispatch_outbox,
                 total_deadline_at)
SELECT t.id, %(instance_id)s, t.step_execution_id, t.job_type, t.status, t.lease_seconds,
       t.retries_remaining, t.payload, t.payload_bytes, t.timeout, t.poll_timeout,
       CASE WHEN t.poll_timeout > 0
            THEN now() + make_interval(secs => t.start_delay + t.poll_timeout) END,
       now() + make_interval(secs => t.start_delay), now(), t.dispatch_outbox,
       CASE WHEN t.total_timeout > 0 THEN now() + make_interval(secs => t.total_timeout) END
  FROM jsonb_to_recordset(%(rows)s::jsonb)
       AS t(id uuid, step_execution_id uuid, job_type text, status text, lease_seconds int,
            retries_remaining int, payload jsonb, payload_bytes int, timeout int,
            poll_timeout int, start_delay int, dispatch_outbox boolean, total_timeout int)
"""

# The open jobs of an instance that ended (``prefix`` ''), or of the steps inside one operator's
# execution (its scope prefix), but the ones this decision wrote itself (one statement cannot
# update a row twice). Their audit rows select from this CTE.
CANCEL_OPEN = """
UPDATE job j SET status = 'CANCELLED', completed_at = now(), lock_expires_at = NULL,
       deadline_at = NULL
  FROM step_execution s
 WHERE j.instance_id = %(instance_id)s AND j.status IN ('UNLOCKED', 'LOCKED')
   AND s.id = j.step_execution_id
   AND left(s.scope, length(%(prefix)s::text)) = %(prefix)s::text
   AND NOT (j.id = ANY(%(written)s::uuid[])) /*after*/
RETURNING j.id, j.instance_id
"""

AUDIT_CANCELLED = """
INSERT INTO audit_log (instance_id, job_id, event)
SELECT instance_id, id, 'JOB_CANCELLED' FROM /*cte:cancelled_jobs*/
RETURNING 1
"""

# The reaper: an expired lease with retries left becomes the job's next attempt, due at its old
# place in line (it counts against retries, so a job whose every worker crashes cannot loop);
# one with none left is returned for a decision that fails its step.
REAP_EXPIRED = """
WITH RECURSIVE types AS (
    -- The job types with leases, one index probe each (a skip scan of job_lease_expiry_by_type).
    SELECT min(job_type) AS job_type FROM job WHERE status = 'LOCKED'
    UNION ALL
    SELECT (SELECT min(job_type) FROM job WHERE status = 'LOCKED' AND job_type > t.job_type)
      FROM types t WHERE t.job_type IS NOT NULL
), expired AS (
    SELECT e.id
      FROM types t
     CROSS JOIN LATERAL (
            SELECT id FROM job
             WHERE job.job_type = t.job_type AND status = 'LOCKED' AND lock_expires_at < now()
             ORDER BY lock_expires_at
             LIMIT %(limit)s
               FOR UPDATE SKIP LOCKED
           ) e
     LIMIT %(limit)s
), reaped AS (
    UPDATE job
       SET status = 'UNLOCKED', worker_id = NULL, locked_at = NULL, lock_expires_at = NULL,
           attempt = job.attempt + 1, retries_remaining = job.retries_remaining - 1,
           deadline_at = CASE WHEN job.poll_timeout_seconds > 0
                              THEN now() + make_interval(secs => job.poll_timeout_seconds) END
      FROM expired
     WHERE job.id = expired.id AND job.retries_remaining > 0
    RETURNING job.id, job.instance_id, job.step_execution_id, job.attempt
), holders AS (
    SELECT j.id, j.worker_id, j.instance_id, j.retries_remaining FROM expired e
      JOIN job j ON j.id = e.id
), steps_back AS (
    UPDATE step_execution s
       SET status = 'SCHEDULED', attempt = reaped.attempt, updated_at = now()
      FROM reaped WHERE s.id = reaped.step_execution_id
), audited AS (
    INSERT INTO audit_log (instance_id, job_id, event, detail)
    SELECT r.instance_id, r.id, 'JOB_LEASE_EXPIRED',
           jsonb_build_object('workerId', h.worker_id, 'attempt', r.attempt - 1)
      FROM reaped r JOIN holders h ON h.id = r.id
)
SELECT (SELECT count(*) FROM reaped) AS n,
       coalesce((SELECT array_agg(id) FROM holders WHERE retries_remaining = 0),
                '{}'::uuid[]) AS exhausted
"""


def claim(
    conn: Conn,
    *,
    worker_id: str,
    job_types: list[str],
    max_jobs: int,
    max_bytes: int,
    with_state: bool = False,
    stops_seen: int | None = None,
) -> tuple[str, list[list[Any]]]:
    """Claim jobs of types without limits: one statement, committed on its own. The claim's
    clock (``now()``, as JSON writes it) and each job as a list of ``CLAIMED_KEYS``' values,
    then its state (``CLAIMED_STATE_KEYS``' values, or None; always None without
    ``with_state``), oldest first. With ``stops_seen``, nothing once the worker's count of stop
    signals differs from it."""
    params: dict[str, Any] = {
        "worker_id": worker_id,
        "job_types": job_types,
        "max_bytes": max_bytes,
        "state_max_bytes": CLAIMED_STATE_MAX_BYTES if with_state else -1,
    }
    if stops_seen is not None:
        params["stops_seen"] = stops_seen
    statement = _raw_claim(max_jobs, len(job_types), stops_seen is not None)
    now, jobs = statement.scalar(conn, params)
    return now, jobs or []


@functools.lru_cache(maxsize=256)
def _raw_claim(max_jobs: int, n_types: int, guarded: bool = False) -> RawStatement:
    """``claim_sql`` converted once (longer than psycopg caches its conversions for)."""
    return RawStatement(claim_sql(max_jobs, n_types, guarded))


# Largest batch a claim's text is written for (the engine caps a poll far below it).
MAX_CLAIM_BATCH = 10_000
# Most job types a claim's text is written for (a poll names at most 50).
MAX_CLAIM_TYPES = 1_000


@functools.lru_cache(maxsize=256)
def claim_sql(max_jobs: int, n_types: int = 1, guarded: bool = False) -> str:
    """CLAIM_AS_JSON with the batch size and the number of job types written into its text.

    A parameter there (``LIMIT $n``) leaves a prepared statement's generic plan guessing a tenth
    of the table, with hash joins over whole-table scans of job, step_execution and instance; so
    PostgreSQL plans the claim again at every poll (about 0.6 ms of backend time, a third of a
    32-job claim). The types' count likewise: the generic plan of ``unnest($1)`` guesses ten
    types, so ten times the rows in every part after it, and its cost (~3,500 against a poll's
    ~380 with 200,000 finished workflows in the tables) made PostgreSQL choose a custom plan, made
    anew, at every poll. With both numbers in the text, each batch size and number of types a
    process polls with is one prepared statement whose generic plan is the custom one, planned
    once per connection. ``guarded``: a long-poll's claim after its look at the stop signal
    (``_UNLESS_STOPPED``)."""
    if not 1 <= max_jobs <= MAX_CLAIM_BATCH:
        raise ValueError(f"a claim takes 1 to {MAX_CLAIM_BATCH} jobs, not {max_jobs}")
    claim = _guarded(CLAIM_AS_JSON, guarded)
    return _with_types_count(claim.replace("%(max_jobs)s", str(int(max_jobs))), n_types)


def claim_limited(
    conn: Conn,
    *,
    worker_id: str,
    job_types: list[str],
    max_jobs: int,
    max_bytes: int,
    stops_seen: int | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Claim jobs of limited types, on an autocommit connection: one transaction in one round
    trip. Returns (claimed rows, each type's grant and what capped it). With ``stops_seen``,
    nothing once the worker's count of stop signals differs from it."""
    params: dict[str, Any] = {
        "worker_id": worker_id,
        "job_types": job_types,
        "max_jobs": max_jobs,
        "max_bytes": max_bytes,
    }
    if stops_seen is not None:
        params["stops_seen"] = stops_seen
    claim = claim_limited_sql(len(job_types), stops_seen is not None)
    return _claim_counted(conn, claim, params)


@functools.lru_cache(maxsize=128)
def claim_limited_sql(n_types: int, guarded: bool = False) -> str:
    """CLAIM_LIMITED with the number of job types written into its text, as ``claim_sql`` does
    for the unlimited claim: ``unnest($1)`` is guessed at ten types, and with a long history in
    the tables that guess made its generic plan dearer than a poll's, so PostgreSQL planned it
    anew at every poll. ``guarded``: as ``claim_sql``'s."""
    return _with_types_count(_guarded(CLAIM_LIMITED, guarded), n_types)


def _with_types_count(claim: str, n_types: int) -> str:
    """``claim`` with the number of job types it is run with written in place of ``n_types``."""
    if not 1 <= n_types <= MAX_CLAIM_TYPES:
        raise ValueError(f"a claim names 1 to {MAX_CLAIM_TYPES} job types, not {n_types}")
    return claim.replace("%(n_types)s", str(int(n_types)))


def _claim_counted(
    conn: Conn, claim: str, params: dict[str, Any]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Lock the types' limits, grant, claim and commit: one transaction in one round trip."""
    with conn.pipeline():
        cur = conn.cursor()
        cur.execute(b"BEGIN", prepare=False)
        cur.execute(LOCK_LIMITS, params)
        grants = conn.cursor()
        grants.execute(GRANT, params)
        claimed = conn.cursor()
        claimed.execute(claim, params)
        cur.execute(b"COMMIT", prepare=False)
    return claimed.fetchall(), grants.fetchall()


# --- limited job types (concurrentExecLimit, rateLimitPerFrequency) ---------------------------
# One transaction, pipelined in one round trip: lock the types' limit rows (serializing their
# claims), compute each type's grant in a statement that starts after the lock (so it counts
# every LOCKED job an earlier claim committed), claim at most the grant, count the claims in the
# rate window. A type's expired leases are left to the reaper here, so a lapsed lease holds its
# slot until it is reaped (at most a second or so) and the LOCKED count never exceeds the limit.

LIMITED_TYPES = "SELECT job_type FROM job_type_limit"

LOCK_LIMITS = """
SELECT job_type FROM job_type_limit WHERE job_type = ANY(%(job_types)s::text[])
 ORDER BY job_type
   FOR UPDATE
"""

GRANT = """
WITH now_counts AS (
    SELECT l.job_type,
           -- The clock after the lock was granted (now() is when the transaction began, maybe
           -- a window ago if it waited behind other claims).
           CASE WHEN l.rate_window_seconds IS NOT NULL
                THEN floor(extract(epoch FROM clock_timestamp()) / l.rate_window_seconds)::bigint
                ELSE 0 END AS window_now,
           (SELECT count(*) FROM job j
             WHERE j.job_type = l.job_type AND j.status = 'LOCKED') AS locked
      FROM job_type_limit l WHERE l.job_type = ANY(%(job_types)s::text[])
), left_now AS (
    SELECT c.job_type, c.window_now,
           CASE WHEN c.window_now = l.window_id THEN l.window_claims ELSE 0 END AS claims,
           l.concurrent_limit - c.locked AS concurrency_left,
           l.rate_per_window - CASE WHEN c.window_now = l.window_id THEN l.window_claims ELSE 0 END
               AS rate_left
      FROM now_counts c JOIN job_type_limit l ON l.job_type = c.job_type
)
UPDATE job_type_limit l
   SET window_id = f.window_now, window_claims = f.claims,
       grant_now = greatest(0, least(%(max_jobs)s, coalesce(f.concurrency_left, %(max_jobs)s),
                                     coalesce(f.rate_left, %(max_jobs)s)))
  FROM left_now f
 WHERE l.job_type = f.job_type
RETURNING l.job_type, l.grant_now,
          coalesce(f.concurrency_left < %(max_jobs)s, false) AS by_concurrency,
          coalesce(f.rate_left < %(max_jobs)s, false) AS by_rate
"""

_CLAIM_LIMITED_FIND = """
WITH ready AS (
    SELECT r.id, r.job_type, r.payload_bytes, r.run_at AS due
      FROM (SELECT * FROM unnest(%(job_types)s::text[]) LIMIT %(n_types)s) AS t(job_type)
      LEFT JOIN job_type_limit l ON l.job_type = t.job_type
     CROSS JOIN LATERAL (
            SELECT id, job_type, payload_bytes, run_at
              FROM job
             WHERE job.job_type = t.job_type
               AND status = 'UNLOCKED'
               AND run_at <= now()
             ORDER BY run_at
             LIMIT coalesce(l.grant_now, %(max_jobs)s)
               FOR UPDATE SKIP LOCKED
           ) r
), ranked AS (
    SELECT id, row_number() OVER w AS n, sum(payload_bytes) OVER w AS running_bytes
      FROM ready
    WINDOW w AS (ORDER BY due ROWS UNBOUNDED PRECEDING)
), picked AS (
    SELECT id FROM ranked
     WHERE n <= %(max_jobs)s AND (n = 1 OR running_bytes <= %(max_bytes)s)
       /* stop guard */
"""

_CLAIM_LIMITED_TAKE = """), claimed AS (
    UPDATE job
       SET status = 'LOCKED',
           worker_id = %(worker_id)s,
           locked_at = now(),
           lock_expires_at = now() + make_interval(secs => job.lease_seconds),
           deadline_at = CASE WHEN job.timeout_seconds > 0
                              THEN now() + make_interval(secs => job.timeout_seconds) END,
           deliveries = job.deliveries + 1
     WHERE job.id = ANY(ARRAY(SELECT id FROM picked))
    RETURNING job.id, job.instance_id, job.step_execution_id, job.job_type, job.attempt,
              job.retries_remaining, job.lock_expires_at, job.payload, job.created_at,
              false AS reclaimed, now() - job.created_at AS dispatch_latency
), steps_started AS (
    UPDATE step_execution s
       SET status = 'IN_PROGRESS', attempt = claimed.attempt,
           started_at = coalesce(s.started_at, now()), updated_at = now()
      FROM claimed
     WHERE s.id = ANY(ARRAY(SELECT step_execution_id FROM claimed))
       AND s.id = claimed.step_execution_id
    RETURNING s.id, s.step_id
), stamp AS MATERIALIZED (
    -- One clock for the dispatches of this claim: their audit time, and the rate window they
    -- are counted in. The grant read the window a moment earlier; should a window have begun
    -- since, the claims open the new one (fewer than its limit, as they are at most the grant),
    -- rather than count in the window that ended and exceed the new one's limit by the audit's
    -- clock.
    SELECT clock_timestamp() AS at
), audited AS (
    INSERT INTO audit_log (instance_id, job_id, event, detail, at)
    SELECT instance_id, id, 'JOB_DISPATCHED',
           jsonb_build_object('workerId', %(worker_id)s::text, 'attempt', attempt),
           (SELECT at FROM stamp)
      FROM claimed
), counted AS (
    UPDATE job_type_limit l
       SET window_id = coalesce(floor(extract(epoch FROM stamp.at) / l.rate_window_seconds)::bigint,
                                l.window_id),
           window_claims = CASE WHEN l.rate_window_seconds IS NULL
                                  OR l.window_id = floor(extract(epoch FROM stamp.at)
                                                         / l.rate_window_seconds)::bigint
                                THEN l.window_claims ELSE 0 END + c.n
      FROM (SELECT job_type, count(*) AS n FROM claimed GROUP BY job_type) c, stamp
     WHERE l.job_type = c.job_type
)
SELECT c.*, s.step_id
  FROM claimed c JOIN steps_started s ON s.id = c.step_execution_id
 ORDER BY c.created_at
"""

CLAIM_LIMITED = _CLAIM_LIMITED_FIND + _CLAIM_LIMITED_TAKE


# --- the claim by id (event-driven dispatch: a worker got the job's id from the broker) -------
# The same lease-taking as the poll's claim, on one row found by id: it must still be UNLOCKED,
# due and (when the delivery names one) at the delivered attempt, so a duplicate or late delivery
# takes nothing. FOR UPDATE waits (briefly) on a transaction holding the row and re-checks it,
# so a concurrent claim or cancel is seen, never skipped over. A limited type goes through
# CLAIM_LIMITED_BY_ID, in the limited claim's transaction (LOCK_LIMITS, GRANT).
_BY_ID_FIND = """
WITH expired AS (
    SELECT NULL::uuid AS id WHERE false
), picked AS (
    SELECT job.id
      FROM job
     WHERE job.id = %(job_id)s AND job.status = 'UNLOCKED' AND job.run_at <= now()
       AND (%(attempt)s::int IS NULL OR job.attempt = %(attempt)s::int)
       AND NOT EXISTS (SELECT 1 FROM job_type_limit l WHERE l.job_type = job.job_type)
       FOR UPDATE
"""

CLAIM_BY_ID = _BY_ID_FIND + _CLAIM_TAKE + _CLAIMED

# A job taken by id for a result given without a poll (Conductor's update of a task by its id,
# whoever holds it): due or not, as Conductor applies an update to a task still waiting out
# its retry delay (the claim by id without its due condition). Types with limits are claimed as
# a poll's claim is, counted.
_DUE = " AND job.run_at <= now()"
assert _DUE in _BY_ID_FIND
TAKE_BY_ID = _BY_ID_FIND.replace(_DUE, "") + _CLAIM_TAKE + _CLAIMED

_LIMITED_BY_ID_FIND = """
WITH picked AS (
    SELECT job.id
      FROM job JOIN job_type_limit l ON l.job_type = job.job_type
     WHERE job.id = %(job_id)s AND job.status = 'UNLOCKED' AND job.run_at <= now()
       AND (%(attempt)s::int IS NULL OR job.attempt = %(attempt)s::int)
       AND l.grant_now > 0
       FOR UPDATE OF job
"""

CLAIM_LIMITED_BY_ID = _LIMITED_BY_ID_FIND + _CLAIM_LIMITED_TAKE

# Why a claim by id took nothing: the job's state (and its type's limit, if any).
CLAIM_REFUSAL = """
SELECT j.status, j.attempt, j.run_at > now() AS not_due, j.job_type,
       EXISTS (SELECT 1 FROM job_type_limit l WHERE l.job_type = j.job_type) AS limited
  FROM job j WHERE j.id = %(job_id)s
"""


def claim_by_id(
    conn: Conn, *, job_id: Any, worker_id: str, attempt: int | None, due_only: bool = True
) -> list[dict[str, Any]]:
    """Claim one job of a type without limits by id (one statement, committed on its own);
    ``due_only`` False: before it is due too (``TAKE_BY_ID``)."""
    params = {"job_id": job_id, "worker_id": worker_id, "attempt": attempt}
    return conn.execute(CLAIM_BY_ID if due_only else TAKE_BY_ID, params).fetchall()


def claim_limited_by_id(
    conn: Conn, *, job_id: Any, job_type: str, worker_id: str, attempt: int | None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Claim one job of a limited type by id, counted against its limits like a poll's claim
    (one transaction in one round trip, on an autocommit connection)."""
    params = {
        "job_id": job_id,
        "job_types": [job_type],
        "worker_id": worker_id,
        "attempt": attempt,
        "max_jobs": 1,
    }
    return _claim_counted(conn, CLAIM_LIMITED_BY_ID, params)
