"""The one mapping from Baton's errors to HTTP: RFC 9457 problem details."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from baton.definitions import pydantic_problems
from baton.errors import (
    BatonError,
    Conflict,
    InvalidValue,
    JobThrottled,
    MalformedRequest,
    NotFound,
    PayloadMissing,
    PayloadTooLarge,
    Problem,
    Unavailable,
    ValidationFailed,
)

PROBLEM_JSON = "application/problem+json"
TYPE_BASE = "https://baton.dev/problems/"

_STATUS: tuple[tuple[type[BatonError], int, str], ...] = (
    (MalformedRequest, 400, "malformed-request"),
    (ValidationFailed, 422, "validation-failed"),
    (InvalidValue, 422, "invalid-value"),
    (NotFound, 404, "not-found"),
    (PayloadMissing, 409, "payload-missing"),
    (Conflict, 409, "conflict"),
    (PayloadTooLarge, 413, "payload-too-large"),
    (JobThrottled, 429, "throttled"),
    (Unavailable, 503, "unavailable"),
)


def problem(
    status: int,
    title: str,
    detail: str,
    *,
    slug: str,
    errors: list[Problem] | None = None,
    instance: str | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "type": TYPE_BASE + slug,
        "title": title,
        "status": status,
        "detail": detail,
        "errors": [e.as_dict() for e in errors or []],
    }
    if instance:
        body["instance"] = instance
    return body


def from_error(
    err: BatonError, instance: str | None = None
) -> tuple[int, dict[str, Any], dict[str, str]]:
    """Status, problem body and extra headers for a Baton error."""
    for cls, status, slug in _STATUS:
        if isinstance(err, cls):
            errors = (
                list(err.problems) if isinstance(err, ValidationFailed | MalformedRequest) else None
            )
            headers = {"Content-Type": PROBLEM_JSON}
            if isinstance(err, Unavailable | JobThrottled):
                headers["Retry-After"] = str(err.retry_after_seconds)
            return (
                status,
                problem(status, err.title, err.detail, slug=slug, errors=errors, instance=instance),
                headers,
            )
    return (
        500,
        problem(500, "Internal error", err.detail, slug="internal"),
        {"Content-Type": PROBLEM_JSON},
    )


def validation_error(err: ValidationError, where: str = "") -> ValidationFailed:
    problems = pydantic_problems(err)
    if where:
        problems = [
            Problem(f"{where}.{p.path}" if p.path != "$" else where, p.message) for p in problems
        ]
    return ValidationFailed(problems)
