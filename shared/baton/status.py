"""The one status vocabulary: instance, step execution, job and queue-task statuses.

``StrEnum`` members compare equal to their strings, so rows read from the database (plain text)
and JSON on the wire need no conversion. The database's CHECK constraints list the same values.
"""

from __future__ import annotations

from enum import StrEnum


class InstanceStatus(StrEnum):
    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    TIMED_OUT = "TIMED_OUT"
    CANCELLED = "CANCELLED"

    @property
    def terminal(self) -> bool:
        return self not in (InstanceStatus.RUNNING, InstanceStatus.PAUSED)


class StepStatus(StrEnum):
    SCHEDULED = "SCHEDULED"
    IN_PROGRESS = "IN_PROGRESS"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    TIMED_OUT = "TIMED_OUT"
    CANCELLED = "CANCELLED"
    SKIPPED = "SKIPPED"


class JobStatus(StrEnum):
    """A job's lease state: UNLOCKED (claimable when due), LOCKED (leased to a worker)."""

    UNLOCKED = "UNLOCKED"
    LOCKED = "LOCKED"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    TIMED_OUT = "TIMED_OUT"


class QueueTaskStatus(StrEnum):
    """Queue-task statuses are lower case on the wire."""

    PENDING = "pending"
    PROCESSING = "processing"
    COMPLETED = "completed"
    FAILED = "failed"
    DEAD = "dead"


OPEN_STEP_STATUSES = (StepStatus.SCHEDULED, StepStatus.IN_PROGRESS)
