"""Per-thread request state for Powertools, where one process serves several invocations at once.

Powertools' event handler keeps the event and context of the invocation in progress on the
``BaseRouter`` class (``BaseRouter.current_event = ...`` in ``resolve``), shared by every resolver
in the process. In Lambda a process serves one invocation at a time, so that is safe. The local
server (``baton dev``) runs every function's "containers" as threads of one process, and two
concurrent requests would then read each other's event: routing, bodies and parameters mixed.
This makes those class attributes per thread, which is what each Lambda container has.
"""

from __future__ import annotations

import threading
from abc import ABCMeta
from typing import Any

from aws_lambda_powertools.event_handler.api_gateway import BaseRouter

_PER_INVOCATION = ("current_event", "lambda_context")
_state = threading.local()


class _PerThread:
    """A class attribute whose value belongs to the thread that set it."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, obj: object, owner: type | None = None) -> Any:
        return getattr(_state, self.name, None)

    def __set__(self, obj: object, value: Any) -> None:
        setattr(_state, self.name, value)


class _PerThreadRouterMeta(ABCMeta):
    """Routes class-level assignments of the per-invocation attributes to the current thread."""

    def __setattr__(cls, name: str, value: Any) -> None:
        if name in _PER_INVOCATION:
            setattr(_state, name, value)
        else:
            super().__setattr__(name, value)


def per_thread_router_state() -> None:
    """Make Powertools' per-invocation router state per thread (idempotent)."""
    if type(BaseRouter) is _PerThreadRouterMeta:
        return
    BaseRouter.__class__ = _PerThreadRouterMeta  # type: ignore[assignment]  # same layout as ABCMeta
    for name in _PER_INVOCATION:
        type.__setattr__(BaseRouter, name, _PerThread(name))
