-- The opt-in event-driven dispatch mode (BATON_DISPATCH_MODE=outbox): a job remembers the mode it
-- was created under, and every transition that makes an outbox-mode job claimable (creation, a
-- retry, a lease the reaper took back, a postponement) writes a dispatch_outbox row in the same
-- transaction, through a trigger. Polling-mode jobs (the default, dispatch_outbox = false) never
-- fire it: the trigger's WHEN clause is false before any function runs.
-- Backward compatible: the new column has a constant default (no table rewrite), so a Lambda of
-- the previous version keeps inserting polling-mode jobs.
ALTER TABLE job ADD COLUMN dispatch_outbox boolean NOT NULL DEFAULT false;

-- What the relay publishes: the attempt (with the job id, the broker's deduplication id) and when
-- the job becomes due (SQS FIFO has no per-message delay: the relay holds a row until then).
ALTER TABLE dispatch_outbox ADD COLUMN attempt integer NOT NULL DEFAULT 1;
ALTER TABLE dispatch_outbox ADD COLUMN due_at timestamptz NOT NULL DEFAULT now();
-- Relayed rows are pruned once past the broker's deduplication window.
CREATE INDEX dispatch_outbox_relayed ON dispatch_outbox (relayed_at) WHERE relayed_at IS NOT NULL;

CREATE FUNCTION baton_job_to_outbox() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO dispatch_outbox (job_id, instance_id, job_type, attempt, due_at)
    VALUES (NEW.id, NEW.instance_id, NEW.job_type, NEW.attempt, NEW.run_at);
    RETURN NULL;
END
$$;

CREATE TRIGGER job_outbox_on_insert AFTER INSERT ON job
    FOR EACH ROW WHEN (NEW.dispatch_outbox AND NEW.status = 'UNLOCKED')
    EXECUTE FUNCTION baton_job_to_outbox();

CREATE TRIGGER job_outbox_on_requeue AFTER UPDATE OF status, run_at, attempt ON job
    FOR EACH ROW WHEN (NEW.dispatch_outbox AND NEW.status = 'UNLOCKED'
                       AND (OLD.status <> 'UNLOCKED' OR OLD.run_at <> NEW.run_at
                            OR OLD.attempt <> NEW.attempt))
    EXECUTE FUNCTION baton_job_to_outbox();
