"""The batch's common shape, decided without a decider: a worker's result that completes the only
step of a running top-level instance, which then completes with its variables as its output.

``complete_batch`` sees this shape for nearly every result of a drain of one-step workflows, and
for it the general decider (``engine.decide``) does the same few things every time: it marks the
job COMPLETED and audits it, completes the step with the output, merges an object output into the
variables, finds no next step in the root list, and ends the instance COMPLETED with its
variables as output. Building a decider for that (its state, its work queue, its plan walks) cost
more client CPU than everything else the batch does for the result. :func:`settle` builds the
rows the writer makes of the decider's changes directly (no state, no
:class:`~baton.engine.records.Changes`), and only when every condition below holds;
anything else (a late or refused result, a retry or a failure, a second step, a MAP item or a
branch, output parameters, permissive steps, a child or a queue-started instance, an output the
payload bucket would take) returns None and goes to the decider, which stays the one definition
of what a result does. ``tests/integration/test_one_step_batch.py`` compares the rows, audit
and answers of both ways.
"""

from __future__ import annotations

import json
from typing import Any

from baton.engine.plan import Plan
from baton.engine.records import limit_of_kind
from baton.engine.writer import Settled
from baton.payload_ref import is_payload_ref
from baton.settings import PayloadLimits


def settle(
    plan: Plan,
    row: dict[str, Any],
    *,
    worker_id: str,
    attempt: int | None,
    output: Any,
    offload: bool,
    payload_limits: PayloadLimits | None,
) -> Settled | None:
    """The decision of ``output`` completing the job of ``row`` (a job-with-instance row, as
    read or kept at the claim), as the rows it writes; None when the result is not of the
    common shape."""
    if not _holds_current(row, worker_id, attempt):
        return None  # a repeat, a late or a refused result: the verdicts decide it
    if (
        row["status"] != "RUNNING"
        or row.get("scope")
        or row.get("parent_instance_id") is not None
        or row.get("queue_task_id") is not None
        or not _last_root_task(plan, row["step_id"])
    ):
        return None
    variables = row["variables"]
    if isinstance(output, dict) and output and not is_payload_ref(output):
        variables = {**variables, **output}
    if offload and payload_limits is not None:
        # The decider stores an instance output above its soft limit in the payload bucket
        # (measured as it measures: json.dumps's ASCII text).
        size = len(json.dumps(variables, separators=(",", ":")))
        if size > limit_of_kind(payload_limits, "WORKFLOW_OUTPUT").soft_bytes:
            return None
    iid = row["id"]
    # The job COMPLETED (guarded by what was read) and audited, the step COMPLETED with the
    # output, the instance COMPLETED with its variables as output (fenced by its version),
    # audited: one row, which writer.Settled says how each statement writes.
    return Settled(
        iid,
        {
            "id": iid,
            "variables": variables,
            "expected": row["version"],
            "job_id": row["job_id"],
            "g_status": row["job_status"],
            "g_worker": row["worker_id"],
            "g_attempt": row["attempt"],
            "step_id": row["step_execution_id"],
            "output": output,
        },
    )


def _holds_current(row: dict[str, Any], worker_id: str, attempt: int | None) -> bool:
    """The result of the attempt in flight, by the worker holding its lease: the verdict that
    applies it as it is (``verdicts.completion_verdict``'s "apply")."""
    return bool(
        row["job_status"] == "LOCKED"
        and row["worker_id"] == worker_id
        and (attempt is None or attempt == row["attempt"])
    )


def _last_root_task(plan: Plan, step_id: str) -> bool:
    """Is ``step_id`` a SERVICE_TASK ending the root list of a definition without output
    parameters nor permissive steps (its completion completes the instance with its
    variables)?"""
    root = plan.root
    return bool(
        root
        and root[-1].id == step_id
        and root[-1].type == "SERVICE_TASK"
        and plan.definition.output_parameters is None
        and not plan.permissive  # a permissive failure before it fails the instance
    )
