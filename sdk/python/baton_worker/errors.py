"""The SDK's one error family.

``BatonError`` is the root. Two branches hang off it:

* :class:`JobError` is what a *handler* raises to fail its job on purpose. It carries the retry
  semantics: ``non_retryable`` makes the runner fail the job with ``retryable=False`` (the engine
  skips the remaining retries); ``next_retry_delay`` replaces the step's retry delay for the one
  retry this failure schedules. :class:`NonRetryableError` is the short spelling of
  ``JobError(..., non_retryable=True)``. Any other exception a handler raises fails the job as
  retryable, after the step's own delay.
* :class:`BatonApiError` is what the *client* raises when the API answers with an error
  (``application/problem+json``, RFC 9457). One subclass per status family, so callers can catch
  ``NotFoundError`` rather than compare numbers. :class:`TransportError` covers requests that got
  no answer at all (connection refused, reset, timed out).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

MAX_RETRY_DELAY = timedelta(days=365)  # the API's limit on nextRetryDelaySeconds


class BatonError(Exception):
    """Root of every error the SDK raises on purpose."""


# --- handler failures ---------------------------------------------------------------------------


class JobError(BatonError):
    """Fail the current job with ``message``; retried by the engine unless ``non_retryable``.

    ``next_retry_delay`` (seconds, or a ``timedelta``; 0 to 365 days) is how long the engine
    waits before that retry, instead of the step's ``retryDelaySeconds`` and backoff: ``0`` to
    retry at once, or the delay a rate-limited service asked for. It applies to this one retry
    only, and means nothing for a non-retryable failure.

    ``output`` (an object) goes with the failure: the step keeps it as its output when this
    failure ends the step (no retry follows), as Conductor keeps a failed task's
    ``outputData``; an ``optional`` step's successors read it. One that is not storable JSON,
    or above the step output's soft limit, is left out (the failure still goes, and the runner
    logs why).
    """

    def __init__(
        self,
        message: str,
        *,
        non_retryable: bool = False,
        next_retry_delay: float | timedelta | None = None,
        output: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.non_retryable = non_retryable
        self.next_retry_delay = _retry_delay(next_retry_delay)
        if output is not None and not isinstance(output, Mapping):
            raise TypeError(f"output is an object (a Mapping), not {type(output).__name__}")
        self.output = output

    @property
    def next_retry_delay_seconds(self) -> float | None:
        """``next_retry_delay`` in seconds, as the API takes it (None: the step's own delay)."""
        return None if self.next_retry_delay is None else self.next_retry_delay.total_seconds()


def _retry_delay(value: float | timedelta | None) -> timedelta | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float | timedelta):
        raise TypeError(f"next_retry_delay is seconds or a timedelta, not {value!r}")
    if not isinstance(value, timedelta):
        if not math.isfinite(value):
            raise ValueError(f"next_retry_delay must be a finite number of seconds, not {value}")
        value = timedelta(seconds=value)
    if not timedelta(0) <= value <= MAX_RETRY_DELAY:
        raise ValueError(f"next_retry_delay must be between 0 and 365 days, not {value}")
    return value


class NonRetryableError(JobError):
    """Fail the current job at once: the engine ignores the step's remaining retries."""

    def __init__(self, message: str, *, output: Mapping[str, Any] | None = None) -> None:
        super().__init__(message, non_retryable=True, output=output)


# --- API errors ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProblemItem:
    """One entry of a problem's ``errors`` list: where (a JSON path) and what."""

    path: str
    message: str


class BatonApiError(BatonError):
    """The API answered with an error status. Carries the RFC 9457 problem's fields."""

    def __init__(
        self,
        status: int,
        title: str,
        detail: str = "",
        *,
        errors: Sequence[ProblemItem] = (),
        type: str | None = None,
        instance: str | None = None,
        retry_after: float | None = None,
        method: str | None = None,
        url: str | None = None,
        hint: str | None = None,
    ) -> None:
        self.status = status
        self.title = title
        self.detail = detail
        self.errors = tuple(errors)
        self.type = type
        self.instance = instance
        self.retry_after = retry_after
        self.method = method
        self.url = url
        self.hint = hint
        super().__init__(self.summary())

    def with_hint(self, hint: str) -> BatonApiError:
        """The same error with ``hint`` (what to do about it, in the client's words) added."""
        self.hint = hint
        self.args = (self.summary(),)
        return self

    def summary(self) -> str:
        """One line: ``404 Not found: definition 'x' not found`` (plus any listed problems)."""
        text = f"{self.status} {self.title}"
        if self.detail and self.detail != self.title:
            text += f": {self.detail}"
        # The listed problems, unless the detail already says them (a single problem often is).
        listed = [e for e in self.errors if e.message not in self.detail]
        if listed:
            text += " (" + "; ".join(f"{e.path}: {e.message}" for e in listed) + ")"
        if self.hint:
            text += f". {self.hint[:1].upper()}{self.hint[1:]}"
        return text

    @property
    def transient(self) -> bool:
        """True when the same request may succeed later (429 and 5xx)."""
        return self.status == 429 or self.status >= 500


class BadRequestError(BatonApiError):
    """400: the request could not be parsed (malformed JSON)."""


class AuthenticationError(BatonApiError):
    """401: no credentials, or credentials the API does not recognise."""


class PermissionDeniedError(BatonApiError):
    """403: the credentials are not allowed to do this (or the API key is wrong)."""


class NotFoundError(BatonApiError):
    """404: an unknown id, name or route."""


class ConflictError(BatonApiError):
    """409: the request conflicts with the current state (e.g. another worker holds the job)."""


class PayloadTooLargeError(BatonApiError):
    """413: the body or a payload is over the limit."""


class ValidationError(BatonApiError):
    """422: schema or rule violations; ``errors`` lists every one."""


class RateLimitedError(BatonApiError):
    """429: throttled; retry after ``retry_after`` seconds."""


class ServerError(BatonApiError):
    """5xx: the server failed; the request may or may not have taken effect."""


class UnavailableError(ServerError):
    """503: a dependency (the database) is unavailable; retry after ``retry_after`` seconds."""


_BY_STATUS: Mapping[int, type[BatonApiError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    413: PayloadTooLargeError,
    422: ValidationError,
    429: RateLimitedError,
    503: UnavailableError,
}


class TransportError(BatonError):
    """No HTTP answer: the connection was refused, reset, or timed out.

    ``sent`` is False when the request certainly never reached the server (connect failures),
    so it is safe to repeat whatever it was.
    """

    def __init__(self, message: str, *, sent: bool, method: str, url: str) -> None:
        super().__init__(message)
        self.sent = sent
        self.method = method
        self.url = url

    @property
    def transient(self) -> bool:
        return True


def error_class(status: int) -> type[BatonApiError]:
    """The exception class for an HTTP error status."""
    if status in _BY_STATUS:
        return _BY_STATUS[status]
    return ServerError if status >= 500 else BatonApiError


def _retry_after(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None  # an HTTP date: rare from our API, not worth a date parser here
    return seconds if seconds >= 0 else None


def problem_error(
    status: int,
    body: Any,
    *,
    retry_after: str | None = None,
    reason: str = "",
    method: str | None = None,
    url: str | None = None,
) -> BatonApiError:
    """Build the right :class:`BatonApiError` subclass from a status and a decoded body.

    ``body`` is the parsed JSON when there was one (a problem document, usually), else the raw
    text or None. Anything that is not a problem document still gives a useful error.
    """
    cls = error_class(status)
    title = reason or "HTTP error"
    detail = ""
    errors: list[ProblemItem] = []
    kind: str | None = None
    instance: str | None = None
    if isinstance(body, dict):
        title = str(body.get("title") or title)
        detail = str(body.get("detail") or body.get("message") or "")
        kind = body.get("type") if isinstance(body.get("type"), str) else None
        instance = body.get("instance") if isinstance(body.get("instance"), str) else None
        raw_errors = body.get("errors")
        if isinstance(raw_errors, list):
            for item in raw_errors:
                if isinstance(item, dict):
                    errors.append(
                        ProblemItem(str(item.get("path", "$")), str(item.get("message", "")))
                    )
    elif isinstance(body, str) and body.strip():
        detail = body.strip()[:500]
    return cls(
        status,
        title,
        detail,
        errors=errors,
        type=kind,
        instance=instance,
        retry_after=_retry_after(retry_after),
        method=method,
        url=url,
    )


def is_transient(error: BaseException) -> bool:
    """Whether an error from the client is worth retrying later (connection trouble, 429, 5xx)."""
    return isinstance(error, TransportError | BatonApiError) and error.transient


__all__ = [
    "MAX_RETRY_DELAY",
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
    "error_class",
    "is_transient",
    "problem_error",
]
