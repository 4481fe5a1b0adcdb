"""Typed shapes of the API's JSON (lowerCamelCase, as on the wire).

The client returns the server's JSON as these ``TypedDict`` s: typed for the checker, still plain
dicts at run time (easy to print, to dump, and tolerant of fields a newer server adds).
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

JsonObject = dict[str, Any]

InstanceStatus = Literal["RUNNING", "PAUSED", "COMPLETED", "FAILED", "TIMED_OUT", "CANCELLED"]
StepStatus = Literal[
    "SCHEDULED", "IN_PROGRESS", "COMPLETED", "FAILED", "TIMED_OUT", "CANCELLED", "SKIPPED"
]
QueueTaskStatus = Literal["pending", "processing", "completed", "failed", "dead"]


class Definition(TypedDict):
    """A workflow definition as stored (steps and every other field as registered)."""

    name: str
    version: int
    steps: list[JsonObject]
    description: NotRequired[str]
    outputParameters: NotRequired[JsonObject]
    timeoutSeconds: NotRequired[int]
    timeoutPolicy: NotRequired[str]
    trigger: NotRequired[JsonObject]
    inputTemplate: NotRequired[JsonObject]
    createdAt: NotRequired[str]


class DefinitionPage(TypedDict):
    definitions: list[Definition]
    nextPageToken: NotRequired[str]


class TaskDef(TypedDict):
    """A Conductor-style task definition (defaults for every step of a job type)."""

    name: str
    description: NotRequired[str]
    retryCount: NotRequired[int]
    retryLogic: NotRequired[str]
    retryDelaySeconds: NotRequired[int]
    maxRetryDelaySeconds: NotRequired[int]
    timeoutSeconds: NotRequired[int]
    pollTimeoutSeconds: NotRequired[int]
    responseTimeoutSeconds: NotRequired[int]
    timeoutPolicy: NotRequired[str]
    inputKeys: NotRequired[list[str]]
    outputKeys: NotRequired[list[str]]
    inputTemplate: NotRequired[JsonObject]
    concurrentExecLimit: NotRequired[int]
    rateLimitPerFrequency: NotRequired[int]
    rateLimitFrequencyInSeconds: NotRequired[int]
    ownerEmail: NotRequired[str]
    createdAt: NotRequired[str]
    updatedAt: NotRequired[str]


class TaskDefPage(TypedDict):
    taskDefs: list[TaskDef]
    nextPageToken: NotRequired[str]


class StepExecution(TypedDict):
    id: str
    stepId: str
    type: str
    status: StepStatus
    attempt: int
    attempts: NotRequired[int]
    input: NotRequired[Any]
    output: NotRequired[Any]
    error: NotRequired[str]
    jobId: NotRequired[str]
    jobType: NotRequired[str]
    workerId: NotRequired[str]
    createdAt: str
    startedAt: NotRequired[str]
    completedAt: NotRequired[str]
    parentStepExecutionId: NotRequired[str]
    branch: NotRequired[int]
    itemIndex: NotRequired[int]
    iteration: NotRequired[int]
    wakeAt: NotRequired[str]
    childInstanceId: NotRequired[str]


class Instance(TypedDict):
    id: str
    definitionName: str
    definitionVersion: NotRequired[int]
    status: InstanceStatus
    input: JsonObject
    variables: JsonObject
    output: NotRequired[Any]
    reason: NotRequired[str]
    version: int
    correlationId: NotRequired[str]
    idempotencyKey: NotRequired[str]
    parentInstanceId: NotRequired[str]
    parentStepExecutionId: NotRequired[str]
    run: NotRequired[int]
    createdAt: str
    updatedAt: str
    completedAt: NotRequired[str]
    timeoutAt: NotRequired[str]
    steps: NotRequired[list[StepExecution]]
    stepsTruncated: NotRequired[bool]
    # Read back from the S3 archive (its retention passed): it can be read and deleted only.
    archived: NotRequired[bool]
    archivedAt: NotRequired[str]


class StepExecutionPage(TypedDict):
    steps: list[StepExecution]
    nextPageToken: NotRequired[str]


class HistoryEvent(TypedDict):
    """One thing that happened to an instance (``GET /v1/instances/{id}/history``)."""

    seq: int
    at: str
    type: str
    stepId: NotRequired[str]
    stepExecutionId: NotRequired[str]
    jobId: NotRequired[str]
    attempt: NotRequired[int]
    workerId: NotRequired[str]
    message: NotRequired[str]
    detail: NotRequired[JsonObject]


class HistoryPage(TypedDict):
    events: list[HistoryEvent]
    nextPageToken: NotRequired[str]


class InstancePage(TypedDict):
    instances: list[Instance]
    nextPageToken: NotRequired[str]


class Job(TypedDict):
    """A claimed job, as a poll returns it."""

    id: str
    instanceId: str
    stepId: str
    stepExecutionId: str
    jobType: str
    attempt: int
    retriesRemaining: int
    lockExpiresAt: str
    input: NotRequired[Any]
    inputPayloadPath: NotRequired[str]
    inputDownloadUrl: NotRequired[str]


class CompleteJobResult(TypedDict):
    jobId: str
    status: Literal["COMPLETED"]
    applied: bool


class FailJobResult(TypedDict):
    jobId: str
    status: Literal["FAILED", "RETRY_SCHEDULED", "COMPLETED"]
    applied: bool
    nextAttemptAt: NotRequired[str]


class BatchOutcome(TypedDict):
    """The answer to one result of :meth:`BatonClient.complete_batch`."""

    jobId: str | None  # None: an INVALID item whose jobId the server could not read
    outcome: Literal["APPLIED", "DUPLICATE", "CONFLICT", "NOT_FOUND", "INVALID"]
    status: NotRequired[Literal["COMPLETED", "FAILED", "RETRY_SCHEDULED"]]
    nextAttemptAt: NotRequired[str]
    error: NotRequired[str]


class StartOutcome(TypedDict):
    """The answer to one item of :meth:`BatonClient.start_instances`."""

    index: int
    outcome: Literal["STARTED", "EXISTING", "INVALID", "NOT_FOUND", "CONFLICT"]
    instance: NotRequired[Instance]  # STARTED and EXISTING (without steps)
    error: NotRequired[str]
    problem: NotRequired[JsonObject]  # what a single start would have answered


class HeartbeatResult(TypedDict):
    jobId: str
    lockExpiresAt: str


class StopWorkerResult(TypedDict):
    workerId: str
    stoppedAt: str


class PushResult(TypedDict):
    id: str
    queueName: str
    status: Literal["pending"]
    priority: int
    createdAt: str


class QueueStats(TypedDict):
    pending: int
    processing: int
    completed: int
    failed: int
    dead: int


class QueueTask(TypedDict):
    id: str
    queueName: str
    title: str
    body: str
    priority: int
    retryCount: int
    maxRetries: int
    createdAt: str
    receipt: NotRequired[str]
    visibleAt: NotRequired[str]


class PurgeResult(TypedDict):
    deleted: int


class SettleResult(TypedDict):
    id: str
    status: QueueTaskStatus
    applied: NotRequired[bool]
    retryCount: NotRequired[int]


class DeletedInstance(TypedDict):
    """What deleting a finished instance removed."""

    id: str
    definitionName: str
    definitionVersion: NotRequired[int]
    status: InstanceStatus
    stepExecutions: int
    jobs: int
    historyEvents: int


class QueueSummary(TypedDict):
    """A queue (one holding at least one task) with its task counts by state."""

    name: str
    pending: int
    processing: int
    completed: int
    failed: int
    dead: int


class QueuePage(TypedDict):
    queues: list[QueueSummary]
    nextPageToken: NotRequired[str]


class QueueTaskDetail(TypedDict):
    """A task as a listing shows it: its state, retries and last error (the body cut to its
    first 65,536 characters, ``bodyTruncated`` when longer)."""

    id: str
    queueName: str
    title: str
    body: str
    bodyTruncated: bool
    priority: int
    status: QueueTaskStatus
    retryCount: int
    maxRetries: int
    createdAt: str
    updatedAt: str
    lastError: NotRequired[str]
    instanceId: NotRequired[str]
    visibleAt: NotRequired[str]
    completedAt: NotRequired[str]


class QueueTaskPage(TypedDict):
    tasks: list[QueueTaskDetail]
    nextPageToken: NotRequired[str]


class RedriveSkipped(TypedDict):
    id: str
    reason: str
    status: NotRequired[QueueTaskStatus]


class RedriveResult(TypedDict):
    redriven: int
    taskIds: list[str]
    skipped: list[RedriveSkipped]
    remaining: int


__all__ = [
    "BatchOutcome",
    "CompleteJobResult",
    "Definition",
    "DefinitionPage",
    "DeletedInstance",
    "FailJobResult",
    "HeartbeatResult",
    "Instance",
    "InstancePage",
    "InstanceStatus",
    "Job",
    "JsonObject",
    "PurgeResult",
    "PushResult",
    "QueuePage",
    "QueueStats",
    "QueueSummary",
    "QueueTask",
    "QueueTaskDetail",
    "QueueTaskPage",
    "QueueTaskStatus",
    "RedriveResult",
    "RedriveSkipped",
    "SettleResult",
    "StartOutcome",
    "StepExecution",
    "StepStatus",
    "StopWorkerResult",
    "TaskDef",
    "TaskDefPage",
]
