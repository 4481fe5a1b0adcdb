"""The batch's common shape, decided without a decider: a worker's result that completes the only
step of a running top-level instance, which then completes with its variables as its output.

``complete_batch`` sees this shape for nearly every result of a drain of one-step workflows, and
for it the general decider (``engine.decide``) does the same few things every time: it marks the
job COMPLETED and audits it, completes the step with the output, merges an object output into the
variables, finds no next step in the root list, and ends the instance COMPLETED with its
variables as output. Building a decider for that (its state, its work queue, its plan walks) cost
more client CPU than everything else the batch does for the result. :func:`settle` writes the
same :class:`~baton.engine.records.Changes` directly, and only when every condition below holds;
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
from baton.engine.records import (
    AuditEvent,
    Changes,
    InstanceState,
    JobRef,
    StepUpdate,
    limit_of_kind,
)
from baton.payload_ref import is_payload_ref
from baton.settings import PayloadLimits
from baton.status import InstanceStatus, JobStatus, StepStatus


def settle(
    plan: Plan,
    state: InstanceState,
    row: dict[str, Any],
    job: JobRef,
    *,
    worker_id: str,
    attempt: int | None,
    output: Any,
    offload: bool,
    payload_limits: PayloadLimits | None,
) -> Changes | None:
    """The decision of ``output`` completing ``job`` of ``state`` (moved on in place, as the
    decider moves its instance), or None when the result is not of the common shape."""
    if not _holds_current(row, worker_id, attempt):
        return None  # a repeat, a late or a refused result: the verdicts decide it
    if (
        job.scope != ""
        or state.status != InstanceStatus.RUNNING
        or state.parent_instance_id is not None
        or state.queue_task_id is not None
        or not _last_root_task(plan, job.step_id)
    ):
        return None
    variables = state.variables
    if isinstance(output, dict) and output and not is_payload_ref(output):
        variables = {**variables, **output}
    if offload and payload_limits is not None:
        # The decider stores an instance output above its soft limit in the payload bucket.
        size = len(json.dumps(variables, separators=(",", ":")))
        if size > limit_of_kind(payload_limits, "WORKFLOW_OUTPUT").soft_bytes:
            return None
    changes = Changes()
    changes.completed_jobs.append(job)
    detail = {"attempt": job.attempt, "workerId": job.worker_id}
    changes.audit.append(AuditEvent("JOB_COMPLETED", job.id, detail))
    changes.step_updates[job.step_execution_id] = StepUpdate(
        job.step_execution_id, StepStatus.COMPLETED, output=output, error="", scope=""
    )
    changes.instance_changed = True
    state.variables = variables
    state.output = dict(variables)
    state.status = InstanceStatus.COMPLETED
    state.reason = None
    changes.audit.append(AuditEvent("INSTANCE_COMPLETED", None, None))
    changes.counters["JobsCompleted"] = 1
    changes.counters["InstancesCompleted"] = 1
    return changes


def _holds_current(row: dict[str, Any], worker_id: str, attempt: int | None) -> bool:
    """The result of the attempt in flight, by the worker holding its lease: the verdict that
    applies it as it is (``verdicts.completion_verdict``'s "apply")."""
    return bool(
        row["job_status"] == JobStatus.LOCKED
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
