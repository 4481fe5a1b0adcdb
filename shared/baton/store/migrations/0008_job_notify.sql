-- Long-poll wake-ups (POST /v1/jobs/poll with waitSeconds). A process with long-polls waiting
-- for a job type keeps a row here (refreshed while it waits, ignored once expired), and the
-- transaction that makes a job of that type claimable sends NOTIFY baton_job '<job type>' as it
-- commits. NOTIFY serializes the commits of notifying transactions, so nothing is sent for a type
-- nobody waits for: with no waiter the triggers cost an empty-table probe per INSERT statement
-- and nothing at all for updates that do not unlock a job. UNLOGGED: the rows are soft state,
-- rebuilt by the waiters within seconds after a crash.
CREATE UNLOGGED TABLE job_waiter (
    job_type    text        PRIMARY KEY,
    expires_at  timestamptz NOT NULL
);

-- New jobs, once per INSERT statement (a decision inserts all of its jobs in one statement):
-- one pg_notify per distinct waited-for type that got a due job. NOTIFY coalesces duplicates
-- within a transaction as well.
CREATE FUNCTION baton_job_notify_inserted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('baton_job', w.job_type)
       FROM job_waiter w
      WHERE w.expires_at > now()
        AND EXISTS (SELECT 1 FROM inserted_jobs j
                     WHERE j.job_type = w.job_type
                       AND j.status = 'UNLOCKED' AND j.run_at <= now());
    RETURN NULL;
END
$$;
CREATE TRIGGER job_notify_inserted AFTER INSERT ON job
    REFERENCING NEW TABLE AS inserted_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION baton_job_notify_inserted();

-- A job going back to UNLOCKED and due (a retry without delay, a lease handed back): row level
-- with a WHEN clause, so claims, completions and delayed retries never even call the function.
CREATE FUNCTION baton_job_notify_unlocked() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('baton_job', w.job_type)
       FROM job_waiter w
      WHERE w.job_type = NEW.job_type AND w.expires_at > now();
    RETURN NULL;
END
$$;
CREATE TRIGGER job_notify_unlocked AFTER UPDATE ON job
    FOR EACH ROW
    WHEN (NEW.status = 'UNLOCKED' AND OLD.status IS DISTINCT FROM 'UNLOCKED'
          AND NEW.run_at <= now())
    EXECUTE FUNCTION baton_job_notify_unlocked();
