-- A step's totalTimeoutSeconds (Conductor's budget over all its attempts, from its first
-- scheduling) is a due time of its job's: total_deadline_at, set when the job is created and kept
-- across its retries, postponements and lapsed leases. The sweeper finds a job past either
-- deadline (its attempt's, or the budget's) through one index on the earlier of the two.
ALTER TABLE job ADD COLUMN IF NOT EXISTS total_deadline_at timestamptz;
DROP INDEX IF EXISTS job_deadline;
CREATE INDEX job_deadline ON job (least(deadline_at, total_deadline_at))
    WHERE status IN ('UNLOCKED', 'LOCKED')
      AND (deadline_at IS NOT NULL OR total_deadline_at IS NOT NULL);
