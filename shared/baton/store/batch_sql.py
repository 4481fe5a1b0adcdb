"""The decision writes of a whole batch, set-based: one statement writes every decision of a
completion batch that needs only the common writes (see ``engine.writer.write_many``):
``WRITE_UPDATES`` when they only update instances, end jobs, update steps and add audit rows (a
batch of one-step completions), else ``WRITE_DECISIONS``. Both are put together from the same
parts below, so a write reads the same in both.

Each write here is the set form of one of the single-decision writes in ``instance_sql`` and
``job_sql`` (same columns, same expressions), reading its rows from one JSON parameter, so a batch
of 100 results costs one statement of a fixed shape (prepared once) instead of 100. Keep each one
in step with its single form: ``tests/integration/test_batch_writer.py`` compares what both write.

The guarded job writes must touch exactly the rows they were given (``baton_expect``: SQLSTATE
BT409, the whole transaction rolls back and every result is applied again on the single path);
the instance updates are fenced row by row by the ``instance_fence`` trigger. Each update
finds its rows through the primary key (``id = ANY(ARRAY(…))``): joined to a function's rows
alone, whose count the planner cannot know, it would hash-join a scan of the whole table. The
chain of ``(SELECT … FROM previous)`` conditions orders the writes as everywhere else:
instances, then jobs, then steps. The batch's instances are locked first, in id order, so two
batches sharing instances cannot deadlock however each statement visits its rows: by the
statement's own ``locked`` CTE when it is the batch's only statement (the common case: one
statement, no pipeline), else by ``LOCK_INSTANCES`` before it.
"""

from __future__ import annotations

LOCK_INSTANCES = """
SELECT id FROM instance WHERE id = ANY(%(ids)s::uuid[]) ORDER BY id FOR NO KEY UPDATE
"""

# Where a write waits for the one before it (a condition on that CTE).
_AFTER = "/*after*/"

_LOCKED_AND_INSTANCE_ROWS = """
WITH locked AS MATERIALIZED (
    -- ``lock``: the instances to lock in id order before anything is written, when this
    -- statement is the batch's only one (else LOCK_INSTANCES did, and this is '[]'). Evaluated
    -- first: instance_rows, which every write reads first, waits for it.
    SELECT id FROM instance
     WHERE id = ANY(ARRAY(SELECT jsonb_array_elements_text(%(lock)s::jsonb)::uuid))
     ORDER BY id
       FOR NO KEY UPDATE
), instance_rows AS MATERIALIZED (
    SELECT * FROM jsonb_to_recordset(%(instances)s::jsonb)
        AS t(id uuid, status text, variables jsonb, output jsonb, reason text, expected bigint,
             added_steps int, clear_timeout boolean, reset_timeout int)
     WHERE (SELECT count(*) FROM locked) >= 0
"""

_ENDED_ROWS = """), ended_rows AS MATERIALIZED (
    SELECT * FROM jsonb_to_recordset(%(ended_jobs)s::jsonb)
        AS t(id uuid, status text, g_status text, g_worker text, g_attempt int)
"""

_RETRIED_ROWS = """), retried_rows AS MATERIALIZED (
    SELECT * FROM jsonb_to_recordset(%(retried_jobs)s::jsonb)
        AS t(id uuid, run_at timestamptz, g_status text, g_worker text, g_attempt int)
"""

_STEP_ROWS = """), step_rows AS MATERIALIZED (
    SELECT * FROM jsonb_to_recordset(%(step_updates)s::jsonb)
        AS t(id uuid, status text, output jsonb, error text, attempt int, state jsonb,
             child_instance_id uuid, wake_at timestamptz, set_wake boolean)
"""

_INSTANCES = """), instances AS (
    UPDATE instance i
       SET status = t.status, variables = t.variables, output = t.output, reason = t.reason,
           version = t.expected + 1, updated_at = now(),
           step_count = i.step_count + t.added_steps,
           completed_at = CASE WHEN t.status NOT IN ('RUNNING', 'PAUSED') THEN now() END,
           timeout_at = CASE WHEN t.clear_timeout OR t.status NOT IN ('RUNNING', 'PAUSED')
                                  OR t.reset_timeout = 0 THEN NULL
                             WHEN t.reset_timeout > 0
                             THEN now() + make_interval(secs => t.reset_timeout)
                             ELSE i.timeout_at END
      FROM instance_rows t
     WHERE i.id = t.id AND i.id = ANY(ARRAY(SELECT id FROM instance_rows))
    RETURNING 1
"""

_ENDED_JOBS = """), ended_jobs AS (
    UPDATE job j
       SET status = t.status, completed_at = now(), lock_expires_at = NULL
      FROM ended_rows t
     WHERE j.id = t.id AND j.id = ANY(ARRAY(SELECT id FROM ended_rows))
       AND j.status = t.g_status AND j.worker_id IS NOT DISTINCT FROM t.g_worker
       AND j.attempt = t.g_attempt
       AND (SELECT baton_expect(count(*) = %(n_instances)s, 'instances') FROM instances) = 1
    RETURNING 1
"""

_RETRIED_JOBS = """), retried_jobs AS (
    UPDATE job j
       SET status = 'UNLOCKED', worker_id = NULL, locked_at = NULL, lock_expires_at = NULL,
           run_at = t.run_at, attempt = j.attempt + 1,
           retries_remaining = j.retries_remaining - 1,
           deadline_at = CASE WHEN j.poll_timeout_seconds > 0
                              THEN t.run_at + make_interval(secs => j.poll_timeout_seconds) END
      FROM retried_rows t
     WHERE j.id = t.id AND j.id = ANY(ARRAY(SELECT id FROM retried_rows))
       AND j.status = t.g_status AND j.worker_id IS NOT DISTINCT FROM t.g_worker
       AND j.attempt = t.g_attempt
       AND (SELECT baton_expect(count(*) = %(n_ended_jobs)s, 'ended jobs') FROM ended_jobs) = 1
    RETURNING 1
"""

_NEW_JOBS = """), new_jobs AS (
    INSERT INTO job (id, instance_id, step_execution_id, job_type, status, lease_seconds,
                     retries_remaining, payload, payload_bytes, timeout_seconds,
                     poll_timeout_seconds, deadline_at, run_at, created_at, dispatch_outbox,
                     total_deadline_at)
    SELECT t.id, t.instance_id, t.step_execution_id, t.job_type, t.status, t.lease_seconds,
           t.retries_remaining, t.payload, t.payload_bytes, t.timeout, t.poll_timeout,
           CASE WHEN t.poll_timeout > 0
                THEN now() + make_interval(secs => t.start_delay + t.poll_timeout) END,
           now() + make_interval(secs => t.start_delay), now(), t.dispatch_outbox,
           CASE WHEN t.total_timeout > 0 THEN now() + make_interval(secs => t.total_timeout) END
      FROM jsonb_to_recordset(%(new_jobs)s::jsonb)
           AS t(id uuid, instance_id uuid, step_execution_id uuid, job_type text, status text,
                lease_seconds int, retries_remaining int, payload jsonb, payload_bytes int,
                timeout int, poll_timeout int, start_delay int, dispatch_outbox boolean,
                total_timeout int)
     WHERE (SELECT baton_expect(count(*) = %(n_retried_jobs)s, 'retried jobs')
              FROM retried_jobs) = 1
    RETURNING 1
"""

_STEP_UPDATES = """), step_updates AS (
    UPDATE step_execution s
       SET status = t.status,
           output = coalesce(t.output, s.output),
           error = nullif(coalesce(t.error, s.error), ''),  -- '' clears it (a retry reopens)
           attempt = coalesce(t.attempt, s.attempt),
           state = coalesce(t.state, s.state),
           child_instance_id = coalesce(t.child_instance_id, s.child_instance_id),
           wake_at = CASE WHEN t.set_wake THEN t.wake_at
                          WHEN t.status IN ('SCHEDULED', 'IN_PROGRESS') THEN s.wake_at END,
           started_at = CASE WHEN t.status = 'SCHEDULED' THEN s.started_at
                             ELSE coalesce(s.started_at, now()) END,
           completed_at = CASE WHEN t.status IN ('SCHEDULED', 'IN_PROGRESS') THEN NULL
                               ELSE now() END,
           updated_at = now()
      FROM step_rows t
     WHERE s.id = t.id AND s.id = ANY(ARRAY(SELECT id FROM step_rows))
       /*after*/
    RETURNING 1
"""

_NEW_STEPS = """), new_steps AS (
    INSERT INTO step_execution (id, instance_id, step_id, step_type, status, attempt, input,
                                output, error, parent_step_execution_id, scope, branch,
                                item_index, iteration, state, wake_at, child_instance_id, seq,
                                started_at, completed_at)
    SELECT t.id, t.instance_id, t.step_id, t.step_type, t.status, t.attempt, t.input, t.output,
           t.error, t.parent_id, t.scope, t.branch, t.item_index, t.iteration, t.state,
           t.wake_at, t.child_instance_id, t.seq,
           CASE WHEN t.status <> 'SCHEDULED' THEN now() END,
           CASE WHEN t.status NOT IN ('SCHEDULED', 'IN_PROGRESS') THEN now() END
      FROM jsonb_to_recordset(%(new_steps)s::jsonb)
           AS t(id uuid, instance_id uuid, step_id text, step_type text, status text,
                attempt int, input jsonb, output jsonb, error text, parent_id uuid, scope text,
                branch int, item_index int, iteration int, state jsonb, wake_at timestamptz,
                child_instance_id uuid, seq int)
     WHERE (SELECT count(*) FROM step_updates) >= 0
    RETURNING 1
"""

_EVENTS = """), events AS (
    INSERT INTO instance_event (instance_id, kind, step_execution_id, payload)
    SELECT t.instance_id, t.kind, t.step_execution_id, t.payload
      FROM jsonb_to_recordset(%(events)s::jsonb)
           AS t(instance_id uuid, kind text, step_execution_id uuid, payload jsonb)
    RETURNING 1
"""

_AUDIT = """), audit AS (
    INSERT INTO audit_log (instance_id, job_id, event, detail)
    SELECT t.instance_id, t.job_id, t.event, t.detail
      FROM jsonb_to_recordset(%(audit)s::jsonb)
           AS t(instance_id uuid, job_id uuid, event text, detail jsonb)
    RETURNING 1
)"""

# Every write after the instance updates, in WRITE_DECISIONS and START_DECISIONS alike.
_DECISION_WRITES = (
    _ENDED_JOBS
    + _RETRIED_JOBS
    + _NEW_JOBS
    + _STEP_UPDATES.replace(_AFTER, "AND (SELECT count(*) FROM new_jobs) >= 0")
    + _NEW_STEPS
    + _EVENTS
    + _AUDIT
)

# Every decision of the batch: instance updates, ended and retried jobs, new jobs, step updates,
# new steps, instance events and audit rows.
WRITE_DECISIONS = (
    _LOCKED_AND_INSTANCE_ROWS  # noqa: S608 (constant SQL only)
    + _ENDED_ROWS
    + _RETRIED_ROWS
    + _STEP_ROWS
    + _INSTANCES
    + _DECISION_WRITES
    + """
SELECT (SELECT count(*) FROM new_steps) + (SELECT count(*) FROM events)
       + (SELECT count(*) FROM audit) AS written
"""
)

# A batch start's instances that carry no idempotency key, inserted from one JSON row each: the
# set form of instance_sql.INSERT_INSTANCE for a top-level instance, with what its first decision
# made of it already in its row (status, variables, output, reason, step count), as a single
# start writes it. (An instance with a key was inserted earlier in the transaction, to learn
# whether its key was new; its first decision is an instance update, ``instance_rows``.)
_NEW_INSTANCES = """), new_instances AS (
    INSERT INTO instance (id, definition_name, definition_version, snapshot_id, status, input,
                          variables, output, reason, correlation_id, queue_task_id, depth,
                          step_count, timeout_at, completed_at, version)
    SELECT t.id, t.definition_name, t.definition_version, t.snapshot_id, t.status, t.input,
           t.variables, t.output, t.reason, t.correlation_id, t.queue_task_id, 0, t.step_count,
           CASE WHEN t.timeout_seconds > 0 AND t.status = 'RUNNING'
                THEN now() + make_interval(secs => t.timeout_seconds) END,
           CASE WHEN t.status NOT IN ('RUNNING', 'PAUSED') THEN now() END,
           1
      FROM jsonb_to_recordset(%(new_instances)s::jsonb)
           AS t(id uuid, definition_name text, definition_version int, snapshot_id bigint,
                status text, input jsonb, variables jsonb, output jsonb, reason text,
                correlation_id text, queue_task_id uuid, step_count int, timeout_seconds int)
    RETURNING 1
"""

# The first decisions of a batch start's instances (``engine.writer.write_starts``): the new
# instances inserted, the keyed ones updated, then every write of WRITE_DECISIONS (a start has
# only new steps, new jobs, events and audit rows among them). One statement of a fixed shape
# instead of one chained statement per instance.
START_DECISIONS = (
    _LOCKED_AND_INSTANCE_ROWS  # noqa: S608 (constant SQL only)
    + _ENDED_ROWS
    + _RETRIED_ROWS
    + _STEP_ROWS
    + _NEW_INSTANCES
    + _INSTANCES
    + _DECISION_WRITES
    + """
SELECT (SELECT count(*) FROM new_instances) + (SELECT count(*) FROM new_steps)
       + (SELECT count(*) FROM events) + (SELECT count(*) FROM audit) AS written
"""
)

# The same writes for a batch whose decisions only update instances, end jobs, update steps and
# add audit rows (every one-step completion, most MAP items): the statement above without its
# four other writes. PostgreSQL sets up every part of a statement at each execution, written to
# or not (each INSERT or UPDATE opens its table's indexes and triggers, and an INSERT of no rows
# still fires job's statement trigger); measured, this form costs the server ~11 us less per
# job of a batch of 32 (docs/performance.md). Its step updates carry the ended jobs' check.
WRITE_UPDATES = (
    _LOCKED_AND_INSTANCE_ROWS  # noqa: S608 (constant SQL only)
    + _ENDED_ROWS
    + _STEP_ROWS
    + _INSTANCES
    + _ENDED_JOBS
    + _STEP_UPDATES.replace(
        _AFTER,
        "AND (SELECT baton_expect(count(*) = %(n_ended_jobs)s, 'ended jobs')\n"
        "              FROM ended_jobs) = 1",
    )
    + _AUDIT
    + """
SELECT (SELECT count(*) FROM step_updates) + (SELECT count(*) FROM audit) AS written
"""
)

# COMPLETE_ONE_STEPS's parts (below): its rows, the instances locked and updated, then (after
# _ENDED_JOBS, over its rows' jobs) the steps and the audit rows.
_SETTLED_ROWS = """
WITH settled AS MATERIALIZED (
    SELECT * FROM jsonb_to_recordset(%(settled)s::jsonb)
        AS t(id uuid, variables jsonb, expected bigint, job_id uuid, g_status text,
             g_worker text, g_attempt int, step_id uuid, output jsonb)
), ended_rows AS NOT MATERIALIZED (  -- the jobs, as _ENDED_JOBS reads them
    SELECT job_id AS id, 'COMPLETED' AS status, g_status, g_worker, g_attempt FROM settled
), locked AS MATERIALIZED (
    SELECT id FROM instance
     WHERE id = ANY(ARRAY(SELECT id FROM settled))
     ORDER BY id
       FOR NO KEY UPDATE
), instances AS (
    UPDATE instance i
       SET status = 'COMPLETED', variables = t.variables, output = t.variables, reason = NULL,
           version = t.expected + 1, updated_at = now(), completed_at = now(), timeout_at = NULL
      FROM settled t
     WHERE i.id = t.id AND i.id = ANY(ARRAY(SELECT id FROM settled))
       AND (SELECT count(*) FROM locked) >= 0
    RETURNING 1
"""

_SETTLED_STEPS_AND_AUDIT = """), step_updates AS (
    UPDATE step_execution s
       SET status = 'COMPLETED', output = coalesce(t.output, s.output), error = NULL,
           wake_at = NULL, started_at = coalesce(s.started_at, now()), completed_at = now(),
           updated_at = now()
      FROM settled t
     WHERE s.id = t.step_id AND s.id = ANY(ARRAY(SELECT step_id FROM settled))
       AND (SELECT baton_expect(count(*) = %(n_instances)s, 'ended jobs') FROM ended_jobs) = 1
    RETURNING 1
), audit AS (
    INSERT INTO audit_log (instance_id, job_id, event, detail)
    SELECT t.id, a.job_id, a.event, a.detail
      FROM settled t
     CROSS JOIN LATERAL (
            VALUES (t.job_id, 'JOB_COMPLETED',
                    jsonb_build_object('attempt', t.g_attempt, 'workerId', t.g_worker), 1),
                   (NULL, 'INSTANCE_COMPLETED', NULL, 2)
           ) AS a(job_id, event, detail, k)
     ORDER BY t.id, a.k  -- the batch's order (its results are in instance-id order)
    RETURNING 1
)
SELECT (SELECT count(*) FROM step_updates) + (SELECT count(*) FROM audit) AS written
"""

# A batch whose every result is of the common shape (``engine.one_step``: each completes the only
# step of its own running top-level instance), which is every batch of a drain of one-step
# workflows: the set form of ``instance_sql.COMPLETE_ONE_STEP``. It writes what WRITE_UPDATES
# writes for those results, from ONE row per result (the instance with the version it was read
# at, the job with its guard, the step with its output) instead of five JSON sets, with what is
# constant for the shape folded in: the statuses; the instance's output is its variables; the
# audit rows are JOB_COMPLETED (its detail the guard's attempt and holder), then
# INSTANCE_COMPLETED, per result in instance-id order (the batch's). PostgreSQL turns each JSON
# row into a record at ~2-4 us (its UUIDs and values parsed from text), so one row instead of
# five, whose ids came three times, saves several us of server CPU per result
# (docs/performance.md). Locks, fences and order as WRITE_UPDATES: the instances locked in id
# order first, each fenced by its version (the trigger), the job guards checked to touch
# exactly one row per result (BT409 otherwise: nothing is written): the jobs are ended by
# _ENDED_JOBS itself, over a view of the rows.
# ``tests/integration/test_one_step_batch.py`` compares what it writes with the decider's writes.
COMPLETE_ONE_STEPS = _SETTLED_ROWS + _ENDED_JOBS + _SETTLED_STEPS_AND_AUDIT
