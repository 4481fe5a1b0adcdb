"""The engine's own JSON definition format: workflows with structured (nested) step lists, and
Conductor-style task definitions.

Registration validates completely: pydantic reports every structural problem, then the semantic
checks (unique step ids, expression references, retry/timeout settings) add theirs, and all of them
come back together in one :class:`~baton.errors.ValidationFailed`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from baton import expressions, validation
from baton.errors import Problem, ValidationFailed

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$"
QUEUE_NAME_PATTERN = r"^[A-Za-z0-9-]{1,64}$"
QUEUE_NAME_RULE = "queue names are 1-64 characters: letters, digits and hyphens"
STEP_ID_PATTERN = r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$"
JOB_TYPE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$"
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


class TaskSettings(Model):
    """Retry and timeout settings shared by task definitions and SERVICE_TASK steps."""

    retry_count: Annotated[int, Field(ge=0, le=1000)] | None = None
    retry_logic: RetryLogic | None = None
    retry_delay_seconds: Seconds | None = None
    max_retry_delay_seconds: Annotated[int, Field(ge=1, le=MAX_SECONDS)] | None = None
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
    retry_count: Annotated[int, Field(ge=0, le=1000)] = 3
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


class StepBase(Model):
    id: Annotated[str, Field(pattern=STEP_ID_PATTERN)]
    name: str | None = None
    description: str | None = None
    input: dict[str, Any] = Field(default_factory=dict)


class ServiceTaskStep(StepBase, TaskSettings):
    """A job for workers polling ``jobType``."""

    type: Literal["SERVICE_TASK"]
    job_type: Annotated[str, Field(pattern=JOB_TYPE_PATTERN)]
    # Filled in at instance start from the task definition of ``job_type`` (dynamic workflows
    # carry their definitions with them, so later edits never touch running instances).
    task_def: TaskDef | None = None


class UserTaskStep(StepBase):
    """Waits until completed through the API with variables."""

    type: Literal["USER_TASK"]
    assignee: str | None = None


class SignalStep(StepBase):
    """Waits until a signal is delivered to it; the signal's payload becomes its output."""

    type: Literal["SIGNAL"]


Step = Annotated[ServiceTaskStep | UserTaskStep | SignalStep, Field(discriminator="type")]
STEP_TYPES = ("SERVICE_TASK", "USER_TASK", "SIGNAL")


class QueueTrigger(Model):
    """Start one instance per task of a named queue."""

    type: Literal["queue"]
    queue_name: Annotated[str, Field(pattern=QUEUE_NAME_PATTERN)]
    poll_interval_secs: Annotated[int, Field(ge=1, le=3600)] = 5
    visibility_timeout_secs: Annotated[int, Field(ge=1, le=43_200)] = 300
    max_retries: Annotated[int, Field(ge=1, le=100)] = 3
    # Instances in flight at once; 1 processes the queue one task at a time, in priority order.
    max_concurrency: Annotated[int, Field(ge=1, le=1000)] = 1
    enabled: bool = True


class WorkflowDefinition(Model):
    name: Annotated[str, Field(pattern=NAME_PATTERN)]
    version: Annotated[int, Field(ge=1, le=INT32_MAX)] | None = None
    description: str | None = None
    steps: Annotated[list[Step], Field(min_length=1, max_length=1000)]
    output_parameters: dict[str, Any] | None = None
    timeout_seconds: Seconds = 0
    timeout_policy: Literal["TIME_OUT_WF", "ALERT_ONLY"] = "TIME_OUT_WF"
    trigger: QueueTrigger | None = None
    # For triggered instances: entries added to the input, ``{{title}}``-style placeholders
    # filled from the trigger's variables.
    input_template: dict[str, Any] | None = None

    def trigger_queue(self) -> str | None:
        """The queue this definition consumes, when its trigger is enabled."""
        t = self.trigger
        return t.queue_name if t is not None and t.enabled else None

    def digest(self) -> str:
        """Content hash of the canonical JSON; equal definitions share one snapshot row."""
        canonical = json.dumps(self.wire(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()


# Each pattern of the models in words, for validation messages.
PATTERN_RULES = {
    NAME_PATTERN: "names are 1-128 characters: letters, digits, '_', '.' and '-', starting "
    "with a letter or a digit",
    STEP_ID_PATTERN: "step ids are 1-64 characters: letters, digits, '_' and '-', starting with "
    "a letter or '_'",
    JOB_TYPE_PATTERN: "job types are 1-128 characters: letters, digits, '_', '.', ':' and '-', "
    "starting with a letter or a digit",
    QUEUE_NAME_PATTERN: QUEUE_NAME_RULE,
}


def pydantic_problems(err: ValidationError) -> list[Problem]:
    """The one translation of pydantic's errors into Baton's problems (path + plain sentence)."""
    return validation.problems(err, tags=STEP_TYPES, pattern_rules=PATTERN_RULES)


# --- semantic checks over the raw JSON, so they run even when the structure has errors ---------


def iter_steps(steps: Any, path: str = "steps") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every step dict in document (execution) order, with its JSON path. Tolerates junk."""
    if not isinstance(steps, list):
        return
    for i, step in enumerate(steps):
        if isinstance(step, dict):
            yield f"{path}[{i}]", step
            # Containers (SWITCH, PARALLEL...) will yield their nested lists here.


def _field(step: dict[str, Any], camel: str) -> Any:
    snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in camel)
    return step.get(camel, step.get(snake))


def _setting_problems(path: str, s: dict[str, Any], *, task_def: bool = False) -> Iterator[Problem]:
    timeout = _field(s, "timeoutSeconds")
    response = _field(s, "responseTimeoutSeconds")
    if task_def and response is None:
        response = 3600  # the task definition's default, which is enforced like a set value
    if isinstance(timeout, int) and isinstance(response, int) and 0 < timeout < response:
        yield Problem(
            f"{_join(path, 'responseTimeoutSeconds')}",
            f"responseTimeoutSeconds ({response}) must not exceed timeoutSeconds ({timeout}): "
            "a lease longer than the attempt may run is never reached",
        )
    delay = _field(s, "retryDelaySeconds")
    cap = _field(s, "maxRetryDelaySeconds")
    if isinstance(delay, int) and isinstance(cap, int) and cap < delay:
        yield Problem(
            f"{_join(path, 'maxRetryDelaySeconds')}",
            f"maxRetryDelaySeconds ({cap}) is below retryDelaySeconds ({delay})",
        )


def _join(path: str, name: str) -> str:
    return name if path == "$" else f"{path}.{name}"


def _unclosed_problems(path: str, template: Any, step: str | None = None) -> Iterator[Problem]:
    """A ``${`` that nothing closes would be sent on as literal text: refused, naming the step
    (``step``: its id, shown before the field path relative to the step) and the field."""
    for suffix, text in expressions.unclosed(template):
        where = path + suffix
        said = f"step {step!r}: {where.split('.', 1)[1]}" if step is not None else where
        yield Problem(
            where,
            f"{said} opens an expression that is never closed ({text!r}); end it with '}}', "
            "or write '$${' for a literal '${'",
        )


def _syntax_problems(path: str, template: Any) -> Iterator[Problem]:
    """Every expression in ``template`` must parse (what it refers to is checked where known)."""
    yield from _unclosed_problems(path, template)
    for suffix, text in expressions.references(template):
        try:
            expressions.parse(text)
        except expressions.ExpressionError as e:
            yield Problem(path + suffix, str(e))


def semantic_problems(raw: dict[str, Any]) -> list[Problem]:
    problems: list[Problem] = []
    seen: dict[str, str] = {}
    steps = list(iter_steps(raw.get("steps")))
    order = {s.get("id"): n for n, (_, s) in enumerate(steps) if isinstance(s.get("id"), str)}
    for n, (path, step) in enumerate(steps):
        sid = step.get("id")
        if isinstance(sid, str):
            if sid == expressions.WORKFLOW:
                problems.append(Problem(f"{path}.id", "'workflow' is reserved for expressions"))
            if sid in seen:
                problems.append(
                    Problem(f"{path}.id", f"duplicate step id {sid!r} (first at {seen[sid]})")
                )
            else:
                seen[sid] = path
        problems.extend(_expression_problems(f"{path}.input", step.get("input"), order, n))
        problems.extend(
            _unclosed_problems(
                f"{path}.input", step.get("input"), sid if isinstance(sid, str) else path
            )
        )
        if step.get("type") == "SERVICE_TASK":
            problems.extend(_setting_problems(path, step))
    output_parameters = _field(raw, "outputParameters")
    problems.extend(_expression_problems("outputParameters", output_parameters, order, None))
    problems.extend(_unclosed_problems("outputParameters", output_parameters))
    return problems


def _expression_problems(
    path: str, template: Any, order: dict[Any, int], position: int | None
) -> Iterator[Problem]:
    for suffix, text in expressions.references(template):
        where = path + suffix
        try:
            ref = expressions.parse(text)
        except expressions.ExpressionError as e:
            yield Problem(where, str(e))
            continue
        sid = ref.step_id
        if sid is None:
            continue
        if sid not in order:
            yield Problem(where, f"${{{text}}} refers to unknown step {sid!r}")
        elif position is not None and order[sid] >= position:
            yield Problem(where, f"${{{text}}} refers to step {sid!r}, which has not run yet")


# Fields the API adds to what it returns: a document read back may be sent again as it is.
READ_ONLY_FIELDS = frozenset({"createdAt", "created_at", "updatedAt", "updated_at"})


def _writable(raw: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in raw.items() if k not in READ_ONLY_FIELDS}


def parse_definition(raw: Any) -> WorkflowDefinition:
    """Validate a definition completely; raise ValidationFailed listing every problem."""
    if not isinstance(raw, dict):
        raise ValidationFailed([Problem("$", "a definition is a JSON object")])
    raw = _writable(raw)
    problems = semantic_problems(raw)
    try:
        definition = WorkflowDefinition.model_validate_json(json.dumps(raw), strict=True)
    except ValidationError as e:
        raise ValidationFailed(pydantic_problems(e) + problems) from None
    if problems:
        raise ValidationFailed(problems)
    return definition


def parse_task_def(raw: Any) -> TaskDef:
    """Validate a task definition completely; raise ValidationFailed listing every problem."""
    if not isinstance(raw, dict):
        raise ValidationFailed([Problem("$", "a task definition is a JSON object")])
    raw = _writable(raw)
    problems = list(_setting_problems("$", raw, task_def=True))
    problems.extend(_syntax_problems("inputTemplate", _field(raw, "inputTemplate")))
    per = _field(raw, "rateLimitPerFrequency")
    freq = _field(raw, "rateLimitFrequencyInSeconds")
    if (per is None) != (freq is None):
        problems.append(
            Problem(
                "rateLimitPerFrequency",
                "rateLimitPerFrequency and rateLimitFrequencyInSeconds go together",
            )
        )
    try:
        task_def = TaskDef.model_validate_json(json.dumps(raw), strict=True)
    except ValidationError as e:
        raise ValidationFailed(pydantic_problems(e) + problems) from None
    if problems:
        raise ValidationFailed(problems)
    return task_def
