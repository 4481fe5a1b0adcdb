"""The one route table: the CDK API and the local server are both built from it.

Paths use API Gateway's template syntax (``{name}``). ``function`` names a folder under
``functions/`` whose ``handler.handler`` serves the route. ``auth`` is ``api_key_or_iam`` (the
deployment's auth mode: an API key, or SigV4) or ``none`` for the few public routes (liveness and
the contract), which the CDK API and the local server both serve without credentials.

``CONDUCTOR_ROUTES`` are the Conductor-compatible surface under ``/api`` (the ``conductor``
function), kept apart from ``ROUTES`` so the ``/v1`` contract (OpenAPI, protobuf) stays
``/v1``-only. Their ``auth`` is ``conductor_token``: Conductor's clients send neither API Gateway
keys nor SigV4, so the function itself checks ``X-Authorization`` (a token from ``POST /api/token``)
or ``x-api-key``; ``/api/token`` is public.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Auth = Literal["api_key_or_iam", "none", "conductor_token"]
PUBLIC: Auth = "none"
CONDUCTOR_TOKEN: Auth = "conductor_token"
Method = Literal["GET", "POST", "PUT", "DELETE", "ANY"]
ANY: Method = "ANY"
GREEDY = "{proxy+}"  # API Gateway's greedy path parameter: one or more segments


@dataclass(frozen=True, slots=True)
class Route:
    method: Method
    path: str
    function: str
    auth: Auth = "api_key_or_iam"
    summary: str = ""
    # Also served with a trailing slash (``/ui/``), as a directory: a page's relative URLs then
    # resolve under it. Every other path with a trailing slash is a 404.
    directory: bool = False

    @property
    def public(self) -> bool:
        """Served without credentials."""
        return self.auth == PUBLIC

    @property
    def fallback(self) -> bool:
        """A catch-all (``ANY``): what the table does not serve, answered 404 (or 405)."""
        return self.method == ANY

    @property
    def gateway_auth(self) -> bool:
        """Credentials checked in front of the function (API Gateway, the local server)."""
        return self.auth == "api_key_or_iam"


ROUTES: tuple[Route, ...] = (
    Route("GET", "/v1/openapi.json", "definitions", auth=PUBLIC, summary="The OpenAPI document"),
    Route(
        "GET",
        "/v1/health",
        "definitions",
        auth=PUBLIC,
        summary="Liveness: database and S3 reachability (no API key needed)",
    ),
    Route(
        "GET",
        "/v1/config",
        "definitions",
        summary="Limits clients need: soft and hard payload limits per kind",
    ),
    Route(
        "POST",
        "/v1/payloads",
        "instances",
        summary="A presigned upload URL for a large payload (S3)",
    ),
    Route("POST", "/v1/definitions", "definitions", summary="Register a workflow definition"),
    Route("GET", "/v1/definitions", "definitions", summary="List definitions (latest versions)"),
    Route("GET", "/v1/definitions/{name}", "definitions", summary="Latest version of a definition"),
    Route(
        "GET",
        "/v1/definitions/{name}/versions/{version}",
        "definitions",
        summary="One version of a definition",
    ),
    Route(
        "DELETE",
        "/v1/definitions/{name}/versions/{version}",
        "definitions",
        summary="Delete one version of a definition (running instances keep their snapshot)",
    ),
    Route("GET", "/v1/taskdefs", "definitions", summary="List task definitions"),
    Route("PUT", "/v1/taskdefs/{name}", "definitions", summary="Create or replace a task def"),
    Route("GET", "/v1/taskdefs/{name}", "definitions", summary="One task definition"),
    Route(
        "DELETE",
        "/v1/taskdefs/{name}",
        "definitions",
        summary="Delete a task definition (running instances keep their snapshot)",
    ),
    Route(
        "DELETE",
        "/v1/instances/{id}",
        "instances",
        summary="Delete a finished instance with its steps, jobs and history",
    ),
    Route("POST", "/v1/instances", "instances", summary="Start an instance"),
    Route(
        "POST",
        "/v1/instances/batch",
        "instances",
        summary="Start up to 100 instances in one call, each answered on its own",
    ),
    Route("GET", "/v1/instances", "instances", summary="Search instances"),
    Route("GET", "/v1/instances/{id}", "instances", summary="An instance with its steps"),
    Route(
        "GET",
        "/v1/instances/{id}/steps",
        "instances",
        summary="An instance's step executions, a page at a time",
    ),
    Route(
        "GET",
        "/v1/instances/{id}/history",
        "instances",
        summary="Everything that happened to an instance, in order",
    ),
    Route(
        "POST",
        "/v1/instances/{id}/cancel",
        "instances",
        summary="Cancel a running or paused instance",
    ),
    Route(
        "POST",
        "/v1/instances/{id}/user-tasks/{stepId}/complete",
        "instances",
        summary="Complete a waiting user task",
    ),
    Route(
        "POST",
        "/v1/instances/{id}/signals/{stepId}",
        "instances",
        summary="Deliver a signal to a waiting step",
    ),
    Route(
        "POST",
        "/v1/instances/{id}/retry",
        "instances",
        summary="Run a failed instance again from what failed",
    ),
    Route(
        "POST",
        "/v1/instances/{id}/rerun",
        "instances",
        summary="Run an ended instance again from one of its step executions",
    ),
    Route(
        "POST",
        "/v1/instances/{id}/restart",
        "instances",
        summary="Run an ended instance again from the start",
    ),
    Route("POST", "/v1/instances/{id}/pause", "instances", summary="Pause a running instance"),
    Route("POST", "/v1/instances/{id}/resume", "instances", summary="Resume a paused instance"),
    Route("POST", "/v1/jobs/poll", "jobs", summary="Claim jobs for a worker"),
    Route("POST", "/v1/jobs/complete", "jobs", summary="Complete a claimed job"),
    Route(
        "POST",
        "/v1/jobs/complete-batch",
        "jobs",
        summary="Complete or fail up to 100 claimed jobs in one call",
    ),
    Route("POST", "/v1/jobs/fail", "jobs", summary="Fail a claimed job"),
    Route("POST", "/v1/jobs/heartbeat", "jobs", summary="Extend a job's lease"),
    Route(
        "POST",
        "/v1/jobs/{id}/claim",
        "jobs",
        summary="Take the lease on one job by id if still claimable (event-driven dispatch)",
    ),
    Route(
        "POST",
        "/v1/workers/stop",
        "jobs",
        summary="A worker's stop signal: its long-polls waiting now claim nothing more",
    ),
    Route("POST", "/v1/queues/{name}/push", "queues", summary="Push a task onto a queue"),
    Route("GET", "/v1/queues/{name}/stats", "queues", summary="Task counts by state"),
    Route("GET", "/v1/queues/{name}/peek", "queues", summary="Pending tasks, not claimed"),
    Route("DELETE", "/v1/queues/{name}", "queues", summary="Purge every task of a queue"),
    # --- queues: inspection and dead letters ---------------------------------------------------
    Route("GET", "/v1/queues", "queues", summary="Queues with their counts by status"),
    Route(
        "GET",
        "/v1/queues/{name}/tasks",
        "queues",
        summary="A queue's tasks with status, retry count and last error (paginated)",
    ),
    Route(
        "POST",
        "/v1/queues/{name}/redrive",
        "queues",
        summary="Move dead tasks back to pending, retry count reset",
    ),
    Route("POST", "/v1/queues/{name}/dequeue", "queues", summary="Claim tasks (consumers)"),
    Route(
        "POST",
        "/v1/queues/{name}/tasks/{taskId}/ack",
        "queues",
        summary="Acknowledge a dequeued task",
    ),
    Route(
        "POST",
        "/v1/queues/{name}/tasks/{taskId}/nack",
        "queues",
        summary="Fail a dequeued task (retry or dead letter)",
    ),
    # --- schedules -----------------------------------------------------------------------------
    Route("POST", "/v1/schedules", "schedules", summary="Create a schedule"),
    Route("GET", "/v1/schedules", "schedules", summary="List schedules (paginated)"),
    Route(
        "GET",
        "/v1/schedules/{id}",
        "schedules",
        summary="A schedule with its next ten fire times and last ten actions",
    ),
    Route("PUT", "/v1/schedules/{id}", "schedules", summary="Replace a schedule"),
    Route("DELETE", "/v1/schedules/{id}", "schedules", summary="Delete a schedule"),
    Route("POST", "/v1/schedules/{id}/pause", "schedules", summary="Pause a schedule"),
    Route("POST", "/v1/schedules/{id}/unpause", "schedules", summary="Unpause a schedule"),
    Route(
        "POST",
        "/v1/schedules/{id}/trigger",
        "schedules",
        summary="Fire a schedule now (with its overlap policy)",
    ),
    Route(
        "POST",
        "/v1/schedules/{id}/backfill",
        "schedules",
        summary="Fire the slots of a past time range, in order",
    ),
)


def _c(method: Method, path: str, summary: str, auth: Auth = CONDUCTOR_TOKEN) -> Route:
    return Route(method, "/api" + path, "conductor", auth=auth, summary=summary)


CONDUCTOR_ROUTES: tuple[Route, ...] = (
    _c("POST", "/token", "A token for X-Authorization (keySecret: an API key)", auth=PUBLIC),
    _c("GET", "/tasks/poll/batch/{taskType}", "Poll tasks of a type (Conductor Tasks)"),
    _c("GET", "/tasks/poll/{taskType}", "Poll one task of a type"),
    _c("POST", "/tasks", "Update a task with a TaskResult; answers the task id"),
    _c("POST", "/tasks/update-v2", "Update a task; answers the next task of its type"),
    _c("GET", "/tasks/{taskId}", "One task"),
    # ({taskId} here is the workflow's id: API Gateway names a path segment once per level.)
    _c(
        "POST",
        "/tasks/{taskId}/{taskRefName}/{status}",
        "Update a workflow's pending task by reference name; answers the task id",
    ),
    _c(
        "POST",
        "/tasks/{taskId}/{taskRefName}/signal",
        "Signal a workflow's blocked WAIT task ({taskRefName} is the status; the body its output)",
    ),
    _c(
        "POST",
        "/tasks/{taskId}/{taskRefName}/signal/sync",
        "Signal a workflow's blocked WAIT task; answers a SignalResponse once it blocks or ends",
    ),
    _c(
        "POST",
        "/tasks/{taskId}/{taskRefName}/{status}/sync",
        "Update a workflow's pending task by reference name; answers the workflow",
    ),
    _c("GET", "/tasks/{taskId}/log", "A task's logs"),
    _c("POST", "/tasks/{taskId}/log", "Add a log line to a task"),
    _c("POST", "/metadata/taskdefs", "Register task definitions (a list)"),
    _c("PUT", "/metadata/taskdefs", "Update one task definition"),
    _c("GET", "/metadata/taskdefs", "Every task definition"),
    _c("GET", "/metadata/taskdefs/{name}", "One task definition"),
    _c("DELETE", "/metadata/taskdefs/{name}", "Delete a task definition"),
    _c("POST", "/metadata/workflow", "Register a workflow definition"),
    _c("PUT", "/metadata/workflow", "Register or update workflow definitions (a list)"),
    _c("GET", "/metadata/workflow", "The latest version of every workflow definition"),
    _c("GET", "/metadata/workflow/{name}", "A workflow definition (latest or ?version=)"),
    _c("DELETE", "/metadata/workflow/{name}/{version}", "Delete a workflow definition version"),
    _c("POST", "/workflow", "Start a workflow (StartWorkflowRequest); answers its id"),
    _c(
        "POST",
        "/workflow/execute/{name}/{version}",
        "Start a workflow and wait (up to 25 s) for its end or a task; answers a WorkflowRun",
    ),
    _c("GET", "/workflow/search", "Search workflows"),
    _c("PUT", "/workflow/bulk/pause", "Pause workflows (a list of ids); answers a BulkResponse"),
    _c("PUT", "/workflow/bulk/resume", "Resume workflows (a list of ids)"),
    _c("POST", "/workflow/bulk/retry", "Retry failed workflows (a list of ids)"),
    _c("POST", "/workflow/bulk/restart", "Restart ended workflows (a list of ids)"),
    _c("POST", "/workflow/bulk/terminate", "Terminate workflows (a list of ids)"),
    _c("PUT", "/workflow/decide/{workflow}", "Run the decider (Baton decides at once: a no-op)"),
    _c("POST", "/workflow/{workflow}", "Start a workflow by name; answers its id"),
    _c("GET", "/workflow/{workflow}/correlated/{correlationId}", "Workflows by correlation id"),
    _c("GET", "/workflow/{workflow}", "A workflow with its tasks"),
    _c("DELETE", "/workflow/{workflow}", "Terminate a workflow"),
    _c("GET", "/workflow/{workflow}/status", "A workflow's status"),
    _c("PUT", "/workflow/{workflow}/pause", "Pause a workflow"),
    _c("PUT", "/workflow/{workflow}/resume", "Resume a workflow"),
    _c("POST", "/workflow/{workflow}/retry", "Retry a failed workflow"),
    _c("POST", "/workflow/{workflow}/restart", "Restart an ended workflow"),
    _c(
        "POST",
        "/workflow/{workflow}/rerun",
        "Rerun an ended workflow from a task (RerunWorkflowRequest); answers its id",
    ),
    _c("DELETE", "/workflow/{workflow}/remove", "Remove an ended workflow"),
)

# The execution viewer: a static page and its assets, outside the REST contract (not in the
# OpenAPI document, no proto message). Public like liveness: the page holds no data, and every API
# call it makes carries the user's key. Assets sit flat under /ui/ (one path segment each), so no
# greedy path is needed; ``/ui/`` (trailing slash) reaches the ``/ui`` resource (``directory``).
# The API's root redirects to the viewer (a browser pointed at the server finds the page).
UI_ROUTES: tuple[Route, ...] = (
    Route("GET", "/", "ui", auth=PUBLIC, summary="Redirects to the execution viewer (/ui/)"),
    Route(
        "GET", "/ui", "ui", auth=PUBLIC, directory=True, summary="The execution viewer (HTML page)"
    ),
    Route("GET", "/ui/{asset}", "ui", auth=PUBLIC, summary="A static asset of the viewer"),
)


# The proto's WorkflowEngine service over the Connect protocol (docs/rpc.md): one function answers
# every RPC at /rpc/workflow.v1.WorkflowEngine/<Method> through the REST route the RPC mirrors
# (baton.rpc.methods), with the /v1 API's credentials.
RPC_FUNCTION = "rpc"
RPC_ROUTES: tuple[Route, ...] = (
    Route(
        "POST",
        "/rpc/" + GREEDY,
        RPC_FUNCTION,
        summary="An RPC of the WorkflowEngine service (Connect protocol, unary)",
    ),
)

SERVED_ROUTES: tuple[Route, ...] = ROUTES + CONDUCTOR_ROUTES + UI_ROUTES + RPC_ROUTES
"""Every route the API Gateway (and the local server) serves: the ``/v1`` contract, the
Conductor-compatible ``/api``, the viewer at ``/ui`` and the Connect protocol at ``/rpc``."""


def _fallbacks(routes: tuple[Route, ...], prefix: str, greedy_function: str) -> tuple[Route, ...]:
    """``ANY`` on every resource of ``routes`` (to the function of its routes) and on
    ``prefix/{proxy+}``, with the auth of ``routes``: see ``FALLBACK_ROUTES``."""
    auth = routes[-1].auth
    functions: dict[str, str] = {}
    for r in routes:
        functions.setdefault(r.path, r.function)
    summary = "A method this path does not serve: 404, or 405 naming those it does"
    return (
        *(Route(ANY, path, fn, auth=auth, summary=summary) for path, fn in functions.items()),
        Route(ANY, f"{prefix}/{GREEDY}", greedy_function, auth=auth, summary="A path not served"),
    )


FALLBACK_ROUTES: tuple[Route, ...] = (
    *_fallbacks(ROUTES, "/v1", "definitions"),
    *_fallbacks(CONDUCTOR_ROUTES, "/api", "conductor"),
    # A Connect call that is not a POST: the function answers 405 in Connect's error shape.
    Route(ANY, "/rpc/" + GREEDY, RPC_FUNCTION, summary="A Connect call that is not a POST"),
)
"""What the table does not serve under ``/v1`` and ``/api`` still reaches a function, after the
credentials its prefix asks for: an unknown path is a 404 naming it (problem+json on ``/v1``,
Conductor's error body on ``/api``), a method a path does not serve a 405 naming those it does.
Without them API Gateway answers its own 403 "Missing Authentication Token" to a valid key, and
the local server a 401 to a valid Conductor token. Not in the OpenAPI document."""

ROUTED: tuple[Route, ...] = SERVED_ROUTES + FALLBACK_ROUTES
"""Every method API Gateway (and the local server) routes to a function."""


def declared_methods(path: str) -> tuple[str, ...]:
    """The methods the table serves on a resource (``path`` is its template), sorted."""
    return tuple(sorted(r.method for r in SERVED_ROUTES if r.path == path))


# Functions invoked on a schedule (EventBridge in AWS, a timer locally), not through the API.
SCHEDULED_FUNCTIONS: tuple[str, ...] = (
    "reaper",
    "sweeper",
    "queue_dispatcher",
    "relay",
    "system_tasks",
)

# Invoked once per deploy as a CloudFormation custom resource (and at start by the local runtime).
MIGRATION_FUNCTION = "migrate"


def api_functions() -> tuple[str, ...]:
    """Names of the functions behind every served route (the REST API's, Conductor's, the
    viewer's), in route-table order, without repeats."""
    return tuple(dict.fromkeys(r.function for r in SERVED_ROUTES))
