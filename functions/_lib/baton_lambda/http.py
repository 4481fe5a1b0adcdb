"""One Powertools REST resolver per API function, with Baton's error mapping installed.

Every error leaves as RFC 9457 problem+json with the status of ``baton.api.problems``; an
unexpected exception is logged with its traceback and answered with a 500 problem (never a hang,
never a silent success).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar, cast
from urllib.parse import unquote

from aws_lambda_powertools import Logger
from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.metrics import EphemeralMetrics
from baton import jsontext
from baton.api.json_input import (
    LoneSurrogate,
    check_string,
    check_text,
    parse_json,
    parse_json_body,
)
from baton.api.problems import PROBLEM_JSON, from_error, problem, validation_error
from baton.engine.service import Engine
from baton.errors import BatonError, MalformedRequest, Problem, ValidationFailed
from baton.routes import ROUTED, ROUTES, SERVED_ROUTES, declared_methods
from pydantic import BaseModel, ValidationError

from baton_lambda import runtime
from baton_lambda.emf import EmfMetrics
from baton_lambda.isolation import per_thread_router_state

M = TypeVar("M", bound=BaseModel)
Item = TypeVar("Item", bound=BaseModel)
LambdaHandler = Callable[[dict[str, Any], Any], dict[str, Any]]
JSON = "application/json"


def _dumps(body: Any) -> str:
    return json.dumps(body, separators=(",", ":"), default=str)


@dataclass(frozen=True, slots=True)
class RefusedItem:
    """An item of a batch body refused on its own (see :meth:`Api.body_items`): what was sent,
    and why, with paths under the item's place (``results[3].attempt``)."""

    sent: Any
    error: ValidationFailed


_ROUTE_KEYS = frozenset((r.method, r.path, r.function) for r in SERVED_ROUTES)
# The /v1 contract's resources, for the fallbacks answered before routing (Conductor's /api
# answers them in its own error shape, through its own not-found handler).
_SERVED_KEYS = frozenset((r.method, r.path) for r in ROUTES)
_SERVED_PATHS = frozenset(r.path for r in ROUTES)
# Whether API Gateway guards a route with a key or SigV4 (``Route.gateway_auth``); a method a
# resource does not serve reaches its fallback (``ANY``), guarded as its prefix is.
_GUARDED = {(r.method, r.path): r.gateway_auth for r in ROUTED}


def unrouted(method: str, resource: str, path: str) -> tuple[int, dict[str, Any], dict[str, str]]:
    """What a request the route table does not serve answers: 405 naming the methods its
    resource serves, or 404 for a path no route serves (status, problem, headers)."""
    allowed = declared_methods(resource)
    if allowed:
        listed = ", ".join(allowed)
        detail = f"{method} is not allowed on {resource} (allowed: {listed})"
        body = problem(405, "Method not allowed", detail, slug="method-not-allowed")
        return 405, body, {"Allow": listed}
    return 404, problem(404, "Not found", f"no route for {method} {path}", slug="no-route"), {}


_INTEGER = re.compile(r"-?[0-9]+")


def _bounded_int(raw: str, name: str, low: int, high: int) -> int:
    if not _INTEGER.fullmatch(raw):
        raise ValidationFailed([Problem(name, f"{raw!r} is not a whole number")])
    # A run of more than 20 digits is out of any range (and int() refuses past 4,300 digits).
    if len(raw.lstrip("-")) > 20 or not low <= int(raw) <= high:
        shown = raw if len(raw) <= 24 else raw[:20] + "…"
        raise ValidationFailed([Problem(name, f"must be between {low} and {high}, not {shown}")])
    return int(raw)


def _item(model: type[Item], sent: Any, where: str) -> Item | RefusedItem:
    """One item of a batch body, as ``model`` (strictly, as :meth:`Api.body` reads a body)."""
    try:
        check_text(sent, where, depth=2)  # the body's nesting limit, counted from the body
        return model.model_validate_json(jsontext.dumps(sent), strict=True)
    except ValidationError as e:
        return RefusedItem(sent, validation_error(e, where))
    except ValidationFailed as e:
        return RefusedItem(sent, e)
    except LoneSurrogate as e:
        return RefusedItem(sent, ValidationFailed([Problem(e.path, e.reason)]))


class Api:
    """An API function: resolver + logger + metrics + engine, wired once per container."""

    def __init__(self, function: str) -> None:
        if runtime.settings().stage == "local":
            # The local server runs every function in one process, several requests at a time.
            per_thread_router_state()
        self.function = function
        self.logger = Logger(service=f"baton-{function}")
        self.metrics = EphemeralMetrics(service=f"baton-{function}")
        self.resolver = APIGatewayRestResolver()
        self._sink = EmfMetrics(self.metrics)
        self.registered: set[tuple[str, str]] = set()
        self._install_error_handlers()

    def route(self, method: str, path: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Register a view for a route of the route table (and only for one of those)."""
        if (method, path, self.function) not in _ROUTE_KEYS:
            raise LookupError(f"{method} {path} is not a route of {self.function!r}")
        self.registered.add((method, path))
        rule = path.replace("{", "<").replace("}", ">")
        return self.resolver.route(rule=rule, method=method)

    # --- request helpers -----------------------------------------------------------------------

    def log_keys(self, **keys: object) -> None:
        """Ids to carry on every log line of this invocation (per thread: see ``isolation``)."""
        self.logger.thread_safe_append_keys(**keys)

    def engine(self) -> Engine:
        return runtime.engine(self._sink)

    def client_gone(self) -> Callable[[], bool] | None:
        """Whether the caller hung up, where the runtime can tell (the local server; in Lambda
        behind API Gateway it cannot: None)."""
        probe = getattr(self.resolver.lambda_context, "client_gone", None)
        return probe if callable(probe) else None

    def raw_body(self) -> str | None:
        event = self.resolver.current_event
        body = event.body
        if body is not None and event.is_base64_encoded:
            try:
                body = base64.b64decode(body).decode("utf-8")
            except (binascii.Error, UnicodeDecodeError):
                raise MalformedRequest("request body is not UTF-8 JSON") from None
        return body

    def json(self) -> Any:
        """The body as strict JSON (see ``baton.api.json_input``); empty is ``{}``."""
        return parse_json_body(self.raw_body())

    def body(self, model: type[M]) -> M:
        """The body validated as ``model``, with strict types (a boolean is not a number)."""
        raw = self.raw_body()
        data = parse_json_body(raw)
        if not isinstance(data, dict):
            raise ValidationFailed([Problem("$", "the request body must be a JSON object")])
        try:
            return model.model_validate_json(raw or "{}", strict=True)
        except ValidationError as e:
            raise validation_error(e) from None

    def body_items(self, model: type[M], field: str, item: type[Item]) -> list[Item | RefusedItem]:
        """The items of a batch body, ``model`` holding only ``field``, a list of ``item``: each
        item validated on its own, so a malformed one (a NUL in its output, an attempt past the
        column, a missing workerId) comes back as a :class:`RefusedItem` and never fails the
        others. A body that is not such an object (not JSON, unknown keys, too few or too many
        items) is refused whole, as :meth:`body` refuses it."""
        try:
            return list(getattr(self.body(model), field))
        except (ValidationFailed, MalformedRequest) as whole:
            key = model.model_fields[field].alias or field
            if isinstance(whole, ValidationFailed) and not all(
                p.path.startswith(f"{key}[") for p in whole.problems
            ):
                raise  # the body itself is wrong, not only some of its items
            data = parse_json(self.raw_body() or "{}", "request body", strings=False)
            sent = data.get(key) if isinstance(data, dict) and data.keys() == {key} else None
            if not isinstance(sent, list):
                raise whole from None
            items = [_item(item, value, f"{key}[{k}]") for k, value in enumerate(sent)]
            if not any(isinstance(i, RefusedItem) for i in items):
                raise whole from None
            # The list's own limits (its length) still refuse the body whole: checked with an
            # unvalidated stand-in for each refused item (instances are taken as they are).
            stand_ins = [item.model_construct() if isinstance(i, RefusedItem) else i for i in items]
            try:
                model.model_validate({field: stand_ins})
            except ValidationError as e:
                raise validation_error(e) from None
            return items

    def query(self, name: str) -> str | None:
        params = self.resolver.current_event.query_string_parameters or {}
        value = params.get(name)
        if value in (None, ""):
            return None
        check_string(value, name)
        return value

    def query_int(self, name: str, default: int, *, low: int = 1, high: int = 1000) -> int:
        """An integer query parameter between ``low`` and ``high``, or ``default``."""
        raw = self.query(name)
        return default if raw is None else _bounded_int(raw, name, low, high)

    def query_bool(self, name: str, default: bool) -> bool:
        """A ``true``/``false`` query parameter, or ``default``."""
        raw = self.query(name)
        if raw is None:
            return default
        if raw not in ("true", "false"):
            raise ValidationFailed([Problem(name, f"true or false, not {raw!r}")])
        return raw == "true"

    def path_int(self, value: str, name: str, *, low: int = 1, high: int) -> int:
        """An integer path parameter between ``low`` and ``high``."""
        return _bounded_int(self.path(value), name, low, high)

    @staticmethod
    def path(value: str) -> str:
        """A path parameter, decoded and checked like any other text from outside."""
        decoded = unquote(value)
        check_string(decoded, "path")
        return decoded

    def ok(
        self, body: Any, status: int = 200, headers: dict[str, str] | None = None
    ) -> Response[Any]:
        return Response(status_code=status, content_type=JSON, body=_dumps(body), headers=headers)

    # --- invocation ----------------------------------------------------------------------------

    def handler(self) -> LambdaHandler:
        """The Lambda entry point: logs with the request id, flushes metrics per invocation."""

        @self.logger.inject_lambda_context(clear_state=True)
        def handle(event: dict[str, Any], context: Any) -> dict[str, Any]:
            self.logger.thread_safe_clear_keys()
            request_id = (event.get("requestContext") or {}).get("requestId")
            if request_id:
                self.log_keys(request_id=request_id)
            method, resource = event.get("httpMethod"), event.get("resource")
            refused = self._key_refused(event, method, resource)
            if refused is not None:
                return refused
            if resource in _SERVED_PATHS and (method, resource) not in _SERVED_KEYS:
                # A fallback (ANY) of a served resource: answered by the resource, never by a
                # route whose template also matches the path (GET /v1/instances/batch is not
                # GET /v1/instances/{id} with the id "batch", as API Gateway routes it too).
                status, body, headers = unrouted(str(method), resource, str(event.get("path")))
                return {
                    "statusCode": status,
                    "headers": {"Content-Type": PROBLEM_JSON, **headers},
                    "body": _dumps(body),
                    "isBase64Encoded": False,
                }
            return self.resolver.resolve(event, context)

        return cast(LambdaHandler, self.metrics.log_metrics(handle))

    def _key_refused(
        self, event: dict[str, Any], method: Any, resource: Any
    ) -> dict[str, Any] | None:
        """Behind an HTTP API (no usage-plan keys) the function checks ``x-api-key`` itself on
        every route API Gateway would have guarded: a 401 (no key) or 403 (not a current key)
        problem, or None to go on."""
        ring = runtime.api_key_ring()
        guarded = _GUARDED.get((method, resource), _GUARDED.get(("ANY", resource), False))
        if ring is None or not guarded:
            return None
        headers = {str(k).lower(): v for k, v in (event.get("headers") or {}).items()}
        verdict = ring.check(headers.get("x-api-key"))
        if verdict == "ok":
            return None
        if verdict == "missing":
            status, title, detail = 401, "Unauthorized", "send an API key in the x-api-key header"
        else:
            status, title = 403, "Forbidden"
            detail = "the x-api-key header is not a current API key; ask for a new key"
        self.logger.info("request refused", extra={"status": status, "error": "ApiKey"})
        body = problem(status, title, detail, slug="unauthorized" if status == 401 else "forbidden")
        return {
            "statusCode": status,
            "headers": {"Content-Type": PROBLEM_JSON},
            "body": _dumps(body),
            "isBase64Encoded": False,
        }

    def _install_error_handlers(self) -> None:
        app = self.resolver

        @app.exception_handler(BatonError)  # type: ignore[untyped-decorator]
        def baton_error(err: BatonError) -> Response[Any]:
            status, body, headers = from_error(err, self._request_path())
            level = self.logger.warning if status >= 500 else self.logger.info
            level("request refused", extra={"status": status, "error": type(err).__name__})
            return Response(
                status_code=status, content_type=PROBLEM_JSON, body=_dumps(body), headers=headers
            )

        @app.not_found
        def not_found(_: Exception) -> Response[Any]:
            # Reached through the route table's fallbacks (baton.routes.FALLBACK_ROUTES): a
            # method the resource does not serve (405 naming those it does), or a path no
            # route serves (404).
            event = app.current_event
            status, body, headers = unrouted(event.http_method, event.resource, event.path)
            return Response(
                status_code=status,
                content_type=PROBLEM_JSON,
                body=_dumps(body),
                headers=headers,
            )

        @app.exception_handler(Exception)  # type: ignore[untyped-decorator]
        def unexpected(err: Exception) -> Response[Any]:
            self.logger.exception("unexpected error")
            body = problem(
                500,
                "Internal error",
                "an unexpected error occurred; it was logged",
                slug="internal",
            )
            return Response(status_code=500, content_type=PROBLEM_JSON, body=_dumps(body))

    def _request_path(self) -> str | None:
        try:
            return str(self.resolver.current_event.path)
        except (AttributeError, KeyError):
            return None
