"""SQL for payload retention: which payload objects an instance references, and the sweeper's walk
over ended instances (see ``engine.retention_ops``)."""

from __future__ import annotations

from baton.store.raw_sql import unsized

# Every payload path the given instances reference anywhere a reference can be stored: their
# input, output and variables, their steps' inputs, outputs and states, their jobs' payloads and
# pending events. Documents without a reference are skipped by a text probe before the walk.
# (Each list here is in the form whose length the planner does not read, ``unsized``: the walk's
# batches are mostly a few instances, and with ``= ANY($1)`` they were planned at every run.)
PATHS_OF = unsized(
    """
WITH docs AS (
    SELECT i.id AS instance_id, d.doc
      FROM instance i CROSS JOIN LATERAL (VALUES (i.input), (i.output), (i.variables)) AS d(doc)
     WHERE i.id = ANY(%(ids)s::uuid[])
    UNION ALL
    SELECT s.instance_id, d.doc
      FROM step_execution s
     CROSS JOIN LATERAL (VALUES (s.input), (s.output), (s.state)) AS d(doc)
     WHERE s.instance_id = ANY(%(ids)s::uuid[])
    UNION ALL
    SELECT j.instance_id, j.payload FROM job j WHERE j.instance_id = ANY(%(ids)s::uuid[])
    UNION ALL
    SELECT e.instance_id, e.payload FROM instance_event e
     WHERE e.instance_id = ANY(%(ids)s::uuid[])
)
SELECT DISTINCT d.instance_id, p #>> '{}' AS path
  FROM docs d CROSS JOIN LATERAL jsonb_path_query(d.doc, 'lax $.**."$payload"') AS p
 WHERE d.doc IS NOT NULL AND strpos(d.doc::text, '"$payload"') > 0
   AND jsonb_typeof(p) = 'string' AND left(p #>> '{}', 9) = 'payloads/'
""",
    ids="uuid",
    paths="text",
)

# Which of ``paths`` a running (or paused) instance still has as its input: a client may start
# several instances with one upload (inputPayloadPath); it is kept until the last of them ended.
# Through a partial expression index holding only the inputs that are references (instance
# inputs never change, so the index costs no HOT update). The engine's own objects (offloaded
# step inputs, instance outputs) belong to one instance each, and a step-output upload is the
# result of the one job it completed.
STILL_REFERENCED = unsized(
    """
SELECT i.input ->> '$payload' AS path FROM instance i
 WHERE i.input ? '$payload' AND i.input ->> '$payload' = ANY(%(paths)s::text[])
   AND i.status IN ('RUNNING', 'PAUSED')
""",
    ids="uuid",
    paths="text",
)

# The walk's mark; a sweeper that finds it locked by another leaves retention to that one.
LOCK_MARK = """
SELECT ended_at, instance_id FROM payload_retention_mark FOR UPDATE SKIP LOCKED
"""

# The next instances that ended after the mark, in the order they ended. Only those that ended
# ``lag`` seconds ago or more: an instance's completed_at is its ending transaction's start, so
# one committed a moment after a later one started must not be passed over.
ENDED_SINCE = """
SELECT id, completed_at FROM instance
 WHERE completed_at IS NOT NULL
   AND (completed_at, id) > (%(ended_at)s::timestamptz, %(instance_id)s::uuid)
   AND completed_at < now() - make_interval(secs => %(lag)s)
 ORDER BY completed_at, id
 LIMIT %(limit)s
"""

ADVANCE_MARK = """
UPDATE payload_retention_mark SET ended_at = %(ended_at)s, instance_id = %(instance_id)s
"""

# Which of the given instances run again (reopened by a retry or a restart meanwhile).
RUNNING_AMONG = unsized(
    """
SELECT id FROM instance WHERE id = ANY(%(ids)s::uuid[]) AND status IN ('RUNNING', 'PAUSED')
""",
    ids="uuid",
    paths="text",
)
