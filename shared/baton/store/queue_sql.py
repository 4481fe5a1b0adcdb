"""SQL for named priority queues: push, dequeue (SKIP LOCKED), ack/nack, visibility, stats."""

from __future__ import annotations

PUSH = """
INSERT INTO queue_task (id, queue_name, title, body, priority, status, max_retries)
VALUES (%(id)s, %(queue)s, %(title)s, %(body)s, %(priority)s, 'pending', %(max_retries)s)
RETURNING id, queue_name, status, priority, created_at
"""

# A lapsed claim: back to pending with the count raised, or dead at max_retries. Runs before a
# dequeue (so a lapsed task is visible at once) and on the dispatcher's tick.
RECYCLE_EXPIRED = """
WITH expired AS (
    SELECT id FROM queue_task q
     WHERE status = 'processing' AND visibility_expires_at < now()
       AND (%(queue)s::text IS NULL OR queue_name = %(queue)s)
       -- A task a trigger handed to an instance belongs to that instance until it ends (its end
       -- settles the task): never recycled while the instance runs, whatever the visibility.
       AND NOT EXISTS (SELECT 1 FROM instance i
                        WHERE i.id = q.instance_id AND i.status = 'RUNNING')
     ORDER BY visibility_expires_at
     LIMIT %(limit)s
       FOR UPDATE SKIP LOCKED
)
UPDATE queue_task q
   SET retry_count = q.retry_count + 1,
       status = CASE WHEN q.retry_count + 1 >= q.max_retries THEN 'dead' ELSE 'pending' END,
       last_error = 'visibility timeout expired',
       receipt = NULL, consumer_id = NULL, visibility_expires_at = NULL, updated_at = now()
  FROM expired
 WHERE q.id = expired.id
RETURNING q.id, q.queue_name, q.status
"""

DEQUEUE = """
WITH picked AS (
    SELECT id FROM queue_task
     WHERE queue_name = %(queue)s AND status = 'pending'
     ORDER BY priority DESC, created_at, id
     LIMIT %(max_tasks)s
       FOR UPDATE SKIP LOCKED
)
UPDATE queue_task q
   SET status = 'processing', receipt = gen_random_uuid(), consumer_id = %(consumer)s,
       visibility_expires_at = now() + make_interval(secs => %(visibility)s),
       dequeued_at = now(), updated_at = now()
  FROM picked
 WHERE q.id = picked.id
RETURNING q.id, q.queue_name, q.title, q.body, q.priority, q.retry_count, q.max_retries,
          q.receipt, q.visibility_expires_at, q.created_at, now() - q.created_at AS latency
"""

ACK = """
UPDATE queue_task
   SET status = 'completed', completed_at = now(), updated_at = now(),
       visibility_expires_at = NULL
 WHERE id = %(id)s AND queue_name = %(queue)s AND status = 'processing' AND receipt = %(receipt)s
RETURNING id, status
"""

# A failure: retry (pending, count + 1) or dead at max_retries; ``retryable`` false: failed.
NACK = """
UPDATE queue_task
   SET retry_count = retry_count + 1,
       status = CASE WHEN NOT %(retryable)s THEN 'failed'
                     WHEN retry_count + 1 >= max_retries THEN 'dead'
                     ELSE 'pending' END,
       last_error = %(error)s, receipt = NULL, consumer_id = NULL,
       visibility_expires_at = NULL, instance_id = NULL, updated_at = now(),
       completed_at = CASE WHEN NOT %(retryable)s OR retry_count + 1 >= max_retries
                           THEN now() END
 WHERE id = %(id)s AND queue_name = %(queue)s AND status = 'processing' AND receipt = %(receipt)s
RETURNING id, status, retry_count
"""

TASK_STATE = """
SELECT id, status, receipt FROM queue_task WHERE id = %(id)s AND queue_name = %(queue)s
"""

STATS = """
SELECT status, count(*) AS n FROM queue_task WHERE queue_name = %(queue)s GROUP BY status
"""

PEEK = """
SELECT id, queue_name, title, body, priority, retry_count, max_retries, created_at
  FROM queue_task
 WHERE queue_name = %(queue)s AND status = 'pending'
 ORDER BY priority DESC, created_at, id
 LIMIT %(limit)s
"""

PURGE = "DELETE FROM queue_task WHERE queue_name = %(queue)s"

DEPTH_BY_STATE = """
SELECT queue_name, status, count(*) AS n FROM queue_task
 WHERE status IN ('pending', 'processing', 'dead')
 GROUP BY queue_name, status
"""

# --- queue triggers ---------------------------------------------------------------------------

# Only the latest version of a definition counts: registering a version without a trigger
# (or with a disabled one) stops the older version's trigger.
TRIGGERS_FOR_QUEUE = """
SELECT name, version, body, trigger_queue
  FROM (SELECT DISTINCT ON (name) name, version, body, trigger_queue
          FROM definition
         WHERE name IN (SELECT name FROM definition WHERE trigger_queue IS NOT NULL)
         ORDER BY name, version DESC) latest
 WHERE trigger_queue IS NOT NULL AND (%(queue)s::text IS NULL OR trigger_queue = %(queue)s)
"""

LOCK_TRIGGER = """
INSERT INTO queue_trigger_state (definition_name) VALUES (%(name)s)
ON CONFLICT (definition_name) DO NOTHING
"""

LOCK_TRIGGER_ROW = """
SELECT next_poll_at <= now() AS due FROM queue_trigger_state
 WHERE definition_name = %(name)s
   FOR UPDATE
"""

SET_NEXT_POLL = """
UPDATE queue_trigger_state
   SET next_poll_at = now() + make_interval(secs => %(seconds)s)
 WHERE definition_name = %(name)s
"""

IN_FLIGHT = """
SELECT count(*) AS n FROM queue_task
 WHERE queue_name = %(queue)s AND status = 'processing' AND consumer_id = %(consumer)s
"""

# A queue trigger's dequeue: the same pick, and each task is claimed FOR the instance that will
# process it, named here (the dispatcher starts the instance with this id in the same
# transaction). The task belongs to that instance until the instance ends, and the end settles it
# (SETTLE_FOR_INSTANCE, in the instance's own statement): whichever decision ends the instance,
# even the start itself, finds the task already naming it. Its claim never lapses on its own
# (no visibility deadline), and the trigger's maxRetries governs its retries.
DEQUEUE_FOR_TRIGGER = """
WITH picked AS (
    SELECT id FROM queue_task
     WHERE queue_name = %(queue)s AND status = 'pending'
     ORDER BY priority DESC, created_at, id
     LIMIT %(max_tasks)s
       FOR UPDATE SKIP LOCKED
)
UPDATE queue_task q
   SET status = 'processing', receipt = gen_random_uuid(), consumer_id = %(consumer)s,
       instance_id = gen_random_uuid(), max_retries = %(max_retries)s,
       visibility_expires_at = NULL, dequeued_at = now(), updated_at = now()
  FROM picked
 WHERE q.id = picked.id
RETURNING q.id, q.queue_name, q.title, q.body, q.priority, q.instance_id,
          now() - q.created_at AS latency
"""

# The end of a queue-triggered instance settles its task, in the instance's own statement:
# ``completed``; ``retry`` (back to pending, or dead at max_retries); ``failed`` (the instance was
# cancelled: given up on purpose, not retried).
SETTLE_FOR_INSTANCE = """
UPDATE queue_task
   SET retry_count = retry_count + CASE WHEN %(outcome)s = 'retry' THEN 1 ELSE 0 END,
       status = CASE WHEN %(outcome)s <> 'retry' THEN %(outcome)s
                     WHEN retry_count + 1 >= max_retries THEN 'dead'
                     ELSE 'pending' END,
       last_error = CASE WHEN %(outcome)s = 'completed' THEN last_error ELSE %(error)s END,
       receipt = NULL, consumer_id = NULL, visibility_expires_at = NULL, instance_id = NULL,
       completed_at = CASE WHEN %(outcome)s <> 'retry' OR retry_count + 1 >= max_retries
                           THEN now() END,
       updated_at = now()
 WHERE id = %(id)s AND status = 'processing' AND instance_id = %(instance_id)s /*after*/
RETURNING 1
"""

# --- inspection and dead letters -------------------------------------------------------------

# A page of queue names (every name holding at least one task), by name. A loose index scan:
# each step seeks the next name on queue_task_by_queue instead of reading every task; the
# outer LIMIT stops the recursion. Then each queue's counts by status from the same index.
QUEUES_PAGE = """
WITH RECURSIVE names AS (
    (SELECT queue_name FROM queue_task WHERE queue_name > %(after)s
      ORDER BY queue_name LIMIT 1)
    UNION ALL
    SELECT (SELECT q.queue_name FROM queue_task q WHERE q.queue_name > n.queue_name
             ORDER BY q.queue_name LIMIT 1)
      FROM names n
     WHERE n.queue_name IS NOT NULL
), page AS (
    SELECT queue_name FROM names WHERE queue_name IS NOT NULL LIMIT %(limit)s
)
SELECT p.queue_name, q.status, count(*) AS n
  FROM page p JOIN queue_task q ON q.queue_name = p.queue_name
 GROUP BY p.queue_name, q.status
 ORDER BY p.queue_name
"""

# A page of a queue's tasks, oldest first, optionally of one status. Bodies are cut to
# %(body_chars)s characters: a listing is for looking, and its pages must stay small.
TASKS_PAGE = """
SELECT id, queue_name, title, left(body, %(body_chars)s) AS body,
       char_length(body) > %(body_chars)s AS body_truncated, priority, status, retry_count,
       max_retries, last_error, instance_id, visibility_expires_at, created_at, updated_at,
       completed_at
  FROM queue_task
 WHERE queue_name = %(queue)s
   AND (%(status)s::text IS NULL OR status = %(status)s)
   AND (%(after_created)s::timestamptz IS NULL
        OR (created_at, id) > (%(after_created)s::timestamptz, %(after_id)s::uuid))
 ORDER BY created_at, id
 LIMIT %(limit)s
"""

# Dead letters back to work, as SQS redrives them: pending with the retry count reset (the
# last error is kept, to say why it died). Oldest first, at most %(limit)s per call.
REDRIVE_ALL = """
WITH picked AS (
    SELECT id FROM queue_task
     WHERE queue_name = %(queue)s AND status = 'dead'
     ORDER BY created_at, id
     LIMIT %(limit)s
       FOR UPDATE SKIP LOCKED
)
UPDATE queue_task q
   SET status = 'pending', retry_count = 0, receipt = NULL, consumer_id = NULL,
       visibility_expires_at = NULL, instance_id = NULL, completed_at = NULL, updated_at = now()
  FROM picked
 WHERE q.id = picked.id
RETURNING q.id
"""

REDRIVE_NAMED = """
UPDATE queue_task
   SET status = 'pending', retry_count = 0, receipt = NULL, consumer_id = NULL,
       visibility_expires_at = NULL, instance_id = NULL, completed_at = NULL, updated_at = now()
 WHERE queue_name = %(queue)s AND status = 'dead' AND id = ANY(%(ids)s::uuid[])
RETURNING id
"""

STATUS_OF_TASKS = """
SELECT id, status FROM queue_task WHERE queue_name = %(queue)s AND id = ANY(%(ids)s::uuid[])
"""

DEAD_COUNT = """
SELECT count(*) AS n FROM queue_task WHERE queue_name = %(queue)s AND status = 'dead'
"""
