"""Baton's errors in Conductor's error body: ``{status, code, message, instance, retryable,
validationErrors[{path, message, invalidValue}]}``, the shape conductor-python reads ``message``
from. Every status is a 4xx except an unavailable database (503, retryable)."""

from __future__ import annotations

from typing import Any

from baton.errors import (
    BatonError,
    Conflict,
    InvalidValue,
    MalformedRequest,
    NotFound,
    PayloadTooLarge,
    Problem,
    Unavailable,
    ValidationFailed,
    listed,
)


class Untranslatable(BatonError):
    """Conductor JSON that Baton cannot run as given (an unsupported task type or option)."""

    title = "Cannot translate"

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        super().__init__(listed(problems))


class Unauthorized(BatonError):
    """No credentials (401), or credentials that are not valid (403)."""

    title = "Unauthorized"

    def __init__(self, detail: str, *, status: int = 401, token_sent: bool = False) -> None:
        self.status = status
        self.token_sent = token_sent
        super().__init__(detail)


_STATUS: tuple[tuple[type[BatonError], int], ...] = (
    (Unauthorized, 401),
    (Untranslatable, 400),
    (MalformedRequest, 400),
    (ValidationFailed, 400),
    (InvalidValue, 400),
    (NotFound, 404),
    (Conflict, 409),
    (PayloadTooLarge, 413),
    (Unavailable, 503),
)


def error_body(status: int, message: str, problems: list[Problem] | None = None) -> dict[str, Any]:
    return {
        "status": status,
        "code": _code(status),
        "message": message,
        "retryable": status == 503,
        "validationErrors": [{"path": p.path, "message": p.message} for p in problems or []],
    }


def _code(status: int) -> str:
    return {
        400: "INVALID_INPUT",
        401: "UNAUTHORIZED",
        403: "FORBIDDEN",
        404: "NOT_FOUND",
        405: "METHOD_NOT_ALLOWED",
        409: "CONFLICT",
        413: "INVALID_INPUT",
        503: "BACKEND_ERROR",
    }.get(status, "INTERNAL_ERROR")


def from_error(err: BatonError) -> tuple[int, dict[str, Any]]:
    """Status and Conductor error body for a Baton error."""
    for cls, status in _STATUS:
        if isinstance(err, cls):
            if isinstance(err, Unauthorized):
                body = error_body(err.status, err.detail)
                if err.token_sent:
                    body["error"] = "INVALID_TOKEN"  # the client refreshes its token once
                return err.status, body
            problems = (
                list(err.problems)
                if isinstance(err, ValidationFailed | Untranslatable | MalformedRequest)
                else None
            )
            message = err.detail
            if problems and not isinstance(err, MalformedRequest):  # its detail says it all
                message = listed(problems)
            return status, error_body(status, message, problems)
    return 500, error_body(500, err.detail)
