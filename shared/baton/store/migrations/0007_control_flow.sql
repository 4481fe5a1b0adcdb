-- Control flow: nested step executions (branches, items, iterations), timers, sub-workflows,
-- pause/resume, restart, and events between instances. Additive for the previous code version
-- (which writes none of the new values: every new column has a default or is nullable).

-- Where a step execution sits: the execution of the operator whose list it is in, and its place
-- there. ``scope`` is the path of (operator execution, key) pairs from the root, e.g.
-- '<parallel id>#b1/<map id>#i7/': every execution inside an operator's execution has that
-- operator's path as a prefix, which is how a subtree is cancelled and how an expression finds
-- the execution of a step it reads (the latest one in the list the two have in common).
ALTER TABLE step_execution
    ADD COLUMN parent_step_execution_id uuid,
    ADD COLUMN scope text NOT NULL DEFAULT '',
    ADD COLUMN branch integer,
    ADD COLUMN item_index integer,
    ADD COLUMN iteration integer,
    ADD COLUMN state jsonb,                -- an operator's bookkeeping (branches ended, next item)
    ADD COLUMN wake_at timestamptz,        -- a TIMER's due time
    ADD COLUMN child_instance_id uuid;     -- a SUB_WORKFLOW's current child
-- The order executions were created in, per instance (many are created by one statement, so
-- created_at, the transaction's time, cannot tell them apart): the instance's step_count when
-- the decision began plus the execution's place in the decision.
ALTER TABLE step_execution ADD COLUMN seq integer;
UPDATE step_execution s SET seq = o.n
  FROM (SELECT id, row_number() OVER (PARTITION BY instance_id ORDER BY created_at, id) AS n
          FROM step_execution) o
 WHERE o.id = s.id;
DROP INDEX step_execution_by_instance;
CREATE INDEX step_execution_by_instance ON step_execution (instance_id, step_id, seq);
CREATE INDEX step_execution_by_parent ON step_execution (parent_step_execution_id, step_id)
    WHERE parent_step_execution_id IS NOT NULL;
-- Pending timers only: wake_at is cleared when a timer ends, and the predicate names no column
-- other updates change, so a step's status changes stay HOT updates.
CREATE INDEX step_execution_timer_due ON step_execution (wake_at) WHERE wake_at IS NOT NULL;

ALTER TABLE instance DROP CONSTRAINT instance_status_check;
ALTER TABLE instance ADD CONSTRAINT instance_status_check
    CHECK (status IN ('RUNNING', 'PAUSED', 'COMPLETED', 'FAILED', 'TIMED_OUT', 'CANCELLED'));
ALTER TABLE instance
    ADD COLUMN step_count integer NOT NULL DEFAULT 0,  -- (backfilled below)  -- step executions created, for the limit
    ADD COLUMN depth integer NOT NULL DEFAULT 0,       -- how deep in sub-workflows
    ADD COLUMN run integer NOT NULL DEFAULT 1;         -- restarts from the start count runs
CREATE INDEX instance_by_parent ON instance (parent_instance_id) WHERE parent_instance_id IS NOT NULL;

-- Something an instance must act on that another transaction noticed without locking it: a
-- child ended, a parent asks its child to cancel, a continuation waits for a paused instance to
-- resume. Written by that transaction, acted on (and deleted) in a decision that locks the
-- instance: no transaction ever locks two instances, so parents and children cannot deadlock.
CREATE TABLE instance_event (
    id                 bigserial   PRIMARY KEY,
    instance_id        uuid        NOT NULL REFERENCES instance (id) ON DELETE CASCADE,
    kind               text        NOT NULL CHECK (kind IN ('CHILD_ENDED', 'CANCEL', 'CONTINUE')),
    step_execution_id  uuid,
    payload            jsonb,
    created_at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX instance_event_by_instance ON instance_event (instance_id, id);

UPDATE instance i SET step_count = c.n
  FROM (SELECT instance_id, count(*) AS n FROM step_execution GROUP BY instance_id) c
 WHERE c.instance_id = i.id;
