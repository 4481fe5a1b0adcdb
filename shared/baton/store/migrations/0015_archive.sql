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
