"""Rows shaped into the wire JSON of the REST contract (lowerCamelCase, ISO-8601 times)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from baton.model import TaskDef
from baton.store.job_sql import CLAIMED_KEYS


def ts(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat().replace("+00:00", "Z")


def _drop_none(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


def definition(row: dict[str, Any]) -> dict[str, Any]:
    body = dict(row["body"])
    body["name"] = row["name"]
    body["version"] = row["version"]
    body["createdAt"] = ts(row["created_at"])
    return body


def task_def(row: dict[str, Any]) -> dict[str, Any]:
    # Through the model: every field with the default that is enforced, whatever was stored.
    body = TaskDef.model_validate(row["body"]).wire()
    body["name"] = row["name"]
    body["createdAt"] = ts(row["created_at"])
    body["updatedAt"] = ts(row["updated_at"])
    return body


def step(row: dict[str, Any]) -> dict[str, Any]:
    return _drop_none(
        {
            "id": str(row["id"]),
            "stepId": row["step_id"],
            "type": row["step_type"],
            "status": row["status"],
            "attempt": row["attempt"],
            "attempts": _attempts(row),
            "input": row["input"],
            "output": row["output"],
            "error": row["error"],
            "jobId": None if row.get("job_id") is None else str(row["job_id"]),
            "jobType": row.get("job_type"),
            "workerId": row.get("worker_id"),
            "createdAt": ts(row["created_at"]),
            "startedAt": ts(row["started_at"]),
            "completedAt": ts(row["completed_at"]),
            "parentStepExecutionId": _id(row.get("parent_step_execution_id")),
            "branch": row.get("branch"),
            "itemIndex": row.get("item_index"),
            "iteration": row.get("iteration"),
            # A pending timer's due time; once it ended, the one it kept in its state.
            "wakeAt": ts(row.get("wake_at")) or _state_of(row).get("wakeAt"),
            "childInstanceId": _id(row.get("child_instance_id")),
        }
    )


def _attempts(row: dict[str, Any]) -> int | None:
    """How many attempts of a job step were handed to a worker (every claim counts, a lapsed
    lease's too); None for a step no worker runs."""
    deliveries = row.get("job_deliveries")
    return None if deliveries is None else int(deliveries)


def _state_of(row: dict[str, Any]) -> dict[str, Any]:
    state = row.get("state")
    return state if isinstance(state, dict) else {}


def _id(value: Any) -> str | None:
    return None if value is None else str(value)


def instance(row: dict[str, Any], steps: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    out = _drop_none(
        {
            "id": str(row["id"]),
            "definitionName": row["definition_name"],
            "definitionVersion": row["definition_version"],
            "status": row["status"],
            "input": row["input"],
            "variables": row["variables"],
            "output": row["output"],
            "reason": row["reason"],
            "version": row["version"],
            "correlationId": row["correlation_id"],
            "idempotencyKey": row["idempotency_key"],
            "parentInstanceId": None
            if row["parent_instance_id"] is None
            else str(row["parent_instance_id"]),
            "parentStepExecutionId": _id(row.get("parent_step_execution_id")),
            "run": row.get("run", 1),
            "createdAt": ts(row["created_at"]),
            "updatedAt": ts(row["updated_at"]),
            "completedAt": ts(row["completed_at"]),
            "timeoutAt": ts(row["timeout_at"]),
        }
    )
    if steps is not None:
        out["steps"] = [step(s) for s in steps]
    return out


def claimed_job(row: dict[str, Any], lock_expires_at: str | None = None) -> dict[str, Any]:
    """A claimed job as the poll answers it (``lock_expires_at``: its lease's end, formatted
    already)."""
    return {
        "id": str(row["id"]),
        "instanceId": str(row["instance_id"]),
        "stepId": row["step_id"],
        "stepExecutionId": str(row["step_execution_id"]),
        "jobType": row["job_type"],
        "attempt": row["attempt"],
        "retriesRemaining": row["retries_remaining"],
        "lockExpiresAt": lock_expires_at or ts(row["lock_expires_at"]),
        "input": row["payload"],
    }


def claimed_jobs(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A claim's jobs as the poll answers them. Their leases mostly end at one time (the claim's
    ``now()`` plus the type's lease), formatted once."""
    out: list[dict[str, Any]] = []
    last: Any = None
    text: str | None = None
    for row in rows:
        at = row["lock_expires_at"]
        if at != last:
            last, text = at, ts(at)
        out.append(claimed_job(row, text))
    return out


_ANSWER_KEYS = (
    "id",
    "instanceId",
    "stepId",
    "stepExecutionId",
    "jobType",
    "attempt",
    "retriesRemaining",
    "lockExpiresAt",
    "input",
)
if CLAIMED_KEYS[: len(_ANSWER_KEYS)] != _ANSWER_KEYS:  # (claimed_answers reads by position)
    raise RuntimeError("views.claimed_answers reads the claim in an order job_sql no longer has")


def claimed_answers(jobs: list[list[Any]]) -> list[dict[str, Any]]:
    """A claim's jobs as ``job_sql.claim`` returns them (lists led by the answer's values, in
    ``job_sql.CLAIMED_KEYS``' order, ids as text) as the poll answers them, the same as
    ``claimed_job`` makes of a row. Their leases mostly end at one time (the claim's ``now()``
    plus the type's lease), formatted once."""
    out: list[dict[str, Any]] = []
    last: Any = None
    text: str | None = None
    for job in jobs:
        at = job[7]
        if at != last:
            last, text = at, None if at is None else ts(datetime.fromisoformat(at))
        # (a dict display by position, _ANSWER_KEYS': a third of dict(zip(...)) per job)
        out.append(
            {
                "id": job[0],
                "instanceId": job[1],
                "stepId": job[2],
                "stepExecutionId": job[3],
                "jobType": job[4],
                "attempt": job[5],
                "retriesRemaining": job[6],
                "lockExpiresAt": text,
                "input": job[8],
            }
        )
    return out


# What a history event says, for the events whose detail is not a message already.
def _history_message(event: str, detail: dict[str, Any]) -> str | None:
    if event == "JOB_FAILED":
        kind = "retryable" if detail.get("retryable") else "not retryable"
        return f"{detail.get('error')} ({kind})"
    if event == "JOB_RETRY_SCHEDULED":
        return f"attempt {detail.get('attempt')} in {detail.get('delaySeconds')}s"
    if event in ("JOB_TIMED_OUT", "JOB_TIMEOUT_ALERT"):
        return f"no result within {detail.get('seconds')}s ({detail.get('timeout')})"
    if event == "OPTIONAL_STEP_FAILED":
        return f"optional step {detail.get('stepId')} {detail.get('error')}; the run goes on"
    if event == "PERMISSIVE_STEP_FAILED":
        return (
            f"permissive step {detail.get('stepId')} {detail.get('error')}; the run goes on and "
            "fails at its end"
        )
    if event == "JOB_LEASE_EXPIRED":
        return "the worker's lease lapsed with no result"
    if event == "JOB_COMPLETED" and detail.get("late"):
        held = detail.get("supersededWorkerId")
        by = f"held by {held}" if held else "not yet claimed"
        return (
            "a late result, sent after the lease lapsed, completed the job; attempt "
            f"{detail.get('supersededAttempt')} ({by}) is superseded"
        )
    for key in ("reason", "error", "message"):
        if isinstance(detail.get(key), str):
            return str(detail[key])
    return None


def history_event(row: dict[str, Any]) -> dict[str, Any]:
    """One audit row as a history event."""
    detail = row["detail"] if isinstance(row["detail"], dict) else {}
    attempt = detail.get("attempt")
    return _drop_none(
        {
            "seq": row["id"],
            "at": ts(row["at"]),
            "type": row["event"],
            "stepId": row.get("step_id") or detail.get("stepId"),
            "stepExecutionId": _id(row.get("step_execution_id")) or detail.get("stepExecutionId"),
            "jobId": _id(row["job_id"]),
            "attempt": attempt if isinstance(attempt, int) else None,
            "workerId": detail.get("workerId"),
            "message": _history_message(row["event"], detail),
            "detail": detail or None,
        }
    )
