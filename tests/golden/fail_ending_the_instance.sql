WITH w0 AS (UPDATE instance
   SET status = %(p0_status)s, variables = %(p0_variables)s, output = %(p0_output)s, reason = %(p0_reason)s,
       version = %(p0_expected)s::bigint + 1, updated_at = now(),
       step_count = step_count + %(p0_added_steps)s,
       completed_at = CASE WHEN %(p0_status)s NOT IN ('RUNNING', 'PAUSED') THEN now() END,
       timeout_at = CASE WHEN %(p0_clear_timeout)s OR %(p0_status)s NOT IN ('RUNNING', 'PAUSED')
                              OR %(p0_reset_timeout)s::int = 0 THEN NULL
                         WHEN %(p0_reset_timeout)s::int > 0
                         THEN now() + make_interval(secs => %(p0_reset_timeout)s::int)
                         ELSE timeout_at END
 WHERE id = %(p0_id)s
RETURNING 1),
w1 AS (UPDATE job SET status = 'FAILED', completed_at = now(), lock_expires_at = NULL
 WHERE id = %(p1_id)s AND status = %(p1_g_status)s AND worker_id IS NOT DISTINCT FROM %(p1_g_worker)s
   AND attempt = %(p1_g_attempt)s AND (SELECT count(*) FROM w0) >= 0
RETURNING 1),
w2 AS (UPDATE job j SET status = 'CANCELLED', completed_at = now(), lock_expires_at = NULL,
       deadline_at = NULL
  FROM step_execution s
 WHERE j.instance_id = %(p2_instance_id)s AND j.status IN ('UNLOCKED', 'LOCKED')
   AND s.id = j.step_execution_id
   AND left(s.scope, length(%(p2_prefix)s::text)) = %(p2_prefix)s::text
   AND NOT (j.id = ANY(%(p2_written)s::uuid[])) AND (SELECT baton_expect(count(*) = 1, 'w1') FROM w1) = 1
RETURNING j.id, j.instance_id),
w3 AS (INSERT INTO audit_log (instance_id, job_id, event)
SELECT instance_id, id, 'JOB_CANCELLED' FROM w2
RETURNING 1),
w4 AS (UPDATE step_execution
   SET status = %(p4_status)s,
       output = coalesce(%(p4_output)s, output),
       error = nullif(coalesce(%(p4_error)s, error), ''),  -- '' clears it (a retry reopens)
       attempt = coalesce(%(p4_attempt)s, attempt),
       state = coalesce(%(p4_state)s, state),
       child_instance_id = coalesce(%(p4_child_instance_id)s, child_instance_id),
       wake_at = CASE WHEN %(p4_set_wake)s THEN %(p4_wake_at)s
                      WHEN %(p4_status)s IN ('SCHEDULED', 'IN_PROGRESS') THEN wake_at END,
       started_at = CASE WHEN %(p4_status)s = 'SCHEDULED' THEN started_at
                         ELSE coalesce(started_at, now()) END,
       completed_at = CASE WHEN %(p4_status)s IN ('SCHEDULED', 'IN_PROGRESS') THEN NULL
                           ELSE now() END,
       updated_at = now()
 WHERE id = %(p4_id)s AND (SELECT count(*) FROM w2) >= 0
RETURNING 1),
w5 AS (UPDATE step_execution SET status = 'CANCELLED', completed_at = now(), updated_at = now(),
       wake_at = NULL
 WHERE instance_id = %(p5_instance_id)s AND status IN ('SCHEDULED', 'IN_PROGRESS')
   AND left(scope, length(%(p5_prefix)s::text)) = %(p5_prefix)s::text
   AND NOT (id = ANY(%(p5_written)s::uuid[])) AND (SELECT count(*) FROM w4) >= 0
RETURNING id, child_instance_id),
w6 AS (INSERT INTO instance_event (instance_id, kind, step_execution_id, payload)
SELECT child_instance_id, 'CANCEL', NULL, '{"reason": "its parent step was cancelled"}'::jsonb
  FROM w5
 WHERE child_instance_id IS NOT NULL
RETURNING 1),
w7 AS (INSERT INTO audit_log (instance_id, job_id, event, detail)
SELECT %(p7_instance_id)s, t.job_id, t.event, t.detail
  FROM jsonb_to_recordset(%(p7_rows)s::jsonb) AS t(job_id uuid, event text, detail jsonb)
RETURNING 1)
SELECT 1
