-- Guards for single-statement decisions, the per-type lease index, and idempotency fingerprints.
-- Additive only: the previous code version keeps working during a deploy.

-- A decision's writes go out as one statement of chained CTEs; a write guarded by the state it
-- was decided on (a job's status, holder and attempt) must touch exactly the rows expected, or
-- the whole statement is refused with the same SQLSTATE as a stale instance version.
CREATE FUNCTION baton_expect(ok boolean, what text) RETURNS integer
LANGUAGE plpgsql AS $$
BEGIN
    IF ok IS NOT TRUE THEN
        RAISE EXCEPTION 'stale write: %', what USING ERRCODE = 'BT409', DETAIL = what;
    END IF;
    RETURN 1;
END
$$;

-- The claim seeks expired leases per job type, as it seeks ready jobs (a poll must not read the
-- expired leases of other types). It replaces the index on expiry alone, which the planner would
-- otherwise prefer for the claim, filtering every type's expiries; the reaper skips from type to
-- type over this one instead.
CREATE INDEX job_lease_expiry_by_type ON job (job_type, lock_expires_at) WHERE status = 'LOCKED';
DROP INDEX job_lease_expiry;

-- What an idempotent start asked for: a key reused with a different request is a conflict.
ALTER TABLE instance ADD COLUMN idempotency_fingerprint text;
