-- A failure workflow starts once the decision that failed its instance has committed, so that it
-- is told of the instance's tasks as they ended: the failing decision leaves the instance an
-- event (FAILURE_WORKFLOW), delivered by the operation after its commit, the sweeper being the
-- backstop. The events table is small (events live until delivered): checked at once.
ALTER TABLE instance_event DROP CONSTRAINT IF EXISTS instance_event_kind_check;
ALTER TABLE instance_event ADD CONSTRAINT instance_event_kind_check
    CHECK (kind IN ('CHILD_ENDED', 'CANCEL', 'CONTINUE', 'FAILURE_WORKFLOW'));
