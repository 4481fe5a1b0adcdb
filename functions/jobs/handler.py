"""Jobs API: poll, complete, fail, heartbeat, claim by id. The hot path of every worker."""

from __future__ import annotations

from typing import Any

from baton.api import models as m
from baton.errors import Problem, ValidationFailed
from baton_lambda import runtime
from baton_lambda.http import Api

api = Api("jobs")


@api.route("POST", "/v1/jobs/poll")
def poll() -> Any:
    req = api.body(m.PollRequest)
    engine = api.engine()
    jobs = engine.poll(req.worker_id, req.job_types, req.max_jobs)
    if engine.offload is not None:
        jobs = runtime.payload_store(engine).offload_jobs(jobs)
    return api.ok({"jobs": jobs})


@api.route("POST", "/v1/jobs/complete")
def complete() -> Any:
    req = api.body(m.CompleteJobRequest)
    api.log_keys(job_id=req.job_id)
    output = req.variables_to_set
    if req.output_payload_path is not None:
        if output is not None:
            raise ValidationFailed(
                [Problem("outputPayloadPath", "give variablesToSet or outputPayloadPath, not both")]
            )
        output = runtime.payload_store(api.engine()).verify(
            req.output_payload_path, "STEP_OUTPUT", field="outputPayloadPath"
        )
    return api.ok(api.engine().complete_job(req.job_id, req.worker_id, output, attempt=req.attempt))


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


handler = api.handler()
