"""Baton worker SDK: handlers for job types, a runner that polls for jobs, and an API client.

from baton_worker import JobContext, NonRetryableError, Registry, Runner

registry = Registry()

@registry.handler("charge-card")
def charge(ctx: JobContext) -> dict[str, object]:
    if ctx.input["amount"] <= 0:
        raise NonRetryableError("nothing to charge")
    return {"receipt": "R-1001"}

Runner(registry, url="http://127.0.0.1:8080", api_key="...").run()

The names below are imported on first use, so importing a submodule (``baton_worker.cli`` for
``baton --help``, ``baton_worker.env``) does not pay for httpx and the runner.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from baton_worker.version import __version__

if TYPE_CHECKING:
    from baton_worker.auth import ApiKeyAuth, AwsSigV4Auth
    from baton_worker.backoff import Backoff, RetryPolicy
    from baton_worker.client import BatonClient
    from baton_worker.context import JobContext
    from baton_worker.errors import (
        AuthenticationError,
        BadRequestError,
        BatonApiError,
        BatonError,
        ConflictError,
        JobError,
        NonRetryableError,
        NotFoundError,
        PayloadTooLargeError,
        PermissionDeniedError,
        ProblemItem,
        RateLimitedError,
        ServerError,
        TransportError,
        UnavailableError,
        ValidationError,
    )
    from baton_worker.metrics import InMemoryMetrics, MetricsHook, NoopMetrics
    from baton_worker.registry import Registry
    from baton_worker.runner import Runner, RunnerOptions
    from baton_worker.transports import JobTransport, PollTransport, SqsTransport

_EXPORTS = {
    "baton_worker.auth": ("ApiKeyAuth", "AwsSigV4Auth"),
    "baton_worker.backoff": ("Backoff", "RetryPolicy"),
    "baton_worker.client": ("BatonClient",),
    "baton_worker.context": ("JobContext",),
    "baton_worker.errors": (
        "AuthenticationError",
        "BadRequestError",
        "BatonApiError",
        "BatonError",
        "ConflictError",
        "JobError",
        "NonRetryableError",
        "NotFoundError",
        "PayloadTooLargeError",
        "PermissionDeniedError",
        "ProblemItem",
        "RateLimitedError",
        "ServerError",
        "TransportError",
        "UnavailableError",
        "ValidationError",
    ),
    "baton_worker.metrics": ("InMemoryMetrics", "MetricsHook", "NoopMetrics"),
    "baton_worker.registry": ("Registry",),
    "baton_worker.runner": ("Runner", "RunnerOptions"),
    "baton_worker.transports": ("JobTransport", "PollTransport", "SqsTransport"),
}
_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'baton_worker' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_MODULE_OF})


__all__ = [
    "ApiKeyAuth",
    "AuthenticationError",
    "AwsSigV4Auth",
    "Backoff",
    "BadRequestError",
    "BatonApiError",
    "BatonClient",
    "BatonError",
    "ConflictError",
    "InMemoryMetrics",
    "JobContext",
    "JobError",
    "JobTransport",
    "MetricsHook",
    "NonRetryableError",
    "NoopMetrics",
    "NotFoundError",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "PollTransport",
    "ProblemItem",
    "RateLimitedError",
    "Registry",
    "RetryPolicy",
    "Runner",
    "RunnerOptions",
    "ServerError",
    "SqsTransport",
    "TransportError",
    "UnavailableError",
    "ValidationError",
    "__version__",
]
