"""SQL for instances, step executions, snapshots and audit rows."""

from __future__ import annotations

import uuid
from typing import Any

from baton.store.db import Conn

UPSERT_SNAPSHOT = """
WITH ins AS (
    INSERT INTO definition_snapshot (digest, body) VALUES (%(digest)s, %(body)s::jsonb)
    ON CONFLICT (digest) DO NOTHING
    RETURNING id
)
SELECT id, true AS inserted FROM ins
UNION ALL
SELECT id, false FROM definition_snapshot WHERE digest = %(digest)s
LIMIT 1
"""

SNAPSHOT_BY_DIGEST = "SELECT id FROM definition_snapshot WHERE digest = %(digest)s"

SNAPSHOT_BODY = "SELECT body::text AS body FROM definition_snapshot WHERE id = %(id)s"

INSERT_INSTANCE = """
INSERT INTO instance (id, definition_name, definition_version, snapshot_id, status, input,
                      variables, correlation_id, idempotency_key, idempotency_fingerprint,
                      queue_task_id, timeout_at, version)
VALUES (%(id)s, %(definition_name)s, %(definition_version)s, %(snapshot_id)s, 'RUNNING',
        %(input)s, %(variables)s, %(correlation_id)s, %(idempotency_key)s,
        %(idempotency_fingerprint)s, %(queue_task_id)s,
        CASE WHEN %(timeout_seconds)s::int > 0
             THEN now() + make_interval(secs => %(timeout_seconds)s::int) END,
        1)
ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
RETURNING id, now() AS now
"""

ID_BY_IDEMPOTENCY_KEY = """
SELECT id, idempotency_fingerprint FROM instance WHERE idempotency_key = %(key)s
"""

LOCK_INSTANCE = """
SELECT id, definition_name, status, version, input, variables, correlation_id, snapshot_id,
       queue_task_id, now() AS now
  FROM instance WHERE id = %(id)s
   FOR UPDATE
"""

# --- deleting a finished instance: history, jobs, steps, then the instance (its row lock first)

LOCK_FOR_DELETE = "SELECT id, status FROM instance WHERE id = %(id)s FOR UPDATE"
DELETE_AUDIT = "DELETE FROM audit_log WHERE instance_id = %(id)s"
DELETE_OUTBOX = "DELETE FROM dispatch_outbox WHERE instance_id = %(id)s"
DELETE_JOBS = "DELETE FROM job WHERE instance_id = %(id)s"
DELETE_STEPS = "DELETE FROM step_execution WHERE instance_id = %(id)s"
DELETE_INSTANCE = """
DELETE FROM instance WHERE id = %(id)s
RETURNING id, definition_name, definition_version, status
"""

# --- a decision's writes: chained CTEs of one statement (see engine.writer) -------------------
# ``/*after*/`` marks where the writer adds the dependency on the previous update, so the rows of
# a decision are locked in one order everywhere: instance, then jobs, then steps.

# The fencing trigger refuses this unless %(expected)s is the version the writer read.
UPDATE_INSTANCE = """
UPDATE instance
   SET status = %(status)s, variables = %(variables)s, output = %(output)s, reason = %(reason)s,
       version = %(expected)s::bigint + 1, updated_at = now(),
       completed_at = CASE WHEN %(status)s <> 'RUNNING' THEN now() END,
       timeout_at = CASE WHEN %(clear_timeout)s OR %(status)s <> 'RUNNING' THEN NULL
                         ELSE timeout_at END
 WHERE id = %(id)s /*after*/
RETURNING 1
"""

GET_INSTANCE = """
SELECT i.id, i.definition_name, i.definition_version, i.status, i.input, i.variables, i.output,
       i.reason, i.version, i.correlation_id, i.idempotency_key, i.parent_instance_id,
       i.created_at, i.updated_at, i.completed_at, i.timeout_at, i.snapshot_id
  FROM instance i WHERE i.id = %(id)s
"""

STEPS_OF_INSTANCE = """
SELECT s.id, s.step_id, s.step_type, s.status, s.attempt, s.input, s.output, s.error,
       s.created_at, s.started_at, s.completed_at,
       j.id AS job_id, j.job_type, j.worker_id, j.status AS job_status
  FROM step_execution s
  LEFT JOIN job j ON j.instance_id = s.instance_id AND j.step_execution_id = s.id
 WHERE s.instance_id = %(id)s
 ORDER BY s.created_at, s.id
"""

LATEST_STEP = """
SELECT id, step_type, status FROM step_execution
 WHERE instance_id = %(instance_id)s AND step_id = %(step_id)s
 ORDER BY created_at DESC LIMIT 1
"""

LATEST_OUTPUT = """
SELECT output FROM step_execution
 WHERE instance_id = %(instance_id)s AND step_id = %(step_id)s AND status = 'COMPLETED'
 ORDER BY created_at DESC LIMIT 1
"""

INSERT_STEP = """
INSERT INTO step_execution (id, instance_id, step_id, step_type, status, input, error,
                            started_at, completed_at)
VALUES (%(id)s, %(instance_id)s, %(step_id)s, %(step_type)s, %(status)s, %(input)s, %(error)s,
        CASE WHEN %(status)s = 'IN_PROGRESS' THEN now() END,
        CASE WHEN %(status)s NOT IN ('SCHEDULED', 'IN_PROGRESS') THEN now() END)
RETURNING 1
"""

UPDATE_STEP = """
UPDATE step_execution
   SET status = %(status)s,
       output = coalesce(%(output)s, output),
       error = coalesce(%(error)s, error),
       attempt = coalesce(%(attempt)s, attempt),
       completed_at = CASE WHEN %(status)s IN ('SCHEDULED', 'IN_PROGRESS') THEN NULL
                           ELSE now() END,
       updated_at = now()
 WHERE id = %(id)s /*after*/
RETURNING 1
"""

# The open steps of an instance that ended, but the ones this decision wrote itself.
CANCEL_OPEN_STEPS = """
UPDATE step_execution SET status = 'CANCELLED', completed_at = now(), updated_at = now()
 WHERE instance_id = %(instance_id)s AND status IN ('SCHEDULED', 'IN_PROGRESS')
   AND NOT (id = ANY(%(written)s::uuid[])) /*after*/
RETURNING 1
"""

# Every audit row of a decision in one statement, passed as one JSON text parameter (cheaper
# to send from Python than three typed arrays).
INSERT_AUDIT = """
INSERT INTO audit_log (instance_id, job_id, event, detail)
SELECT %(instance_id)s, t.job_id, t.event, t.detail
  FROM jsonb_to_recordset(%(rows)s::jsonb) AS t(job_id uuid, event text, detail jsonb)
RETURNING 1
"""

AUDIT_OF_INSTANCE = """
SELECT id, at, job_id, event, detail FROM audit_log
 WHERE instance_id = %(id)s ORDER BY id
"""

LOCK_INSTANCE_IF_DUE = """
SELECT id, definition_name, status, version, input, variables, correlation_id, snapshot_id,
       queue_task_id, now() AS now
  FROM instance
 WHERE id = %(id)s AND status = 'RUNNING' AND timeout_at <= now()
   FOR UPDATE
"""

SEARCH = """
SELECT i.id, i.definition_name, i.definition_version, i.status, i.input, i.variables, i.output,
       i.reason, i.version, i.correlation_id, i.idempotency_key, i.parent_instance_id,
       i.created_at, i.updated_at, i.completed_at, i.timeout_at
  FROM instance i
 WHERE (%(status)s::text IS NULL OR i.status = %(status)s)
   AND (%(definition_name)s::text IS NULL OR i.definition_name = %(definition_name)s)
   AND (%(correlation_id)s::text IS NULL OR i.correlation_id = %(correlation_id)s)
   AND (%(after_created)s::timestamptz IS NULL
        OR (i.created_at, i.id) < (%(after_created)s::timestamptz, %(after_id)s::uuid))
 ORDER BY i.created_at DESC, i.id DESC
 LIMIT %(limit)s
"""

TIMED_OUT_DUE = """
SELECT id FROM instance
 WHERE status = 'RUNNING' AND timeout_at IS NOT NULL AND timeout_at <= now()
 ORDER BY timeout_at
 LIMIT %(limit)s
"""


def latest_output(conn: Conn, instance_id: uuid.UUID, step_id: str) -> Any:
    """The output of the latest completed execution of ``step_id`` (None if there is none)."""
    row = conn.execute(LATEST_OUTPUT, {"instance_id": instance_id, "step_id": step_id}).fetchone()
    return None if row is None else row["output"]
