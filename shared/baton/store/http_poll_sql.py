"""HTTP_POLL's statements (``baton.engine.http_poll``): the polls an attempt made so far, and a
poll that did not end the step: its job handed back, same attempt, due later, with the count kept
in the step execution's state."""

POLLS_SO_FAR = """
SELECT state FROM step_execution WHERE id = %(step_execution_id)s
"""

# As Conductor's IN_PROGRESS callback hands a job back (conductor_sql.POSTPONE), keeping the count;
# but the step stays IN_PROGRESS between polls, as Conductor keeps a system task's (a worker's task
# goes back to SCHEDULED there, and in POSTPONE).
POLL_AGAIN = """
WITH j AS (
    UPDATE job
       SET status = 'UNLOCKED',
           run_at = now() + make_interval(secs => %(seconds)s),
           locked_at = NULL,
           lock_expires_at = NULL,
           deadline_at = NULL
     WHERE id = %(job_id)s
       AND status = 'LOCKED'
       AND worker_id = %(worker_id)s
       AND attempt = %(attempt)s
    RETURNING id, instance_id, step_execution_id, attempt
), s AS (
    UPDATE step_execution SET state = %(state)s, updated_at = now()
      FROM j WHERE step_execution.id = j.step_execution_id
    RETURNING step_execution.id
), a AS (
    INSERT INTO audit_log (instance_id, job_id, event, detail)
    SELECT instance_id, id, 'HTTP_POLLED', %(detail)s FROM j
)
SELECT id FROM j
"""
