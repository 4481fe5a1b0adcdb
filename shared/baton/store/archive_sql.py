"""SQL for retention and archive (see ``engine.archive_ops``): which terminal instances are past
their retention, the archivers' claims, reading what a document holds, deleting the rows in one
short transaction per batch, and the index of archived instances."""

from __future__ import annotations

import functools

from baton.store.raw_sql import unsized


def _unsized(sql: str) -> str:
    # An archiver's batches are of any size, mostly a few instances once the backlog is
    # archived: with ``= ANY($1)`` these statements were planned anew at every run, forever
    # (tests/integration/test_plan_cache.py).
    return unsized(sql, ids="uuid", paths="text")


TERMINAL = ("COMPLETED", "FAILED", "TIMED_OUT", "CANCELLED")

# The shortest retention any definition sets (its snapshots carry it; NULL when none does).
SHORTEST_DEFINITION_RETENTION = """
SELECT min((body ->> 'retentionSeconds')::bigint) AS seconds FROM definition_snapshot
 WHERE body ? 'retentionSeconds' AND (body ->> 'retentionSeconds')::bigint > 0
"""

# Claim up to ``limit`` terminal instances past their retention (the definition's, else
# ``default``; 0 is never), oldest end first, through the ended-instances index bounded by the
# shortest retention. A sub-workflow child waits for its parent to leave the database first (a
# retry of the parent may still act on it). A claim that lapsed (its archiver died) is taken over.
# Plain rows in autocommit: no instance row is locked here.
CLAIM_EXPIRED = """
WITH candidate AS (
    SELECT i.id
      FROM instance i
      JOIN definition_snapshot s ON s.id = i.snapshot_id
     WHERE i.completed_at IS NOT NULL
       AND i.completed_at < now() - make_interval(secs => %(shortest)s)
       AND i.status IN ('COMPLETED', 'FAILED', 'TIMED_OUT', 'CANCELLED')
       AND coalesce((s.body ->> 'retentionSeconds')::bigint, %(default)s) > 0
       AND i.completed_at < now() - make_interval(
               secs => coalesce((s.body ->> 'retentionSeconds')::bigint, %(default)s))
       AND (i.parent_instance_id IS NULL
            OR NOT EXISTS (SELECT 1 FROM instance p WHERE p.id = i.parent_instance_id))
       AND NOT EXISTS (SELECT 1 FROM archive_claim c
                        WHERE c.instance_id = i.id
                          AND c.claimed_at > now() - make_interval(secs => %(lease)s))
     ORDER BY i.completed_at, i.id
     LIMIT %(limit)s
)
INSERT INTO archive_claim (instance_id, token)
SELECT id, %(token)s FROM candidate ORDER BY id
ON CONFLICT (instance_id) DO UPDATE SET token = EXCLUDED.token, claimed_at = now()
 WHERE archive_claim.claimed_at <= now() - make_interval(secs => %(lease)s)
RETURNING instance_id
"""


@functools.lru_cache(maxsize=16)
def claim_expired_sql(limit: int) -> str:
    """CLAIM_EXPIRED with its batch size written into its text, as the job claim's is: of
    ``LIMIT $n`` a generic plan guesses a tenth of the ended instances, so over a long history
    it looked dearer than a plan for the batch given, and the claim was planned anew at every
    run (tests/integration/test_plan_cache.py)."""
    if not 1 <= limit <= 10_000:
        raise ValueError(f"an archive claim takes 1 to 10000 instances, not {limit}")
    return CLAIM_EXPIRED.replace("%(limit)s", str(int(limit)))


# What a document holds: the instances (with the retention that applied), their steps, jobs and
# history, and the database's clock.
INSTANCES_OF = _unsized("""
SELECT i.id, i.definition_name, i.definition_version, i.status, i.input, i.variables, i.output,
       i.reason, i.version, i.correlation_id, i.idempotency_key, i.parent_instance_id,
       i.parent_step_execution_id, i.created_at, i.updated_at, i.completed_at, i.timeout_at,
       i.run, i.depth, i.queue_task_id, i.snapshot_id,
       coalesce((s.body ->> 'retentionSeconds')::bigint, %(default)s) AS retention_seconds,
       now() AS now
  FROM instance i JOIN definition_snapshot s ON s.id = i.snapshot_id
 WHERE i.id = ANY(%(ids)s::uuid[])
   AND i.status IN ('COMPLETED', 'FAILED', 'TIMED_OUT', 'CANCELLED')
""")

STEPS_OF = _unsized("""
SELECT s.id, s.instance_id, s.step_id, s.step_type, s.status, s.attempt, s.input, s.output,
       s.error, s.created_at, s.started_at, s.completed_at, s.parent_step_execution_id,
       s.branch, s.item_index, s.iteration, s.wake_at, s.child_instance_id, s.state, s.seq,
       j.id AS job_id, j.job_type, j.worker_id, j.status AS job_status,
       j.deliveries AS job_deliveries
  FROM step_execution s
  LEFT JOIN job j ON j.instance_id = s.instance_id AND j.step_execution_id = s.id
 WHERE s.instance_id = ANY(%(ids)s::uuid[])
 ORDER BY s.instance_id, s.seq, s.created_at, s.id
""")

JOBS_OF = _unsized("""
SELECT j.instance_id, to_jsonb(j) AS job FROM job j
 WHERE j.instance_id = ANY(%(ids)s::uuid[])
 ORDER BY j.instance_id, j.created_at, j.id
""")

HISTORY_OF = _unsized("""
SELECT a.instance_id, a.id, a.at, a.job_id, a.event, a.detail, j.step_execution_id, s.step_id
  FROM audit_log a
  LEFT JOIN job j ON j.id = a.job_id
  LEFT JOIN step_execution s ON s.id = j.step_execution_id
 WHERE a.instance_id = ANY(%(ids)s::uuid[])
 ORDER BY a.instance_id, a.id
""")

# Which of ``paths`` another instance still in the database has as its input (a client may
# start several instances with one upload): such an object is copied, not moved.
INPUT_OF_OTHERS = _unsized("""
SELECT DISTINCT i.input ->> '$payload' AS path FROM instance i
 WHERE i.input ? '$payload' AND i.input ->> '$payload' = ANY(%(paths)s::text[])
   AND NOT i.id = ANY(%(ids)s::uuid[])
""")

# The delete transaction's first statement: the claimed instances, locked (one another
# archiver or a retry holds is skipped; it is not ours to delete now). The claim's token is read
# through an InitPlan, as the ids are: a batch's claims share a token, so the token is among the
# most common values of archive_claim's statistics, and a custom plan for a token that is not
# (a new batch's) always looked cheaper than the generic plan, which was then never kept.
LOCK_CLAIMED = _unsized("""
SELECT i.id, i.version, i.status
  FROM instance i JOIN archive_claim c ON c.instance_id = i.id
 WHERE i.id = ANY(%(ids)s::uuid[]) AND c.token = (SELECT %(token)s::uuid)
 ORDER BY i.id
   FOR UPDATE OF i, c SKIP LOCKED
""")

INSERT_INDEX = """
INSERT INTO archived_instance (id, object_key, definition_name, definition_version, status,
                               correlation_id, parent_instance_id, created_at, completed_at,
                               size_bytes)
SELECT * FROM unnest(%(ids)s::uuid[], %(keys)s::text[], %(names)s::text[], %(versions)s::int[],
                     %(statuses)s::text[], %(correlations)s::text[], %(parents)s::uuid[],
                     %(created)s::timestamptz[], %(completed)s::timestamptz[],
                     %(sizes)s::bigint[])
ON CONFLICT (id) DO NOTHING
"""

DELETE_ROWS = tuple(
    _unsized(sql)
    for sql in (
        "DELETE FROM audit_log WHERE instance_id = ANY(%(ids)s::uuid[])",
        "DELETE FROM dispatch_outbox WHERE instance_id = ANY(%(ids)s::uuid[])",
        "DELETE FROM instance_event WHERE instance_id = ANY(%(ids)s::uuid[])",
        "DELETE FROM job WHERE instance_id = ANY(%(ids)s::uuid[])",
        "DELETE FROM step_execution WHERE instance_id = ANY(%(ids)s::uuid[])",
        "DELETE FROM instance WHERE id = ANY(%(ids)s::uuid[])",
    )
)

RELEASE_CLAIMS = _unsized("""
DELETE FROM archive_claim
 WHERE instance_id = ANY(%(ids)s::uuid[]) AND token = (SELECT %(token)s::uuid)
""")

# --- reading the index ---------------------------------------------------------------------

_INDEX = """
SELECT id, object_key, definition_name, definition_version, status, correlation_id,
       parent_instance_id, created_at, completed_at, archived_at, size_bytes
  FROM archived_instance
"""

INDEX_ROW = _INDEX + " WHERE id = %(id)s"

# Archived instances, latest end first, by definition and end time (``since`` inclusive,
# ``until`` exclusive), a page after (completed_at, id).
SEARCH_INDEX = (
    _INDEX
    + """
 WHERE (%(definition_name)s::text IS NULL OR definition_name = %(definition_name)s)
   AND (%(status)s::text IS NULL OR status = %(status)s)
   AND (%(correlation_id)s::text IS NULL OR correlation_id = %(correlation_id)s)
   AND (%(since)s::timestamptz IS NULL OR completed_at >= %(since)s::timestamptz)
   AND (%(until)s::timestamptz IS NULL OR completed_at < %(until)s::timestamptz)
   AND (%(after_completed)s::timestamptz IS NULL
        OR (completed_at, id) < (%(after_completed)s::timestamptz, %(after_id)s::uuid))
 ORDER BY completed_at DESC, id DESC
 LIMIT %(limit)s
"""
)

DELETE_INDEX_ROW = "DELETE FROM archived_instance WHERE id = %(id)s RETURNING object_key"

IS_ARCHIVED = "SELECT 1 FROM archived_instance WHERE id = %(id)s"
