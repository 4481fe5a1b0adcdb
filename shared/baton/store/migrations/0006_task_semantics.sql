-- Task-definition semantics enforced: per-attempt timeouts, poll timeouts, concurrency and rate
-- limits. Additive for the previous code version (it writes none of the new values).

-- What a job's deadlines are computed from. deadline_at is the one wake-up of a waiting or
-- running job: UNLOCKED, when it must have been claimed (pollTimeoutSeconds after it became
-- due); LOCKED, when its attempt must have finished (timeoutSeconds after the claim).
ALTER TABLE job ADD COLUMN timeout_seconds integer NOT NULL DEFAULT 0,
                ADD COLUMN poll_timeout_seconds integer NOT NULL DEFAULT 0;
CREATE INDEX job_deadline ON job (deadline_at)
    WHERE status IN ('UNLOCKED', 'LOCKED') AND deadline_at IS NOT NULL;

-- An attempt ended by a timeout with nothing after it is TIMED_OUT.
ALTER TABLE job DROP CONSTRAINT job_status_check;
ALTER TABLE job ADD CONSTRAINT job_status_check
    CHECK (status IN ('UNLOCKED', 'LOCKED', 'COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT'));

-- One row per job type with a concurrency or rate limit (kept in step with its task definition).
-- A limited claim locks the row, which serializes the claims of that type, and counts the
-- type's LOCKED jobs in a statement that starts after the lock (so it sees every earlier claim).
CREATE TABLE job_type_limit (
    job_type           text     PRIMARY KEY,
    concurrent_limit   integer  CHECK (concurrent_limit > 0),
    rate_per_window    integer  CHECK (rate_per_window > 0),
    rate_window_seconds integer CHECK (rate_window_seconds > 0),
    -- The fixed window (floor(epoch / rate_window_seconds)) the claims below were counted in.
    window_id          bigint   NOT NULL DEFAULT 0,
    window_claims      integer  NOT NULL DEFAULT 0,
    -- Filled by a limited claim for its next statement: how many it may hand out.
    grant_now          integer  NOT NULL DEFAULT 0
);
