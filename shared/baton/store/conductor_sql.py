"""SQL for the Conductor-compatible surface: leases as Conductor workers expect them, the
IN_PROGRESS callback, and task logs kept in the audit log with their job."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from baton.store.raw_sql import unsized_array

# Conductor workers never heartbeat: a job whose lease is Baton's default (no task definition
# and no step setting chose one) is leased for Conductor's default responseTimeoutSeconds.
LEASE_FOR_CONDUCTOR = """
UPDATE job
   SET lease_seconds = %(seconds)s,
       lock_expires_at = locked_at + make_interval(secs => %(seconds)s)
 WHERE id = ANY(%(ids)s::uuid[])
   AND status = 'LOCKED'
   AND worker_id = %(worker_id)s
   AND lease_seconds = %(default_seconds)s
   AND NOT EXISTS (SELECT 1 FROM task_def t WHERE t.name = job.job_type)
RETURNING id, lock_expires_at
"""

# A job's task as Conductor names it: a dynamic fork's task (a job inside a keyed MAP's item,
# directly or in the SWITCH choosing the task by its type) is its item's key, and a task inside
# a DO_WHILE carries the iteration of the innermost loop it runs in (``<ref>__<iteration>``):
# the first step execution up the job's that has one (a loop's body steps do).
TASK_REFERENCES = """
SELECT j.id,
       CASE WHEN p.step_type = 'MAP' THEN p.input -> 'keys' ->> s.item_index
            WHEN p.step_type = 'SWITCH' AND g.step_type = 'MAP'
                 THEN g.input -> 'keys' ->> p.item_index
       END AS reference,
       coalesce(s.iteration, p.iteration, g.iteration, CASE WHEN g.parent_step_execution_id
                IS NOT NULL THEN (
            WITH RECURSIVE up (parent, iteration, depth) AS (
                SELECT g.parent_step_execution_id, NULL::integer, 0
                UNION ALL
                SELECT x.parent_step_execution_id, x.iteration, up.depth + 1
                  FROM up JOIN step_execution x ON x.id = up.parent
                 WHERE up.iteration IS NULL AND up.depth < 1000
            )
            SELECT iteration
              FROM up WHERE iteration IS NOT NULL LIMIT 1
       ) END) AS iteration
  FROM job j
  JOIN step_execution s ON s.id = j.step_execution_id
  LEFT JOIN step_execution p ON p.id = s.parent_step_execution_id
  LEFT JOIN step_execution g ON g.id = p.parent_step_execution_id
 WHERE j.id = ANY(%(ids_unsized)s)
""".replace("%(ids_unsized)s", unsized_array("ids", "uuid"))

# IN_PROGRESS with callbackAfterSeconds: the same attempt is handed out again once due.
POSTPONE = """
WITH j AS (
    UPDATE job
       SET status = 'UNLOCKED',
           run_at = now() + make_interval(secs => %(seconds)s),
           locked_at = NULL,
           lock_expires_at = NULL,
           deadline_at = NULL
     WHERE id = %(job_id)s
       AND status = 'LOCKED'
       AND worker_id = %(worker_id)s
       AND (%(attempt)s::int IS NULL OR attempt = %(attempt)s::int)
    RETURNING id, instance_id, step_execution_id, attempt
), s AS (
    UPDATE step_execution SET status = 'SCHEDULED', updated_at = now()
      FROM j WHERE step_execution.id = j.step_execution_id
    RETURNING step_execution.id
), a AS (
    INSERT INTO audit_log (instance_id, job_id, event, detail)
    SELECT instance_id, id, 'JOB_CALLBACK_LATER',
           jsonb_build_object('attempt', attempt, 'seconds', %(seconds)s::int)
      FROM j
)
SELECT id FROM j
"""

EXTEND = """
UPDATE job SET lock_expires_at = now() + make_interval(secs => lease_seconds)
 WHERE id = %(job_id)s AND status = 'LOCKED' AND worker_id = %(worker_id)s
RETURNING id
"""

JOB_STATE = """
SELECT j.id, j.status, j.attempt, j.worker_id, j.job_type, j.instance_id,
       i.status AS instance_status
  FROM job j JOIN instance i ON i.id = j.instance_id
 WHERE j.id = %(job_id)s
"""

ADD_LOGS = """
INSERT INTO audit_log (instance_id, job_id, event, detail)
SELECT instance_id, id, 'TASK_LOGS',
       jsonb_build_object('attempt', %(attempt)s::int, 'logs', %(logs)s::jsonb)
  FROM job WHERE id = %(job_id)s
"""

LOGS_OF_JOB = """
SELECT detail FROM audit_log
 WHERE job_id = %(job_id)s AND event = 'TASK_LOGS'
 ORDER BY id
"""


# Conductor's search: offset paging (start, size) and a total, over conditions on the instance's
# columns (Conductor's query: ``field = v``, ``field IN (a,b)``, ``field > v``, ``field < v``, a
# ``*`` in a single value matching anything) and its free text (an id or a correlation id).
SEARCH_COLUMNS = frozenset(
    {
        "id",
        "correlation_id",
        "definition_name",
        "status",
        "created_at",
        "completed_at",
        "updated_at",
        "parent_instance_id",
    }
)
SEARCH_OPERATORS = frozenset({"=", ">", "<", "IN", "LIKE"})
SEARCH_ORDERS = frozenset({"ASC", "DESC"})

_SEARCH_COLUMNS_READ = """
SELECT i.id, i.definition_name, i.definition_version, i.status, i.input, i.variables, i.output,
       i.reason, i.version, i.correlation_id, i.idempotency_key, i.parent_instance_id,
       i.parent_step_execution_id, i.created_at, i.updated_at, i.completed_at, i.timeout_at,
       i.run
  FROM instance i"""


class Condition(NamedTuple):
    """One condition of a search: ``column`` (of SEARCH_COLUMNS) ``operator`` (of
    SEARCH_OPERATORS) its ``values`` (IN: any of them; the others: the first)."""

    column: str
    operator: str
    values: tuple[Any, ...]


def search_sql(
    conditions: Sequence[Condition], sort: Sequence[tuple[str, str]]
) -> tuple[str, str, dict[str, Any]]:
    """(count, page, their parameters besides start, size, cap and free): the statements of a
    search. Columns, operators and orders come from their sets only; values are parameters."""
    where = ["(%(free)s::text IS NULL OR i.id::text = %(free)s OR i.correlation_id = %(free)s)"]
    params: dict[str, Any] = {}
    for k, c in enumerate(conditions):
        if c.column not in SEARCH_COLUMNS or c.operator not in SEARCH_OPERATORS:
            raise ValueError(f"not a search condition: {c}")
        name = f"c{k}"
        if c.operator == "IN":
            where.append(f"i.{c.column} = ANY(%({name})s)")
            params[name] = list(c.values)
        else:
            where.append(f"i.{c.column} {c.operator} %({name})s")
            params[name] = c.values[0]
    order = []
    for column, direction in sort:
        if column not in SEARCH_COLUMNS or direction not in SEARCH_ORDERS:
            raise ValueError(f"not a search order: {column} {direction}")
        order.append(f"i.{column} {direction}")
    order += ["i.created_at DESC", "i.id DESC"]
    filters = " WHERE " + " AND ".join(where)
    # (Columns, operators and orders from their sets only: checked above.)
    count = (
        "SELECT count(*) AS n FROM (SELECT 1 FROM instance i"  # noqa: S608
        + filters
        + " LIMIT %(cap)s) AS hits"
    )
    page = (
        _SEARCH_COLUMNS_READ
        + filters
        + " ORDER BY "
        + ", ".join(order)
        + " OFFSET %(start)s LIMIT %(size)s"
    )
    return count, page, params
