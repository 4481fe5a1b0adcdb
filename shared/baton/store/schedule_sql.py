"""SQL of schedules and their slots (migration 0013)."""

from __future__ import annotations

_COLUMNS = """id, definition_name, definition_version, input, spec, overlap_policy,
       catchup_window_seconds, pause_on_failure, paused, note, materialized_until,
       last_instance_id, created_at, updated_at"""

_SELECT = """SELECT id, definition_name, definition_version, input, spec, overlap_policy,
       catchup_window_seconds, pause_on_failure, paused, note, materialized_until,
       last_instance_id, created_at, updated_at
  FROM schedule"""

INSERT = (
    """
INSERT INTO schedule (id, definition_name, definition_version, input, spec, overlap_policy,
                      catchup_window_seconds, pause_on_failure, paused, note, materialized_until,
                      next_fire_at)
VALUES (%(id)s, %(definition_name)s, %(definition_version)s, %(input)s, %(spec)s,
        %(overlap_policy)s, %(catchup_window_seconds)s, %(pause_on_failure)s, %(paused)s,
        %(note)s, %(now)s, %(next_fire_at)s)
ON CONFLICT (id) DO NOTHING
RETURNING """
    + _COLUMNS
    + """
"""
)

GET = _SELECT + " WHERE id = %(id)s"

LOCK = _SELECT + " WHERE id = %(id)s FOR UPDATE"

LIST = (
    """
SELECT """
    + _COLUMNS
    + """ FROM schedule
 WHERE %(after)s::text IS NULL OR id > %(after)s
 ORDER BY id LIMIT %(limit)s
"""
)

UPDATE = (
    """
UPDATE schedule
   SET definition_name = %(definition_name)s, definition_version = %(definition_version)s,
       input = %(input)s, spec = %(spec)s, overlap_policy = %(overlap_policy)s,
       catchup_window_seconds = %(catchup_window_seconds)s,
       pause_on_failure = %(pause_on_failure)s, paused = %(paused)s, note = %(note)s,
       materialized_until = %(now)s, next_fire_at = %(next_fire_at)s, updated_at = now()
 WHERE id = %(id)s
RETURNING """
    + _COLUMNS
    + """
"""
)

# A spec change or an unpause starts from now: slots of the old spec, or of the paused time, that
# have not fired are dropped (they are not missed: nobody asked for them any more).
DROP_PENDING = """
DELETE FROM schedule_slot
 WHERE schedule_id = %(id)s AND status IN ('PENDING', 'BUFFERED') AND kind = 'SCHEDULED'
"""

SET_PAUSED = (
    """
UPDATE schedule
   SET paused = %(paused)s, note = %(note)s, updated_at = now(),
       materialized_until = CASE WHEN %(paused)s THEN materialized_until ELSE %(now)s END,
       next_fire_at = CASE WHEN %(paused)s THEN next_fire_at ELSE %(next_fire_at)s END
 WHERE id = %(id)s
RETURNING """
    + _COLUMNS
    + """
"""
)

DELETE = "DELETE FROM schedule WHERE id = %(id)s RETURNING id"

# Schedules whose slots up to now are not all rows yet; each taken by one duty loop.
TO_MATERIALIZE = (
    """
SELECT """
    + _COLUMNS
    + """ FROM schedule
 WHERE NOT paused AND next_fire_at <= %(now)s
 ORDER BY next_fire_at
 LIMIT %(limit)s
 FOR UPDATE SKIP LOCKED
"""
)

INSERT_SLOTS = """
INSERT INTO schedule_slot (schedule_id, slot_time, due_at, kind, status, detail, settled_at)
SELECT %(id)s, s.slot_time, s.due_at, %(kind)s, s.status, s.detail,
       CASE WHEN s.status = 'MISSED' THEN now() END
  FROM unnest(%(slot_times)s::timestamptz[], %(due_ats)s::timestamptz[], %(statuses)s::text[],
              %(details)s::text[]) AS s (slot_time, due_at, status, detail)
ON CONFLICT (schedule_id, slot_time) DO NOTHING
"""

SET_MATERIALIZED = """
UPDATE schedule SET materialized_until = %(until)s, next_fire_at = %(next_fire_at)s
 WHERE id = %(id)s
"""

# Schedules with a slot due: the loop locks each schedule (SKIP LOCKED) and fires its slots.
WITH_DUE_SLOTS = """
SELECT DISTINCT schedule_id FROM (
  SELECT schedule_id FROM schedule_slot
   WHERE status IN ('PENDING', 'BUFFERED') AND due_at <= %(now)s
   ORDER BY due_at LIMIT %(limit)s
) due
"""

LOCK_OR_SKIP = (
    """
SELECT """
    + _COLUMNS
    + """ FROM schedule WHERE id = %(id)s FOR UPDATE SKIP LOCKED
"""
)

DUE_SLOTS = """
SELECT schedule_id, slot_time, due_at, kind, status FROM schedule_slot
 WHERE schedule_id = %(id)s AND status IN ('PENDING', 'BUFFERED') AND due_at <= %(now)s
 ORDER BY slot_time
 LIMIT %(limit)s
 FOR UPDATE SKIP LOCKED
"""

SETTLE_SLOT = """
UPDATE schedule_slot
   SET status = %(status)s, instance_id = %(instance_id)s, detail = %(detail)s,
       settled_at = CASE WHEN %(status)s = 'BUFFERED' THEN NULL ELSE now() END
 WHERE schedule_id = %(id)s AND slot_time = %(slot_time)s
"""

SET_LAST_INSTANCE = """
UPDATE schedule SET last_instance_id = %(instance_id)s WHERE id = %(id)s
"""

PAUSE_AFTER_FAILURE = """
UPDATE schedule SET paused = true, note = %(note)s, updated_at = now() WHERE id = %(id)s
"""

INSTANCE_STATUS = "SELECT status FROM instance WHERE id = %(id)s"

INSERT_SLOT = """
INSERT INTO schedule_slot (schedule_id, slot_time, due_at, kind)
VALUES (%(id)s, %(slot_time)s, %(slot_time)s, %(kind)s)
ON CONFLICT (schedule_id, slot_time) DO UPDATE
   SET kind = EXCLUDED.kind, status = 'PENDING', due_at = EXCLUDED.due_at, settled_at = NULL,
       detail = NULL
 WHERE schedule_slot.status IN ('MISSED', 'SKIPPED')
RETURNING slot_time
"""

RECENT_ACTIONS = """
SELECT slot_time, kind, status, instance_id, detail, settled_at FROM schedule_slot
 WHERE schedule_id = %(id)s AND settled_at IS NOT NULL
 ORDER BY settled_at DESC, slot_time DESC
 LIMIT %(limit)s
"""

PENDING_COUNT = """
SELECT count(*) AS n FROM schedule_slot
 WHERE schedule_id = %(id)s AND status IN ('PENDING', 'BUFFERED')
"""
