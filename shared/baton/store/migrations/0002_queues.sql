-- Named priority queues with visibility timeout, retries and dead letter; queue-triggered
-- workflows. Additive only: the previous code version keeps working during a deploy.

CREATE TABLE queue_task (
    id                     uuid        PRIMARY KEY,
    queue_name             text        NOT NULL,
    title                  text        NOT NULL,
    body                   text        NOT NULL DEFAULT '',
    priority               integer     NOT NULL DEFAULT 0,
    status                 text        NOT NULL
        CHECK (status IN ('pending', 'processing', 'completed', 'failed', 'dead')),
    retry_count            integer     NOT NULL DEFAULT 0,
    max_retries            integer     NOT NULL DEFAULT 3 CHECK (max_retries >= 0),
    -- processing: when the claim lapses and the task becomes visible again (retry_count + 1)
    visibility_expires_at  timestamptz,
    receipt                uuid,       -- changes on every dequeue: only its holder can ack
    consumer_id            text,
    instance_id            uuid,       -- the instance a queue trigger started for it
    last_error             text,
    created_at             timestamptz NOT NULL DEFAULT now(),
    updated_at             timestamptz NOT NULL DEFAULT now(),
    dequeued_at            timestamptz,
    completed_at           timestamptz
);
-- Dequeue order: priority descending, then oldest first; only pending rows are indexed.
CREATE INDEX queue_task_pending ON queue_task (queue_name, priority DESC, created_at, id)
    WHERE status = 'pending';
CREATE INDEX queue_task_visibility ON queue_task (visibility_expires_at)
    WHERE status = 'processing';
CREATE INDEX queue_task_by_queue ON queue_task (queue_name, status);

-- The queue task an instance was started for: its end completes or fails the task.
ALTER TABLE instance ADD COLUMN queue_task_id uuid;

-- Latest definitions with a queue trigger, found without scanning every definition body.
ALTER TABLE definition ADD COLUMN trigger_queue text;
CREATE INDEX definition_by_trigger_queue ON definition (trigger_queue, name, version DESC)
    WHERE trigger_queue IS NOT NULL;

-- One row per queue trigger: serializes its dispatchers (row lock, not an advisory lock, so
-- RDS Proxy never pins) and remembers when an empty queue should next be polled.
CREATE TABLE queue_trigger_state (
    definition_name  text        PRIMARY KEY,
    next_poll_at     timestamptz NOT NULL DEFAULT now()
);
