"""Request and response bodies of the REST contract: the single source of the OpenAPI document.

lowerCamelCase on the wire; snake_case accepted on input. Requests refuse unknown fields (a typo
is a 422 naming the field, not a silently ignored option). The proto file
(``proto/workflow/v1/engine.proto``) mirrors these; a test ties the two together.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from baton.definitions import WorkflowDefinition
from baton.model import INT32_MAX, JOB_TYPE_PATTERN, MAX_SECONDS, NAME_PATTERN, TaskDef
from baton.status import InstanceStatus, QueueTaskStatus, StepStatus

WorkerId = Annotated[str, Field(min_length=1, max_length=256)]
JobType = Annotated[str, Field(pattern=JOB_TYPE_PATTERN)]
MAX_ID_LENGTH = 64
Uuid = Annotated[str, Field(min_length=1, max_length=MAX_ID_LENGTH)]
Variables = dict[str, Any]
Attempt = Annotated[
    int | None,
    Field(
        ge=1,
        le=INT32_MAX,
        description="The attempt the worker ran, from the poll (absent: judged on workerId "
        "alone). A completion whose lease lapsed still counts, once, while the job is not "
        "settled, even if the job was claimed again; the repeat of a result already applied is "
        "harmless; any other result for an attempt that is over is a conflict.",
    ),
]


class ApiModel(BaseModel):
    # defer_build: a model's validator is built on first use, so a function pays only for the
    # models it serves (cold start), not for every model of the contract.
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", defer_build=True
    )


# --- requests ------------------------------------------------------------------------------


class StartInstanceRequest(ApiModel):
    definition_name: Annotated[str, Field(pattern=NAME_PATTERN)] | None = None
    definition_version: Annotated[int, Field(ge=1, le=INT32_MAX)] | None = None
    definition: dict[str, Any] | None = Field(
        default=None, description="An inline definition (dynamic workflow), validated in full."
    )
    input: Variables | None = None
    input_payload_path: Annotated[str, Field(min_length=1, max_length=1024)] | None = Field(
        default=None,
        description="Instead of input: a WORKFLOW_INPUT path from POST /v1/payloads, uploaded.",
    )
    correlation_id: Annotated[str, Field(max_length=256)] | None = None
    idempotency_key: Annotated[str, Field(min_length=1, max_length=256)] | None = None


MAX_BATCH_STARTS = 100


class StartInstancesRequest(ApiModel):
    """Up to 100 starts, each answered on its own (a malformed item is INVALID, never its
    neighbours); one transaction for all of them."""

    instances: Annotated[
        list[StartInstanceRequest], Field(min_length=1, max_length=MAX_BATCH_STARTS)
    ]


class StartOutcome(ApiModel):
    index: int = Field(description="The item's position in the request.")
    outcome: Literal["STARTED", "EXISTING", "INVALID", "NOT_FOUND", "CONFLICT"] = Field(
        description="STARTED; EXISTING: its idempotencyKey started this instance before (the "
        "same request); INVALID: the item is malformed or cannot start (its problem says why); "
        "NOT_FOUND: no such definition; CONFLICT: its idempotencyKey was first used with a "
        "different request."
    )
    instance: Instance | None = Field(
        default=None, description="STARTED and EXISTING: the instance, without its steps."
    )
    error: str | None = None
    problem: ProblemDetails | None = Field(
        default=None, description="The problem+json a single start would have answered."
    )


class StartInstancesResponse(ApiModel):
    results: list[StartOutcome] = Field(description="One per item, in the request's order.")


class CancelInstanceRequest(ApiModel):
    reason: Annotated[str, Field(max_length=2000)] | None = None


class CompleteUserTaskRequest(ApiModel):
    variables_to_set: Variables | None = None
    step_execution_id: Uuid | None = Field(
        default=None,
        description="Which waiting execution of the step (inside a MAP or a loop several may "
        "wait at once); the oldest waiting one when absent.",
    )


class SignalRequest(ApiModel):
    payload: Any = None
    step_execution_id: Uuid | None = Field(
        default=None,
        description="Which waiting execution of the step; the oldest waiting one when absent.",
    )


class InstanceOperationRequest(ApiModel):
    """Retry, pause and resume take no options (an empty object or no body)."""


class RestartInstanceRequest(ApiModel):
    use_latest_definition: bool = Field(
        default=False,
        description="Run the newest version of the instance's definition instead of the one it "
        "ran.",
    )


class RerunInstanceRequest(ApiModel):
    from_step_execution_id: Annotated[str, Field(max_length=64)] | None = Field(
        default=None,
        description="The step execution to run again from (its id, as the instance's steps "
        "show it): what came after it in its list, and after each operator holding it, is "
        "removed, and it runs again as a new execution in its place. None: from the start, as "
        "a restart.",
    )
    input: Variables | None = Field(default=None, description="Replaces the instance's input.")
    step_input: Variables | None = Field(
        default=None, description="The input of the step execution run again, in place of its own."
    )
    correlation_id: Annotated[str, Field(max_length=256)] | None = Field(
        default=None, description="Replaces the instance's correlation id."
    )
    at_join: bool = Field(
        default=False,
        description="The step execution, a PARALLEL or MAP, keeps its branches or items as they "
        "ended and joins them again (those that did not complete run again first).",
    )


class PollRequest(ApiModel):
    worker_id: WorkerId
    job_types: Annotated[list[JobType], Field(min_length=1, max_length=50)]
    max_jobs: Annotated[int, Field(ge=1, le=100)] = 1
    wait_seconds: Annotated[float, Field(ge=0, le=20)] = Field(
        default=0,
        description="Long-poll: when nothing is claimable, wait up to this long for a job "
        "(returns as soon as one is claimed; empty at the deadline).",
    )


class StopWorkerRequest(ApiModel):
    """A worker's stop signal: its long-polls waiting now claim nothing more."""

    worker_id: WorkerId


class CompleteJobRequest(ApiModel):
    """Complete a job's attempt with its output. The attempt's worker completes it while it holds
    the lease, and also after the lease lapsed, until the job is settled (even if the job went
    back on the queue or another worker claimed it again: that later attempt is superseded, its
    results are answered ``applied: false`` and its heartbeats 409). 409 once the job was
    cancelled, failed for good or timed out, for an attempt its own failure or a timeout ended,
    and for a worker that did not run the attempt."""

    job_id: Uuid
    worker_id: WorkerId
    variables_to_set: Variables | None = None
    output_payload_path: Annotated[str, Field(min_length=1, max_length=1024)] | None = Field(
        default=None,
        description="Instead of variablesToSet: a STEP_OUTPUT path from POST /v1/payloads.",
    )
    attempt: Attempt = None


class FailJobRequest(ApiModel):
    """Fail the job's current attempt (a retry is scheduled while retries remain). A failure for
    an attempt that is no longer current (its lease lapsed, a timeout ended it) is refused with
    409 and changes nothing; a re-sent failure, or the failure of an attempt that another
    attempt's late completion superseded, is answered ``applied: false``."""

    job_id: Uuid
    worker_id: WorkerId
    error_message: Annotated[str, Field(min_length=1, max_length=10_000)]
    retryable: bool = True
    next_retry_delay_seconds: Annotated[float, Field(ge=0, le=MAX_SECONDS)] | None = Field(
        default=None,
        description="Wait this long before the retry instead of the definition's retry delay.",
    )
    attempt: Attempt = None
    output: Variables | None = Field(
        default=None,
        description="What the worker gives with the failure (Conductor's failed task's "
        "outputData): kept as the step's output when this failure ends the step (no retry "
        "follows), where an optional step's successors read it.",
    )


class BatchFailure(ApiModel):
    error_message: Annotated[str, Field(min_length=1, max_length=10_000)]
    retryable: bool = True
    next_retry_delay_seconds: Annotated[float, Field(ge=0, le=MAX_SECONDS)] | None = None
    output: Variables | None = Field(
        default=None,
        description="Kept as the step's output when this failure ends the step (as on "
        "POST /v1/jobs/fail).",
    )


class BatchResultItem(ApiModel):
    """One result: ``variablesToSet`` or ``outputPayloadPath`` completes the job, ``failure``
    fails it. A malformed item (a missing or wrong field, a NUL in its output, an attempt past
    the column) is answered INVALID, saying why; it never fails the others."""

    job_id: Uuid
    worker_id: WorkerId
    attempt: Attempt = None
    variables_to_set: Variables | None = None
    output_payload_path: Annotated[str, Field(min_length=1, max_length=1024)] | None = None
    failure: BatchFailure | None = None


MAX_BATCH_RESULTS = 100


class CompleteBatchRequest(ApiModel):
    results: Annotated[list[BatchResultItem], Field(min_length=1, max_length=MAX_BATCH_RESULTS)]


class HeartbeatRequest(ApiModel):
    """Extend the lease of a job this worker holds; 409 when it no longer does (the job was
    completed, by a late result of an earlier attempt too, or claimed by another worker): stop
    working on it."""

    job_id: Uuid
    worker_id: WorkerId
    attempt: Attempt = None


class ClaimJobRequest(ApiModel):
    """The claim by id (event-driven dispatch): the job id is in the path."""

    worker_id: WorkerId
    attempt: Attempt = None


class PushRequest(ApiModel):
    title: Annotated[str, Field(min_length=1, max_length=1000)]
    body: Annotated[str, Field(max_length=1_000_000)] = ""
    priority: Annotated[int, Field(ge=-(2**31), le=2**31 - 1)] = 0
    max_retries: Annotated[int, Field(ge=1, le=100)] = 3


class DequeueRequest(ApiModel):
    consumer_id: WorkerId
    visibility_timeout_secs: Annotated[int, Field(ge=1, le=43_200)] = 300
    max_tasks: Annotated[int, Field(ge=1, le=100)] = 1


class AckRequest(ApiModel):
    receipt: Uuid


class NackRequest(ApiModel):
    receipt: Uuid
    error: Annotated[str, Field(max_length=10_000)] | None = None
    retryable: bool = True


# --- responses (documented shapes; the engine's views produce them) -------------------------


class Definition(WorkflowDefinition):
    created_at: datetime | None = None


class TaskDefinition(TaskDef):
    created_at: datetime | None = None
    updated_at: datetime | None = None


class DefinitionPage(ApiModel):
    definitions: list[Definition]
    next_page_token: str | None = None


class TaskDefPage(ApiModel):
    task_defs: list[TaskDefinition]
    next_page_token: str | None = None


class StepExecution(ApiModel):
    id: str
    step_id: str
    type: str
    status: StepStatus
    attempt: int = Field(description="The attempt the step is on (from 1).")
    attempts: int | None = Field(
        default=None,
        description="How many attempts were handed to a worker (a lapsed lease's too); absent "
        "for steps no worker runs. Every attempt is in the instance's history.",
    )
    input: Any = None
    output: Any = None
    error: str | None = None
    job_id: str | None = None
    job_type: str | None = None
    worker_id: str | None = None
    created_at: datetime
    started_at: datetime | None = None
    completed_at: datetime | None = None
    parent_step_execution_id: str | None = Field(
        default=None,
        description="The operator execution (SWITCH, PARALLEL, MAP, DO_WHILE) whose list it is in.",
    )
    branch: int | None = Field(default=None, description="Its PARALLEL branch (from 0).")
    item_index: int | None = Field(default=None, description="Its MAP item (from 0).")
    iteration: int | None = Field(default=None, description="Its DO_WHILE iteration (from 1).")
    wake_at: datetime | None = Field(default=None, description="A TIMER's due time.")
    child_instance_id: str | None = Field(
        default=None, description="A SUB_WORKFLOW's child instance."
    )


class Instance(ApiModel):
    id: str
    definition_name: str
    definition_version: int | None = None
    status: InstanceStatus
    input: Variables
    variables: Variables
    output: Any = None
    reason: str | None = None
    version: int = Field(description="The fencing token: bumped by every state change.")
    correlation_id: str | None = None
    idempotency_key: str | None = None
    parent_instance_id: str | None = None
    parent_step_execution_id: str | None = Field(
        default=None, description="The parent's SUB_WORKFLOW step execution that started it."
    )
    run: int = Field(default=1, description="1, then one more at each restart.")
    created_at: datetime
    updated_at: datetime
    completed_at: datetime | None = None
    timeout_at: datetime | None = None
    steps: list[StepExecution] | None = Field(
        default=None,
        description="Its step executions in creation order; absent with includeSteps=false.",
    )
    steps_truncated: bool | None = Field(
        default=None,
        description="True when the steps stopped before the response grew past its byte "
        "budget; GET /v1/instances/{id}/steps pages through all of them.",
    )
    archived: bool | None = Field(
        default=None,
        description="True when the run was read back from the S3 archive (its retention "
        "passed and its rows left the database); it can be read and deleted, not changed.",
    )
    archived_at: datetime | None = Field(
        default=None, description="When an archived run was written to the archive."
    )


class InstancePage(ApiModel):
    instances: list[Instance]
    next_page_token: str | None = None


class StepExecutionPage(ApiModel):
    steps: list[StepExecution]
    next_page_token: str | None = None
    archived: bool | None = Field(
        default=None, description="True when the page was read from the S3 archive."
    )


class HistoryEvent(ApiModel):
    seq: int = Field(description="Increasing in the order things happened.")
    at: datetime
    type: str = Field(
        description="INSTANCE_STARTED, JOB_DISPATCHED, JOB_COMPLETED, JOB_FAILED, "
        "JOB_RETRY_SCHEDULED, JOB_TIMED_OUT, JOB_LEASE_EXPIRED, SIGNAL_RECEIVED, "
        "USER_TASK_COMPLETED, TIMER_FIRED, INSTANCE_COMPLETED, INSTANCE_FAILED, …"
    )
    step_id: str | None = None
    step_execution_id: str | None = None
    job_id: str | None = None
    attempt: int | None = None
    worker_id: str | None = None
    message: str | None = None
    detail: dict[str, Any] | None = None


class HistoryPage(ApiModel):
    events: list[HistoryEvent]
    next_page_token: str | None = None
    archived: bool | None = Field(
        default=None, description="True when the page was read from the S3 archive."
    )


class Job(ApiModel):
    id: str
    instance_id: str
    step_id: str
    step_execution_id: str
    job_type: str
    attempt: int
    retries_remaining: int
    lock_expires_at: datetime
    input: Any = None
    input_payload_path: str | None = Field(
        default=None, description="Instead of input when it is above the soft limit."
    )
    input_download_url: str | None = Field(
        default=None, description="A presigned GET of inputPayloadPath (short-lived)."
    )


class PollResponse(ApiModel):
    jobs: list[Job]


class CompleteJobResponse(ApiModel):
    job_id: str
    status: Literal["COMPLETED"]
    applied: bool = Field(
        description="False when the job was already completed: a repeat of this completion, or "
        "another attempt's completion came first (nothing changed)."
    )


class FailJobResponse(ApiModel):
    job_id: str
    status: Literal["FAILED", "RETRY_SCHEDULED", "COMPLETED"] = Field(
        description="COMPLETED (with applied false): a late completion of an earlier attempt "
        "completed the job before this attempt's failure arrived."
    )
    applied: bool
    next_attempt_at: datetime | None = None


class BatchOutcome(ApiModel):
    job_id: str | None = Field(
        description="The result's jobId; null for an INVALID item whose jobId could not be read "
        "(the answers are in the order of the results)."
    )
    outcome: Literal["APPLIED", "DUPLICATE", "CONFLICT", "NOT_FOUND", "INVALID"] = Field(
        description="APPLIED; DUPLICATE: the job already has this result, or another "
        "attempt's completion came first (nothing changed); CONFLICT: refused (another worker's "
        "lease, a failure for an attempt that ended, a cancelled, failed or timed-out job); "
        "NOT_FOUND: no such job; INVALID: the item itself is malformed, or its output cannot be "
        "used (an offloaded output that is not a JSON document)."
    )
    status: Literal["COMPLETED", "FAILED", "RETRY_SCHEDULED"] | None = None
    next_attempt_at: datetime | None = None
    error: str | None = None


class CompleteBatchResponse(ApiModel):
    results: list[BatchOutcome]


class HeartbeatResponse(ApiModel):
    job_id: str
    lock_expires_at: datetime


class StopWorkerResponse(ApiModel):
    worker_id: str
    stopped_at: datetime


class ProblemItem(ApiModel):
    path: str
    message: str


class ProblemDetails(ApiModel):
    """RFC 9457 problem details."""

    type: str
    title: str
    status: int
    detail: str
    instance: str | None = None
    errors: list[ProblemItem] = Field(default_factory=list)


class PushResponse(ApiModel):
    id: str
    queue_name: str
    status: Literal["pending"]
    priority: int
    created_at: datetime


class QueueStats(ApiModel):
    pending: int
    processing: int
    completed: int
    failed: int
    dead: int


class QueueTask(ApiModel):
    id: str
    queue_name: str
    title: str
    body: str
    priority: int
    retry_count: int
    max_retries: int
    created_at: datetime
    receipt: str | None = Field(default=None, description="Present on dequeued tasks.")
    visible_at: datetime | None = Field(
        default=None, description="When a dequeued task's claim lapses."
    )


class QueueTaskList(ApiModel):
    tasks: list[QueueTask]


class PurgeResponse(ApiModel):
    deleted: int


class SettleResponse(ApiModel):
    id: str
    status: QueueTaskStatus
    applied: bool | None = None
    retry_count: int | None = None


# --- liveness (public) -----------------------------------------------------------------------


class HealthCheck(ApiModel):
    status: Literal["ok", "unreachable", "unconfigured"]
    latency_ms: float | None = None
    error: str | None = Field(default=None, description="Why the check failed.")
    bucket: str | None = Field(default=None, description="The payload bucket (S3 only).")


class Health(ApiModel):
    """200 while the database answers (``degraded`` when S3 does not), else 503."""

    status: Literal["ok", "degraded"]
    version: str
    database: HealthCheck
    s3: HealthCheck


# --- external payloads ------------------------------------------------------------------------

PayloadKindName = Literal["WORKFLOW_INPUT", "STEP_INPUT", "STEP_OUTPUT"]


class CreatePayloadRequest(ApiModel):
    kind: PayloadKindName = Field(description="What the payload will be used as.")
    size_bytes: int = Field(
        ge=0, le=2**53, description="The exact size of the body that will be uploaded."
    )
    content_sha256: str | None = Field(
        default=None,
        pattern=r"^[0-9a-fA-F]{64}$",
        description="Hex SHA-256 of the body: when given, S3 refuses any other content.",
    )


class PayloadUpload(ApiModel):
    """A presigned PUT for one server-chosen key, valid until ``expiresAt`` (at most 15 min)."""

    path: str = Field(description="Send it as inputPayloadPath/outputPayloadPath afterwards.")
    upload_url: str
    expires_at: datetime
    upload_headers: dict[str, str] = Field(
        description="Headers the PUT must carry exactly (they are signed into the URL)."
    )


class PayloadLimitView(ApiModel):
    soft_limit_bytes: int = Field(description="Above it, the payload goes to S3.")
    hard_limit_bytes: int = Field(description="Above it, the payload is refused.")


class PayloadLimitsView(ApiModel):
    workflow_input: PayloadLimitView
    step_input: PayloadLimitView
    step_output: PayloadLimitView


class ServerConfig(ApiModel):
    """What a client needs to know about this deployment."""

    payload_limits: PayloadLimitsView
    presign_seconds: int = Field(description="Lifetime of a presigned URL.")


# --- queues: listing and dead letters ----------------------------------------------------------


class QueueSummary(ApiModel):
    name: str
    pending: int
    processing: int
    completed: int
    failed: int
    dead: int


class QueuePage(ApiModel):
    queues: list[QueueSummary]
    next_page_token: str | None = None


class QueueTaskDetail(ApiModel):
    id: str
    queue_name: str
    title: str
    body: str = Field(description="The first 65,536 characters of the body.")
    body_truncated: bool = Field(description="True when the body is longer than shown.")
    priority: int
    status: QueueTaskStatus
    retry_count: int
    max_retries: int
    last_error: str | None = None
    instance_id: str | None = Field(
        default=None, description="The instance a queue trigger started for the task."
    )
    visible_at: datetime | None = Field(
        default=None, description="When a processing task's claim lapses."
    )
    created_at: datetime
    updated_at: datetime
    completed_at: datetime | None = None


class QueueTaskPage(ApiModel):
    tasks: list[QueueTaskDetail]
    next_page_token: str | None = None


class RedriveRequest(ApiModel):
    task_ids: Annotated[list[Uuid], Field(min_length=1, max_length=1000)] | None = Field(
        default=None, description="The dead tasks to redrive; omitted: every dead task."
    )


class RedriveSkipped(ApiModel):
    id: str
    status: QueueTaskStatus | None = None
    reason: str


class RedriveResponse(ApiModel):
    redriven: int
    task_ids: list[str]
    skipped: list[RedriveSkipped] = Field(
        description="Named tasks that were not redriven (not dead, or not in the queue)."
    )
    remaining: int = Field(description="Dead tasks still in the queue.")


# --- deletes -----------------------------------------------------------------------------------


class DeletedInstance(ApiModel):
    """What ``DELETE /v1/instances/{id}`` removed."""

    id: str
    definition_name: str
    definition_version: int | None = None
    status: InstanceStatus
    step_executions: int
    jobs: int
    history_events: int = Field(description="Audit rows (the instance's history) deleted.")
    archived: bool | None = Field(
        default=None,
        description="True when the instance was archived: its S3 document, archived payloads "
        "and index row were deleted.",
    )
