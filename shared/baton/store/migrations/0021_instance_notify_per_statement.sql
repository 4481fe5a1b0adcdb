-- Waits on an instance (migration 0019) notified once per UPDATE statement instead of once per
-- row: a batch completion updates a batch's instances in one statement, and the row trigger ran
-- its function and a job_waiter probe for each of them (about 4% of the batch write's
-- PostgreSQL time, with nobody waiting). The statement's updated rows come as a transition
-- table; nobody waiting on an instance, the function is one probe of the small job_waiter table.
DROP TRIGGER instance_notify ON instance;

CREATE OR REPLACE FUNCTION baton_instance_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('baton_job', w.job_type)
       FROM job_waiter w
      WHERE w.job_type LIKE 'instance/%' AND w.expires_at > now()
        AND EXISTS (SELECT 1 FROM updated_instances i
                     WHERE w.job_type = 'instance/' || i.id::text);
    RETURN NULL;
END
$$;

CREATE TRIGGER instance_notify AFTER UPDATE ON instance
    REFERENCING NEW TABLE AS updated_instances
    FOR EACH STATEMENT EXECUTE FUNCTION baton_instance_notify();
