-- A worker's stop signal (POST /v1/workers/stop): a long-poll the worker left waiting when it
-- stopped ends without claiming once it sees the worker's count of stops move. Behind API Gateway
-- a wait cannot see its client hang up; without this, a job made claimable during the rest of the
-- wait was leased to a worker that was gone, until the lease lapsed (then run as a new attempt).
-- One row per worker id; the sweeper forgets rows older than any wait (20 s) by far.
CREATE TABLE worker_stop (
    worker_id   text        PRIMARY KEY,
    stops       bigint      NOT NULL DEFAULT 1,
    stopped_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX worker_stop_by_time ON worker_stop (stopped_at);
