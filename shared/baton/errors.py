"""One error family. The API layer maps each class to an HTTP status in one place."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with an input: where (a JSON path like ``steps[1].id``) and what."""

    path: str
    message: str

    def as_dict(self) -> dict[str, str]:
        return {"path": self.path, "message": self.message}


class BatonError(Exception):
    """Root of every error Baton raises on purpose."""

    title = "Baton error"

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


def listed(problems: Iterable[Problem]) -> str:
    """Problems on one line: ``path: message; path: message``."""
    return "; ".join(f"{p.path}: {p.message}" for p in problems)


class ValidationFailed(BatonError):
    """The input is well-formed JSON but breaks the schema or a rule; lists every problem."""

    title = "Validation failed"

    def __init__(self, problems: Sequence[Problem], detail: str | None = None) -> None:
        self.problems = tuple(problems)
        n = len(self.problems)
        super().__init__(detail or f"{n} problem{'s' if n != 1 else ''} found")


class InvalidValue(BatonError):
    """A value the database refused (out of range for its column, not representable): a bad
    input that slipped past validation, answered as one rather than as a server error."""

    title = "Invalid value"


class MalformedRequest(BatonError):
    """The request body is not parseable (bad JSON, wrong content); ``problems`` say where,
    when that is known (a JSON path, with the line and column in the message)."""

    title = "Malformed request"

    def __init__(self, detail: str, problems: Sequence[Problem] = ()) -> None:
        super().__init__(detail)
        self.problems = tuple(problems)


class NotFound(BatonError):
    title = "Not found"

    def __init__(self, kind: str, ident: str, detail: str | None = None) -> None:
        self.kind = kind
        self.ident = ident
        super().__init__(detail or f"{kind} {ident!r} not found")


class DefinitionNotFound(NotFound):
    def __init__(self, name: str, version: int | None = None) -> None:
        self.name = name
        self.version = version
        super().__init__("definition", name if version is None else f"{name} v{version}")


class InstanceNotFound(NotFound):
    def __init__(self, instance_id: str) -> None:
        self.instance_id = instance_id
        super().__init__("instance", instance_id, _no_instance(instance_id))


def _no_instance(instance_id: str) -> str:
    try:
        canonical = str(uuid.UUID(instance_id))
    except ValueError:
        shown = instance_id if len(instance_id) <= 80 else instance_id[:77] + "..."
        return (
            f"no instance has the id {shown!r}: instance ids are UUIDs, as "
            "POST /v1/instances returns them"
        )
    return f"no instance has the id {canonical} (it was never started here, or was deleted)"


class JobNotFound(NotFound):
    def __init__(self, job_id: str) -> None:
        self.job_id = job_id
        super().__init__("job", job_id)


class StepNotFound(NotFound):
    def __init__(self, instance_id: str, step_id: str) -> None:
        self.instance_id = instance_id
        self.step_id = step_id
        super().__init__("step", f"{step_id} of instance {instance_id}")


class Conflict(BatonError):
    """The request is valid but the current state forbids it."""

    title = "Conflict"


class StaleVersion(Conflict):
    """A write carried an instance version (fencing token) that is no longer current."""

    def __init__(self, instance_id: str, expected: int | None = None) -> None:
        self.instance_id = instance_id
        self.expected = expected
        super().__init__(f"instance {instance_id} changed concurrently (stale version {expected})")


class LeaseNotHeld(Conflict):
    def __init__(self, job_id: str, worker_id: str, reason: str) -> None:
        self.job_id = job_id
        self.worker_id = worker_id
        super().__init__(f"worker {worker_id!r} does not hold job {job_id}: {reason}")


class AttemptNotCurrent(Conflict):
    """A result for an attempt of a job that is not the job's current one."""

    def __init__(self, job_id: str, attempt: int, current: int, why: str) -> None:
        self.job_id = job_id
        self.attempt = attempt
        self.current = current
        super().__init__(
            f"attempt {attempt} of job {job_id} is not current ({why}); "
            f"the job is on attempt {current}"
        )


class JobNotClaimable(Conflict):
    """A claim by id of a job that is no longer (or not yet) claimable: claimed, finished, on
    another attempt, or not due. A duplicate delivery of a dispatched job ends here, harmlessly."""

    def __init__(self, job_id: str, reason: str) -> None:
        self.job_id = job_id
        super().__init__(f"job {job_id} is not claimable: {reason}")


class JobThrottled(BatonError):
    """A claim by id held back by its job type's concurrency or rate limit: try again later."""

    title = "Too many requests"

    def __init__(self, job_id: str, job_type: str, retry_after_seconds: int = 1) -> None:
        self.job_id = job_id
        self.job_type = job_type
        self.retry_after_seconds = retry_after_seconds
        super().__init__(f"job {job_id}: job type {job_type!r} is at its concurrency or rate limit")


class PayloadMissing(Conflict):
    """An offloaded payload the engine must read is not in the payload bucket (deleted, expired
    by the bucket's lifecycle rule, or lost): no retry can bring it back, so never a 503."""

    title = "Payload missing"

    def __init__(self, path: str, bucket: str) -> None:
        self.path = path
        self.bucket = bucket
        super().__init__(
            f"the payload at {path} is not in the payload bucket {bucket} (deleted, expired or "
            "lost): what needs it cannot run, and retrying will not bring it back; upload the "
            "payload again and start a new instance with its new path"
        )


class PayloadTooLarge(BatonError):
    title = "Payload too large"

    def __init__(
        self,
        size_bytes: int,
        limit_bytes: int,
        what: str = "payload",
        *,
        limit: str = "limit",
        how: str | None = None,
    ) -> None:
        self.size_bytes = size_bytes
        self.limit_bytes = limit_bytes
        detail = f"{what} of {size_bytes} bytes exceeds the {limit} of {limit_bytes} bytes"
        super().__init__(f"{detail}: {how}" if how else detail)


class Unavailable(BatonError):
    """A dependency (the database) cannot be reached; the caller should retry later."""

    title = "Service unavailable"

    def __init__(self, detail: str, retry_after_seconds: int = 2) -> None:
        self.retry_after_seconds = retry_after_seconds
        super().__init__(detail)
