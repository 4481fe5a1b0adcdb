"""Conductor-compatible API under ``/api``: what conductor-python 2.0.0's workers, metadata
client and workflow client call, over Baton's engine. Thin: the translations live in
``baton.conductor`` (definitions, views, errors, auth), the work in the engine."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from baton.conductor import auth
from baton.conductor import definitions as cdefs
from baton.conductor import sync as csync
from baton.conductor import views as cviews
from baton.conductor.errors import Unauthorized, Untranslatable, error_body, from_error
from baton.engine.long_poll import MAX_INSTANCE_WAIT_SECONDS as MAX_SYNC
from baton.engine.long_poll import MAX_WAIT_SECONDS, wait_for_instance
from baton.errors import (
    AttemptNotCurrent,
    BatonError,
    Conflict,
    JobNotFound,
    LeaseNotHeld,
    MalformedRequest,
    Problem,
    Unavailable,
    ValidationFailed,
)
from baton.payload_ref import SIZE_KEY, is_payload_ref
from baton.routes import declared_methods
from baton_lambda import runtime
from baton_lambda.http import Api, _dumps

api = Api("conductor")
JSON = "application/json"
TEXT = "text/plain"
RESULT_STATUSES = ("COMPLETED", "FAILED", "FAILED_WITH_TERMINAL_ERROR", "IN_PROGRESS")
MAX_POLL = 100
MAX_TIMEOUT_MS = 2**31 - 1  # Conductor's Integer; waits longer than MAX_WAIT_SECONDS are cut


# --- plumbing ------------------------------------------------------------------------------------


def _json(body: Any, status: int = 200) -> Response[Any]:
    return Response(status_code=status, content_type=JSON, body=_dumps(body))


def _text(value: str) -> Response[Any]:
    return Response(status_code=200, content_type=TEXT, body=value)


def _empty(status: int = 200) -> Response[Any]:
    return Response(status_code=status, content_type=JSON, body="")


def _error(status: int, body: dict[str, Any]) -> Response[Any]:
    return Response(status_code=status, content_type=JSON, body=_dumps(body))


@api.resolver.exception_handler(BatonError)  # type: ignore[untyped-decorator]
def _baton_error(err: BatonError) -> Response[Any]:
    status, body = from_error(err)
    api.logger.info("request refused", extra={"status": status, "error": type(err).__name__})
    if isinstance(err, Unavailable):
        return Response(
            status_code=status,
            content_type=JSON,
            body=_dumps(body),
            headers={"Retry-After": str(err.retry_after_seconds)},
        )
    return _error(status, body)


@api.resolver.exception_handler(NotFoundError)  # type: ignore[untyped-decorator]
def _no_route(_: Exception) -> Response[Any]:
    # Reached through the route table's fallbacks, after _authenticate as any route: a path
    # Baton does not serve is a 404 naming it; a method a served path does not take, a 405
    # naming those it does (with Allow), in Conductor's error body either way.
    event = api.resolver.current_event
    route = f"{event.http_method} {event.path}"
    served = declared_methods(event.resource)
    if served:
        listed = ", ".join(served)
        message = f"Baton does not serve {route}: this path takes {listed}"
        return Response(
            status_code=405,
            content_type=JSON,
            body=_dumps(error_body(405, message)),
            headers={"Allow": listed},
        )
    message = (
        f"Baton does not serve {route}: its /api is the part of Conductor's API that "
        "conductor-python's workers, metadata and workflow clients use"
    )
    return _error(404, error_body(404, message))


@api.resolver.exception_handler(Exception)  # type: ignore[untyped-decorator]
def _unexpected(_: Exception) -> Response[Any]:
    api.logger.exception("unexpected error")
    return _error(500, error_body(500, "an unexpected error occurred; it was logged"))


def _header(name: str) -> str | None:
    headers = api.resolver.current_event.headers or {}
    for k, v in headers.items():
        if k.lower() == name:
            return str(v)
    return None


def _api_key() -> str:
    key = runtime.conductor_key()
    if not key:
        raise Unauthorized("this deployment has no API key for the /api surface", status=403)
    return key


def _authenticate(app: Any, next_middleware: Any) -> Any:
    event = app.current_event
    if event.path == "/api/token" or (event.path or "").endswith("/api/token"):
        return next_middleware(app)
    try:
        token = _header("x-authorization")
        key = _header("x-api-key")
        if not token and not key:
            raise Unauthorized("send X-Authorization: <token from POST /api/token> or x-api-key")
        expected = _api_key()
        now = time.time()
        if token and not auth.valid(token, expected, now):
            raise Unauthorized("the token is not valid", status=401, token_sent=True)
        if not token and key and not auth.key_matches(key, expected):
            raise Unauthorized("the API key is not valid", status=403)
    except Unauthorized as e:
        return _baton_error(e)
    return next_middleware(app)


api.resolver.use([_authenticate])


def _object() -> dict[str, Any]:
    data = api.json()
    if not isinstance(data, dict):
        raise ValidationFailed([Problem("$", "the request body must be a JSON object")])
    return data


def _list_of_objects() -> list[dict[str, Any]]:
    data = api.json()
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list) or not all(isinstance(d, dict) for d in data):
        raise ValidationFailed([Problem("$", "the request body must be a list of objects")])
    return data


def _bool(name: str, default: bool) -> bool:
    """Query booleans, case-insensitive (the client sends True/False on POST, true/false on GET)."""
    raw = api.query(name)
    if raw is None:
        return default
    if raw.lower() in ("true", "1"):
        return True
    if raw.lower() in ("false", "0"):
        return False
    raise ValidationFailed([Problem(name, f"{raw!r} is not true or false")])


def _int(name: str, default: int, low: int, high: int) -> int:
    return api.query_int(name, default, low=low, high=high)


# --- auth ----------------------------------------------------------------------------------------


@api.route("POST", "/api/token")
def token() -> Any:
    body = _object()
    secret = body.get("keySecret")
    if not isinstance(secret, str) or not secret:
        raise Unauthorized("keySecret (a Baton API key) is required")
    if not auth.key_matches(secret, _api_key()):
        raise Unauthorized("keySecret is not a valid API key", status=403)
    return _json({"token": auth.issue(secret, time.time())})


# --- workers -------------------------------------------------------------------------------------


def _poll(task_type: str, count: int, wait_seconds: float = 0.0) -> list[dict[str, Any]]:
    worker = api.query("workerid") or "conductor-worker"
    engine = api.engine()
    jobs = engine.poll(
        worker, [api.path(task_type)], count, wait_seconds=wait_seconds, gone=api.client_gone()
    )
    if not jobs:
        return []
    return _tasks(engine, jobs, worker)


def _tasks(engine: Any, jobs: list[dict[str, Any]], worker: str) -> list[dict[str, Any]]:
    """Claimed jobs as Conductor tasks, leased as Conductor workers expect (no heartbeats)."""
    extended = engine.lease_for_conductor([j["id"] for j in jobs], worker)
    out = []
    for j in _inline_offloaded(engine, jobs):
        expires = extended.get(j["id"])
        until = expires.timestamp() if expires else cviews.ms(j.get("lockExpiresAt")) / 1000
        out.append(cviews.polled_task(j, worker, max(1, round(until - time.time()))))
    return out


def _inline_offloaded(engine: Any, jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Conductor's workers do not fetch external payloads themselves: an offloaded input is read
    and inlined while the response stays within the poll budget; beyond it the task carries
    only its externalInputPayloadStoragePath (as Conductor's server does)."""
    if engine.payloads is None or not any(is_payload_ref(j.get("input")) for j in jobs):
        return jobs
    budget = engine.settings.max_poll_response_bytes - sum(
        len(json.dumps(j.get("input"))) for j in jobs if not is_payload_ref(j.get("input"))
    )
    out = []
    for j in jobs:
        value = j.get("input")
        if is_payload_ref(value) and 0 < value[SIZE_KEY] <= budget:  # type: ignore[index]
            budget -= value[SIZE_KEY]  # type: ignore[index]
            j = {**j, "input": engine.payloads(value)}  # noqa: PLW2901 (the job, inlined)
        out.append(j)
    return out


@api.route("GET", "/api/tasks/poll/batch/{taskType}")
def poll_batch(taskType: str) -> Any:
    # Conductor's batch poll waits up to ``timeout`` ms for a task (default 100; conductor-python
    # always sends 100): a long-poll here too, woken as soon as a task is claimable, at most the
    # long-poll's 20 s (API Gateway gives up at 29 s).
    count = _int("count", 1, 1, MAX_POLL)
    timeout_ms = _int("timeout", 100, 0, MAX_TIMEOUT_MS)
    return _json(_poll(taskType, count, min(timeout_ms / 1000, MAX_WAIT_SECONDS)))


@api.route("GET", "/api/tasks/poll/{taskType}")
def poll_one(taskType: str) -> Any:
    tasks = _poll(taskType, 1)
    return _json(tasks[0]) if tasks else _empty(204)


def _apply_result(result: dict[str, Any]) -> tuple[str, str, str]:
    """Apply a TaskResult; returns (task id, job type, worker id)."""
    tid = result.get("taskId")
    if not isinstance(tid, str) or not tid:
        raise ValidationFailed([Problem("taskId", "required")])
    status = result.get("status")
    if status not in RESULT_STATUSES:
        raise ValidationFailed([Problem("status", f"one of {', '.join(RESULT_STATUSES)}")])
    worker = result.get("workerId") if isinstance(result.get("workerId"), str) else None
    job_id, attempt = cviews.parse_task_id(tid)
    engine = api.engine()
    try:
        state = engine.job_state(job_id)
    except JobNotFound:
        # Not a worker's task: a HUMAN (USER_TASK) or WAIT (SIGNAL) step completed by its id.
        _complete_waiting(result, tid, status)
        return tid, "", worker or ""
    worker = worker or state.get("worker_id") or "conductor-worker"
    api.log_keys(job_id=job_id)
    logs = result.get("logs")
    if isinstance(logs, list) and logs:
        engine.add_task_logs(
            job_id, attempt or state["attempt"], [x for x in logs if isinstance(x, dict)]
        )
    output = result.get("outputData")
    output = output if isinstance(output, dict) else {}
    job_type = str(state.get("job_type") or "")
    if state["status"] not in ("LOCKED", "UNLOCKED") or state["instance_status"] not in (
        "RUNNING",
        "PAUSED",
    ):
        return tid, job_type, worker  # late update for a finished task: ignored, as Conductor does
    try:
        if status == "COMPLETED":
            engine.complete_job(job_id, worker, output, attempt=attempt)
        elif status in ("FAILED", "FAILED_WITH_TERMINAL_ERROR"):
            reason = result.get("reasonForIncompletion")
            engine.fail_job(
                job_id,
                worker,
                str(reason) if reason else f"task {tid} failed",
                retryable=status == "FAILED",
                attempt=attempt,
            )
        elif result.get("extendLease"):
            engine.extend_lease(job_id, worker)
        else:
            seconds = result.get("callbackAfterSeconds")
            seconds = seconds if isinstance(seconds, int) and seconds >= 0 else 0
            engine.postpone_job(job_id, worker, seconds, attempt=attempt)
    except (AttemptNotCurrent, LeaseNotHeld):
        pass  # a stale attempt's update: Conductor ignores it with 200
    return tid, job_type, worker


def _complete_waiting(result: dict[str, Any], tid: str, status: str) -> None:
    wid = result.get("workflowInstanceId")
    if not isinstance(wid, str) or not wid:
        raise JobNotFound(tid)
    engine = api.engine()
    step = next((s for s in engine.get_instance(wid).get("steps", []) if s["id"] == tid), None)
    if step is None or step["type"] not in ("USER_TASK", "SIGNAL"):
        raise JobNotFound(tid)
    if step["status"] not in ("SCHEDULED", "IN_PROGRESS"):
        return  # a late update for a finished task: ignored, as Conductor does
    if status != "COMPLETED":
        raise ValidationFailed(
            [Problem("status", f"a {step['type']} task is completed with COMPLETED, not {status}")]
        )
    output = result.get("outputData") if isinstance(result.get("outputData"), dict) else {}
    if step["type"] == "USER_TASK":
        engine.complete_user_task(wid, step["stepId"], output, step_execution_id=tid)
    else:
        engine.signal(wid, step["stepId"], output, step_execution_id=tid)


@api.route("POST", "/api/tasks")
def update_task() -> Any:
    tid, _, _ = _apply_result(_object())
    return _text(tid)


@api.route("POST", "/api/tasks/update-v2")
def update_task_v2() -> Any:
    _, job_type, worker = _apply_result(_object())
    if not job_type:
        return _empty(204)
    engine = api.engine()
    jobs = engine.poll(worker, [job_type], 1)
    if not jobs:
        return _empty(204)
    return _json(_tasks(engine, jobs, worker)[0])


def _task_of(task_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    job_id, _ = cviews.parse_task_id(api.path(task_id))
    engine = api.engine()
    state = engine.job_state(job_id)
    instance = engine.get_instance(str(state["instance_id"]))
    wf = cviews.workflow(instance, engine.audit_trail(str(state["instance_id"])))
    matches = [t for t in wf["tasks"] if t["taskId"] == api.path(task_id)]
    matches = matches or [t for t in wf["tasks"] if t["taskId"].startswith(job_id)]
    if not matches:
        raise JobNotFound(job_id)
    return state, matches[-1]


@api.route("GET", "/api/tasks/{taskId}")
def get_task(taskId: str) -> Any:
    return _json(_task_of(taskId)[1])


@api.route("GET", "/api/tasks/{taskId}/log")
def get_logs(taskId: str) -> Any:
    job_id, _ = cviews.parse_task_id(api.path(taskId))
    return _json(api.engine().task_logs(job_id))


@api.route("POST", "/api/tasks/{taskId}/log")
def add_log(taskId: str) -> Any:
    job_id, attempt = cviews.parse_task_id(api.path(taskId))
    line = api.json()
    engine = api.engine()
    state = engine.job_state(job_id)
    entry = {
        "log": line if isinstance(line, str) else _dumps(line),
        "taskId": taskId,
        "createdTime": int(time.time() * 1000),
    }
    engine.add_task_logs(job_id, attempt or state["attempt"], [entry])
    return _empty()


# --- metadata ------------------------------------------------------------------------------------


def _put_task_def(raw: dict[str, Any]) -> None:
    body = cdefs.to_baton_task_def(raw)
    name = body.get("name")
    if not isinstance(name, str) or not name:
        raise ValidationFailed([Problem("name", "a task definition needs a name")])
    api.engine().put_task_def(name, body)


@api.route("POST", "/api/metadata/taskdefs")
def register_task_defs() -> Any:
    for raw in _list_of_objects():
        _put_task_def(raw)
    return _empty()


@api.route("PUT", "/api/metadata/taskdefs")
def update_task_def() -> Any:
    _put_task_def(_object())
    return _empty()


@api.route("GET", "/api/metadata/taskdefs")
def all_task_defs() -> Any:
    engine = api.engine()
    pages = _every(lambda t: engine.list_task_defs(limit=100, page_token=t))
    return _json([cdefs.to_conductor_task_def(d) for p in pages for d in p.get("taskDefs", [])])


def _every(fetch: Callable[[str | None], dict[str, Any]]) -> list[dict[str, Any]]:
    """Every page ``fetch(token)`` serves, following ``nextPageToken``."""
    pages = [fetch(None)]
    while token := pages[-1].get("nextPageToken"):
        pages.append(fetch(token))
    return pages


@api.route("GET", "/api/metadata/taskdefs/{name}")
def get_task_def(name: str) -> Any:
    return _json(cdefs.to_conductor_task_def(api.engine().get_task_def(api.path(name))))


@api.route("DELETE", "/api/metadata/taskdefs/{name}")
def delete_task_def(name: str) -> Any:
    api.engine().delete_task_def(api.path(name))
    return _empty()


def _register_workflow(raw: dict[str, Any], overwrite: bool) -> dict[str, Any]:
    body = cdefs.to_baton_workflow(raw)
    engine = api.engine()
    version = body.get("version")
    if version is not None:
        try:
            existing = engine.get_definition(body["name"], version)
        except BatonError:
            existing = None
        if existing is not None:
            if not overwrite:
                raise Conflict(f"workflow {body['name']} version {version} already exists")
            engine.delete_definition(body["name"], version)
    return engine.register_definition(body, conductor=raw)


@api.route("POST", "/api/metadata/workflow")
def register_workflow() -> Any:
    _register_workflow(_object(), _bool("overwrite", False))
    return _empty()


@api.route("PUT", "/api/metadata/workflow")
def update_workflows() -> Any:
    for raw in _list_of_objects():
        _register_workflow(raw, _bool("overwrite", True))
    return _json({"bulkSuccessfulResults": [], "bulkErrorResults": {}})


@api.route("GET", "/api/metadata/workflow")
def all_workflows() -> Any:
    engine = api.engine()
    pages = _every(lambda t: engine.list_definition_sources(limit=100, page_token=t))
    return _json(
        [
            cdefs.read_back(d["definition"], d["conductor"])
            for p in pages
            for d in p.get("definitions", [])
        ]
    )


@api.route("GET", "/api/metadata/workflow/{name}")
def get_workflow_def(name: str) -> Any:
    version = api.query("version")
    v = None if version is None else api.path_int(version, "version", high=2**31 - 1)
    return _json(cdefs.read_back(*api.engine().get_definition_source(api.path(name), v)))


@api.route("DELETE", "/api/metadata/workflow/{name}/{version}")
def delete_workflow_def(name: str, version: str) -> Any:
    v = api.path_int(version, "version", high=2**31 - 1)
    api.engine().delete_definition(api.path(name), v)
    return _empty()


# --- execution -----------------------------------------------------------------------------------


def _start(
    *,
    name: str | None,
    version: Any,
    input: Any,
    correlation_id: Any,
    inline: Any = None,
    idempotency_key: Any = None,
) -> str:
    """Start a workflow as Conductor's start calls ask; its id."""
    if input is not None and not isinstance(input, dict):
        raise ValidationFailed([Problem("input", "must be an object")])
    definition = cdefs.to_baton_workflow(inline) if isinstance(inline, dict) else None
    if definition is None and not (isinstance(name, str) and name):
        raise ValidationFailed([Problem("name", "give a workflow name or a workflowDef")])
    if version is not None and not isinstance(version, int):
        raise ValidationFailed([Problem("version", "must be a whole number")])
    wanted = version if isinstance(version, int) and version > 0 else None
    instance, _ = api.engine().start_instance(
        definition_name=None if definition is not None else name,
        definition_version=wanted,
        definition=definition,
        input=_with_defaults(input or {}, inline, name, wanted),
        correlation_id=correlation_id if isinstance(correlation_id, str) else None,
        idempotency_key=idempotency_key if isinstance(idempotency_key, str) else None,
    )
    api.log_keys(instance_id=instance["id"])
    return str(instance["id"])


def _with_defaults(
    given: dict[str, Any], inline: Any, name: str | None, version: int | None
) -> dict[str, Any]:
    """The input with the definition's ``inputTemplate`` defaults under it (given keys win), as
    Conductor starts a workflow. The template is read from the definition as registered."""
    source = inline
    if not isinstance(inline, dict) and isinstance(name, str) and name:
        try:
            source = api.engine().get_definition_source(name, version)[1]
        except BatonError:
            return given  # the start answers the missing definition itself
    template = source.get("inputTemplate") if isinstance(source, dict) else None
    return {**template, **given} if isinstance(template, dict) and template else given


@api.route("POST", "/api/workflow")
def start() -> Any:
    req = _object()
    return _text(
        _start(
            name=req.get("name"),
            version=req.get("version"),
            input=req.get("input"),
            correlation_id=req.get("correlationId"),
            inline=req.get("workflowDef"),
            idempotency_key=req.get("idempotencyKey"),
        )
    )


@api.route("POST", "/api/workflow/{workflow}")
def start_by_name(workflow: str) -> Any:
    version = api.query("version")
    v = None if version is None else api.path_int(version, "version", high=2**31 - 1)
    return _text(
        _start(
            name=api.path(workflow),
            version=v,
            input=api.json(),
            correlation_id=api.query("correlationId"),
        )
    )


@api.route("POST", "/api/workflow/execute/{name}/{version}")
def execute(name: str, version: str) -> Any:
    # Conductor's WorkflowResourceSync: the path's name and version win over the body's (a
    # StartWorkflowRequest); version 0 is the latest. Clients send waitForSeconds up to 30
    # (conductor-python's workflow client's default): it is cut to 25 s, not refused.
    req = _object()
    v = api.path_int(version, "version", low=0, high=2**31 - 1)
    wait = min(_int("waitForSeconds", csync.DEFAULT_WAIT_SECONDS, 0, MAX_TIMEOUT_MS), MAX_SYNC)
    refs = csync.task_refs(api.query("waitUntilTaskRef"))
    wid = _start(
        name=api.path(name),
        version=v,
        input=req.get("input"),
        correlation_id=req.get("correlationId"),
        inline=req.get("workflowDef"),  # ConductorWorkflow.execute sends its definition
        idempotency_key=req.get("idempotencyKey"),
    )
    engine = api.engine()
    instance = wait_for_instance(
        lambda: engine.get_instance(wid),
        lambda i: csync.reached(i, refs),
        wid,
        wait,
        engine.wakeups,
        gone=api.client_gone(),
    )
    run = csync.workflow_run(instance, engine.audit_trail(wid), api.query("requestId"))
    return _json(run)


@api.route("GET", "/api/workflow/search")
def search() -> Any:
    size = _int("size", 100, 1, 100)
    # Conductor's server form-decodes queries: a "+" is a space.
    query = (api.query("query") or "").replace("+", " ")
    status = None
    name = None
    correlation = None
    for clause in re.split(r"\s+AND\s+", query):
        key, _, value = clause.partition("=")
        key, value = key.strip(), value.strip().strip("'\"")
        if key == "status" and value:
            status = "CANCELLED" if value == "TERMINATED" else value
        elif key == "workflowType" and value:
            name = value
        elif key == "correlationId" and value:
            correlation = value
        elif clause.strip():
            raise ValidationFailed(
                [
                    Problem(
                        "query", f"only status=… and workflowType=… are supported, not {clause!r}"
                    )
                ]
            )
    if status is not None and status not in cviews.WORKFLOW_STATUS:
        raise ValidationFailed([Problem("query", f"unknown status {status!r}")])
    free = (api.query("freeText") or "").strip()
    total, found = api.engine().search_for_conductor(
        status=status,
        definition_name=name,
        correlation_id=correlation,
        free_text=None if free in ("", "*") else free,
        start=_int("start", 0, 0, 10_000),
        size=size,
    )
    return _json({"totalHits": total, "results": [cviews.summary(i) for i in found]})


@api.route("GET", "/api/workflow/{workflow}/correlated/{correlationId}")
def correlated(workflow: str, correlationId: str) -> Any:
    page = api.engine().search_instances(
        definition_name=api.path(workflow), correlation_id=api.path(correlationId), limit=100
    )
    return _json([cviews.workflow(i, include_tasks=False) for i in page.get("instances", [])])


@api.route("GET", "/api/workflow/{workflow}")
def get_workflow(workflow: str) -> Any:
    engine = api.engine()
    wid = api.path(workflow)
    include = _bool("includeTasks", True)
    instance = engine.get_instance(wid)
    audit = engine.audit_trail(wid) if include else []
    return _json(cviews.workflow(instance, audit, include_tasks=include))


@api.route("GET", "/api/workflow/{workflow}/status")
def workflow_status(workflow: str) -> Any:
    i = api.engine().get_instance(api.path(workflow))
    body: dict[str, Any] = {
        "workflowId": i["id"],
        "correlationId": i.get("correlationId"),
        "status": cviews.workflow_status(i["status"]),
    }
    if _bool("includeOutput", False):
        body["output"] = i.get("output") or {}
    if _bool("includeVariables", False):
        body["variables"] = i.get("variables") or {}
    return _json({k: v for k, v in body.items() if v is not None})


@api.route("DELETE", "/api/workflow/{workflow}")
def terminate(workflow: str) -> Any:
    engine = api.engine()
    wid = api.path(workflow)
    instance = engine.get_instance(wid)
    if instance["status"] in ("RUNNING", "PAUSED"):
        # The client form-encodes this query (a space is "+"), as Conductor's server decodes it.
        reason = api.query("reason")
        engine.cancel_instance(wid, reason.replace("+", " ") if reason else None)
    return _empty()


@api.route("PUT", "/api/workflow/{workflow}/pause")
def pause(workflow: str) -> Any:
    api.engine().pause_instance(api.path(workflow))
    return _empty()


@api.route("PUT", "/api/workflow/{workflow}/resume")
def resume(workflow: str) -> Any:
    api.engine().resume_instance(api.path(workflow))
    return _empty()


@api.route("POST", "/api/workflow/{workflow}/retry")
def retry(workflow: str) -> Any:
    api.engine().retry_instance(api.path(workflow))
    return _empty()


@api.route("POST", "/api/workflow/{workflow}/restart")
def restart(workflow: str) -> Any:
    latest = _bool("useLatestDefinitions", False)
    api.engine().restart_instance(api.path(workflow), use_latest_definition=latest)
    return _empty()


@api.route("DELETE", "/api/workflow/{workflow}/remove")
def remove(workflow: str) -> Any:
    api.engine().delete_instance(api.path(workflow))
    return _empty()


__all__ = ["JobNotFound", "MalformedRequest", "Untranslatable"]
handler = api.handler()
