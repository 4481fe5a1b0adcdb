"""What every ``/api`` route shares: answers (JSON, a bare text id, empty), Baton's errors in
Conductor's error body (503s with Retry-After), the 404/405 for what is not served, the token
check in front of every route but ``/api/token``, and reading bodies and query values."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from baton.conductor import auth
from baton.conductor import views as cviews
from baton.conductor.errors import Unauthorized, error_body, from_error
from baton.errors import BatonError, NotFound, Problem, Unavailable, ValidationFailed
from baton.payload_ref import SIZE_KEY, is_payload_ref
from baton.routes import declared_methods

from baton_lambda import runtime
from baton_lambda.http import Api, _dumps

JSON = "application/json"
TEXT = "text/plain"
MAX_TIMEOUT_MS = 2**31 - 1  # Conductor's Integer; waits longer than the route allows are cut
MAX_VERSION = 2**31 - 1


def json_answer(body: Any, status: int = 200) -> Response[Any]:
    return Response(status_code=status, content_type=JSON, body=_dumps(body))


def text_answer(value: str) -> Response[Any]:
    return Response(status_code=200, content_type=TEXT, body=value)


def empty_answer(status: int = 200) -> Response[Any]:
    return Response(status_code=status, content_type=JSON, body="")


def error_answer(err: BatonError) -> Response[Any]:
    status, body = from_error(err)
    headers = (
        {"Retry-After": str(err.retry_after_seconds)} if isinstance(err, Unavailable) else None
    )
    return Response(status_code=status, content_type=JSON, body=_dumps(body), headers=headers)


class Routes:
    """A group of routes on ``api``, with the request helpers they share."""

    def __init__(self, api: Api) -> None:
        self.api = api

    def route(self, method: str, path: str, view: Any) -> None:
        self.api.route(method, path)(view)

    def object_body(self) -> dict[str, Any]:
        data = self.api.json()
        if not isinstance(data, dict):
            raise ValidationFailed([Problem("$", "the request body must be a JSON object")])
        return data

    def list_body(self) -> list[dict[str, Any]]:
        data = self.api.json()
        if isinstance(data, dict):
            data = [data]
        if not isinstance(data, list) or not all(isinstance(d, dict) for d in data):
            raise ValidationFailed([Problem("$", "the request body must be a list of objects")])
        return data

    def query_bool(self, name: str, default: bool) -> bool:
        """Query booleans, case-insensitive (the client sends True/False on POST, true/false on
        GET)."""
        raw = self.api.query(name)
        if raw is None:
            return default
        if raw.lower() in ("true", "1"):
            return True
        if raw.lower() in ("false", "0"):
            return False
        raise ValidationFailed([Problem(name, f"{raw!r} is not true or false")])

    def query_int(self, name: str, default: int, low: int, high: int) -> int:
        return self.api.query_int(name, default, low=low, high=high)

    def version(self, raw: str | None, *, low: int = 1) -> int | None:
        return None if raw is None else self.api.path_int(raw, "version", low=low, high=MAX_VERSION)


def install_errors_and_auth(api: Api) -> None:
    """Conductor's error body for every refusal, and the token check before every route."""
    resolver = api.resolver

    @resolver.exception_handler(BatonError)  # type: ignore[untyped-decorator]
    def baton_error(err: BatonError) -> Response[Any]:
        answer = error_answer(err)
        api.logger.info(
            "request refused", extra={"status": answer.status_code, "error": type(err).__name__}
        )
        return answer

    @resolver.exception_handler(NotFoundError)  # type: ignore[untyped-decorator]
    def no_route(_: Exception) -> Response[Any]:
        # Reached through the route table's fallbacks, after the token check as any route: a
        # path Baton does not serve is a 404 naming it; a method a served path does not take, a
        # 405 naming those it does (with Allow), in Conductor's error body either way.
        event = resolver.current_event
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
        return json_answer(error_body(404, message), 404)

    @resolver.exception_handler(Exception)  # type: ignore[untyped-decorator]
    def unexpected(_: Exception) -> Response[Any]:
        api.logger.exception("unexpected error")
        return json_answer(error_body(500, "an unexpected error occurred; it was logged"), 500)

    def header(name: str) -> str | None:
        headers = resolver.current_event.headers or {}
        for k, v in headers.items():
            if k.lower() == name:
                return str(v)
        return None

    def authenticate(app: Any, next_middleware: Any) -> Any:
        event = app.current_event
        if event.path == "/api/token" or (event.path or "").endswith("/api/token"):
            return next_middleware(app)
        try:
            token = header("x-authorization")
            key = header("x-api-key")
            if not token and not key:
                raise Unauthorized(
                    "send X-Authorization: <token from POST /api/token> or x-api-key"
                )
            expected = api_key()
            now = time.time()
            if token and not auth.valid(token, expected, now):
                raise Unauthorized("the token is not valid", status=401, token_sent=True)
            if not token and key and not auth.key_matches(key, expected):
                raise Unauthorized("the API key is not valid", status=403)
        except Unauthorized as e:
            return baton_error(e)
        return next_middleware(app)

    resolver.use([authenticate])


def api_key() -> str:
    key = runtime.conductor_key()
    if not key:
        raise Unauthorized("this deployment has no API key for the /api surface", status=403)
    return key


# How many bytes of offloaded payloads a workflow read inlines (its JOINs may repeat the forked
# tasks' outputs, and the answer must stay under Lambda's 6 MB).
INLINE_READ_BYTES = 1_500_000


def for_conductor(engine: Any, instance: dict[str, Any]) -> dict[str, Any]:
    """``instance`` (``get_instance(conductor_view=True)``'s) as a Conductor read shows it: its
    offloaded payloads inlined (:func:`inline_payloads`) and, for a definition registered on
    ``/api`` or given inline there, its WorkflowTasks by reference name (each task's
    ``workflowTask``)."""
    source = None
    version = instance.get("definitionVersion")
    if isinstance(version, int):
        with contextlib.suppress(NotFound):  # deleted since: its tasks show none
            _, source = engine.get_definition_source(instance["definitionName"], version)
    return _with_workflow_tasks(inline_payloads(engine, instance), source)


def _with_workflow_tasks(instance: dict[str, Any], source: Any) -> dict[str, Any]:
    """``instance`` with the WorkflowTasks of the Conductor definition it runs by reference
    name (``workflowTasks``): ``source``, the one its definition was registered as, else the
    one an inline start on ``/api`` gave (``conductorSource``); none for a ``/v1`` one."""
    conductor = source if source is not None else instance.get("conductorSource")
    if conductor is not None:
        instance["workflowTasks"] = cviews.workflow_tasks(conductor)
    return instance


def failed_view(
    engine: Any,
) -> Callable[[dict[str, Any], list[dict[str, Any]], Any], dict[str, Any]]:
    """The engine's ``failed_view`` (``baton.engine.core.FailedView``): an ended instance as
    ``GET /api/workflow/{id}`` shows it, which a failure workflow is told of: its ``tasks``
    (``failedWorkflow.tasks``) and, for a definition written for Conductor, its
    ``reasonForIncompletion``. From what the engine read in the transaction that starts the
    failure workflow (no read of its own: offloaded payloads are inlined through
    ``engine.payloads``, the bucket)."""

    def view(instance: dict[str, Any], audit: list[dict[str, Any]], source: Any) -> Any:
        shown = _with_workflow_tasks(inline_payloads(engine, instance), source)
        workflow = cviews.workflow(shown, audit)
        out = {"tasks": workflow["tasks"]}
        if "workflowTasks" in shown and workflow.get("reasonForIncompletion") is not None:
            out["reasonForIncompletion"] = workflow["reasonForIncompletion"]
        return out

    return view


def inline_payloads(engine: Any, instance: dict[str, Any]) -> dict[str, Any]:
    """``instance`` (its wire form, with its steps) with its offloaded payloads read and inlined,
    its output and input first, then its steps' in order, while they fit
    ``INLINE_READ_BYTES``: Conductor keeps a task's output inline up to megabytes (where Baton
    offloads above 256 KB) and its clients do not fetch external payloads, so a read shows
    what Conductor's would; one beyond the budget keeps only its external storage path, as
    Conductor's server does beyond its thresholds."""
    if engine.payloads is None:
        return instance
    budget = INLINE_READ_BYTES

    def inlined(value: Any) -> Any:
        nonlocal budget
        if not is_payload_ref(value) or not 0 < value[SIZE_KEY] <= budget:
            return value
        budget -= value[SIZE_KEY]
        return engine.payloads(value)

    out = {**instance, "output": inlined(instance.get("output"))}
    out["input"] = inlined(instance.get("input"))
    steps = []
    for step in instance.get("steps") or []:
        if is_payload_ref(step.get("output")) or is_payload_ref(step.get("input")):
            step = {**step, "output": inlined(step.get("output"))}  # noqa: PLW2901
            step["input"] = inlined(step.get("input"))
        steps.append(step)
    out["steps"] = steps
    return out
