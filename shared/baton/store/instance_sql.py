"""SQL for instances, step executions, snapshots, instance events and audit rows."""

from __future__ import annotations

import uuid
from typing import Any

from baton.store.db import Conn
from baton.store.raw_sql import unsized_array

# ``inserted``: the row is this transaction's (now, or by an earlier statement of it), so it could
# still roll back; NULL or false: committed before (safe to cache).
UPSERT_SNAPSHOT = """
WITH ins AS (
    INSERT INTO definition_snapshot (digest, body) VALUES (%(digest)s, %(body)s::jsonb)
    ON CONFLICT (digest) DO NOTHING
    RETURNING id
)
SELECT id, true AS inserted FROM ins
UNION ALL
SELECT id, xmin = pg_current_xact_id_if_assigned()::xid FROM definition_snapshot
 WHERE digest = %(digest)s
LIMIT 1
"""

SNAPSHOT_BY_DIGEST = "SELECT id FROM definition_snapshot WHERE digest = %(digest)s"

SNAPSHOT_BODY = "SELECT body::text AS body FROM definition_snapshot WHERE id = %(id)s"

# The Conductor WorkflowDef a snapshot was translated from (an inline start on /api): the first
# given is kept.
SET_SNAPSHOT_CONDUCTOR = """
UPDATE definition_snapshot SET conductor = %(conductor)s::json
 WHERE id = %(id)s AND conductor IS NULL
"""

# The definition each child of an instance runs (a Conductor SUB_WORKFLOW task's input names it).
CHILD_DEFINITIONS = """
SELECT id, definition_name, definition_version FROM instance WHERE parent_instance_id = %(id)s
"""

# The Conductor WorkflowDef an instance's snapshot was translated from, if any.
INSTANCE_CONDUCTOR_SOURCE = """
SELECT s.conductor FROM instance i JOIN definition_snapshot s ON s.id = i.snapshot_id
 WHERE i.id = %(id)s
"""

# A new instance with what its first decision made of it (a start may run to its end at once).
INSERT_INSTANCE = """
INSERT INTO instance (id, definition_name, definition_version, snapshot_id, status, input,
                      variables, output, reason, correlation_id, idempotency_key,
                      idempotency_fingerprint, queue_task_id, parent_instance_id,
                      parent_step_execution_id, depth, step_count, timeout_at, completed_at,
                      version)
VALUES (%(id)s, %(definition_name)s, %(definition_version)s, %(snapshot_id)s,
        coalesce(%(status)s, 'RUNNING'), %(input)s, %(variables)s, %(output)s, %(reason)s,
        %(correlation_id)s, %(idempotency_key)s, %(idempotency_fingerprint)s,
        %(queue_task_id)s, %(parent_instance_id)s, %(parent_step_execution_id)s,
        coalesce(%(depth)s, 0), coalesce(%(step_count)s, 0),
        CASE WHEN %(timeout_seconds)s::int > 0 AND coalesce(%(status)s, 'RUNNING') = 'RUNNING'
             THEN now() + make_interval(secs => %(timeout_seconds)s::int) END,
        CASE WHEN coalesce(%(status)s, 'RUNNING') NOT IN ('RUNNING', 'PAUSED') THEN now() END,
        1)
ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
RETURNING id, now() AS now
"""

ID_BY_IDEMPOTENCY_KEY = """
SELECT id, idempotency_fingerprint FROM instance WHERE idempotency_key = %(key)s
"""

_INSTANCE_STATE = """
SELECT id, definition_name, definition_version, status, version, input, variables, correlation_id,
       snapshot_id, queue_task_id, parent_instance_id, parent_step_execution_id, step_count,
       depth, run, created_at, now() AS now
  FROM instance
"""

LOCK_INSTANCE = _INSTANCE_STATE + " WHERE id = %(id)s FOR UPDATE"

LOCK_INSTANCE_IF_DUE = (
    _INSTANCE_STATE
    + " WHERE id = %(id)s AND status = 'RUNNING' AND timeout_at <= now() FOR UPDATE SKIP LOCKED"
)

# The sweeper's and event delivery's lock: an instance being decided elsewhere is skipped.
LOCK_INSTANCE_OR_SKIP = _INSTANCE_STATE + " WHERE id = %(id)s FOR UPDATE SKIP LOCKED"

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
       step_count = step_count + %(added_steps)s,
       completed_at = CASE WHEN %(status)s NOT IN ('RUNNING', 'PAUSED') THEN now() END,
       timeout_at = CASE WHEN %(clear_timeout)s OR %(status)s NOT IN ('RUNNING', 'PAUSED')
                              OR %(reset_timeout)s::int = 0 THEN NULL
                         WHEN %(reset_timeout)s::int > 0
                         THEN now() + make_interval(secs => %(reset_timeout)s::int)
                         ELSE timeout_at END
 WHERE id = %(id)s /*after*/
RETURNING 1
"""

INSERT_STEP = """
INSERT INTO step_execution (id, instance_id, step_id, step_type, status, attempt, input, output,
                            error, parent_step_execution_id, scope, branch, item_index,
                            iteration, state, wake_at, child_instance_id, seq, started_at,
                            completed_at)
VALUES (%(id)s, %(instance_id)s, %(step_id)s, %(step_type)s, %(status)s, %(attempt)s, %(input)s,
        %(output)s, %(error)s, %(parent_id)s, %(scope)s, %(branch)s, %(item_index)s,
        %(iteration)s, %(state)s, %(wake_at)s, %(child_instance_id)s, %(seq)s,
        CASE WHEN %(status)s <> 'SCHEDULED' THEN now() END,
        CASE WHEN %(status)s NOT IN ('SCHEDULED', 'IN_PROGRESS') THEN now() END)
RETURNING 1
"""

# Many new step executions at once (a fan-out, a loop run through in one decision): one insert
# from one JSON parameter, so the statement's size and shape do not grow with the count.
INSERT_STEPS = """
INSERT INTO step_execution (id, instance_id, step_id, step_type, status, attempt, input, output,
                            error, parent_step_execution_id, scope, branch, item_index,
                            iteration, state, wake_at, child_instance_id, seq, started_at,
                            completed_at)
SELECT t.id, %(instance_id)s, t.step_id, t.step_type, t.status, t.attempt, t.input, t.output,
       t.error, t.parent_id, t.scope, t.branch, t.item_index, t.iteration, t.state, t.wake_at,
       t.child_instance_id, t.seq,
       CASE WHEN t.status <> 'SCHEDULED' THEN now() END,
       CASE WHEN t.status NOT IN ('SCHEDULED', 'IN_PROGRESS') THEN now() END
  FROM jsonb_to_recordset(%(rows)s::jsonb)
       AS t(id uuid, step_id text, step_type text, status text, attempt int, input jsonb,
            output jsonb, error text, parent_id uuid, scope text, branch int, item_index int,
            iteration int, state jsonb, wake_at timestamptz, child_instance_id uuid, seq int)
RETURNING 1
"""

UPDATE_STEP = """
UPDATE step_execution
   SET status = %(status)s,
       output = coalesce(%(output)s, output),
       error = nullif(coalesce(%(error)s, error), ''),  -- '' clears it (a retry reopens)
       attempt = coalesce(%(attempt)s, attempt),
       state = coalesce(%(state)s, state),
       child_instance_id = coalesce(%(child_instance_id)s, child_instance_id),
       wake_at = CASE WHEN %(set_wake)s THEN %(wake_at)s
                      WHEN %(status)s IN ('SCHEDULED', 'IN_PROGRESS') THEN wake_at END,
       started_at = CASE WHEN %(status)s = 'SCHEDULED' THEN started_at
                         ELSE coalesce(started_at, now()) END,
       completed_at = CASE WHEN %(status)s IN ('SCHEDULED', 'IN_PROGRESS') THEN NULL
                           ELSE now() END,
       updated_at = now()
 WHERE id = %(id)s /*after*/
RETURNING 1
"""

# The open steps of an instance (``prefix`` ''), or of one operator's execution (its scope
# prefix), but the ones this decision wrote itself. Child instances of the SUB_WORKFLOW steps
# among them are asked to cancel (their ids are returned for the event rows).
CANCEL_OPEN_STEPS = """
UPDATE step_execution SET status = 'CANCELLED', completed_at = now(), updated_at = now(),
       wake_at = NULL
 WHERE instance_id = %(instance_id)s AND status IN ('SCHEDULED', 'IN_PROGRESS')
   AND left(scope, length(%(prefix)s::text)) = %(prefix)s::text
   AND NOT (id = ANY(%(written)s::uuid[])) /*after*/
RETURNING id, child_instance_id
"""

CANCEL_CHILDREN = """
INSERT INTO instance_event (instance_id, kind, step_execution_id, payload)
SELECT child_instance_id, 'CANCEL', NULL, '{"reason": "its parent step was cancelled"}'::jsonb
  FROM /*cte:cancelled_steps*/
 WHERE child_instance_id IS NOT NULL
RETURNING 1
"""

# One result of the common shape (``engine.one_step``: it completes the only step of a running
# top-level instance, which completes with its variables as its output), decided without a
# decider and written on its own (``engine.writer.write_settled``, a per-commit completion): what
# UPDATE_INSTANCE, ``job_sql.MARK_COMPLETED``, UPDATE_STEP and INSERT_AUDIT write for it, with
# what is constant for the shape folded in (the statuses; the instance's output is its
# variables; the JOB_COMPLETED row's detail is the guard's attempt and holder) and every
# parameter typed by a cast (one generic plan), in the chained form's order and fenced alike: the
# instance by its version (the fencing trigger), the job by its guard (BT409 unless it touches
# exactly the job read). Keep it in step with those: ``tests/integration/test_one_step_commit.py``
# compares what both write.
COMPLETE_ONE_STEP = """
WITH instance_done AS (
    UPDATE instance
       SET status = 'COMPLETED', variables = %(variables)s::jsonb, output = %(variables)s::jsonb,
           reason = NULL, version = %(expected)s::bigint + 1, updated_at = now(),
           completed_at = now(), timeout_at = NULL
     WHERE id = %(id)s::uuid
    RETURNING 1
), job_done AS (
    UPDATE job SET status = 'COMPLETED', completed_at = now(), lock_expires_at = NULL
     WHERE id = %(job_id)s::uuid AND status = %(g_status)s::text
       AND worker_id IS NOT DISTINCT FROM %(g_worker)s::text AND attempt = %(g_attempt)s::int
       AND (SELECT count(*) FROM instance_done) >= 0
    RETURNING 1
), step_done AS (
    UPDATE step_execution
       SET status = 'COMPLETED', output = coalesce(%(step_output)s::jsonb, output), error = NULL,
           wake_at = NULL, started_at = coalesce(started_at, now()), completed_at = now(),
           updated_at = now()
     WHERE id = %(step_id)s::uuid
       AND (SELECT baton_expect(count(*) = 1, 'job_done') FROM job_done) = 1
    RETURNING 1
)
INSERT INTO audit_log (instance_id, job_id, event, detail)
SELECT %(id)s::uuid, %(job_id)s::uuid, 'JOB_COMPLETED',
       jsonb_build_object('attempt', %(g_attempt)s::int, 'workerId', %(g_worker)s::text)
 UNION ALL
SELECT %(id)s::uuid, NULL, 'INSTANCE_COMPLETED', NULL
"""

# Every audit row of a decision in one statement, passed as one JSON text parameter (cheaper
# to send from Python than three typed arrays).
INSERT_AUDIT = """
INSERT INTO audit_log (instance_id, job_id, event, detail)
SELECT %(instance_id)s, t.job_id, t.event, t.detail
  FROM jsonb_to_recordset(%(rows)s::jsonb) AS t(job_id uuid, event text, detail jsonb)
RETURNING 1
"""

INSERT_EVENTS = """
INSERT INTO instance_event (instance_id, kind, step_execution_id, payload)
SELECT t.instance_id, t.kind, t.step_execution_id, t.payload
  FROM jsonb_to_recordset(%(rows)s::jsonb)
       AS t(instance_id uuid, kind text, step_execution_id uuid, payload jsonb)
RETURNING 1
"""

DELETE_EVENTS = """
DELETE FROM instance_event WHERE instance_id = %(instance_id)s AND id = ANY(%(ids)s::bigint[])
RETURNING 1
"""

# --- reads -------------------------------------------------------------------------------------

GET_INSTANCE = """
SELECT i.id, i.definition_name, i.definition_version, i.status, i.input, i.variables, i.output,
       i.reason, i.version, i.correlation_id, i.idempotency_key, i.parent_instance_id,
       i.parent_step_execution_id, i.created_at, i.updated_at, i.completed_at, i.timeout_at,
       i.snapshot_id, i.run
  FROM instance i WHERE i.id = %(id)s
"""

# A batch start's answers: its new and existing instances, read after its COMMIT.
INSTANCES_BY_IDS = GET_INSTANCE.replace(
    "i.id = %(id)s", "i.id = ANY(" + unsized_array("ids", "uuid") + ")"
)

# A batch start's idempotency keys that were used before (its inserts of them did nothing).
IDS_BY_IDEMPOTENCY_KEYS = (
    """
SELECT id, idempotency_key, idempotency_fingerprint FROM instance
 WHERE idempotency_key = ANY("""
    + unsized_array("keys", "text")
    + """)
"""
)

_STEPS = """
SELECT s.id, s.step_id, s.step_type, s.status, s.attempt, s.input, s.output, s.error,
       s.created_at, s.started_at, s.completed_at, s.parent_step_execution_id, s.branch,
       s.item_index, s.iteration, s.wake_at, s.child_instance_id, s.state, s.seq,
       j.id AS job_id, j.job_type, j.worker_id, j.status AS job_status,
       j.deliveries AS job_deliveries
  FROM step_execution s
  LEFT JOIN job j ON j.instance_id = s.instance_id AND j.step_execution_id = s.id
 WHERE s.instance_id = %(id)s
"""

STEPS_OF_INSTANCE = _STEPS + " ORDER BY s.seq, s.created_at, s.id"

# One page of an instance's step executions in creation order (``seq`` is set on every insert).
STEPS_PAGE = (
    _STEPS
    + """   AND s.seq > %(after)s
 ORDER BY s.seq LIMIT %(limit)s"""
)

_EXECUTION = """
SELECT id, step_id, step_type, scope, status, attempt, state, input, child_instance_id, output
  FROM step_execution
"""

EXECUTION = _EXECUTION + " WHERE id = %(id)s"

LOCK_EXECUTION_OR_SKIP = _EXECUTION + " WHERE id = %(id)s FOR UPDATE SKIP LOCKED"

# The execution of a waiting step (USER_TASK, SIGNAL) that an API call completes: the named one,
# else the oldest still waiting (a step inside a MAP or a loop may wait in several at once).
WAITING_EXECUTION = (
    _EXECUTION
    + """ WHERE instance_id = %(instance_id)s AND step_id = %(step_id)s
   AND (%(exec_id)s::uuid IS NULL OR id = %(exec_id)s::uuid)
 ORDER BY status = 'IN_PROGRESS' DESC, seq
 LIMIT 1"""
)

# The latest completed output of a step inside a scope (the execution an expression reads).
LATEST_OUTPUT = """
SELECT output FROM step_execution
 WHERE instance_id = %(instance_id)s AND step_id = %(step_id)s AND status = 'COMPLETED'
   AND left(scope, length(%(prefix)s::text)) = %(prefix)s::text
 ORDER BY seq DESC LIMIT 1
"""

# What ${<step>.status} and the like read: the latest execution of a step in a scope, any status,
# with its job (found through the instance's jobs).
LATEST_RECORD = """
SELECT s.id, s.status, s.attempt, s.started_at, s.completed_at, s.created_at,
       (SELECT j.id FROM job j WHERE j.instance_id = s.instance_id AND j.step_execution_id = s.id
         ORDER BY j.created_at DESC LIMIT 1) AS job_id
  FROM step_execution s
 WHERE s.instance_id = %(instance_id)s AND s.step_id = %(step_id)s
   AND left(s.scope, length(%(prefix)s::text)) = %(prefix)s::text
 ORDER BY s.seq DESC LIMIT 1
"""

# For a join: the completed executions of the last step of each list of an operator execution.
LAST_OUTPUTS = """
SELECT DISTINCT ON (step_id, branch, item_index) step_id, branch, item_index, output
  FROM step_execution
 WHERE parent_step_execution_id = %(parent_id)s AND step_id = ANY(%(step_ids)s::text[])
   AND status = 'COMPLETED'
 ORDER BY step_id, branch, item_index, seq DESC
"""

# The latest completed output of any of ``step_ids`` in each list directly inside an operator
# execution (``prefix``: its scope and id, ``<scope><id>#``), however deep in that list: a keyed
# MAP's join through the SWITCH ending its steps. ``list``: the list's key (``i3``).
LAST_OUTPUTS_WITHIN = """
SELECT DISTINCT ON (split_part(substr(scope, length(%(prefix)s::text) + 1), '/', 1))
       split_part(substr(scope, length(%(prefix)s::text) + 1), '/', 1) AS list, output
  FROM step_execution
 WHERE instance_id = %(instance_id)s AND step_id = ANY(%(step_ids)s::text[])
   AND status = 'COMPLETED' AND left(scope, length(%(prefix)s::text)) = %(prefix)s::text
 ORDER BY split_part(substr(scope, length(%(prefix)s::text) + 1), '/', 1), seq DESC
"""

# The latest completed output of each of some steps in each list under an operator execution (a
# running DO_WHILE's output so far: each iteration's steps by id). ``after_step`` and
# ``after_scope``: an execution of a loop's first step in the last iteration not wanted (a loop
# keeping its last n iterations); only what was created after its latest one is read, so a long
# loop's read stays as long as its kept iterations instead of growing with every iteration
# ('' and '': no bound). Each step is read by its own backward range of (instance_id, step_id,
# seq): a generic plan takes an instance for a handful of rows, and with the steps as one
# ``ANY`` it read them through (instance_id, id), every execution of a long loop's instance.
LAST_OUTPUTS_BY_LIST = """
SELECT DISTINCT ON (list, step_id) list, step_id, output
  FROM unnest(%(step_ids)s::text[]) AS wanted(step_id)
 CROSS JOIN LATERAL (
        SELECT split_part(substr(s.scope, length(%(prefix)s::text) + 1), '/', 1) AS list,
               s.output, s.seq
          FROM step_execution s
         WHERE s.instance_id = %(instance_id)s AND s.step_id = wanted.step_id
           AND s.status = 'COMPLETED'
           AND left(s.scope, length(%(prefix)s::text)) = %(prefix)s::text
           AND s.seq > coalesce((SELECT b.seq FROM step_execution b
                                  WHERE b.instance_id = %(instance_id)s
                                    AND b.step_id = %(after_step)s::text
                                    AND b.scope = %(after_scope)s::text
                                  ORDER BY b.seq DESC LIMIT 1), -1)
         ORDER BY s.seq DESC
       ) AS within
 ORDER BY list, step_id, seq DESC
"""

# The latest execution of each step in each scope (each list of each operator execution): where
# an instance retry finds how far each list went (its furthest step's execution), what failed,
# what was cancelled with it, and the permissive failures a list went past.
LATEST_BY_STEP = """
SELECT DISTINCT ON (scope, step_id)
       id, step_id, step_type, scope, status, attempt, state, input, child_instance_id, output
  FROM step_execution WHERE instance_id = %(id)s
 ORDER BY scope, step_id, seq DESC
"""

# The latest execution of each of some steps in each scope, oldest first, with its latest job
# and, when that job's attempt failed, what its worker said (and whether it said not to retry):
# what an instance reads of its
# permissive steps when nothing is left to run (Conductor's reason names each failed task's).
LATEST_OF_STEPS = """
WITH latest AS (
  SELECT DISTINCT ON (scope, step_id) id, step_id, scope, status, attempt, error, seq
    FROM step_execution
   WHERE instance_id = %(instance_id)s AND step_id = ANY(%(step_ids)s::text[])
   ORDER BY scope, step_id, seq DESC
), with_job AS (
  SELECT l.*,
         (SELECT j.id FROM job j
           WHERE j.instance_id = %(instance_id)s AND j.step_execution_id = l.id
           ORDER BY j.created_at DESC LIMIT 1) AS job_id
    FROM latest l
), said AS (
  SELECT DISTINCT ON (a.job_id, a.detail->>'attempt')
         a.job_id, a.detail->>'attempt' AS attempt, a.detail->>'error' AS error,
         a.detail->'retryable' AS retryable
    FROM audit_log a
   WHERE a.instance_id = %(instance_id)s AND a.event = 'JOB_FAILED'
     AND a.job_id IN (SELECT job_id FROM with_job WHERE status = 'FAILED')
   ORDER BY a.job_id, a.detail->>'attempt', a.id DESC
)
SELECT w.id, w.step_id, w.scope, w.status, w.attempt, w.error, w.job_id, s.error AS job_error,
       s.retryable = 'false'::jsonb AS job_terminal
  FROM with_job w LEFT JOIN said s ON s.job_id = w.job_id AND s.attempt = w.attempt::text
 ORDER BY w.seq
"""

# The instance's open executions (an instance with permissive steps ends when none is left).
OPEN_STEPS = """
SELECT id, scope FROM step_execution
 WHERE instance_id = %(instance_id)s AND status IN ('SCHEDULED', 'IN_PROGRESS')
"""

EVENTS_OF_INSTANCE = """
SELECT id, kind, step_execution_id, payload FROM instance_event
 WHERE instance_id = %(id)s AND kind = ANY(%(kinds)s::text[])
 ORDER BY id
"""

INSTANCES_WITH_EVENTS = """
SELECT DISTINCT instance_id FROM instance_event
 WHERE kind IN ('CHILD_ENDED', 'CANCEL', 'FAILURE_WORKFLOW')
 LIMIT %(limit)s
"""

# Children of an instance with events to act on (after the parent cancelled work).
CHILDREN_WITH_EVENTS = """
SELECT i.id FROM instance i
 WHERE i.parent_instance_id = %(parent)s AND i.status IN ('RUNNING', 'PAUSED')
   AND EXISTS (SELECT 1 FROM instance_event e WHERE e.instance_id = i.id AND e.kind = 'CANCEL')
"""

TIMERS_DUE = """
SELECT s.id, s.instance_id FROM step_execution s
  JOIN instance i ON i.id = s.instance_id AND i.status = 'RUNNING'
 WHERE s.status = 'IN_PROGRESS' AND s.wake_at IS NOT NULL AND s.wake_at <= now()
 ORDER BY s.wake_at
 LIMIT %(limit)s
"""

# The timers of one instance that fell due (while it was paused).
TIMERS_DUE_OF_INSTANCE = (
    _EXECUTION
    + """ WHERE instance_id = %(id)s AND status = 'IN_PROGRESS' AND wake_at IS NOT NULL
   AND wake_at <= now()
 ORDER BY wake_at"""
)

AUDIT_OF_INSTANCE = """
SELECT id, at, job_id, event, detail FROM audit_log
 WHERE instance_id = %(id)s ORDER BY id
"""

# One page of an instance's history: audit rows in the order they were written, with the step
# execution and step of each job row (a restart deletes the previous run's jobs; their rows keep
# what their detail says).
HISTORY_PAGE = """
SELECT a.id, a.at, a.job_id, a.event, a.detail, j.step_execution_id, s.step_id
  FROM audit_log a
  LEFT JOIN job j ON j.id = a.job_id
  LEFT JOIN step_execution s ON s.id = j.step_execution_id
 WHERE a.instance_id = %(id)s AND a.id > %(after)s
 ORDER BY a.id LIMIT %(limit)s
"""

INSTANCE_EXISTS = "SELECT 1 FROM instance WHERE id = %(id)s"

SEARCH = """
SELECT i.id, i.definition_name, i.definition_version, i.status, i.input, i.variables, i.output,
       i.reason, i.version, i.correlation_id, i.idempotency_key, i.parent_instance_id,
       i.parent_step_execution_id, i.created_at, i.updated_at, i.completed_at, i.timeout_at,
       i.run
  FROM instance i
 WHERE (%(status)s::text IS NULL OR i.status = %(status)s)
   AND (%(definition_name)s::text IS NULL OR i.definition_name = %(definition_name)s)
   AND (%(correlation_id)s::text IS NULL OR i.correlation_id = %(correlation_id)s)
   AND (%(since)s::timestamptz IS NULL OR i.created_at >= %(since)s::timestamptz)
   AND (%(until)s::timestamptz IS NULL OR i.created_at < %(until)s::timestamptz)
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

# A restart: the previous run's steps and jobs go (the audit log keeps its history).
# --- a rerun from a step execution (engine.rerun_ops) -------------------------------------------

# Every step execution of an instance, as a rerun places them.
RUN_EXECUTIONS = """
SELECT id, step_id, step_type, scope, status, seq, child_instance_id
  FROM step_execution WHERE instance_id = %(id)s
"""

# Some executions of an instance, as a decision reads them.
EXECUTIONS_BY_ID = _EXECUTION + " WHERE id = ANY(%(ids)s::uuid[])"

# Where an id a rerun names sits in an instance or its descendants: a step execution's, or its
# job's; else (``forks``) every execution with lists there, whose JOIN a view may name.
_TREE = """
WITH RECURSIVE tree AS (
    SELECT %(id)s::uuid AS id
    UNION ALL
    SELECT i.id FROM instance i JOIN tree t ON i.parent_instance_id = t.id
)
"""
FIND_EXECUTION = _TREE + (  # noqa: S608 (constant SQL only)
    """
SELECT s.instance_id, s.id FROM step_execution s
 WHERE s.id = %(key)s AND s.instance_id IN (SELECT id FROM tree)
UNION ALL
SELECT j.instance_id, j.step_execution_id FROM job j
 WHERE j.id = %(key)s AND j.instance_id IN (SELECT id FROM tree)
LIMIT 1
"""
)
FORKS_OF_TREE = _TREE + (  # noqa: S608 (constant SQL only)
    """
SELECT s.instance_id, s.id FROM step_execution s
 WHERE s.instance_id IN (SELECT id FROM tree) AND s.step_type IN ('PARALLEL', 'MAP')
"""
)

# The instance of a step execution (found by its id alone).
INSTANCE_OF_EXECUTION = "SELECT instance_id FROM step_execution WHERE id = %(id)s"

# The statuses of some instances.
STATUSES = "SELECT id, status FROM instance WHERE id = ANY(%(ids)s::uuid[])"

# What a rerun removes: the executions after the one it runs again from (their jobs with them).
DELETE_EXECUTIONS = """
DELETE FROM step_execution WHERE instance_id = %(id)s AND id = ANY(%(ids)s::uuid[])
"""

# A rerun's new input and correlation id (either kept when not given), fenced as every update.
SET_INPUT = """
UPDATE instance
   SET input = coalesce(%(input)s, input),
       correlation_id = coalesce(%(correlation_id)s, correlation_id),
       version = %(expected)s::bigint + 1
 WHERE id = %(id)s
"""

# The parent of an instance, locked, and the instance as its parent's step waits on it.
LOCK_PARENT_OF = _INSTANCE_STATE + (  # noqa: S608 (constant SQL only)
    " WHERE id = (SELECT parent_instance_id FROM instance WHERE id = %(child)s) FOR UPDATE"
)
CHILD_AS_ENDED = """
SELECT status, output, reason, parent_step_execution_id FROM instance WHERE id = %(child)s
"""

CLEAR_RUN = """
WITH jobs AS (DELETE FROM job WHERE instance_id = %(id)s RETURNING 1),
     steps AS (DELETE FROM step_execution WHERE instance_id = %(id)s RETURNING 1),
     events AS (DELETE FROM instance_event WHERE instance_id = %(id)s RETURNING 1)
SELECT (SELECT count(*) FROM steps) AS steps
"""

RESTART_INSTANCE = """
UPDATE instance
   SET status = 'RUNNING', variables = '{}', output = NULL, reason = NULL,
       version = %(expected)s::bigint + 1, updated_at = now(), completed_at = NULL,
       step_count = 0, run = run + 1, snapshot_id = %(snapshot_id)s,
       definition_version = %(definition_version)s,
       input = coalesce(%(input)s, input),
       correlation_id = coalesce(%(correlation_id)s, correlation_id),
       timeout_at = CASE WHEN %(timeout_seconds)s::int > 0
                         THEN now() + make_interval(secs => %(timeout_seconds)s::int) END
 WHERE id = %(id)s
"""


def latest_output(conn: Conn, instance_id: uuid.UUID, step_id: str, prefix: str = "") -> Any:
    """The output of the latest completed execution of ``step_id`` in a scope (None if none)."""
    row = conn.execute(
        LATEST_OUTPUT, {"instance_id": instance_id, "step_id": step_id, "prefix": prefix}
    ).fetchone()
    return None if row is None else row["output"]
