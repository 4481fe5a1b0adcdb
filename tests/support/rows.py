"""The rows a cohort of workflows left (instances whose definition name ends in ``-<cohort>``),
as comparable text: two cohorts driven through the same steps by different paths (single results
and batches) must leave the same text."""

from __future__ import annotations

import itertools
import pprint
import re
from typing import Any

import psycopg
from psycopg.rows import dict_row

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_TIME = re.compile(r"\d{4}-\d\d-\d\dT[0-9:.]+(Z|[+-]\d\d:\d\d)")


def cohort_rows(database_url: str, cohort: str, *, dispatch_order: bool = True) -> list[str]:
    """Every row the cohort's workflows left, with ids, times and the cohort's name taken out.

    ``dispatch_order`` False: the JOB_DISPATCHED rows of one claim are compared as a set. A claim
    takes jobs due at the same moment in any order; jobs that one decision made claimable are
    due at the same moment, where jobs made claimable by one decision each are not."""
    with psycopg.connect(database_url, autocommit=True, row_factory=dict_row) as conn:
        # Not the version: a batch writes one instance's results as one decision (one bump).
        instances = conn.execute(
            """SELECT id, definition_name, status, input, variables, output, reason,
                      step_count, completed_at IS NOT NULL AS ended, timeout_at
                 FROM instance WHERE definition_name LIKE %s
                ORDER BY definition_name, input ->> 'n'""",
            (f"%-{cohort}",),
        ).fetchall()
        out: dict[str, Any] = {}
        for k, inst in enumerate(instances):
            iid = inst.pop("id")
            steps = conn.execute(
                """SELECT step_id, step_type, status, attempt, input, output, error, scope,
                          branch, seq, started_at IS NOT NULL AS started,
                          completed_at IS NOT NULL AS ended, wake_at,
                          child_instance_id IS NOT NULL AS has_child
                     FROM step_execution WHERE instance_id = %s ORDER BY seq""",
                (iid,),
            ).fetchall()
            jobs = conn.execute(
                """SELECT s.step_id, j.job_type, j.status, j.attempt, j.retries_remaining,
                          j.payload, j.dispatch_outbox, j.deadline_at IS NOT NULL AS deadline,
                          j.lock_expires_at IS NOT NULL AS leased
                     FROM job j JOIN step_execution s ON s.id = j.step_execution_id
                    WHERE j.instance_id = %s ORDER BY s.seq""",
                (iid,),
            ).fetchall()
            audit = conn.execute(
                "SELECT event, detail FROM audit_log WHERE instance_id = %s ORDER BY id", (iid,)
            ).fetchall()
            if not dispatch_order:
                audit = _dispatches_sorted(audit)
            events = conn.execute(
                "SELECT kind, payload FROM instance_event WHERE instance_id = %s ORDER BY id",
                (iid,),
            ).fetchall()
            out[f"{k}"] = {"instance": inst, "steps": steps, "jobs": jobs, "audit": audit}
            out[f"{k}"]["events"] = events
    text = _TIME.sub("<time>", _UUID.sub("<id>", pprint.pformat(out, width=100)))
    text = text.replace(f"-{cohort}", "")
    return text.splitlines()


def _dispatches_sorted(audit: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``audit`` with each run of consecutive JOB_DISPATCHED rows in a fixed order."""
    out: list[dict[str, Any]] = []
    for dispatched, run in itertools.groupby(audit, key=lambda a: a["event"] == "JOB_DISPATCHED"):
        rows = list(run)
        out.extend(sorted(rows, key=pprint.pformat) if dispatched else rows)
    return out
