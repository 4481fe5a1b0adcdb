"""The step types of a definition. Control flow is structured: an operator holds nested step
lists (branches, cases, a loop body), so a definition is a tree that is validated completely at
registration and executed without any graph search.

Work steps: SERVICE_TASK (a job for workers), USER_TASK and SIGNAL (completed through the API),
TIMER (a durable wait), SUB_WORKFLOW (a child instance), START_WORKFLOW (another instance, not
waited for). Operators evaluated by the engine itself: SWITCH, PARALLEL, MAP, DO_WHILE,
SET_VARIABLE, TERMINATE, NOOP, EXCLUSIVE_JOIN, and SCRIPT (JavaScript) and JQ (a jq filter), run
in the engine's script sandbox (``baton.scripting``). HTTP: a call the engine makes outside the
decision, as a job of a reserved type (``baton:http``) its system-tasks function runs.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import Field

from baton.model import (
    INT32_MAX,
    JOB_TYPE_OR_EXPRESSION_PATTERN,
    NAME_OR_EXPRESSION_PATTERN,
    STEP_ID_PATTERN,
    WHOLE_EXPRESSION_PATTERN,
    Model,
    RetryLogic,
    Seconds,
    TaskDef,
    TaskSettings,
)

MAX_MAP_ITEMS = 10_000
MAX_ITERATIONS = 10_000
MAX_MAP_CONCURRENCY = 1_000
# The longest script (SCRIPT, a SWITCH's script, a DO_WHILE's JavaScript while) or jq query.
MAX_SCRIPT_CHARS = 65_536
ScriptText = Annotated[str, Field(min_length=1, max_length=MAX_SCRIPT_CHARS)]


class StepBase(Model):
    id: Annotated[str, Field(pattern=STEP_ID_PATTERN)]
    name: str | None = None
    description: str | None = None
    # An object of values and ${…} expressions, or one ${…} expression giving an object.
    input: dict[str, Any] | str = Field(default_factory=dict)
    # A failure of this step (its retries exhausted, a RETRY timeout) is recorded and its list
    # goes on: the step ends COMPLETED with its error kept (Conductor's COMPLETED_WITH_ERRORS).
    # A TIME_OUT_WF timeout still times the instance out, as Conductor's decider does. A ``${…}``
    # is read when the step fails (true, or the text "true": a dynamic fork's task's own
    # ``optional``, ``${map.item.optional}``).
    optional: bool | Annotated[str, Field(pattern=WHOLE_EXPRESSION_PATTERN)] | None = None
    # A failure of this step (its retries exhausted) is kept: the step stays FAILED, its list goes
    # on as if it had succeeded, and the instance fails once nothing is left to run (Conductor's
    # ``permissive``). A PARALLEL/MAP whose branch or item ends on such a failure lets the others
    # finish, then fails; inside a DO_WHILE the loop fails at once. ``optional`` wins over it.
    # A ``${…}`` is read when the step fails, as ``optional``'s.
    permissive: bool | Annotated[str, Field(pattern=WHOLE_EXPRESSION_PATTERN)] | None = None


class ServiceTaskStep(StepBase, TaskSettings):
    """A job for workers polling ``jobType`` (or a ``${…}`` expression giving it when the step
    starts: its task definition's retry and timeout settings then do not apply, its limits do)."""

    type: Literal["SERVICE_TASK"]
    job_type: Annotated[str, Field(pattern=JOB_TYPE_OR_EXPRESSION_PATTERN)]
    # The job is claimable this long after the step starts (Conductor's startDelay); a retry's
    # delay is the task settings' own.
    start_delay_seconds: Seconds | None = None
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


class TimerStep(StepBase):
    """A durable wait: ``duration`` (ISO-8601 like ``PT30S``, or seconds) or ``until`` (an ISO
    timestamp, or an expression giving one). A row with a due time, fired by the sweeper."""

    type: Literal["TIMER"]
    duration: str | Annotated[int, Field(ge=0, le=366 * 24 * 3600)] | None = None
    until: str | None = None


class SubWorkflowStep(StepBase):
    """Starts a child instance (a stored definition, one given inline, or one an expression gives
    when the child starts) and waits for it; the child's output is the step's output. A failed
    child fails the step (``retryCount`` starts a new child); cancelling the parent cancels the
    child."""

    type: Literal["SUB_WORKFLOW"]
    # A name (and version), or a ${…} expression resolved when the child starts.
    definition_name: Annotated[str, Field(pattern=NAME_OR_EXPRESSION_PATTERN)] | None = None
    definition_version: (
        Annotated[int, Field(ge=1, le=INT32_MAX)]
        | Annotated[str, Field(pattern=WHOLE_EXPRESSION_PATTERN)]
        | None
    ) = None
    # Inline: the definition itself, or a ${…} giving one when the child starts, read in
    # ``definitionDialect`` (baton, or conductor: a Conductor WorkflowDef; see baton.dialects);
    # when that gives nothing, ``definitionName`` (if any) runs.
    definition: dict[str, Any] | Annotated[str, Field(pattern=WHOLE_EXPRESSION_PATTERN)] | None = (
        None
    )
    definition_dialect: Literal["baton", "conductor"] = "baton"
    retry_count: Annotated[int, Field(ge=0, le=100)] = 0


class StartWorkflowStep(StepBase):
    """Starts another instance and goes on at once, without waiting for it (Conductor's
    START_WORKFLOW). ``request`` (an object, or one ``${…}`` expression giving one) is resolved
    when the step starts: ``name`` (or ``definitionName``) of a stored definition, ``version``
    (its latest without one), ``input`` (an object) and ``correlationId`` (this instance's
    without one); other keys (Conductor's ``taskToDomain``, ``priority``, ``idempotencyKey``…)
    are ignored. Output ``{"workflowId", "instanceId"}`` (the same id). The started instance has
    no parent: cancelling this one leaves it running. A request naming no definition Baton has
    fails the step with the reason."""

    type: Literal["START_WORKFLOW"]
    request: dict[str, Any] | str


class SetVariableStep(StepBase):
    """Writes ``variables`` (expressions allowed) into ``workflow.variables``."""

    type: Literal["SET_VARIABLE"]
    variables: Annotated[dict[str, Any], Field(min_length=1)]


class TerminateStep(StepBase):
    """Ends the instance now with ``status``, a ``reason`` and an ``output``; open work in other
    branches (and children) is cancelled. CANCELLED ends it as cancelling it through the API
    does (Conductor's TERMINATED)."""

    type: Literal["TERMINATE"]
    status: Literal["COMPLETED", "FAILED", "CANCELLED"]
    reason: str | None = None
    output: Any = None


class NoopStep(StepBase):
    """Does nothing: completes at once with an empty output (Conductor's NOOP)."""

    type: Literal["NOOP"]


class ScriptStep(StepBase):
    """Runs ``script`` (JavaScript) with ``$`` bound to the resolved ``input``; the script's
    completion value is the step's ``output.result``. Run by the engine, bounded in time and
    memory; a script that throws, overruns or gives too large a value fails the step."""

    type: Literal["SCRIPT"]
    language: Literal["javascript"] = "javascript"
    script: ScriptText


class JqStep(StepBase):
    """Runs the jq filter ``query`` on the resolved ``input``: ``output.result`` is its first
    result (null when none), ``output.resultList`` all of them. Run by the engine, bounded."""

    type: Literal["JQ"]
    query: ScriptText


class HttpCall(StepBase, TaskSettings):
    """What HTTP and HTTP_POLL share: the request and the task settings of its job."""

    request: dict[str, Any] | str
    # Filled in at instance start from the task definition named by the step's ``name`` (its
    # ``id`` when it has none), as Conductor applies the TaskDef of an HTTP task's name: its
    # retry, timeout and response-timeout settings and inputTemplate, under the step's own.
    task_def: TaskDef | None = None


class HttpStep(HttpCall):
    """An HTTP call the engine makes (Conductor's HTTP task): ``request`` (an object, or one
    ``${…}`` expression giving one) with ``uri``, ``method``, ``headers``, ``body``, ``accept``,
    ``contentType``, ``connectionTimeOut`` and ``readTimeOut`` (milliseconds), resolved when the
    step is scheduled. Run outside the decision as a job of the reserved type ``baton:http`` that
    the ``system-tasks`` function claims; retried like a SERVICE_TASK (``retryCount``, ...). Output
    ``{"response": {"statusCode", "headers", "body", "reasonPhrase"}}``; a status outside 2xx,
    a refused address (``baton.httpcall.guard``) or a timeout fails the attempt."""

    type: Literal["HTTP"]


MAX_POLL_COUNT = 10_000


class HttpPollStep(HttpCall):
    """An HTTP call made again until ``terminationCondition`` holds (Conductor's HTTP_POLL): the
    call of an HTTP step, then the condition, JavaScript run in the script sandbox with ``$``
    bound to ``{"output": <the call's output>, "input": <the step's input>}``: true (or any
    truthy value, or the number 1) completes the step with that call's output and ``pollCount``;
    false (0, any falsy value) calls again ``pollingIntervalSeconds`` later (FIXED), that times
    the polls so far (LINEAR_BACKOFF) or doubled each time (EXPONENTIAL_BACKOFF, at most a day);
    -1 fails it. ``maxPollCount`` calls without the condition holding fail it. A call that fails
    (a status outside 2xx, a timeout, a refused address) fails the attempt as an HTTP step's."""

    type: Literal["HTTP_POLL"]
    termination_condition: ScriptText
    polling_interval_seconds: Annotated[int, Field(ge=1, le=24 * 3600)] = 60
    polling_strategy: Literal["FIXED", "LINEAR_BACKOFF", "EXPONENTIAL_BACKOFF"] = "FIXED"
    max_poll_count: Annotated[int, Field(ge=1, le=MAX_POLL_COUNT)] = 1000


StepIds = Annotated[
    list[Annotated[str, Field(pattern=STEP_ID_PATTERN)]], Field(min_length=1, max_length=1000)
]


class ExclusiveJoinStep(StepBase):
    """Gives the output of whichever step ran of those it joins on (Conductor's EXCLUSIVE_JOIN,
    after a SWITCH whose cases end in different steps): the first of ``joinOn`` that ran, else
    the first of ``defaultJoinOn`` that ran. A joined step that did not complete fails it with
    that step's status; none having run fails it too, naming them."""

    type: Literal["EXCLUSIVE_JOIN"]
    join_on: StepIds
    default_join_on: StepIds | None = None


class EventStep(StepBase, TaskSettings):
    """Publishes a message to ``sink`` (Conductor's EVENT task): ``queue:<name>`` pushes a task
    to Baton's queue ``<name>`` (its body the message's JSON; a definition with a queue trigger
    on it starts an instance per message), ``sqs:<queue name or URL>`` sends it to that SQS
    queue. ``sink`` may hold ``${…}``, resolved when the step starts. The message is the step's
    resolved ``input`` with ``workflowInstanceId``, ``workflowType`` and ``correlationId``; the
    output is the message with ``sink`` and ``messageId``. Published outside the decision by the
    system-tasks function, as a job of the reserved type ``baton:event``, retried like a
    SERVICE_TASK when the sink cannot be reached."""

    type: Literal["EVENT"]
    sink: Annotated[str, Field(min_length=1, max_length=1024)]


class SwitchCase(Model):
    """One case of a SWITCH given as a condition (JSONata over the context)."""

    condition: Annotated[str, Field(min_length=1)]
    steps: list[Step]


class SwitchStep(StepBase):
    """Runs the steps of the first matching case: by ``on``'s string value (``cases`` an object
    of value → steps, as Conductor's value-param), by the value of ``script`` (JavaScript with
    ``$`` bound to the resolved ``input``, as Conductor's javascript evaluator; ``cases`` an
    object), or by conditions evaluated in order (``cases`` a list). ``default`` runs when none
    matches; the chosen case is the step's ``output.case``."""

    type: Literal["SWITCH"]
    on: str | None = None
    script: ScriptText | None = None
    cases: dict[str, list[Step]] | list[SwitchCase]
    default: list[Step] | None = None


class ParallelStep(StepBase):
    """Runs its ``branches`` concurrently and joins when all finish. Output: each branch's last
    step output by branch index. A failing branch fails the step and cancels the others' open
    work, unless ``failFast`` is false (the others then finish first)."""

    type: Literal["PARALLEL"]
    branches: Annotated[list[Annotated[list[Step], Field(min_length=1)]], Field(min_length=1)]
    fail_fast: bool = True


def list_literal(items: str) -> list[Any] | None:
    """A MAP's ``items`` written as a JSON list (a Conductor dynamic fork's literal inputs), or
    None when it is no JSON list (one ``${…}`` expression). A string field keeps the REST and
    protobuf forms of a step the same."""
    if not items.lstrip().startswith("["):
        return None
    try:
        value = json.loads(items)
    except ValueError:
        return None
    return value if isinstance(value, list) else None


class MapStep(StepBase):
    """Runs ``steps`` once per element of ``items`` (one ``${…}`` giving a list, or a list
    written as JSON text, ``"[1, \"${workflow.input.x}\"]"``, whose ``${…}`` are resolved when
    the MAP starts: :func:`list_literal`), at most
    ``maxConcurrency`` at a time; ``${map.item}`` and ``${map.index}`` inside. Output: the list of
    each item's last step output, in item order; with ``key`` (a text template resolved for each
    item, reading ``${map.item…}``/``${map.index}``), an object keyed by it. With ``inputs`` (an
    object, or a ``${…}`` giving one), ``${map.input}`` inside is its entry under the item's key
    (Conductor's dynamic fork: tasks by reference name, their inputs by reference name). When a
    keyed MAP's steps end with a SWITCH, an item's value is its taken case's last output. With
    ``indexAs`` (a keyed MAP without ``inputs``), ``${map.input}`` is the item as an object
    carrying its index under that name (an item that is no object is ``{input: item}``): how
    Conductor's dynamic fork hands each forked task its input with ``__index``."""

    type: Literal["MAP"]
    items: Annotated[str, Field(min_length=1)]
    steps: Annotated[list[Step], Field(min_length=1)]
    max_concurrency: Annotated[int, Field(ge=1, le=MAX_MAP_CONCURRENCY)] = 10
    key: Annotated[str, Field(min_length=1, max_length=1000)] | None = None
    inputs: Annotated[str, Field(pattern=WHOLE_EXPRESSION_PATTERN)] | dict[str, Any] | None = None
    index_as: Annotated[str, Field(pattern=STEP_ID_PATTERN)] | None = None


class DoWhileStep(StepBase):
    """Runs ``steps``, then again while ``while`` holds (JSONata over the context, or a ``${…}``
    truthy value; with ``whileLanguage`` javascript, a script whose value is true or a number
    above 0, ``$`` bound to the loop's ``input`` resolved after the iteration, each of its steps'
    output by id and ``$.<loop id>.iteration``, as Conductor's ``loopCondition``), at most
    ``maxIterations`` times; ``${<loop id>.iteration}`` (from 1) inside, and in ``while``, and
    ``${<loop id>.output…}``, its output so far: ``{"iteration": <running>, "1": {<step id>:
    <output>, …}, …}`` (Conductor's DO_WHILE task output while it runs).
    Output: the last iteration's output and ``iterations``; with ``iterationOutputs``, the
    output so far as it ended (Conductor's): ``iteration`` and each iteration's step outputs,
    the last ``keepLastIterations`` of them if given."""

    type: Literal["DO_WHILE"]
    steps: Annotated[list[Step], Field(min_length=1)]
    while_: Annotated[str, Field(alias="while", min_length=1, max_length=MAX_SCRIPT_CHARS)]
    while_language: Literal["jsonata", "javascript"] = "jsonata"
    max_iterations: Annotated[int, Field(ge=1, le=MAX_ITERATIONS)]
    iteration_outputs: bool = False
    keep_last_iterations: Annotated[int, Field(ge=1, le=MAX_ITERATIONS)] | None = None


Step = Annotated[
    ServiceTaskStep
    | UserTaskStep
    | SignalStep
    | TimerStep
    | SubWorkflowStep
    | SetVariableStep
    | StartWorkflowStep
    | TerminateStep
    | NoopStep
    | ScriptStep
    | JqStep
    | HttpStep
    | HttpPollStep
    | EventStep
    | ExclusiveJoinStep
    | SwitchStep
    | ParallelStep
    | MapStep
    | DoWhileStep,
    Field(discriminator="type"),
]
STEP_TYPES = (
    "SERVICE_TASK",
    "USER_TASK",
    "SIGNAL",
    "TIMER",
    "SUB_WORKFLOW",
    "SET_VARIABLE",
    "START_WORKFLOW",
    "TERMINATE",
    "NOOP",
    "SCRIPT",
    "JQ",
    "HTTP",
    "HTTP_POLL",
    "EVENT",
    "EXCLUSIVE_JOIN",
    "SWITCH",
    "PARALLEL",
    "MAP",
    "DO_WHILE",
)
CONTAINER_TYPES = frozenset({"SWITCH", "PARALLEL", "MAP", "DO_WHILE"})

__all__ = [
    "CONTAINER_TYPES",
    "MAX_ITERATIONS",
    "MAX_MAP_ITEMS",
    "MAX_SCRIPT_CHARS",
    "STEP_TYPES",
    "DoWhileStep",
    "EventStep",
    "ExclusiveJoinStep",
    "HttpCall",
    "HttpPollStep",
    "HttpStep",
    "JqStep",
    "MapStep",
    "NoopStep",
    "ParallelStep",
    "RetryLogic",
    "ScriptStep",
    "Seconds",
    "ServiceTaskStep",
    "SetVariableStep",
    "SignalStep",
    "StartWorkflowStep",
    "Step",
    "StepBase",
    "SubWorkflowStep",
    "SwitchCase",
    "SwitchStep",
    "TerminateStep",
    "TimerStep",
    "UserTaskStep",
]
