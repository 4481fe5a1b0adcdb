WITH w0 AS (UPDATE instance
   SET status = %(p0_status)s, variables = %(p0_variables)s, output = %(p0_output)s, reason = %(p0_reason)s,
       version = %(p0_expected)s::bigint + 1, updated_at = now(),
       completed_at = CASE WHEN %(p0_status)s <> 'RUNNING' THEN now() END,
       timeout_at = CASE WHEN %(p0_clear_timeout)s OR %(p0_status)s <> 'RUNNING' THEN NULL
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
       error = coalesce(%(p2_error)s, error),
       attempt = coalesce(%(p2_attempt)s, attempt),
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
