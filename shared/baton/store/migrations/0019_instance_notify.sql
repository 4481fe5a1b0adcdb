-- Waits on an instance (Conductor's synchronous execution, POST /api/workflow/execute): a request
-- waiting for an instance to end, or to reach a task, keeps a job_waiter row keyed
-- 'instance/<id>' (a '/' is in no job type) while it waits, and each write of that instance's row
-- (every decision that adds steps or changes its status, variables or output bumps its version)
-- sends NOTIFY baton_job 'instance/<id>' as it commits. With nobody waiting the trigger costs a
-- primary-key probe of the small job_waiter table per instance update.
CREATE FUNCTION baton_instance_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('baton_job', w.job_type)
       FROM job_waiter w
      WHERE w.job_type = 'instance/' || NEW.id::text AND w.expires_at > now();
    RETURN NULL;
END
$$;
CREATE TRIGGER instance_notify AFTER UPDATE ON instance
    FOR EACH ROW EXECUTE FUNCTION baton_instance_notify();
