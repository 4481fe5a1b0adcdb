-- Payload retention: the objects of an instance's offloaded payloads expire a retention period
-- after the instance ENDED, not after they were written (issue 13). The sweeper walks the ended
-- instances in the order they ended, from a mark it keeps here, and has each of their objects
-- copied onto itself with the tag baton-retention=ended (which restarts the object's age, so
-- the bucket's tag-filtered lifecycle rule deletes it payloadExpiryDays later).
-- Only ended instances are indexed (completed_at is NULL while one runs), so the index costs
-- one entry per instance end and nothing on the hot path of a running instance.
CREATE INDEX instance_ended ON instance (completed_at, id) WHERE completed_at IS NOT NULL;

-- One row: how far the walk has come. Its row lock serializes sweepers (another one skips
-- retention for that tick instead of waiting).
CREATE TABLE payload_retention_mark (
    singleton    boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    ended_at     timestamptz NOT NULL DEFAULT '1970-01-01T00:00:00Z',
    instance_id  uuid        NOT NULL DEFAULT '00000000-0000-0000-0000-000000000000'
);
INSERT INTO payload_retention_mark DEFAULT VALUES;

-- A client may start several instances with one upload: before retiring a path, the walk asks
-- whether a running instance still has it as its input. Only inputs that are references are
-- indexed (and an instance's input never changes: no HOT update is lost).
CREATE INDEX instance_input_payload ON instance ((input ->> '$payload'))
    WHERE input ? '$payload';
