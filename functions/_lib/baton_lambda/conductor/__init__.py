"""The Conductor-compatible API under ``/api`` (the ``conductor`` function): what
conductor-python 2.0.0's workers, metadata client and workflow client call, over Baton's engine.
Thin: the translations live in ``baton.conductor`` (definitions, views, errors, auth, sync), the
work in the engine. One module per group of routes (:mod:`.workers`, :mod:`.metadata`,
:mod:`.workflows`), each registered on the function's own :class:`~baton_lambda.http.Api` (one
per container: a resolver keeps its current request on itself)."""

from __future__ import annotations

from baton_lambda.conductor.common import install_errors_and_auth
from baton_lambda.conductor.metadata import MetadataRoutes
from baton_lambda.conductor.workers import WorkerRoutes
from baton_lambda.conductor.workflows import WorkflowRoutes
from baton_lambda.http import Api


def conductor_api() -> Api:
    """The conductor function's API: error answers in Conductor's shape, the token check, and
    every route of ``baton.routes.CONDUCTOR_ROUTES``."""
    api = Api("conductor")
    install_errors_and_auth(api)
    WorkerRoutes(api)
    MetadataRoutes(api)
    WorkflowRoutes(api)
    return api


__all__ = ["conductor_api"]
