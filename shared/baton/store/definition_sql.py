"""SQL for workflow definitions and task definitions."""

from __future__ import annotations

INSERT_NEXT_VERSION = """
INSERT INTO definition (name, version, body, trigger_queue, conductor)
SELECT %(name)s, coalesce(max(version), 0) + 1, %(body)s::jsonb, %(trigger_queue)s,
       %(conductor)s::json
  FROM definition WHERE name = %(name)s
ON CONFLICT (name, version) DO NOTHING
RETURNING name, version, created_at
"""

INSERT_VERSION = """
INSERT INTO definition (name, version, body, trigger_queue, conductor)
VALUES (%(name)s, %(version)s, %(body)s::jsonb, %(trigger_queue)s, %(conductor)s::json)
ON CONFLICT (name, version) DO NOTHING
RETURNING name, version, created_at
"""

GET_VERSION = """
SELECT name, version, body, created_at, conductor FROM definition
 WHERE name = %(name)s AND version = %(version)s
"""

GET_LATEST = """
SELECT name, version, body, created_at, conductor FROM definition
 WHERE name = %(name)s ORDER BY version DESC LIMIT 1
"""

DELETE_VERSION = """
DELETE FROM definition WHERE name = %(name)s AND version = %(version)s
RETURNING name, version, body, created_at
"""

LIST_LATEST = """
SELECT DISTINCT ON (name) name, version, body, created_at, conductor
  FROM definition
 WHERE %(after)s::text IS NULL OR name > %(after)s
 ORDER BY name, version DESC
 LIMIT %(limit)s
"""

UPSERT_TASK_DEF = """
INSERT INTO task_def (name, body) VALUES (%(name)s, %(body)s::jsonb)
ON CONFLICT (name) DO UPDATE SET body = EXCLUDED.body, updated_at = now()
RETURNING name, body, created_at, updated_at, (xmax = 0) AS created
"""

DELETE_TASK_DEF = """
DELETE FROM task_def WHERE name = %(name)s RETURNING name, body, created_at, updated_at
"""

GET_TASK_DEF = "SELECT name, body, created_at, updated_at FROM task_def WHERE name = %(name)s"


LIST_TASK_DEFS = """
SELECT name, body, created_at, updated_at FROM task_def
 WHERE %(after)s::text IS NULL OR name > %(after)s
 ORDER BY name LIMIT %(limit)s
"""

# A stored definition with the task definitions of every job type it names, in one round trip.
# ``strict $.**.jobType`` finds job types at any depth of nested step lists; an HTTP step's task
# definition is its name's (its id's without one: baton.engine.plan.http_task_def_name).
DEFINITION_WITH_TASK_DEFS = """
SELECT d.name, d.version, d.body::text AS body, d.conductor IS NOT NULL AS from_conductor,
       (SELECT jsonb_object_agg(t.name, t.body ORDER BY t.name)::text
          FROM task_def t
         WHERE t.name IN (SELECT jsonb_path_query(d.body, 'strict $.**.jobType') #>> '{}'
                          UNION ALL
                          SELECT coalesce(h ->> 'name', h ->> 'id')
                            FROM jsonb_path_query(
                                     d.body,
                                     'strict $.** ? (@.type == "HTTP" || @.type == "HTTP_POLL")'
                                 ) h)
       ) AS task_defs
  FROM definition d
 WHERE d.name = %(name)s AND (%(version)s::int IS NULL OR d.version = %(version)s)
 ORDER BY d.version DESC
 LIMIT 1
"""

TASK_DEFS_AS_TEXT = """
SELECT jsonb_object_agg(name, body ORDER BY name)::text AS task_defs
  FROM task_def WHERE name = ANY(%(names)s)
"""

# A job type's limits follow its task definition (same transaction); the window counters of an
# existing row are kept, so changing a limit does not reset the current rate window.
UPSERT_LIMIT = """
INSERT INTO job_type_limit (job_type, concurrent_limit, rate_per_window, rate_window_seconds)
VALUES (%(name)s, %(concurrent)s, %(rate_per)s, %(rate_seconds)s)
ON CONFLICT (job_type) DO UPDATE
   SET concurrent_limit = EXCLUDED.concurrent_limit, rate_per_window = EXCLUDED.rate_per_window,
       rate_window_seconds = EXCLUDED.rate_window_seconds
"""

DELETE_LIMIT = "DELETE FROM job_type_limit WHERE job_type = %(name)s"

# The limit row of an HTTP job type (``baton:http:<task definition>``) whose task definition no
# longer limits it: kept without limits, so the system tasks still claim its waiting jobs (they
# poll the HTTP types that have a row).
UNLIMIT = """
UPDATE job_type_limit
   SET concurrent_limit = NULL, rate_per_window = NULL, rate_window_seconds = NULL
 WHERE job_type = %(name)s
"""
