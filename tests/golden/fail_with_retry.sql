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
w1 AS (UPDATE job
   SET status = 'UNLOCKED', worker_id = NULL, locked_at = NULL, lock_expires_at = NULL,
       run_at = %(p1_run_at)s, attempt = attempt + 1, retries_remaining = retries_remaining - 1,
       deadline_at = CASE WHEN poll_timeout_seconds > 0
                          THEN %(p1_run_at)s::timestamptz
                               + make_interval(secs => poll_timeout_seconds) END
 WHERE id = %(p1_id)s AND status = %(p1_g_status)s AND worker_id IS NOT DISTINCT FROM %(p1_g_worker)s
   AND attempt = %(p1_g_attempt)s AND (SELECT count(*) FROM w0) >= 0
RETURNING 1),
w2 AS (UPDATE step_execution
   SET status = %(p2_status)s,
       output = coalesce(%(p2_output)s, output),
       error = nullif(coalesce(%(p2_error)s, error), ''),  -- '' clears it (a retry reopens)
       attempt = coalesce(%(p2_attempt)s, attempt),
       state = coalesce(%(p2_state)s, state),
       child_instance_id = coalesce(%(p2_child_instance_id)s, child_instance_id),
       wake_at = CASE WHEN %(p2_set_wake)s THEN %(p2_wake_at)s
                      WHEN %(p2_status)s IN ('SCHEDULED', 'IN_PROGRESS') THEN wake_at END,
       started_at = CASE WHEN %(p2_status)s = 'SCHEDULED' THEN started_at
                         ELSE coalesce(started_at, now()) END,
       completed_at = CASE WHEN %(p2_status)s IN ('SCHEDULED', 'IN_PROGRESS') THEN NULL
                           ELSE now() END,
       updated_at = now()
 WHERE id = %(p2_id)s AND (SELECT baton_expect(count(*) = 1, 'w1') FROM w1) = 1
RETURNING 1),
w3 AS (INSERT INTO audit_log (instance_id, job_id, event, detail)
SELECT %(p3_instance_id)s, t.job_id, t.event, t.detail
  FROM jsonb_to_recordset(%(p3_rows)s::jsonb) AS t(job_id uuid, event text, detail jsonb)
RETURNING 1)
SELECT 1
