-- Schedules (issue 32): a row per schedule, a row per slot (a time the schedule fires), keyed
-- (schedule_id, slot_time) so that two duty loops racing on the same slot fire it once. A slot
-- is materialized by the duty loop once its time has come (``materialized_until`` says how far),
-- then claimed under the schedule's row lock (SKIP LOCKED) and settled with its outcome: the slot
-- rows are the schedule's recent actions.
CREATE TABLE IF NOT EXISTS schedule (
    id                      text PRIMARY KEY,
    definition_name         text NOT NULL,
    definition_version      integer,
    input                   jsonb NOT NULL DEFAULT '{}'::jsonb,
    spec                    jsonb NOT NULL,
    overlap_policy          text NOT NULL DEFAULT 'SKIP',
    catchup_window_seconds  integer NOT NULL DEFAULT 60,
    pause_on_failure        boolean NOT NULL DEFAULT false,
    paused                  boolean NOT NULL DEFAULT false,
    note                    text,
    materialized_until      timestamptz NOT NULL,
    -- The first slot time after materialized_until (NULL: none, endAt passed): the duty loop
    -- reads only the schedules whose next slot has come.
    next_fire_at            timestamptz,
    last_instance_id        uuid,
    created_at              timestamptz NOT NULL DEFAULT now(),
    updated_at              timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX IF NOT EXISTS schedule_to_materialize
    ON schedule (next_fire_at) WHERE NOT paused AND next_fire_at IS NOT NULL;

CREATE TABLE IF NOT EXISTS schedule_slot (
    schedule_id  text NOT NULL REFERENCES schedule (id) ON DELETE CASCADE,
    slot_time    timestamptz NOT NULL,
    due_at       timestamptz NOT NULL,
    -- SCHEDULED (from the spec), TRIGGER (trigger now), BACKFILL
    kind         text NOT NULL DEFAULT 'SCHEDULED',
    -- PENDING, BUFFERED (waiting for the run before it), STARTED, SKIPPED, MISSED, FAILED
    status       text NOT NULL DEFAULT 'PENDING',
    instance_id  uuid,
    detail       text,
    settled_at   timestamptz,
    PRIMARY KEY (schedule_id, slot_time)
);

-- The duty loop's question: which slots are due now.
CREATE INDEX IF NOT EXISTS schedule_slot_due
    ON schedule_slot (due_at) WHERE status IN ('PENDING', 'BUFFERED');
-- A schedule's recent actions.
CREATE INDEX IF NOT EXISTS schedule_slot_settled
    ON schedule_slot (schedule_id, settled_at DESC) WHERE settled_at IS NOT NULL;
