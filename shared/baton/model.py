"""The base of every definition model (camelCase on the wire, strict, frozen), the settings a
SERVICE_TASK shares with a task definition, and Conductor's task definition itself."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$"
# A name, or one ${…} expression giving one when it is needed (a sub-workflow's, a failure
# workflow's).
NAME_OR_EXPRESSION_PATTERN = NAME_PATTERN + r"|^\$\{[^}]+\}$"
WHOLE_EXPRESSION_PATTERN = r"^\$\{[^}]+\}$"
QUEUE_NAME_PATTERN = r"^[A-Za-z0-9-]{1,64}$"
QUEUE_NAME_RULE = "queue names are 1-64 characters: letters, digits and hyphens"
STEP_ID_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_-]{0,127}$"
JOB_TYPE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$"
# A job type, or one ${…} expression giving one when the step starts (Conductor's DYNAMIC).
JOB_TYPE_OR_EXPRESSION_PATTERN = JOB_TYPE_PATTERN + r"|^\$\{[^}]+\}$"
MAX_SECONDS = 365 * 24 * 3600
INT32_MAX = 2**31 - 1  # what an integer column holds


class Model(BaseModel):
    """Base: lowerCamelCase on the wire, snake_case accepted on input, unknown fields refused."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
        use_enum_values=True,
        defer_build=True,  # built on first use: keeps it off the cold start of functions
    )

    def wire(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class RetryLogic(StrEnum):
    FIXED = "FIXED"
    EXPONENTIAL_BACKOFF = "EXPONENTIAL_BACKOFF"
    LINEAR_BACKOFF = "LINEAR_BACKOFF"


class TimeoutPolicy(StrEnum):
    RETRY = "RETRY"
    TIME_OUT_WF = "TIME_OUT_WF"
    ALERT_ONLY = "ALERT_ONLY"


Seconds = Annotated[int, Field(ge=0, le=MAX_SECONDS)]
# Conductor bounds retryCount only below (an int >= 0). Baton's bound refuses what is a typo or
# a loop in disguise, not real retry policies (Conductor's own tests use 50000): each attempt is
# a job update, an audit event and, in Conductor's task view, a task of its own.
MAX_RETRY_COUNT = 100_000
RetryCount = Annotated[int, Field(ge=0, le=MAX_RETRY_COUNT)]


class TaskSettings(Model):
    """Retry and timeout settings shared by task definitions and SERVICE_TASK steps."""

    retry_count: RetryCount | None = None
    retry_logic: RetryLogic | None = None
    retry_delay_seconds: Seconds | None = None
    max_retry_delay_seconds: Annotated[int, Field(ge=1, le=MAX_SECONDS)] | None = None
    # LINEAR_BACKOFF waits retryDelaySeconds x backoffScaleFactor x the retry number (Conductor's
    # TaskDef; default 1); each retry waits up to backoffJitterMs more, at random.
    backoff_scale_factor: Annotated[int, Field(ge=1, le=10_000)] | None = None
    backoff_jitter_ms: Annotated[int, Field(ge=0, le=MAX_SECONDS * 1000)] | None = None
    # A budget over every attempt of a step (Conductor's totalTimeoutSeconds; 0: none), from its
    # first scheduling: past it a failure is not retried, and an attempt still running or waiting
    # times out (its timeoutPolicy, no retry). Not below timeoutSeconds when both are set.
    total_timeout_seconds: Seconds | None = None
    timeout_seconds: Seconds | None = None
    poll_timeout_seconds: Seconds | None = None
    response_timeout_seconds: Annotated[int, Field(ge=1, le=MAX_SECONDS)] | None = None
    timeout_policy: TimeoutPolicy | None = None


class TaskDef(TaskSettings):
    """A Conductor-style task definition: defaults for every step running this job type.

    Unset fields take reference 002's defaults (retryCount 3, retryDelaySeconds 60,
    responseTimeoutSeconds 3600, timeoutPolicy TIME_OUT_WF, no timeouts), so what is stored and
    shown is what is enforced. A step's own settings win over its task definition's.
    """

    name: Annotated[str, Field(pattern=JOB_TYPE_PATTERN)]
    retry_count: RetryCount = 3
    retry_logic: RetryLogic = RetryLogic.FIXED
    retry_delay_seconds: Seconds = 60
    timeout_seconds: Seconds = 0
    poll_timeout_seconds: Seconds = 0
    response_timeout_seconds: Annotated[int, Field(ge=1, le=MAX_SECONDS)] = 3600
    timeout_policy: TimeoutPolicy = TimeoutPolicy.TIME_OUT_WF
    description: str | None = None
    input_keys: list[str] | None = None
    output_keys: list[str] | None = None
    input_template: dict[str, Any] | None = None
    concurrent_exec_limit: Annotated[int, Field(ge=1, le=1_000_000)] | None = None
    rate_limit_per_frequency: Annotated[int, Field(ge=1, le=1_000_000)] | None = None
    rate_limit_frequency_in_seconds: Annotated[int, Field(ge=1, le=86_400)] | None = None
    owner_email: str | None = None


# Defaults when neither the step nor its task definition says otherwise.
DEFAULT_RETRY_COUNT = 3
DEFAULT_RETRY_LOGIC = RetryLogic.FIXED
DEFAULT_RETRY_DELAY_SECONDS = 1
DEFAULT_RESPONSE_TIMEOUT_SECONDS = 30
