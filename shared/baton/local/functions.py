"""The Lambda functions of ``functions/<name>/handler.py``, run in this process as Lambda runs them.

Each function gets a pool of "containers". A container is one import of the handler module
(its own module-level state: settings, resolver app) and serves one invocation at a time, as a
Lambda execution environment does; a second concurrent request gets a second container, started
lazily (a cold start). This matters beyond fidelity: a Powertools resolver keeps the current
event on the app object, so two threads sharing one import would mix events.

As Lambda scales a function to one environment per concurrent request, a function has up to
``concurrency`` containers (``BATON_LOCAL_CONCURRENCY``, default 100): long-polls hold theirs for
up to 20 s, so with a handful of containers a few idle workers would queue every other call of
the jobs function behind their waits. A request that finds them all busy waits
``THROTTLE_AFTER_SECONDS`` for one, then is throttled (429, as Lambda throttles an invocation
beyond the function's concurrency). The database connections are not per container: the
functions share one pool.
"""

from __future__ import annotations

import importlib.util
import logging
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

from baton.errors import BatonError
from baton.local.events import ACCOUNT_ID, REGION
from baton.local.usage import meter

log = logging.getLogger("baton.local.functions")

Handler = Callable[[dict[str, Any], Any], Any]

HANDLER_FILE = "handler.py"
HANDLER_NAME = "handler"
MODULE_PREFIX = "baton_function_"
FUNCTION_VERSION = "$LATEST"
MEMORY_MB = 512
# API Gateway gives up on an integration after 29 s; scheduled functions may run longer.
API_TIMEOUT_SECONDS = 29.0
SCHEDULED_TIMEOUT_SECONDS = 60.0
DEFAULT_MAX_CONTAINERS = 100
# How long a request waits for a container when all of a function's are busy (absorbs a burst).
THROTTLE_AFTER_SECONDS = 1.0


class FunctionThrottled(BatonError):
    """Every container of a function stayed busy: the invocation never ran (safe to repeat)."""

    title = "Too many requests"

    def __init__(self, function: str, concurrency: int) -> None:
        super().__init__(
            f"the {function} function is running {concurrency} requests at once, its local "
            f"concurrency (BATON_LOCAL_CONCURRENCY); retry shortly"
        )


class FunctionUnavailable(BatonError):
    """A function's handler cannot be loaded (missing file, import error, no ``handler``)."""

    title = "Function unavailable"

    def __init__(self, function: str, reason: str) -> None:
        self.function = function
        self.reason = reason
        super().__init__(f"function {function!r} is unavailable: {reason}")


def default_functions_dir() -> Path:
    """``<repo>/functions``, found from this package's location (an editable install), else
    ``./functions``."""
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / "functions").is_dir() and (parent / "shared" / "baton").is_dir():
            return parent / "functions"
    return Path.cwd() / "functions"


@dataclass(frozen=True, slots=True)
class CognitoIdentity:
    cognito_identity_id: str | None = None
    cognito_identity_pool_id: str | None = None


@dataclass(frozen=True, slots=True)
class LocalLambdaContext:
    """The ``context`` argument, with the attributes of the Python runtime's LambdaContext."""

    function_name: str
    function_version: str
    invoked_function_arn: str
    memory_limit_in_mb: str  # a string in the real Python runtime (read from its environment)
    aws_request_id: str
    log_group_name: str
    log_stream_name: str
    deadline: float  # time.monotonic() at which Lambda would stop the invocation
    identity: CognitoIdentity = field(default_factory=CognitoIdentity)
    client_context: None = None
    tenant_id: str | None = None
    # Local only (Lambda behind API Gateway has no such thing): tells whether the HTTP client
    # that sent the request has closed its connection. Handlers read it with getattr.
    client_gone: Callable[[], bool] | None = None

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self.deadline - time.monotonic()) * 1000))


def function_name(name: str) -> str:
    return f"baton-{name}"


@dataclass(slots=True)
class _Container:
    module_name: str
    handler: Handler
    log_stream_name: str


class LocalFunction:
    """One function: its handler file and the containers currently loaded from it."""

    def __init__(self, name: str, handler_path: Path, *, max_containers: int) -> None:
        self.name = name
        self.handler_path = handler_path
        self.max_containers = max_containers
        self._slots = threading.BoundedSemaphore(max_containers)
        self._lock = threading.Lock()
        self._idle: list[_Container] = []
        self._indices: set[int] = set()

    def invoke(
        self,
        event: dict[str, Any],
        *,
        timeout_seconds: float,
        client_gone: Callable[[], bool] | None = None,
    ) -> Any:
        """Call the handler in a free container, waiting ``THROTTLE_AFTER_SECONDS`` at most for
        one if all are busy (then FunctionThrottled: the handler did not run)."""
        if not self._slots.acquire(timeout=THROTTLE_AFTER_SECONDS):
            raise FunctionThrottled(self.name, self.max_containers)
        try:
            container = self._checkout()
            try:
                context = self._context(container, timeout_seconds, client_gone)
                usage = meter()
                if usage is None:
                    return container.handler(event, context)
                started = time.perf_counter()
                try:
                    return container.handler(event, context)
                finally:
                    usage.invocation(self.name, time.perf_counter() - started)
            finally:
                with self._lock:
                    self._idle.append(container)
        finally:
            self._slots.release()

    def _context(
        self,
        container: _Container,
        timeout_seconds: float,
        client_gone: Callable[[], bool] | None = None,
    ) -> LocalLambdaContext:
        fn = function_name(self.name)
        return LocalLambdaContext(
            function_name=fn,
            function_version=FUNCTION_VERSION,
            invoked_function_arn=f"arn:aws:lambda:{REGION}:{ACCOUNT_ID}:function:{fn}",
            memory_limit_in_mb=str(MEMORY_MB),
            aws_request_id=str(uuid.uuid4()),
            log_group_name=f"/aws/lambda/{fn}",
            log_stream_name=container.log_stream_name,
            deadline=time.monotonic() + timeout_seconds,
            client_gone=client_gone,
        )

    def _checkout(self) -> _Container:
        with self._lock:
            if self._idle:
                return self._idle.pop()
            index = 1
            while index in self._indices:
                index += 1
            self._indices.add(index)
        try:
            return self._cold_start(index)
        except BaseException:
            with self._lock:
                self._indices.discard(index)
            raise

    def _cold_start(self, index: int) -> _Container:
        module_name = MODULE_PREFIX + self.name + ("" if index == 1 else f"_{index}")
        module = _load_module(self.name, module_name, self.handler_path)
        handler = getattr(module, HANDLER_NAME, None)
        if not callable(handler):
            sys.modules.pop(module_name, None)
            raise FunctionUnavailable(self.name, f"{self.handler_path} defines no {HANDLER_NAME}()")
        day = datetime.now(UTC).strftime("%Y/%m/%d")
        stream = f"{day}/[{FUNCTION_VERSION}]{uuid.uuid4().hex}"
        log.info(
            "cold start",
            extra={"function": self.name, "container": index, "module_name": module_name},
        )
        return _Container(module_name, handler, stream)


def _load_module(function: str, module_name: str, path: Path) -> ModuleType:
    if not path.is_file():
        raise FunctionUnavailable(function, f"no handler at {path}")
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise FunctionUnavailable(function, f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    # Registered before running it: dataclasses and pydantic look their module up by name.
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        sys.modules.pop(module_name, None)
        log.exception("handler import failed", extra={"function": function, "path": str(path)})
        raise FunctionUnavailable(function, f"importing {path} failed: {e!r}") from e
    return module


class FunctionRegistry:
    """The functions of one ``functions/`` folder, each loaded on first use."""

    def __init__(self, functions_dir: Path, *, max_containers: int = DEFAULT_MAX_CONTAINERS):
        self.functions_dir = functions_dir
        self._max_containers = max_containers
        self._functions: dict[str, LocalFunction] = {}
        self._lock = threading.Lock()

    def function(self, name: str) -> LocalFunction:
        with self._lock:
            fn = self._functions.get(name)
            if fn is None:
                path = self.functions_dir / name / HANDLER_FILE
                fn = LocalFunction(name, path, max_containers=self._max_containers)
                self._functions[name] = fn
            return fn

    def invoke(
        self,
        name: str,
        event: dict[str, Any],
        *,
        timeout_seconds: float,
        client_gone: Callable[[], bool] | None = None,
    ) -> Any:
        return self.function(name).invoke(
            event, timeout_seconds=timeout_seconds, client_gone=client_gone
        )
