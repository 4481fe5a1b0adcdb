"""Jobs API: poll, complete, fail, heartbeat, claim by id, a worker's stop signal. The hot
path of every worker."""

from __future__ import annotations

from typing import Any

from baton.api import models as m
from baton.api.json_input import is_clean
from baton.engine.batch_ops import BatchResult, Failure
from baton.errors import Problem, ValidationFailed, listed
from baton_lambda import runtime
from baton_lambda.http import Api, RefusedItem

api = Api("jobs")


@api.route("POST", "/v1/jobs/poll")
def poll() -> Any:
    req = api.body(m.PollRequest)
    engine = api.engine()
    jobs = engine.poll(
        req.worker_id,
        req.job_types,
        req.max_jobs,
        wait_seconds=req.wait_seconds,
        gone=api.client_gone(),
    )
    if engine.offload is not None:
        jobs = runtime.payload_store(engine).offload_jobs(jobs)
    return api.ok({"jobs": jobs})


@api.route("POST", "/v1/jobs/complete")
def complete() -> Any:
    req = api.body(m.CompleteJobRequest)
    api.log_keys(job_id=req.job_id)
    output = _output(api.engine(), req.variables_to_set, req.output_payload_path)
    return api.ok(api.engine().complete_job(req.job_id, req.worker_id, output, attempt=req.attempt))


def _output(engine: Any, variables: dict[str, Any] | None, path: str | None) -> Any:
    """What a completion reports: its variables, or the reference of the STEP_OUTPUT payload
    uploaded at ``path`` (checked: issued by us, present, within the hard limit)."""
    if path is None:
        return variables
    if variables is not None:
        raise ValidationFailed(
            [Problem("outputPayloadPath", "give variablesToSet or outputPayloadPath, not both")]
        )
    return runtime.payload_store(engine).verify(path, "STEP_OUTPUT", field="outputPayloadPath")


@api.route("POST", "/v1/jobs/complete-batch")
def complete_batch() -> Any:
    engine = api.engine()
    items: list[BatchResult | dict[str, Any]] = []
    for r in api.body_items(m.CompleteBatchRequest, "results", m.BatchResultItem):
        if isinstance(r, RefusedItem):  # malformed: this item only, never its neighbours
            items.append(_invalid(_sent_job_id(r.sent), r.error))
            continue
        try:
            items.append(_batch_item(engine, r))
        except ValidationFailed as e:  # this item only: a bad path, both outputs given
            items.append(_invalid(r.job_id, e))
    answers = iter(engine.complete_batch([i for i in items if isinstance(i, BatchResult)]))
    results = [i if isinstance(i, dict) else next(answers) for i in items]
    applied = sum(1 for r in results if r["outcome"] == "APPLIED")
    api.logger.info("batch applied", extra={"results": len(results), "applied": applied})
    return api.ok({"results": results})


def _invalid(job_id: str | None, error: ValidationFailed) -> dict[str, Any]:
    return {"jobId": job_id, "outcome": "INVALID", "error": listed(error.problems)}


def _sent_job_id(sent: Any) -> str | None:
    """A refused item's jobId, echoed when it is one Baton could have read (else null: the
    answers are in the order of the results)."""
    job_id = sent.get("jobId") if isinstance(sent, dict) else None
    if isinstance(job_id, str) and 0 < len(job_id) <= m.MAX_ID_LENGTH and is_clean(job_id):
        return job_id
    return None


def _batch_item(engine: Any, r: m.BatchResultItem) -> BatchResult:
    if r.failure is None:
        output = _output(engine, r.variables_to_set, r.output_payload_path)
        return BatchResult(r.job_id, r.worker_id, r.attempt, output=output)
    if r.variables_to_set is not None or r.output_payload_path is not None:
        raise ValidationFailed(
            [Problem("results", "give one of variablesToSet, outputPayloadPath or failure")]
        )
    f = r.failure
    failure = Failure(f.error_message, f.retryable, f.next_retry_delay_seconds, f.output)
    return BatchResult(r.job_id, r.worker_id, r.attempt, failure=failure)


@api.route("POST", "/v1/jobs/fail")
def fail() -> Any:
    req = api.body(m.FailJobRequest)
    api.log_keys(job_id=req.job_id)
    result = api.engine().fail_job(
        req.job_id,
        req.worker_id,
        req.error_message,
        req.retryable,
        attempt=req.attempt,
        next_retry_delay_seconds=req.next_retry_delay_seconds,
        output=req.output,
    )
    return api.ok(result)


@api.route("POST", "/v1/jobs/heartbeat")
def heartbeat() -> Any:
    req = api.body(m.HeartbeatRequest)
    return api.ok(api.engine().heartbeat(req.job_id, req.worker_id, attempt=req.attempt))


@api.route("POST", "/v1/jobs/{id}/claim")
def claim(id: str) -> Any:
    """Event-driven dispatch: the lease on a job the broker delivered, if still claimable."""
    req = api.body(m.ClaimJobRequest)
    job_id = api.path(id)
    api.log_keys(job_id=job_id)
    engine = api.engine()
    job = engine.claim_job(job_id, req.worker_id, attempt=req.attempt)
    if engine.offload is not None:
        (job,) = runtime.payload_store(engine).offload_jobs([job])
    return api.ok(job)


@api.route("POST", "/v1/workers/stop")
def stop_worker() -> Any:
    """The worker's stop signal: its long-polls waiting now claim nothing more. A wait behind API
    Gateway cannot see its client hang up; a stopping worker says so (the SDK does at stop)."""
    req = api.body(m.StopWorkerRequest)
    return api.ok(api.engine().stop_worker(req.worker_id))


handler = api.handler()
