"""The handler registry: job type -> the function that does the work.

Two spellings of one registration: the plain call ``registry.register("t", fn)`` (the pattern every
Baton SDK shares) and the ``@registry.handler("t")`` decorator above a ``def``; both validate the
same way and take ``replace=``. Registering only records a
function reference; the runner looks it up when a job of that type arrives. A handler takes a
:class:`~baton_worker.context.JobContext` and returns the variables to set on the instance (a
mapping, or None for nothing). It may be a plain function (run on the runner's thread pool) or an
``async def`` (run on the runner's event loop).
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from baton_worker.context import JobContext

JobResult = Mapping[str, Any] | None
SyncHandler = Callable[["JobContext"], JobResult]
AsyncHandler = Callable[["JobContext"], Awaitable[JobResult]]
Handler = SyncHandler | AsyncHandler
H = TypeVar("H", bound=Callable[["JobContext"], Any])

# The engine's rule for job type names (``baton.definitions.JOB_TYPE_PATTERN``).
JOB_TYPE_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$")


def is_async_callable(fn: Callable[..., Any]) -> bool:
    """True for ``async def`` functions, partials of them, and objects with an async
    ``__call__``."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(fn, "__call__", None)  # noqa: B004 - we want the method, not callable()
    return call is not None and inspect.iscoroutinefunction(call)


def _check_job_type(job_type: str) -> None:
    if not isinstance(job_type, str) or not JOB_TYPE_PATTERN.match(job_type):
        raise ValueError(
            f"invalid job type {job_type!r}: letters, digits and _.:- (a letter or digit "
            "first), at most 128 characters"
        )


@dataclass(frozen=True, slots=True)
class RegisteredHandler:
    """A handler as registered: its job type, the function, and whether it is a coroutine."""

    job_type: str
    fn: Callable[[JobContext], Any]
    is_async: bool

    @property
    def name(self) -> str:
        return getattr(self.fn, "__qualname__", None) or repr(self.fn)


class Registry:
    """Handlers by job type.

    >>> registry = Registry()
    >>> def charge(ctx):
    ...     return {"receipt": "R-1"}
    >>> registry.register("charge-card", charge)
    >>> @registry.handler("ship-parcel")
    ... def ship(ctx):
    ...     return {"tracking": "T-1"}
    >>> registry.job_types
    ('charge-card', 'ship-parcel')
    """

    def __init__(self) -> None:
        self._handlers: dict[str, RegisteredHandler] = {}

    def register(self, job_type: str, fn: Handler, *, replace: bool = False) -> None:
        """Register ``fn`` (a plain or ``async`` function of a ``JobContext``) as the handler of
        ``job_type``. A second handler for a type is an error unless ``replace``; an invalid job
        type or a ``fn`` that is not callable is refused at once, not when the first job would
        have arrived."""
        _check_job_type(job_type)
        self._add(job_type, fn, replace=replace)

    def handler(self, job_type: str, *, replace: bool = False) -> Callable[[H], H]:
        """Decorator: :meth:`register` the function below it as the handler of ``job_type``
        (``@registry.handler("charge-card")`` above a ``def``, plain or ``async``); returns the
        function unchanged. The job type is checked at once, before the function is defined."""
        _check_job_type(job_type)

        def decorate(fn: H) -> H:
            self._add(job_type, fn, replace=replace)
            return fn

        return decorate

    def _add(self, job_type: str, fn: Handler, *, replace: bool) -> None:
        if not callable(fn):
            raise TypeError(f"the handler for {job_type!r} is not callable: {fn!r}")
        existing = self._handlers.get(job_type)
        if existing is not None and not replace and existing.fn is not fn:
            raise ValueError(f"job type {job_type!r} already has a handler: {existing.name}")
        self._handlers[job_type] = RegisteredHandler(job_type, fn, is_async_callable(fn))

    def get(self, job_type: str) -> RegisteredHandler | None:
        """The handler of ``job_type``, or None."""
        return self._handlers.get(job_type)

    @property
    def job_types(self) -> tuple[str, ...]:
        """Every registered job type, in registration order."""
        return tuple(self._handlers)

    def __contains__(self, job_type: object) -> bool:
        return job_type in self._handlers

    def __len__(self) -> int:
        return len(self._handlers)

    def __iter__(self) -> Iterator[RegisteredHandler]:
        return iter(tuple(self._handlers.values()))

    def __repr__(self) -> str:
        return f"Registry({list(self._handlers)!r})"


__all__ = [
    "AsyncHandler",
    "Handler",
    "JobResult",
    "RegisteredHandler",
    "Registry",
    "SyncHandler",
    "is_async_callable",
]
