-- Retention and archive (docs/archive.md): a terminal instance past its retention is written to
-- S3 as one gzip JSON document, then its rows are deleted. What stays is one small row per
-- archived instance: where its document is, and what a search by definition and time needs.
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

-- An archiver's claim on an instance while it writes the document (outside any transaction):
-- another archiver leaves a claimed instance alone until the claim lapses (a crashed one), so
-- each instance is written and deleted by one archiver; the token says whose claim it is.
CREATE TABLE archive_claim (
    instance_id  uuid        PRIMARY KEY,
    token        uuid        NOT NULL,
    claimed_at   timestamptz NOT NULL DEFAULT now()
);

-- Deleting step executions (an archive batch, DELETE of an instance) cascades to their jobs
-- through job's foreign key, and job has no index on step_execution_id (each job index costs
-- every job transition a write, migration 0003): each deleted execution was a scan of the whole
-- job table (an archive batch of 100 instances took a second on 30,000 jobs). The key now names
-- the instance too, so the cascade finds the jobs through job_by_instance; the executions get
-- the unique (instance_id, id) index it references (neither column ever changes, so their
-- updates stay HOT).
CREATE UNIQUE INDEX step_execution_instance_and_id ON step_execution (instance_id, id);
ALTER TABLE job ADD CONSTRAINT job_step_execution_fkey
    FOREIGN KEY (instance_id, step_execution_id) REFERENCES step_execution (instance_id, id)
    ON DELETE CASCADE NOT VALID;
ALTER TABLE job VALIDATE CONSTRAINT job_step_execution_fkey;
ALTER TABLE job DROP CONSTRAINT job_step_execution_id_fkey;
