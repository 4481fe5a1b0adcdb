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
w1 AS (INSERT INTO step_execution (id, instance_id, step_id, step_type, status, attempt, input, output,
                            error, parent_step_execution_id, scope, branch, item_index,
                            iteration, state, wake_at, child_instance_id, seq, started_at,
                            completed_at)
VALUES (%(p1_id)s, %(p1_instance_id)s, %(p1_step_id)s, %(p1_step_type)s, %(p1_status)s, %(p1_attempt)s, %(p1_input)s,
        %(p1_output)s, %(p1_error)s, %(p1_parent_id)s, %(p1_scope)s, %(p1_branch)s, %(p1_item_index)s,
        %(p1_iteration)s, %(p1_state)s, %(p1_wake_at)s, %(p1_child_instance_id)s, %(p1_seq)s,
        CASE WHEN %(p1_status)s <> 'SCHEDULED' THEN now() END,
        CASE WHEN %(p1_status)s NOT IN ('SCHEDULED', 'IN_PROGRESS') THEN now() END)
RETURNING 1),
w2 AS (INSERT INTO job (id, instance_id, step_execution_id, job_type, status, lease_seconds,
                 retries_remaining, payload, payload_bytes, timeout_seconds,
                 poll_timeout_seconds, deadline_at, run_at, created_at, dispatch_outbox,
                 total_deadline_at)
VALUES (%(p2_id)s, %(p2_instance_id)s, %(p2_step_execution_id)s, %(p2_job_type)s, %(p2_status)s,
        %(p2_lease_seconds)s, %(p2_retries_remaining)s, %(p2_payload)s::jsonb, %(p2_payload_bytes)s,
        %(p2_timeout)s, %(p2_poll_timeout)s,
        CASE WHEN %(p2_poll_timeout)s::int > 0
             THEN now() + make_interval(secs => %(p2_start_delay)s::int + %(p2_poll_timeout)s::int)
        END,
        now() + make_interval(secs => %(p2_start_delay)s::int), now(), %(p2_dispatch_outbox)s,
        CASE WHEN %(p2_total_timeout)s::int > 0
             THEN now() + make_interval(secs => %(p2_total_timeout)s::int) END)),
w3 AS (UPDATE job SET status = 'COMPLETED', completed_at = now(), lock_expires_at = NULL
 WHERE id = %(p3_id)s AND status = %(p3_g_status)s AND worker_id IS NOT DISTINCT FROM %(p3_g_worker)s
   AND attempt = %(p3_g_attempt)s AND (SELECT count(*) FROM w0) >= 0
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
 WHERE id = %(p4_id)s AND (SELECT baton_expect(count(*) = 1, 'w3') FROM w3) = 1
RETURNING 1),
w5 AS (INSERT INTO audit_log (instance_id, job_id, event, detail)
SELECT %(p5_instance_id)s, t.job_id, t.event, t.detail
  FROM jsonb_to_recordset(%(p5_rows)s::jsonb) AS t(job_id uuid, event text, detail jsonb)
RETURNING 1)
SELECT 1
