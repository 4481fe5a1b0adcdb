-- Baton's schema as the migrations leave it, in one readable file: the canonical picture of the
-- database. tests/integration/test_migrations.py checks that a database built from this file and
-- one built by applying every migration in migrations/ are identical; a migration that changes
-- the schema changes this file in the same commit.
--
-- Every wake-up is a row with a due time (job.run_at, job.lock_expires_at, instance.timeout_at,
-- job.deadline_at): schedulers find work by query, never by an in-memory timer alone.

CREATE TABLE definition (
    name        text        NOT NULL,
    version     integer     NOT NULL CHECK (version > 0),
    body        jsonb       NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    -- The queue an enabled trigger consumes: triggered definitions are found without a scan.
    trigger_queue text,
    -- The Conductor definition as registered on /api (json keeps its every field and order), so
    -- GET /api/metadata/workflow reads it back exactly; NULL when registered on /v1.
    conductor   json,
    PRIMARY KEY (name, version)
);
CREATE INDEX definition_by_trigger_queue ON definition (trigger_queue, name, version DESC)
    WHERE trigger_queue IS NOT NULL;

CREATE TABLE task_def (
    name        text        PRIMARY KEY,
    body        jsonb       NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);

-- Immutable, content-addressed copies of the definition an instance runs (task definitions
-- embedded). Instances of one definition share a row, and processes cache the compiled plan by id.
CREATE TABLE definition_snapshot (
    id          bigserial   PRIMARY KEY,
    digest      text        NOT NULL UNIQUE,
    body        jsonb       NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    -- The Conductor WorkflowDef an inline start on /api gave (migration 0022), else NULL.
    conductor   json
);

CREATE TABLE instance (
    id                        uuid        PRIMARY KEY,
    definition_name           text        NOT NULL,
    definition_version        integer,            -- NULL for an inline (dynamic) definition
    snapshot_id               bigint      NOT NULL REFERENCES definition_snapshot (id),
    status                    text        NOT NULL
        CONSTRAINT instance_status_check
        CHECK (status IN ('RUNNING', 'PAUSED', 'COMPLETED', 'FAILED', 'TIMED_OUT', 'CANCELLED')),
    input                     jsonb       NOT NULL DEFAULT '{}',
    variables                 jsonb       NOT NULL DEFAULT '{}',
    output                    jsonb,
    reason                    text,
    version                   bigint      NOT NULL DEFAULT 1,   -- the fencing token
    correlation_id            text,
    idempotency_key           text,
    parent_instance_id        uuid,
    parent_step_execution_id  uuid,
    timeout_at                timestamptz,
    created_at                timestamptz NOT NULL DEFAULT now(),
    updated_at                timestamptz NOT NULL DEFAULT now(),
    completed_at              timestamptz,
    -- The queue task a queue trigger started this instance for: its end settles the task.
    queue_task_id             uuid,
    -- What an idempotent start asked for: a key reused with a different request is a conflict.
    idempotency_fingerprint   text,
    step_count                integer     NOT NULL DEFAULT 0,  -- step executions, for the limit
    depth                     integer     NOT NULL DEFAULT 0,  -- how deep in sub-workflows
    run                       integer     NOT NULL DEFAULT 1   -- restarts from the start count runs
) WITH (fillfactor = 80);
CREATE UNIQUE INDEX instance_idempotency_key ON instance (idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX instance_recent ON instance (created_at DESC, id DESC);
CREATE INDEX instance_by_status ON instance (status, created_at DESC, id DESC);
CREATE INDEX instance_by_definition ON instance (definition_name, created_at DESC, id DESC);
CREATE INDEX instance_by_correlation ON instance (correlation_id, created_at DESC, id DESC)
    WHERE correlation_id IS NOT NULL;
CREATE INDEX instance_timeout_due ON instance (timeout_at)
    WHERE status = 'RUNNING' AND timeout_at IS NOT NULL;
CREATE INDEX instance_by_parent ON instance (parent_instance_id) WHERE parent_instance_id IS NOT NULL;

-- Fencing: every update must carry version = (the version it read) + 1. A writer that read an
-- older version is refused by the database itself, whatever code path it came through.
CREATE FUNCTION baton_instance_fence() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.version IS DISTINCT FROM OLD.version + 1 THEN
        RAISE EXCEPTION 'stale instance version'
            USING ERRCODE = 'BT409',
                  DETAIL = OLD.id::text,
                  HINT = format('current version %s, write carried %s', OLD.version, NEW.version - 1);
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER instance_fence BEFORE UPDATE ON instance
    FOR EACH ROW EXECUTE FUNCTION baton_instance_fence();

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

CREATE TABLE step_execution (
    id            uuid        PRIMARY KEY,
    instance_id   uuid        NOT NULL REFERENCES instance (id) ON DELETE CASCADE,
    step_id       text        NOT NULL,
    step_type     text        NOT NULL,
    status        text        NOT NULL
        CHECK (status IN ('SCHEDULED', 'IN_PROGRESS', 'COMPLETED', 'FAILED', 'TIMED_OUT',
                          'CANCELLED', 'SKIPPED')),
    attempt       integer     NOT NULL DEFAULT 1,
    input         jsonb,
    output        jsonb,
    error         text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    started_at    timestamptz,
    completed_at  timestamptz,
    updated_at    timestamptz NOT NULL DEFAULT now(),
    -- Where it sits: the execution of the operator whose list it is in, and its place there.
    -- ``scope`` is the path of (operator execution, key) pairs from the root, e.g.
    -- '<parallel id>#b1/<map id>#i7/': every execution inside an operator's execution has that
    -- operator's path as a prefix, which is how a subtree is cancelled and how an expression
    -- finds the execution of a step it reads (the latest one in the list the two share).
    parent_step_execution_id uuid,
    scope         text        NOT NULL DEFAULT '',
    branch        integer,
    item_index    integer,
    iteration     integer,
    state         jsonb,       -- an operator's bookkeeping (branches ended, next item)
    wake_at       timestamptz, -- a TIMER's due time
    child_instance_id uuid,    -- a SUB_WORKFLOW's current child
    -- The order executions were created in, per instance (one statement creates many, so
    -- created_at cannot tell them apart): the instance's step_count before the decision plus
    -- the execution's place in it.
    seq           integer
) WITH (fillfactor = 80);
CREATE INDEX step_execution_by_instance ON step_execution (instance_id, step_id, seq);
-- What job's foreign key references (migration 0015); never updated: updates stay HOT.
CREATE UNIQUE INDEX step_execution_instance_and_id ON step_execution (instance_id, id);
CREATE INDEX step_execution_by_parent ON step_execution (parent_step_execution_id, step_id)
    WHERE parent_step_execution_id IS NOT NULL;
-- Pending timers only: wake_at is cleared when a timer ends, and the predicate names no column
-- other updates change, so a step's status changes stay HOT updates.
CREATE INDEX step_execution_timer_due ON step_execution (wake_at) WHERE wake_at IS NOT NULL;

CREATE TABLE job (
    id                   uuid        PRIMARY KEY,
    instance_id          uuid        NOT NULL REFERENCES instance (id) ON DELETE CASCADE,
    step_execution_id    uuid        NOT NULL,
    job_type             text        NOT NULL,
    status               text        NOT NULL
        CONSTRAINT job_status_check
        CHECK (status IN ('UNLOCKED', 'LOCKED', 'COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT')),
    worker_id            text,
    -- Workers whose lease on this job expired before they finished: a late complete from one of
    -- them is still accepted (once); a complete from a stranger is a conflict.
    previous_worker_ids  text[]      NOT NULL DEFAULT '{}',
    locked_at            timestamptz,
    lock_expires_at      timestamptz,
    lease_seconds        integer     NOT NULL CHECK (lease_seconds > 0),
    run_at               timestamptz NOT NULL DEFAULT now(),
    -- The one wake-up of a waiting or running job: UNLOCKED, when it must have been claimed
    -- (poll_timeout_seconds after it became due); LOCKED, when its attempt must have finished
    -- (timeout_seconds after the claim).
    deadline_at          timestamptz,
    attempt              integer     NOT NULL DEFAULT 1,
    retries_remaining    integer     NOT NULL CHECK (retries_remaining >= 0),
    deliveries           integer     NOT NULL DEFAULT 0,
    payload              jsonb       NOT NULL,
    payload_bytes        integer     NOT NULL DEFAULT 0,
    created_at           timestamptz NOT NULL DEFAULT now(),
    completed_at         timestamptz,
    timeout_seconds      integer     NOT NULL DEFAULT 0,
    poll_timeout_seconds integer     NOT NULL DEFAULT 0,
    -- Created under BATON_DISPATCH_MODE=outbox: each time it becomes claimable, a trigger writes
    -- a dispatch_outbox row (see below); polling-mode jobs never do.
    dispatch_outbox      boolean     NOT NULL DEFAULT false,
    -- Its step's totalTimeoutSeconds budget over all attempts, from the job's creation (the
    -- step's first scheduling); kept across retries, postponements and lapsed leases.
    total_deadline_at    timestamptz,
    -- Through the instance (migration 0015): deleting executions finds their jobs by
    -- job_by_instance (job has no index on step_execution_id).
    CONSTRAINT job_step_execution_fkey FOREIGN KEY (instance_id, step_execution_id)
        REFERENCES step_execution (instance_id, id) ON DELETE CASCADE
) WITH (fillfactor = 85);
-- The claim seeks ready jobs and expired leases per job type in these partial indexes, so poll
-- latency stays flat however many terminal rows (or other types' rows) pile up; the reaper skips
-- from type to type over the second.
CREATE INDEX job_claimable ON job (job_type, run_at) WHERE status = 'UNLOCKED';
CREATE INDEX job_lease_expiry_by_type ON job (job_type, lock_expires_at) WHERE status = 'LOCKED';
-- Every job update is non-HOT (status is in the partial-index predicates), so each index of the
-- job table costs a write per transition: steps find their job through job_by_instance.
CREATE INDEX job_by_instance ON job (instance_id);
-- The sweeper's: a job past its attempt's deadline or its step's totalTimeoutSeconds budget.
CREATE INDEX job_deadline ON job (least(deadline_at, total_deadline_at))
    WHERE status IN ('UNLOCKED', 'LOCKED')
      AND (deadline_at IS NOT NULL OR total_deadline_at IS NOT NULL);

-- Long-poll wake-ups: a process waiting for a job type keeps a row in job_waiter while it waits,
-- and only then does a transaction making a job of that type claimable send NOTIFY baton_job.
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

-- Waits on an instance (Conductor's synchronous execution; migrations 0019, 0021): a request
-- waiting for an instance keeps a job_waiter row 'instance/<id>' ('/' is in no job type), and
-- each write of that instance's row notifies it as it commits. Once per UPDATE statement (a
-- batch completion updates its instances in one), over the statement's updated rows; nobody
-- waiting: one probe of job_waiter per statement.
CREATE FUNCTION baton_instance_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('baton_job', w.job_type)
       FROM job_waiter w
      WHERE w.job_type LIKE 'instance/%' AND w.expires_at > now()
        AND EXISTS (SELECT 1 FROM updated_instances i
                     WHERE w.job_type = 'instance/' || i.id::text);
    RETURN NULL;
END
$$;
CREATE TRIGGER instance_notify AFTER UPDATE ON instance
    REFERENCING NEW TABLE AS updated_instances
    FOR EACH STATEMENT EXECUTE FUNCTION baton_instance_notify();

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

CREATE TABLE audit_log (
    id           bigserial   PRIMARY KEY,
    at           timestamptz NOT NULL DEFAULT now(),
    instance_id  uuid,
    job_id       uuid,
    event        text        NOT NULL,
    detail       jsonb
);
CREATE INDEX audit_log_by_instance ON audit_log (instance_id, id);

-- The opt-in event-driven dispatch mode (docs/dispatch.md): a row each time an outbox-mode job
-- becomes claimable, written by a trigger in the same transaction, drained in id order by the one
-- elected relay once due (SQS FIFO has no per-message delay), pruned after the dedup window.
CREATE TABLE dispatch_outbox (
    id            bigserial   PRIMARY KEY,
    job_id        uuid        NOT NULL,
    instance_id   uuid        NOT NULL,
    job_type      text        NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    relayed_at    timestamptz,
    attempt       integer     NOT NULL DEFAULT 1,
    due_at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX dispatch_outbox_pending ON dispatch_outbox (id) WHERE relayed_at IS NULL;
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

-- Named priority queues with visibility timeout, retries and dead letter.
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

-- One row per queue trigger: serializes its dispatchers (row lock, not an advisory lock, so
-- RDS Proxy never pins) and remembers when an empty queue should next be polled.
CREATE TABLE queue_trigger_state (
    definition_name  text        PRIMARY KEY,
    next_poll_at     timestamptz NOT NULL DEFAULT now()
);

-- Something an instance must act on that another transaction noticed without locking it: a
-- child ended, a parent asks its child to cancel, a continuation waits for a paused instance to
-- resume; or that an ended instance leaves itself: its failure workflow to start once the
-- decision that ended it has committed. Written by that transaction, acted on (and deleted) in a
-- decision that locks the instance: no transaction ever locks two instances, so parents and
-- children cannot deadlock.
CREATE TABLE instance_event (
    id                 bigserial   PRIMARY KEY,
    instance_id        uuid        NOT NULL REFERENCES instance (id) ON DELETE CASCADE,
    kind               text        NOT NULL
                                   CHECK (kind IN ('CHILD_ENDED', 'CANCEL', 'CONTINUE',
                                                   'FAILURE_WORKFLOW')),
    step_execution_id  uuid,
    payload            jsonb,
    created_at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX instance_event_by_instance ON instance_event (instance_id, id);

-- Payload retention (migration 0010): ended instances, walked in the order they ended from a
-- mark the sweeper keeps, have their payload objects tagged for the bucket's lifecycle rule.
CREATE INDEX instance_ended ON instance (completed_at, id) WHERE completed_at IS NOT NULL;
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

-- A worker's stop signal: a long-poll the worker left waiting ends once its count of stops moves
-- (see migrations/0011_worker_stop.sql). The sweeper forgets old rows.
CREATE TABLE worker_stop (
    worker_id   text        PRIMARY KEY,
    stops       bigint      NOT NULL DEFAULT 1,
    stopped_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX worker_stop_by_time ON worker_stop (stopped_at);

-- Schedules: a row per schedule, a row per slot keyed (schedule_id, slot_time) (migration 0013).

CREATE TABLE schedule (
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

CREATE INDEX schedule_to_materialize
    ON schedule (next_fire_at) WHERE NOT paused AND next_fire_at IS NOT NULL;

CREATE TABLE schedule_slot (
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
CREATE INDEX schedule_slot_due
    ON schedule_slot (due_at) WHERE status IN ('PENDING', 'BUFFERED');
-- A schedule's recent actions.
CREATE INDEX schedule_slot_settled
    ON schedule_slot (schedule_id, settled_at DESC) WHERE settled_at IS NOT NULL;

-- Retention and archive (migration 0015): one row per archived instance, and archivers' claims.
CREATE TABLE archived_instance (
    id                  uuid        PRIMARY KEY,
    object_key          text        NOT NULL,
    definition_name     text        NOT NULL,
    definition_version  integer,
    status              text        NOT NULL,
    correlation_id      text,
    parent_instance_id  uuid,
    created_at          timestamptz NOT NULL,
    completed_at        timestamptz NOT NULL,
    archived_at         timestamptz NOT NULL DEFAULT now(),
    size_bytes          bigint      NOT NULL
);
CREATE INDEX archived_instance_by_definition
    ON archived_instance (definition_name, completed_at DESC, id DESC);
CREATE INDEX archived_instance_by_end ON archived_instance (completed_at DESC, id DESC);

CREATE TABLE archive_claim (
    instance_id  uuid        PRIMARY KEY,
    token        uuid        NOT NULL,
    claimed_at   timestamptz NOT NULL DEFAULT now()
);
