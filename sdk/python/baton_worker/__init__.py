"""Baton worker SDK: handlers for job types, a runner that polls for jobs, and an API client.

from baton_worker import JobContext, NonRetryableError, Registry, Runner

registry = Registry()

@registry.handler("charge-card")
def charge(ctx: JobContext) -> dict[str, object]:
    if ctx.input["amount"] <= 0:
        raise NonRetryableError("nothing to charge")
    return {"receipt": "R-1001"}

Runner(registry, url="http://127.0.0.1:8080", api_key="...").run()
"""

from __future__ import annotations

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
from baton_worker.version import __version__

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
    "MetricsHook",
    "NonRetryableError",
    "NoopMetrics",
    "NotFoundError",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "ProblemItem",
    "RateLimitedError",
    "Registry",
    "RetryPolicy",
    "Runner",
    "RunnerOptions",
    "ServerError",
    "TransportError",
    "UnavailableError",
    "ValidationError",
    "__version__",
]
