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
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar, cast
from urllib.parse import unquote

import orjson
from aws_lambda_powertools import Logger
from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.metrics import EphemeralMetrics
from baton import jsontext
from baton.api.json_input import (
    LoneSurrogate,
    check_json_body,
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


# Types orjson would write its own way, given to ``default`` (``str``) as json.dumps gives them.
_AS_JSON_DOES = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS


def _dumps(body: Any) -> str:
    """An answer's body as compact JSON: orjson (a poll of 100 jobs 193 -> 13 µs), or json.dumps
    for what orjson refuses (an integer past 64 bits, a non-string key, a lone surrogate in an
    echoed value). Non-ASCII text is written as UTF-8 rather than ``\\u`` escapes."""
    try:
        return orjson.dumps(body, default=str, option=_AS_JSON_DOES).decode()
    except TypeError:
        return json.dumps(body, separators=(",", ":"), default=str)


@dataclass(frozen=True, slots=True)
class DirectCall:
    """An RPC answered by its REST view without the JSON wire (see :meth:`Api.direct`): the
    REST request the RPC's message amounts to, its body as the JSON values REST would parse."""

    method: str
    resource: str  # the route's template
    path: str
    path_parameters: Mapping[str, str]
    body: Any
    # The caller knows the body passes what check_text checks: a binary message without a zero
    # byte holds no NUL, its strings are valid UTF-8 (no lone surrogate), and protobuf's decoder
    # refuses nesting past 100 messages (about 33 levels of Struct), far within check_text's 200.
    text_checked: bool = False


@dataclass(frozen=True, slots=True)
class DirectAnswer:
    """A view's answer to a :class:`DirectCall`: the status, headers and body REST would send,
    the body as the JSON value, before serialization (a problem's body for an error)."""

    status: int
    body: Any
    headers: Mapping[str, str]


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


def _item(
    model: type[Item], sent: Any, where: str, direct: DirectCall | None
) -> Item | RefusedItem:
    """One item of a batch body, as ``model`` (strictly, as :meth:`Api.body` reads a body);
    ``direct``: validated from the JSON values themselves (an RPC's message), not their text."""
    try:
        # The body's nesting limit, counted from the body.
        if direct is None or not direct.text_checked:
            check_text(sent, where, depth=2)
        if direct is not None:
            return model.model_validate(sent, strict=True)
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
        # Views return their body as a value (``ok``); it is serialized here for REST only.
        self.resolver = APIGatewayRestResolver(serializer=_dumps)
        self._sink = EmfMetrics(self.metrics)
        self.registered: set[tuple[str, str]] = set()
        self._views: dict[tuple[str, str], Callable[..., Any]] = {}
        self._direct = threading.local()  # the DirectCall being answered, per thread
        self._entry: Callable[[dict[str, Any], Any], Any] | None = None
        self._install_error_handlers()

    def route(self, method: str, path: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Register a view for a route of the route table (and only for one of those)."""
        if (method, path, self.function) not in _ROUTE_KEYS:
            raise LookupError(f"{method} {path} is not a route of {self.function!r}")
        self.registered.add((method, path))
        rule = path.replace("{", "<").replace("}", ">")
        register = self.resolver.route(rule=rule, method=method)

        def decorate(view: Callable[..., Any]) -> Callable[..., Any]:
            self._views[(method, path)] = view
            return register(view)

        return decorate

    def serves_directly(self, method: str, path: str) -> bool:
        """Whether a view of this function serves ``method path`` (for :meth:`direct`)."""
        return (method, path) in self._views

    def direct(self, call: DirectCall, event: dict[str, Any], context: Any) -> DirectAnswer:
        """Answer ``call`` with the view of its route, as REST would (the same key check, body
        validation, engine call, errors, logs and metrics), without JSON text either way: the
        body is validated from its values, and the view's answer comes back as a value.
        ``event`` is the invocation's own (its request id and headers are used)."""
        if self._entry is None:
            self.handler()
        assert self._entry is not None
        self._direct.call = call
        try:
            answer: DirectAnswer = self._entry(event, context)
        finally:
            self._direct.call = None
        return answer

    def _current(self) -> DirectCall | None:
        call: DirectCall | None = getattr(self._direct, "call", None)
        return call

    # --- request helpers -----------------------------------------------------------------------

    def log_keys(self, **keys: object) -> None:
        """Ids to carry on every log line of this invocation (per thread: see ``isolation``)."""
        self.logger.thread_safe_append_keys(**keys)

    def engine(self) -> Engine:
        return runtime.engine(self._sink)

    def client_gone(self) -> Callable[[], bool] | None:
        """Whether the caller hung up, where the runtime can tell (the local server; in Lambda
        behind API Gateway it cannot: None)."""
        context = self._direct.context if self._current() else self.resolver.lambda_context
        probe = getattr(context, "client_gone", None)
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
        direct = self._current()
        if direct is not None:
            return _validated(model, direct)
        raw = self.raw_body()
        data = check_json_body(raw)  # pydantic reads the values from the text
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
            direct = self._current()
            if direct is not None:
                data = direct.body
            else:
                data = parse_json(self.raw_body() or "{}", "request body", strings=False)
            sent = data.get(key) if isinstance(data, dict) and data.keys() == {key} else None
            if not isinstance(sent, list):
                raise whole from None
            items = [_item(item, value, f"{key}[{k}]", direct) for k, value in enumerate(sent)]
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

    def query_all(self, name: str) -> list[str]:
        """Every value of a query parameter given more than once, in order (none: empty)."""
        multi = self.resolver.current_event.multi_value_query_string_parameters or {}
        values = multi.get(name) or []
        for value in values:
            check_string(value, name)
        return [v for v in values if v != ""]

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
        """A view's answer; ``body`` is serialized by the resolver (REST) or taken as it is (an
        RPC answered directly)."""
        return Response(status_code=status, content_type=JSON, body=body, headers=headers)

    # --- invocation ----------------------------------------------------------------------------

    def handler(self) -> LambdaHandler:
        """The Lambda entry point: logs with the request id, flushes metrics per invocation."""

        @self.logger.inject_lambda_context(clear_state=True)
        def handle(event: dict[str, Any], context: Any) -> Any:
            try:
                return serve(event, context)
            finally:
                self._sink.publish()  # the engine's metrics, before log_metrics flushes them

        def serve(event: dict[str, Any], context: Any) -> Any:
            self.logger.thread_safe_clear_keys()
            request_id = (event.get("requestContext") or {}).get("requestId")
            if request_id:
                self.log_keys(request_id=request_id)
            direct = self._current()
            if direct is not None:
                return self._answer(direct, event, context)
            method, resource = event.get("httpMethod"), event.get("resource")
            refused = self._key_refused(event, method, resource)
            if refused is not None:
                status, body = refused
                return {
                    "statusCode": status,
                    "headers": {"Content-Type": PROBLEM_JSON},
                    "body": _dumps(body),
                    "isBase64Encoded": False,
                }
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

        self._entry = self.metrics.log_metrics(handle)
        return cast(LambdaHandler, self._entry)

    def _answer(self, call: DirectCall, event: dict[str, Any], context: Any) -> DirectAnswer:
        """A :class:`DirectCall` through its view, with REST's key check and error mapping."""
        refused = self._key_refused(event, call.method, call.resource)
        if refused is not None:
            status, body = refused
            return DirectAnswer(status, body, {"Content-Type": PROBLEM_JSON})
        self._direct.context = context
        try:
            response = self._views[(call.method, call.resource)](**call.path_parameters)
        except BatonError as err:
            return DirectAnswer(*self._refusal(err))
        except Exception:
            return DirectAnswer(*self._unexpected())
        finally:
            self._direct.context = None
        return DirectAnswer(response.status_code, response.body, dict(response.headers))

    def _key_refused(
        self, event: dict[str, Any], method: Any, resource: Any
    ) -> tuple[int, dict[str, Any]] | None:
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
        return status, body

    def _refusal(self, err: BatonError) -> tuple[int, dict[str, Any], dict[str, str]]:
        """A Baton error's problem (status, body, headers), logged: for both wires."""
        status, body, headers = from_error(err, self._request_path())
        level = self.logger.warning if status >= 500 else self.logger.info
        level("request refused", extra={"status": status, "error": type(err).__name__})
        return status, body, headers

    def _unexpected(self) -> tuple[int, dict[str, Any], dict[str, str]]:
        """An unexpected exception (being handled): logged with its traceback, answered 500."""
        self.logger.exception("unexpected error")
        body = problem(
            500, "Internal error", "an unexpected error occurred; it was logged", slug="internal"
        )
        return 500, body, {"Content-Type": PROBLEM_JSON}

    def _install_error_handlers(self) -> None:
        app = self.resolver

        @app.exception_handler(BatonError)  # type: ignore[untyped-decorator]
        def baton_error(err: BatonError) -> Response[Any]:
            status, body, headers = self._refusal(err)
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
            status, body, _ = self._unexpected()
            return Response(status_code=status, content_type=PROBLEM_JSON, body=_dumps(body))

    def _request_path(self) -> str | None:
        direct = self._current()
        if direct is not None:
            return direct.path
        try:
            return str(self.resolver.current_event.path)
        except (AttributeError, KeyError):
            return None


def _validated(model: type[M], call: DirectCall) -> M:
    """An RPC's body (JSON values) as ``model``: the checks :meth:`Api.body` makes of a JSON
    body's values (NUL, lone surrogates, nesting), then the same strict validation."""
    data = call.body
    if not call.text_checked:
        check_text(data, "$")
    if not isinstance(data, dict):
        raise ValidationFailed([Problem("$", "the request body must be a JSON object")])
    try:
        return model.model_validate(data, strict=True)
    except ValidationError as e:
        raise validation_error(e) from None
