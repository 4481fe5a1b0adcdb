"""SQL for the dispatch outbox (the opt-in event-driven mode, docs/dispatch.md).

Rows are written by a trigger on ``job`` (migration 0009) in the transaction that makes an
outbox-mode job claimable. The relay drains them in id order once due, inside a transaction that
holds a transaction-level advisory lock: whoever holds it is the one relay, and its marks commit
(become visible) before the lock is released, so the next holder never sees a row it published
as pending.
"""

from __future__ import annotations

# The relay's election: one key for the whole database, held for one drain transaction.
RELAY_LOCK_KEY = 0x0BA7_0003

TRY_LEAD = "SELECT pg_try_advisory_xact_lock(%(key)s) AS leader"

# Due rows in order, each with whether its job is still waiting for that very attempt (a row whose
# job was claimed by a poll, finished or re-queued under another attempt is marked, not sent).
DUE = """
SELECT o.id, o.job_id, o.instance_id, o.job_type, o.attempt, o.created_at, o.due_at,
       coalesce(j.status = 'UNLOCKED' AND j.attempt = o.attempt, false) AS live
  FROM dispatch_outbox o
  LEFT JOIN job j ON j.id = o.job_id
 WHERE o.relayed_at IS NULL AND o.due_at <= now()
 ORDER BY o.id
 LIMIT %(limit)s
   FOR UPDATE OF o
"""

MARK_RELAYED = "UPDATE dispatch_outbox SET relayed_at = now() WHERE id = ANY(%(ids)s::bigint[])"

# Relayed rows past the broker's deduplication window are of no further use.
PRUNE = """
DELETE FROM dispatch_outbox
 WHERE id IN (SELECT id FROM dispatch_outbox
               WHERE relayed_at IS NOT NULL
                 AND relayed_at < now() - make_interval(secs => %(keep_seconds)s)
               LIMIT %(limit)s)
"""

# Outbox depth (rows due and not relayed) and relay lag (how long the oldest of them has been due).
BACKLOG = """
SELECT count(*) AS depth,
       coalesce(extract(epoch FROM now() - min(due_at)), 0)::float8 AS lag_seconds
  FROM dispatch_outbox
 WHERE relayed_at IS NULL AND due_at <= now()
"""

# Local runtime only: its in-memory broker forgot everything at the restart, so relayed rows whose
# job still waits for that very attempt are relayed again.
REPUBLISH_WAITING = """
UPDATE dispatch_outbox o SET relayed_at = NULL
  FROM job j
 WHERE o.relayed_at IS NOT NULL AND j.id = o.job_id AND j.status = 'UNLOCKED'
   AND j.attempt = o.attempt
"""
