"""``BatonClient``: a typed, synchronous client for Baton's REST API.

One method per route of the API (definitions, task definitions, instances, jobs, queues). Errors
come back as the :mod:`baton_worker.errors` family, built from the server's problem+json.

Transient failures are retried with jittered exponential backoff (``retry=``), but only when a
repeat cannot do harm: a request that never reached the server, a 429 or 503 (the server did
nothing), or any transient failure of a call that is idempotent on the server (reads, PUT and
DELETE, job completion/failure/heartbeat, a start carrying an idempotency key, a queue ack).

The client is thread-safe; share one per process.
"""

from __future__ import annotations

import enum
import json as jsonlib
import logging
import os
import socket
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Final, TypeVar, cast
from urllib.parse import quote

import httpx

from baton_worker.auth import ApiKeyAuth, AwsSigV4Auth
from baton_worker.backoff import NO_RETRY, Backoff, RetryPolicy
from baton_worker.connect import PROTO as CONNECT_PROTO
from baton_worker.connect import PROTOCOLS, ConnectCodec
from baton_worker.env import DEFAULT_URL, ENV_API_KEY, ENV_PROTOCOL, ENV_URL, read_key_file
from baton_worker.errors import BatonApiError, TransportError, problem_error
from baton_worker.origins import Origins, resolve
from baton_worker.types import (
    BatchOutcome,
    CompleteJobResult,
    Definition,
    DefinitionPage,
    DeletedInstance,
    FailJobResult,
    HeartbeatResult,
    HistoryEvent,
    HistoryPage,
    Instance,
    InstancePage,
    InstanceStatus,
    Job,
    JsonObject,
    PurgeResult,
    PushResult,
    QueuePage,
    QueueStats,
    QueueSummary,
    QueueTask,
    QueueTaskDetail,
    QueueTaskPage,
    QueueTaskStatus,
    RedriveResult,
    SettleResult,
    StartOutcome,
    StepExecution,
    StepExecutionPage,
    StopWorkerResult,
    TaskDef,
    TaskDefPage,
)
from baton_worker.version import __version__

log = logging.getLogger("baton_worker.client")

DEFAULT_TIMEOUT: Final = 30.0
# The server's longest long-poll, and how much longer than the wait a long-poll's read may take.
MAX_LONG_POLL_SECONDS: Final = 20.0
LONG_POLL_TIMEOUT_MARGIN: Final = 10.0
DEFAULT_RETRY: Final = RetryPolicy()


class _Default(enum.Enum):
    CLIENT_POLICY = enum.auto()


CLIENT_POLICY: Final = _Default.CLIENT_POLICY
"""Per-call ``retry=`` value meaning "the client's own policy" (the default)."""

RetryArg = RetryPolicy | None | _Default


def _segment(value: str) -> str:
    """A path segment, percent-encoded (names may not contain '/', but ids come from users)."""
    return quote(str(value), safe="")


def may_retry(error: TransportError | BatonApiError, *, idempotent: bool) -> bool:
    """Whether repeating a failed request is both useful and harmless."""
    if isinstance(error, TransportError):
        return idempotent or not error.sent
    if error.status in (429, 503):
        return True  # refused before doing anything
    return idempotent and error.status >= 500


class BatonClient:
    """A client for one Baton API.

    ``url`` is the API's base URL (``http://127.0.0.1:8080`` for ``baton dev``; the stage URL of
    an API Gateway). Credentials: ``api_key=`` for the ``x-api-key`` header, or any ``httpx.Auth``
    as ``auth=`` (e.g. :class:`~baton_worker.auth.AwsSigV4Auth` for IAM). ``retry`` is the policy
    for transient failures (``None``: never retry). ``transport`` is for tests.
    """

    def __init__(
        self,
        url: str = DEFAULT_URL,
        *,
        api_key: str | None = None,
        auth: httpx.Auth | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        retry: RetryPolicy | None = DEFAULT_RETRY,
        headers: Mapping[str, str] | None = None,
        max_connections: int = 32,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        origins: Origins | None = None,
        protocol: str = "rest",
    ) -> None:
        if protocol not in PROTOCOLS:
            raise ValueError(f"protocol must be one of {', '.join(PROTOCOLS)}, not {protocol!r}")
        # "connect": every call goes as its RPC, binary protobuf over the Connect protocol.
        self.protocol = protocol
        self._connect = ConnectCodec() if protocol == "connect" else None
        if api_key is not None and auth is not None:
            raise ValueError("give api_key or auth, not both")
        if api_key:
            auth = ApiKeyAuth(api_key)
        # Where the URL and key came from, for the messages of 401/403 and unreachable servers.
        self.origins = origins or Origins(key="the api_key= argument" if api_key else None)
        # Credentials other than a key (SigV4, an httpx.Auth of the caller's), for messages.
        self._other_auth = None if auth is None or isinstance(auth, ApiKeyAuth) else auth
        self.url = url.rstrip("/")
        self.retry = retry or NO_RETRY
        self._sleep = sleep
        if transport is None:
            transport = httpx.HTTPTransport(
                limits=httpx.Limits(
                    max_connections=max_connections, max_keepalive_connections=max_connections
                ),
                # Requests are small and latency-bound: send each write at once (no Nagle).
                socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)],
            )
        # Presigned S3 URLs carry their own signature: no API key, no SigV4 auth on them.
        self._s3 = httpx.Client(timeout=httpx.Timeout(60.0, connect=10.0))
        self._config: JsonObject | None = None
        self._http = httpx.Client(
            base_url=self.url,
            auth=auth,
            timeout=timeout,
            headers={"user-agent": f"baton-worker/{__version__}", **(headers or {})},
            transport=transport,
        )

    @classmethod
    def from_env(cls, **overrides: Any) -> BatonClient:
        """A client configured from ``BATON_URL``, ``BATON_API_KEY`` and ``BATON_PROTOCOL``
        (``rest``, the default, or ``connect``); keywords win.

        Without ``BATON_API_KEY``, a client of a server on this machine uses the key ``baton
        dev`` keeps in its data directory (``$BATON_DATA_DIR``, default ``.baton/data``).
        """
        protocol = os.environ.get(ENV_PROTOCOL) or "rest"
        overrides.setdefault("protocol", protocol)
        if "auth" in overrides:
            url, _, origins = resolve(overrides.pop("url", None), None, find_key=False)
            return cls(url, origins=overrides.pop("origins", origins), **overrides)
        url, api_key, origins = resolve(overrides.pop("url", None), overrides.pop("api_key", None))
        return cls(
            url,
            auth=key_auth(api_key, origins),
            origins=overrides.pop("origins", origins),
            **overrides,
        )

    # --- lifecycle -------------------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()
        self._s3.close()

    def __enter__(self) -> BatonClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"BatonClient({self.url!r})"

    # --- definitions -----------------------------------------------------------------------------

    def register_definition(self, definition: Mapping[str, Any]) -> Definition:
        """Register a workflow definition; the server assigns the next version when omitted."""
        return cast(Definition, self._call("POST", "/v1/definitions", json=dict(definition)))

    def list_definitions(
        self, *, limit: int | None = None, page_token: str | None = None
    ) -> DefinitionPage:
        """One page of definitions (latest version of each name)."""
        params = _params(limit=limit, pageToken=page_token)
        return cast(DefinitionPage, self._call("GET", "/v1/definitions", params=params))

    def iter_definitions(self, *, page_size: int = 100) -> Iterator[Definition]:
        """Every definition (latest versions), following page tokens."""
        token: str | None = None
        while True:
            page = self.list_definitions(limit=page_size, page_token=token)
            yield from page["definitions"]
            token = page.get("nextPageToken")
            if not token:
                return

    def get_definition(self, name: str, *, version: int | None = None) -> Definition:
        """The latest version of a definition, or the given ``version``."""
        path = f"/v1/definitions/{_segment(name)}"
        if version is not None:
            path += f"/versions/{int(version)}"
        return cast(Definition, self._call("GET", path))

    def delete_definition(self, name: str, *, version: int) -> Definition:
        """Delete one version of a definition; returns it as it was.

        Instances running it keep their copy and finish; if it was the latest version, its queue
        trigger stops (the latest remaining version, if any, is the definition from now on).
        Raises ``NotFoundError`` if there is no such version. Repeated only after a failure that
        surely changed nothing, as :meth:`delete_task_def`.
        """
        path = f"/v1/definitions/{_segment(name)}/versions/{int(version)}"
        return cast(Definition, self._call("DELETE", path, idempotent=False))

    # --- task definitions ------------------------------------------------------------------------

    def put_task_def(self, name: str, task_def: Mapping[str, Any]) -> TaskDef:
        """Create or replace the task definition of job type ``name``."""
        body = {**task_def, "name": name}
        return cast(TaskDef, self._call("PUT", f"/v1/taskdefs/{_segment(name)}", json=body))

    def get_task_def(self, name: str) -> TaskDef:
        """One task definition."""
        return cast(TaskDef, self._call("GET", f"/v1/taskdefs/{_segment(name)}"))

    def delete_task_def(self, name: str) -> TaskDef:
        """Delete the task definition of job type ``name``; returns it as it was.

        Running instances keep the copy they started with; instances started later run with
        their steps' own settings and the engine's defaults. Raises ``NotFoundError`` if there is
        none. Repeated only after a failure that surely changed nothing (no connection, 429, 503):
        after a lost answer, a repeat would report the deletion that happened as a 404.
        """
        path = f"/v1/taskdefs/{_segment(name)}"
        return cast(TaskDef, self._call("DELETE", path, idempotent=False))

    def list_task_defs(
        self, *, limit: int | None = None, page_token: str | None = None
    ) -> TaskDefPage:
        """One page of task definitions."""
        params = _params(limit=limit, pageToken=page_token)
        return cast(TaskDefPage, self._call("GET", "/v1/taskdefs", params=params))

    def iter_task_defs(self, *, page_size: int = 100) -> Iterator[TaskDef]:
        """Every task definition, by name, following page tokens."""
        token: str | None = None
        while True:
            page = self.list_task_defs(limit=page_size, page_token=token)
            yield from page["taskDefs"]
            token = page.get("nextPageToken")
            if not token:
                return

    # --- instances -------------------------------------------------------------------------------

    def start_instance(
        self,
        definition_name: str | None = None,
        *,
        definition_version: int | None = None,
        definition: Mapping[str, Any] | None = None,
        input: Mapping[str, Any] | None = None,
        correlation_id: str | None = None,
        idempotency_key: str | None = None,
    ) -> Instance:
        """Start an instance of a stored definition, or of an inline ``definition``.

        With an ``idempotency_key`` a repeated start returns the first instance, so the client
        may also retry it after an ambiguous failure.
        """
        body = self.start_request(
            definition_name,
            definition_version=definition_version,
            definition=definition,
            input=input,
            correlation_id=correlation_id,
            idempotency_key=idempotency_key,
        )
        result = self._call(
            "POST", "/v1/instances", json=body, idempotent=idempotency_key is not None
        )
        return cast(Instance, result)

    def start_request(
        self,
        definition_name: str | None = None,
        *,
        definition_version: int | None = None,
        definition: Mapping[str, Any] | None = None,
        input: Mapping[str, Any] | None = None,
        correlation_id: str | None = None,
        idempotency_key: str | None = None,
    ) -> dict[str, Any]:
        """The body of a start (single, or one item of :meth:`start_instances`); above the
        workflow input soft limit the input is uploaded to S3 and the body carries its path."""
        body = _params(
            definitionName=definition_name,
            definitionVersion=definition_version,
            definition=None if definition is None else dict(definition),
            input=None if input is None else dict(input),
            correlationId=correlation_id,
            idempotencyKey=idempotency_key,
        )
        if input is not None:
            encoded = _encode(dict(input))
            if len(encoded) > OFFLOAD_FLOOR and len(encoded) > self.soft_limit("workflowInput"):
                # Above the soft limit the input goes to S3 first; the server gets its path.
                del body["input"]
                body["inputPayloadPath"] = self.upload_payload("WORKFLOW_INPUT", encoded)
        return body

    def start_instances(
        self, instances: Sequence[Mapping[str, Any]], *, retry: RetryArg = CLIENT_POLICY
    ) -> list[StartOutcome]:
        """Start up to 100 instances in one call (``POST /v1/instances/batch``): items built by
        :meth:`start_request`. One answer per item, in order (``STARTED``, ``EXISTING`` for a
        repeated ``idempotencyKey``, ``INVALID``, ``NOT_FOUND``, ``CONFLICT``); an item refused
        never fails the others. Retried after an ambiguous failure only when every item carries
        an ``idempotencyKey`` (a repeat then answers EXISTING instead of starting twice)."""
        body = {"instances": [dict(i) for i in instances]}
        keyed = bool(instances) and all(i.get("idempotencyKey") for i in instances)
        result = self._call("POST", "/v1/instances/batch", json=body, idempotent=keyed, retry=retry)
        return cast(list[StartOutcome], result["results"])

    def get_instance(self, instance_id: str, *, include_steps: bool = True) -> Instance:
        """An instance with its step executions (``stepsTruncated`` when they did not all fit
        in one response: :meth:`iter_steps` reads them all); ``include_steps=False`` leaves
        them out."""
        params = None if include_steps else {"includeSteps": "false"}
        path = f"/v1/instances/{_segment(instance_id)}"
        return cast(Instance, self._call("GET", path, params=params))

    def list_steps(
        self, instance_id: str, *, limit: int | None = None, page_token: str | None = None
    ) -> StepExecutionPage:
        """One page of an instance's step executions, in the order they were created."""
        path = f"/v1/instances/{_segment(instance_id)}/steps"
        params = _params(limit=limit, pageToken=page_token)
        return cast(StepExecutionPage, self._call("GET", path, params=params))

    def iter_steps(self, instance_id: str, *, page_size: int = 500) -> Iterator[StepExecution]:
        """Every step execution of an instance, following page tokens."""
        for page in _pages(lambda t: self.list_steps(instance_id, limit=page_size, page_token=t)):
            yield from page["steps"]

    def get_history(
        self, instance_id: str, *, limit: int | None = None, page_token: str | None = None
    ) -> HistoryPage:
        """One page of what happened to an instance, oldest first: dispatches, completions,
        failures with their errors, retries with their delays, timeouts, signals, user tasks
        and the instance's own transitions."""
        path = f"/v1/instances/{_segment(instance_id)}/history"
        params = _params(limit=limit, pageToken=page_token)
        return cast(HistoryPage, self._call("GET", path, params=params))

    def iter_history(self, instance_id: str, *, page_size: int = 500) -> Iterator[HistoryEvent]:
        """An instance's whole history, following page tokens."""
        for page in _pages(lambda t: self.get_history(instance_id, limit=page_size, page_token=t)):
            yield from page["events"]

    def search_instances(
        self,
        *,
        status: InstanceStatus | None = None,
        definition_name: str | None = None,
        correlation_id: str | None = None,
        created_after: str | None = None,
        created_before: str | None = None,
        limit: int | None = None,
        page_token: str | None = None,
        archived: bool = False,
        ended_from: str | None = None,
        ended_to: str | None = None,
    ) -> InstancePage:
        """One page of instances, newest first, filtered by the given fields (``created_after``
        inclusive and ``created_before`` exclusive, ISO-8601 times). ``archived``: the runs
        archived to S3 instead (their retention passed), latest end first, by when they ended
        (``ended_from`` inclusive, ``ended_to`` exclusive)."""
        params = _params(
            status=status,
            definitionName=definition_name,
            correlationId=correlation_id,
            createdAfter=created_after,
            createdBefore=created_before,
            limit=limit,
            pageToken=page_token,
            archived="true" if archived else None,
        )
        params.update(_params(**{"from": ended_from, "to": ended_to}))
        return cast(InstancePage, self._call("GET", "/v1/instances", params=params))

    def iter_instances(
        self,
        *,
        status: InstanceStatus | None = None,
        definition_name: str | None = None,
        correlation_id: str | None = None,
        page_size: int = 100,
    ) -> Iterator[Instance]:
        """Every matching instance, following page tokens."""
        token: str | None = None
        while True:
            page = self.search_instances(
                status=status,
                definition_name=definition_name,
                correlation_id=correlation_id,
                limit=page_size,
                page_token=token,
            )
            yield from page["instances"]
            token = page.get("nextPageToken")
            if not token:
                return

    def delete_instance(self, instance_id: str) -> DeletedInstance:
        """Delete a finished instance with its step executions, jobs and history. Raises
        ``ConflictError`` while it runs (cancel it first) and ``NotFoundError`` if there is none.
        Repeated only after a failure that surely changed nothing, as :meth:`delete_task_def`."""
        path = f"/v1/instances/{_segment(instance_id)}"
        return cast(DeletedInstance, self._call("DELETE", path, idempotent=False))

    def cancel_instance(self, instance_id: str, *, reason: str | None = None) -> Instance:
        """Terminate a running or paused instance (its open jobs and children are cancelled)."""
        path = f"/v1/instances/{_segment(instance_id)}/cancel"
        return cast(Instance, self._call("POST", path, json=_params(reason=reason)))

    def retry_instance(self, instance_id: str) -> Instance:
        """Run a FAILED, TIMED_OUT or CANCELLED instance again from what did not complete,
        keeping what completed."""
        path = f"/v1/instances/{_segment(instance_id)}/retry"
        return cast(Instance, self._call("POST", path, json={}))

    def restart_instance(
        self, instance_id: str, *, use_latest_definition: bool = False
    ) -> Instance:
        """Run an ended instance again from the start with the same input (the same id, its
        next ``run``); ``use_latest_definition`` runs its definition's newest version."""
        path = f"/v1/instances/{_segment(instance_id)}/restart"
        body = {"useLatestDefinition": True} if use_latest_definition else {}
        return cast(Instance, self._call("POST", path, json=body))

    def rerun_instance(
        self,
        instance_id: str,
        *,
        from_step_execution_id: str | None = None,
        input: dict[str, Any] | None = None,
        step_input: dict[str, Any] | None = None,
        correlation_id: str | None = None,
        at_join: bool = False,
    ) -> Instance:
        """Run an ended instance again from one of its step executions (none: from the start):
        what came after it is removed and it runs again in its place, with ``step_input`` if
        given; ``input`` and ``correlation_id`` replace the instance's; ``at_join`` rejoins a
        PARALLEL or MAP over its branches or items as they ended."""
        path = f"/v1/instances/{_segment(instance_id)}/rerun"
        body = _params(
            fromStepExecutionId=from_step_execution_id,
            input=input,
            stepInput=step_input,
            correlationId=correlation_id,
            atJoin=at_join or None,
        )
        return cast(Instance, self._call("POST", path, json=body))

    def pause_instance(self, instance_id: str) -> Instance:
        """Pause a running instance: no new work until resumed (jobs in flight may finish)."""
        path = f"/v1/instances/{_segment(instance_id)}/pause"
        return cast(Instance, self._call("POST", path, json={}))

    def resume_instance(self, instance_id: str) -> Instance:
        """Resume a paused instance; what waited runs, and timers that fell due fire."""
        path = f"/v1/instances/{_segment(instance_id)}/resume"
        return cast(Instance, self._call("POST", path, json={}))

    def complete_user_task(
        self,
        instance_id: str,
        step_id: str,
        *,
        variables: Mapping[str, Any] | None = None,
        step_execution_id: str | None = None,
    ) -> Instance:
        """Complete a waiting USER_TASK step, setting ``variables`` on the instance.
        ``step_execution_id`` names one of several waiting executions (in a MAP or a loop);
        the oldest waiting one by default."""
        path = f"/v1/instances/{_segment(instance_id)}/user-tasks/{_segment(step_id)}/complete"
        body = _params(
            variablesToSet=None if variables is None else dict(variables),
            stepExecutionId=step_execution_id,
        )
        return cast(Instance, self._call("POST", path, json=body))

    def signal(
        self,
        instance_id: str,
        step_id: str,
        *,
        payload: Any = None,
        step_execution_id: str | None = None,
    ) -> Instance:
        """Deliver a signal to a waiting SIGNAL step; ``payload`` becomes its output."""
        path = f"/v1/instances/{_segment(instance_id)}/signals/{_segment(step_id)}"
        body = _params(payload=payload, stepExecutionId=step_execution_id)
        return cast(Instance, self._call("POST", path, json=body))

    # --- jobs (the worker's side) ----------------------------------------------------------------

    def poll_jobs(
        self,
        *,
        worker_id: str,
        job_types: Sequence[str],
        max_jobs: int = 1,
        wait_seconds: float = 0,
        retry: RetryArg = CLIENT_POLICY,
    ) -> list[Job]:
        """Claim up to ``max_jobs`` jobs of ``job_types`` for ``worker_id`` (may be empty).

        ``wait_seconds`` (0 to 20): long-poll. When nothing is claimable the server holds the
        request until a job is (returning at once with it) or the wait is over (empty). The
        request's read timeout is stretched past the wait."""
        if not 0 <= wait_seconds <= MAX_LONG_POLL_SECONDS:
            raise ValueError(f"wait_seconds must be between 0 and {MAX_LONG_POLL_SECONDS}")
        body: dict[str, Any] = {
            "workerId": worker_id,
            "jobTypes": list(job_types),
            "maxJobs": max_jobs,
        }
        timeout = None
        if wait_seconds > 0:
            body["waitSeconds"] = wait_seconds
            t = self._http.timeout
            timeout = httpx.Timeout(
                connect=t.connect,
                read=max(t.read or 0.0, wait_seconds + LONG_POLL_TIMEOUT_MARGIN),
                write=t.write,
                pool=t.pool,
            )
        result = self._call("POST", "/v1/jobs/poll", json=body, retry=retry, timeout=timeout)
        return cast(list[Job], result["jobs"])

    def claim_job(
        self,
        job_id: str,
        *,
        worker_id: str,
        attempt: int | None = None,
        retry: RetryArg = CLIENT_POLICY,
    ) -> Job:
        """Take the lease on one job by id (event-driven dispatch: the id came from the broker).

        Raises :class:`~baton_worker.errors.ConflictError` when the job is no longer claimable (a
        duplicate or stale delivery), :class:`~baton_worker.errors.RateLimitedError` when its job
        type is at its concurrency or rate limit."""
        body = _params(workerId=worker_id, attempt=attempt)
        path = f"/v1/jobs/{_segment(job_id)}/claim"
        return cast(Job, self._call("POST", path, json=body, retry=retry))

    def complete_job(
        self,
        job_id: str,
        *,
        worker_id: str,
        variables: Mapping[str, Any] | None = None,
        attempt: int | None = None,
        retry: RetryArg = CLIENT_POLICY,
    ) -> CompleteJobResult:
        """Complete a claimed job with ``variables``. A repeat is accepted (``applied`` False).

        ``attempt`` (from the poll) makes a repeat recognisable after the job moved on to a
        later attempt; without it the result is judged on the worker alone."""
        body = self.completion(job_id, worker_id=worker_id, variables=variables, attempt=attempt)
        return self.send_completion(body, retry=retry)

    def send_completion(
        self, body: Mapping[str, Any], *, retry: RetryArg = CLIENT_POLICY
    ) -> CompleteJobResult:
        """``POST /v1/jobs/complete`` with a body built by :meth:`completion` (any output
        already uploaded): safe to repeat, a repeat answers ``applied`` False."""
        result = self._call(
            "POST", "/v1/jobs/complete", json=dict(body), idempotent=True, retry=retry
        )
        return cast(CompleteJobResult, result)

    def completion(
        self,
        job_id: str,
        *,
        worker_id: str,
        variables: Mapping[str, Any] | None = None,
        attempt: int | None = None,
    ) -> dict[str, Any]:
        """The body of a completion (single or one item of a batch): ``variablesToSet``, or
        above the step output soft limit the output uploaded to S3 and its ``outputPayloadPath``.
        Raises ``ValueError``/``TypeError`` for variables that are not strict JSON."""
        body = _params(
            jobId=job_id,
            workerId=worker_id,
            variablesToSet=None if variables is None else dict(variables),
            attempt=attempt,
        )
        if variables is not None:
            encoded = _encode(dict(variables))
            if len(encoded) > OFFLOAD_FLOOR and len(encoded) > self.soft_limit("stepOutput"):
                # Above the soft limit the output goes to S3; the server gets its path.
                del body["variablesToSet"]
                body["outputPayloadPath"] = self.upload_payload("STEP_OUTPUT", encoded)
        return body

    @staticmethod
    def failure(
        job_id: str,
        *,
        worker_id: str,
        error_message: str,
        retryable: bool = True,
        next_retry_delay_seconds: float | None = None,
        attempt: int | None = None,
        output: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """One failure as an item of :meth:`complete_batch` (``output``: kept as the step's
        when the failure ends the step)."""
        failure = _params(
            errorMessage=error_message,
            retryable=retryable,
            nextRetryDelaySeconds=next_retry_delay_seconds,
            output=None if output is None else dict(output),
        )
        return _params(jobId=job_id, workerId=worker_id, attempt=attempt, failure=failure)

    def complete_batch(
        self, results: Sequence[Mapping[str, Any]], *, retry: RetryArg = CLIENT_POLICY
    ) -> list[BatchOutcome]:
        """Report up to 100 results in one call (``POST /v1/jobs/complete-batch``): items built
        by :meth:`completion` or :meth:`failure`. One answer per item, in order; an item that
        conflicts does not fail the others. Safe to retry: a result already applied answers
        DUPLICATE."""
        body = {"results": [dict(r) for r in results]}
        result = self._call(
            "POST", "/v1/jobs/complete-batch", json=body, idempotent=True, retry=retry
        )
        return cast(list[BatchOutcome], result["results"])

    # --- external payloads -----------------------------------------------------------------------

    def config(self) -> JsonObject:
        """``GET /v1/config`` (the payload limits), fetched once per client."""
        if self._config is None:
            self._config = cast(JsonObject, self._call("GET", "/v1/config"))
        return self._config

    def soft_limit(self, kind: str) -> int:
        """The soft limit of ``kind`` (``workflowInput``, ``stepInput``, ``stepOutput``); a server
        without ``/v1/config`` (older) means never offload."""
        try:
            limits = self.config()["payloadLimits"][kind]
        except BatonApiError:
            self._config = {}  # an older server: asked once, never again
            return 2**62
        except (TransportError, KeyError, TypeError):
            return 2**62
        return int(limits["softLimitBytes"])

    def upload_payload(self, kind: str, data: bytes) -> str:
        """Upload ``data`` through a presigned PUT (``POST /v1/payloads``); its path. Transient
        S3 failures (5xx, connection errors) are retried with a fresh grant each time."""
        grants: list[Any] = []

        def put() -> httpx.Response:
            grant = self._call("POST", "/v1/payloads", json={"kind": kind, "sizeBytes": len(data)})
            grants.append(grant)
            return self._s3.put(
                grant["uploadUrl"], content=data, headers=grant.get("uploadHeaders") or {}
            )

        self._presigned(put, "upload", "PUT")
        return str(grants[-1]["path"])

    def download_payload(self, url: str) -> Any:
        """The JSON at a presigned GET URL, retrying transient S3 failures."""
        return jsonlib.loads(self._presigned(lambda: self._s3.get(url), "download", "GET").content)

    def _presigned(
        self, send: Callable[[], httpx.Response], what: str, method: str
    ) -> httpx.Response:
        """``send()`` (a request to a presigned S3 URL) until it succeeds: 5xx and connection
        errors are retried per ``PAYLOAD_RETRY``; another refusal is final."""
        backoff = Backoff(PAYLOAD_RETRY)
        attempts = 0
        while True:
            attempts += 1
            try:
                response = send()
            except httpx.TransportError as e:
                failure: str = _why(e)
            else:
                if response.is_success:
                    return response
                if response.status_code < 500:
                    raise TransportError(
                        f"payload {what} refused: {response.status_code} {response.text[:300]}",
                        sent=True,
                        method=method,
                        url="(presigned)",
                    )
                failure = f"{response.status_code}"
            delay = backoff.next_delay()
            if not PAYLOAD_RETRY.allows(attempts, 0.0, delay):
                raise TransportError(
                    f"payload {what} failed: {failure}", sent=True, method=method, url="(presigned)"
                )
            self._sleep(delay)

    def fail_job(
        self,
        job_id: str,
        *,
        worker_id: str,
        error_message: str,
        retryable: bool = True,
        next_retry_delay_seconds: float | None = None,
        attempt: int | None = None,
        retry: RetryArg = CLIENT_POLICY,
        output: Mapping[str, Any] | None = None,
    ) -> FailJobResult:
        """Fail a claimed job; the engine retries it per the step's policy when ``retryable``,
        after ``next_retry_delay_seconds`` instead of the step's delay when that is given.
        ``attempt`` as for :meth:`complete_job` (a re-sent fail is then a harmless repeat).
        ``output``: kept as the step's output when this failure ends the step."""
        body = _params(
            jobId=job_id,
            workerId=worker_id,
            errorMessage=error_message,
            retryable=retryable,
            nextRetryDelaySeconds=next_retry_delay_seconds,
            attempt=attempt,
            output=None if output is None else dict(output),
        )
        result = self._call("POST", "/v1/jobs/fail", json=body, idempotent=True, retry=retry)
        return cast(FailJobResult, result)

    def heartbeat(
        self,
        job_id: str,
        *,
        worker_id: str,
        attempt: int | None = None,
        retry: RetryArg = CLIENT_POLICY,
    ) -> HeartbeatResult:
        """Extend the lease of a claimed job (of its ``attempt``) by the step's response timeout."""
        body = _params(jobId=job_id, workerId=worker_id, attempt=attempt)
        result = self._call("POST", "/v1/jobs/heartbeat", json=body, idempotent=True, retry=retry)
        return cast(HeartbeatResult, result)

    def stop_worker(
        self, worker_id: str, *, retry: RetryArg = CLIENT_POLICY, timeout: float | None = None
    ) -> StopWorkerResult:
        """The worker's stop signal: a long-poll of ``worker_id`` waiting now claims nothing more
        and ends empty (polls sent afterwards are unaffected). A server behind API Gateway cannot
        see a client hang up on a long-poll; the runner sends this when it stops with one in
        flight."""
        result = self._call(
            "POST",
            "/v1/workers/stop",
            json={"workerId": worker_id},
            idempotent=True,
            retry=retry,
            timeout=None if timeout is None else httpx.Timeout(timeout),
        )
        return cast(StopWorkerResult, result)

    # --- queues ----------------------------------------------------------------------------------

    def push(
        self,
        queue: str,
        *,
        title: str,
        body: str = "",
        priority: int = 0,
        max_retries: int | None = None,
    ) -> PushResult:
        """Push a task onto a named queue (higher ``priority`` first, then FIFO)."""
        payload = _params(title=title, body=body, priority=priority, maxRetries=max_retries)
        path = f"/v1/queues/{_segment(queue)}/push"
        return cast(PushResult, self._call("POST", path, json=payload))

    def queue_stats(self, queue: str) -> QueueStats:
        """Task counts of a queue by state."""
        return cast(QueueStats, self._call("GET", f"/v1/queues/{_segment(queue)}/stats"))

    def peek(self, queue: str, *, limit: int | None = None) -> list[QueueTask]:
        """Pending tasks in dequeue order, without claiming them (default 10, at most 100)."""
        path = f"/v1/queues/{_segment(queue)}/peek"
        result = self._call("GET", path, params=_params(limit=limit))
        return cast(list[QueueTask], result["tasks"])

    def purge(self, queue: str) -> PurgeResult:
        """Delete every task of a queue."""
        return cast(PurgeResult, self._call("DELETE", f"/v1/queues/{_segment(queue)}"))

    def list_queues(self, *, limit: int | None = None, page_token: str | None = None) -> QueuePage:
        """One page of queues (those holding at least one task), by name, with their counts."""
        params = _params(limit=limit, pageToken=page_token)
        return cast(QueuePage, self._call("GET", "/v1/queues", params=params))

    def iter_queues(self, *, page_size: int = 100) -> Iterator[QueueSummary]:
        """Every queue, by name, following page tokens."""
        token: str | None = None
        while True:
            page = self.list_queues(limit=page_size, page_token=token)
            yield from page["queues"]
            token = page.get("nextPageToken")
            if not token:
                return

    def list_queue_tasks(
        self,
        queue: str,
        *,
        status: QueueTaskStatus | None = None,
        limit: int | None = None,
        page_token: str | None = None,
    ) -> QueueTaskPage:
        """One page of a queue's tasks, oldest first (``status="dead"``: its dead letters), each
        with its retry count and last error."""
        params = _params(status=status, limit=limit, pageToken=page_token)
        path = f"/v1/queues/{_segment(queue)}/tasks"
        return cast(QueueTaskPage, self._call("GET", path, params=params))

    def iter_queue_tasks(
        self, queue: str, *, status: QueueTaskStatus | None = None, page_size: int = 100
    ) -> Iterator[QueueTaskDetail]:
        """Every task of a queue (of one ``status``), oldest first, following page tokens."""
        token: str | None = None
        while True:
            page = self.list_queue_tasks(queue, status=status, limit=page_size, page_token=token)
            yield from page["tasks"]
            token = page.get("nextPageToken")
            if not token:
                return

    def redrive(self, queue: str, *, task_ids: Sequence[str] | None = None) -> RedriveResult:
        """Move dead tasks back to pending with their retry count reset, as SQS redrives a
        dead-letter queue: the named ones, or (``task_ids`` None) a batch of every dead task,
        with ``remaining`` saying how many are left. Named tasks that were not dead come back
        in ``skipped``. Repeating it is harmless (a redriven task is no longer dead)."""
        body = _params(taskIds=None if task_ids is None else list(task_ids))
        path = f"/v1/queues/{_segment(queue)}/redrive"
        return cast(RedriveResult, self._call("POST", path, json=body, idempotent=True))

    def dequeue(
        self,
        queue: str,
        *,
        consumer_id: str,
        max_tasks: int = 1,
        visibility_timeout_secs: int | None = None,
    ) -> list[QueueTask]:
        """Claim up to ``max_tasks`` tasks; each carries the ``receipt`` to ack or nack it."""
        body = _params(
            consumerId=consumer_id,
            maxTasks=max_tasks,
            visibilityTimeoutSecs=visibility_timeout_secs,
        )
        result = self._call("POST", f"/v1/queues/{_segment(queue)}/dequeue", json=body)
        return cast(list[QueueTask], result["tasks"])

    def ack(self, queue: str, task_id: str, *, receipt: str) -> SettleResult:
        """Acknowledge a dequeued task (completed). Repeating it is harmless."""
        path = f"/v1/queues/{_segment(queue)}/tasks/{_segment(task_id)}/ack"
        result = self._call("POST", path, json={"receipt": receipt}, idempotent=True)
        return cast(SettleResult, result)

    def nack(
        self,
        queue: str,
        task_id: str,
        *,
        receipt: str,
        error: str | None = None,
        retryable: bool = True,
    ) -> SettleResult:
        """Fail a dequeued task: retried later, or dead-lettered after its maximum retries."""
        path = f"/v1/queues/{_segment(queue)}/tasks/{_segment(task_id)}/nack"
        body = _params(receipt=receipt, error=error, retryable=retryable)
        return cast(SettleResult, self._call("POST", path, json=body))

    # --- schedules -------------------------------------------------------------------------------

    def create_schedule(self, schedule: Mapping[str, Any]) -> JsonObject:
        """Create a schedule: ``{id?, definitionName, definitionVersion?, input?, spec: {cron?,
        interval?, timeZone?, jitterSeconds?, startAt?, endAt?}, overlapPolicy?,
        catchupWindowSeconds?, pauseOnFailure?, paused?, dryRun?}``. Answers it with
        ``nextFireTimes``; with ``dryRun: true`` it is checked and shown, not created."""
        return cast(JsonObject, self._call("POST", "/v1/schedules", json=dict(schedule)))

    def get_schedule(self, schedule_id: str) -> JsonObject:
        """A schedule with its next ten fire times and its last ten actions."""
        return cast(JsonObject, self._call("GET", f"/v1/schedules/{_segment(schedule_id)}"))

    def list_schedules(
        self, *, limit: int | None = None, page_token: str | None = None
    ) -> JsonObject:
        """One page of schedules, by id (``schedules``, ``nextPageToken``)."""
        params = _params(limit=limit, pageToken=page_token)
        return cast(JsonObject, self._call("GET", "/v1/schedules", params=params))

    def iter_schedules(self, *, page_size: int = 100) -> Iterator[JsonObject]:
        """Every schedule, by id, following page tokens."""
        token: str | None = None
        while True:
            page = self.list_schedules(limit=page_size, page_token=token)
            yield from cast(list[JsonObject], page["schedules"])
            token = cast("str | None", page.get("nextPageToken"))
            if not token:
                return

    def replace_schedule(self, schedule_id: str, schedule: Mapping[str, Any]) -> JsonObject:
        """Replace a schedule whole (its slots not fired yet follow the new spec)."""
        path = f"/v1/schedules/{_segment(schedule_id)}"
        return cast(JsonObject, self._call("PUT", path, json=dict(schedule), idempotent=True))

    def delete_schedule(self, schedule_id: str) -> JsonObject:
        """Delete a schedule (the instances it started are kept)."""
        return cast(JsonObject, self._call("DELETE", f"/v1/schedules/{_segment(schedule_id)}"))

    def pause_schedule(self, schedule_id: str, *, note: str | None = None) -> JsonObject:
        """Pause a schedule: no slot fires until it is unpaused (nor afterwards, for the
        paused time)."""
        path = f"/v1/schedules/{_segment(schedule_id)}/pause"
        return cast(JsonObject, self._call("POST", path, json=_params(note=note), idempotent=True))

    def unpause_schedule(self, schedule_id: str) -> JsonObject:
        """Unpause a schedule: it fires from now on."""
        path = f"/v1/schedules/{_segment(schedule_id)}/unpause"
        return cast(JsonObject, self._call("POST", path, json={}, idempotent=True))

    def trigger_schedule(self, schedule_id: str) -> JsonObject:
        """Fire a schedule now (its overlap policy applies), even while paused."""
        path = f"/v1/schedules/{_segment(schedule_id)}/trigger"
        return cast(JsonObject, self._call("POST", path, json={}))

    def backfill_schedule(self, schedule_id: str, *, start: str, end: str) -> JsonObject:
        """Fire the slots of the spec between ``start`` and ``end`` (ISO 8601 times), in order,
        whatever the catch-up window. Repeating it adds nothing (a slot fires once)."""
        path = f"/v1/schedules/{_segment(schedule_id)}/backfill"
        body = {"from": start, "to": end}
        return cast(JsonObject, self._call("POST", path, json=body, idempotent=True))

    # --- other -----------------------------------------------------------------------------------

    def openapi(self) -> JsonObject:
        """The API's OpenAPI document."""
        return cast(JsonObject, self._call("GET", "/v1/openapi.json"))

    # --- transport -------------------------------------------------------------------------------

    def _call(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, Any] | None = None,
        idempotent: bool | None = None,
        retry: RetryArg = CLIENT_POLICY,
        timeout: httpx.Timeout | None = None,
    ) -> Any:
        """Send a request, retrying per policy; the decoded JSON body of a 2xx answer.

        The body is encoded once, as strict JSON: NaN, Infinity or an object that is not JSON
        raise ``ValueError``/``TypeError`` here, before anything is sent.
        """
        content = None if json is None else _encode(json)
        if idempotent is None:
            idempotent = method in ("GET", "PUT", "DELETE", "HEAD")
        policy = self.retry if retry is CLIENT_POLICY else (retry or NO_RETRY)
        assert isinstance(policy, RetryPolicy)
        backoff = Backoff(policy)
        started = time.monotonic()
        attempts = 0
        while True:
            attempts += 1
            try:
                if self._connect is not None:
                    return self._send_rpc(
                        self._connect, method, path, json, params, timeout=timeout
                    )
                return self._send(method, path, content, params, timeout)
            except (TransportError, BatonApiError) as error:
                if not may_retry(error, idempotent=idempotent):
                    raise
                delay = backoff.next_delay()
                hinted = getattr(error, "retry_after", None)
                if hinted:
                    delay = max(delay, min(hinted, policy.maximum_interval))
                if not policy.allows(attempts, time.monotonic() - started, delay):
                    raise
                log.info(
                    "retrying after a transient failure",
                    extra={
                        "method": method,
                        "path": path,
                        "attempt": attempts,
                        "delay_s": round(delay, 3),
                        "error": str(error),
                    },
                )
                self._sleep(delay)

    def _send_rpc(
        self,
        codec: ConnectCodec,
        method: str,
        path: str,
        body: Any,
        params: Mapping[str, Any] | None,
        *,
        timeout: httpx.Timeout | None = None,
    ) -> Any:
        """``method path`` as its RPC over the Connect protocol (binary); the answer as REST
        JSON, errors as the exceptions REST's would raise."""
        rpc = codec.request(method, path, body, dict(params) if params else None)
        url = self.url + rpc.path
        headers = {
            "content-type": CONNECT_PROTO,
            "accept": CONNECT_PROTO,  # API Gateway returns binary when Accept names its type
            "connect-protocol-version": "1",
        }
        try:
            response = self._http.post(
                rpc.path,
                content=rpc.body,
                headers=headers,
                timeout=httpx.USE_CLIENT_DEFAULT if timeout is None else timeout,
            )
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as e:
            why = f"{_why(e)} ({self.origins.unreachable()})"
            raise TransportError(
                f"cannot reach {self.url}: {why}", sent=False, method="POST", url=url
            ) from e
        except httpx.TransportError as e:
            raise TransportError(
                f"{rpc.rpc} failed: {_why(e)}", sent=True, method="POST", url=url
            ) from e
        if response.status_code == 200:
            return codec.response(rpc, response.content)
        status, problem = codec.problem(response.status_code, _decoded(response))
        error = problem_error(
            status,
            problem,
            retry_after=response.headers.get("retry-after"),
            reason=response.reason_phrase,
            method="POST",
            url=url,
        )
        if error.status in (401, 403):
            signed = isinstance(self._other_auth, AwsSigV4Auth)
            hint = self.origins.refused(self.url, other_auth=self._other_auth, signed=signed)
            error.with_hint(hint)
        raise error

    def _send(
        self,
        method: str,
        path: str,
        content: bytes | None,
        params: Mapping[str, Any] | None,
        timeout: httpx.Timeout | None = None,
    ) -> Any:
        url = self.url + path
        headers = None if content is None else {"content-type": "application/json"}
        try:
            response = self._http.request(
                method,
                path,
                content=content,
                params=params,
                headers=headers,
                timeout=httpx.USE_CLIENT_DEFAULT if timeout is None else timeout,
            )
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as e:
            why = f"{_why(e)} ({self.origins.unreachable()})"
            raise TransportError(
                f"cannot reach {self.url}: {why}", sent=False, method=method, url=url
            ) from e
        except httpx.TransportError as e:
            raise TransportError(
                f"{method} {path} failed: {_why(e)}", sent=True, method=method, url=url
            ) from e
        if response.is_success:
            if not response.content:
                return None
            try:
                return response.json()
            except ValueError as e:
                raise BatonApiError(
                    response.status_code,
                    "Unexpected response",
                    f"the body of {method} {path} is not JSON",
                    method=method,
                    url=url,
                ) from e
        error = problem_error(
            response.status_code,
            _decoded(response),
            retry_after=response.headers.get("retry-after"),
            reason=response.reason_phrase,
            method=method,
            url=url,
        )
        if error.status in (401, 403):
            signed = isinstance(self._other_auth, AwsSigV4Auth)
            hint = self.origins.refused(self.url, other_auth=self._other_auth, signed=signed)
            error.with_hint(hint)
        raise error


# Bodies up to this size are always sent inline (well under the server's inline cap), so small
# requests never cost a GET /v1/config.
OFFLOAD_FLOOR = 64 * 1024
# Transient S3 failures on presigned uploads/downloads: a few quick retries.
PAYLOAD_RETRY = RetryPolicy(initial_interval=0.2, maximum_interval=2.0, maximum_attempts=4)


def _encode(body: Any) -> bytes:
    return jsonlib.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode(
        "utf-8"
    )


_Page = TypeVar("_Page", StepExecutionPage, HistoryPage)


def _pages(fetch: Callable[[str | None], _Page]) -> Iterator[_Page]:
    """Every page ``fetch(token)`` serves, from the first, following ``nextPageToken``."""
    token: str | None = None
    while True:
        page = fetch(token)
        yield page
        token = page.get("nextPageToken")
        if not token:
            return


def _params(**values: Any) -> dict[str, Any]:
    """Drop the None values (the API's defaults apply)."""
    return {k: v for k, v in values.items() if v is not None}


def _decoded(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return response.text


def _why(error: httpx.TransportError) -> str:
    text = str(error) or type(error).__name__
    return text if len(text) < 300 else text[:300] + "..."


def key_auth(api_key: str | None, origins: Origins) -> ApiKeyAuth | None:
    """The auth of a key resolved with :func:`baton_worker.origins.resolve`: one read from a
    local ``baton dev``'s key file is read again when the server refuses it (the server may
    have restarted with another key)."""
    if not api_key:
        return None
    if origins.key_file is None:
        return ApiKeyAuth(api_key)
    path = origins.key_file
    return ApiKeyAuth(api_key, reload=lambda: read_key_file(path))


__all__ = [
    "CLIENT_POLICY",
    "DEFAULT_RETRY",
    "DEFAULT_URL",
    "ENV_API_KEY",
    "ENV_URL",
    "BatonClient",
    "key_auth",
    "may_retry",
]
