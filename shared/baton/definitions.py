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
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError

from baton import expressions, validation
from baton.conditions import ConditionError, compile_condition
from baton.durations import duration_seconds, parse_timestamp
from baton.errors import Problem, ValidationFailed
from baton.httpcall.request import request_problems
from baton.model import (
    INT32_MAX,
    JOB_TYPE_PATTERN,
    NAME_OR_EXPRESSION_PATTERN,
    NAME_PATTERN,
    QUEUE_NAME_PATTERN,
    QUEUE_NAME_RULE,
    STEP_ID_PATTERN,
    WHOLE_EXPRESSION_PATTERN,
    Model,
    Seconds,
    TaskDef,
)
from baton.sinks import parse_sink
from baton.steps import (
    MAX_SCRIPT_CHARS,
    STEP_TYPES,
    Step,
    list_literal,
)
from baton.structure import (
    MAX_DEPTH,
    MAX_STEPS,
    ROOT,
    ListRef,
    Node,
    Point,
    Tree,
    condition_references,
    in_map,
    iteration_references,
    loops_of,
)


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
    # An object of values and ${…} expressions, or one ${…} expression giving the output (as
    # ``${<lastStep>.output}``, Conductor's output when a definition names none).
    output_parameters: dict[str, Any] | str | None = None
    timeout_seconds: Seconds = 0
    timeout_policy: Literal["TIME_OUT_WF", "ALERT_ONLY"] = "TIME_OUT_WF"
    trigger: QueueTrigger | None = None
    # Started when an instance of this definition fails, once that failure has committed, with
    # Conductor's input (the failed input's keys, workflowId/instanceId, reason, failureStatus,
    # failureTaskId, failedWorkflow with its tasks) and ``input``. A name, or one ${…}
    # expression over the failed instance (resolved when it fails).
    failure_workflow: Annotated[str, Field(pattern=NAME_OR_EXPRESSION_PATTERN)] | None = None
    # The version of it started (Conductor's failureWorkflowVersion; None: its latest).
    failure_workflow_version: Annotated[int, Field(ge=1, le=INT32_MAX)] | None = None
    # For triggered instances: entries added to the input, ``{{title}}``-style placeholders
    # filled from the trigger's variables.
    input_template: dict[str, Any] | None = None
    # Seconds after its end that an instance is archived to S3 and deleted from the database;
    # overrides BATON_RETENTION_SECONDS (0: never archived).
    retention_seconds: Annotated[int, Field(ge=0, le=INT32_MAX)] | None = None

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
    STEP_ID_PATTERN: "step ids are 1-128 characters: letters, digits, '_' and '-', not starting "
    "with '-'",
    JOB_TYPE_PATTERN: "job types are 1-128 characters: letters, digits, '_', '.', ':' and '-', "
    "starting with a letter or a digit",
    QUEUE_NAME_PATTERN: QUEUE_NAME_RULE,
    NAME_OR_EXPRESSION_PATTERN: "a name (1-128 characters: letters, digits, '_', '.' and '-', "
    "starting with a letter or a digit) or one ${…} expression giving one",
    WHOLE_EXPRESSION_PATTERN: "one ${…} expression",
}


def pydantic_problems(
    err: ValidationError, document: Any = validation.NO_DOCUMENT
) -> list[Problem]:
    """The one translation of pydantic's errors into Baton's problems (path + plain sentence);
    ``document``, the JSON validated, keeps pydantic's union labels out of the paths."""
    return validation.problems(err, tags=STEP_TYPES, pattern_rules=PATTERN_RULES, document=document)


# --- semantic checks over the raw JSON, so they run even when the structure has errors ---------


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
    total = _field(s, "totalTimeoutSeconds")
    if isinstance(timeout, int) and isinstance(total, int) and 0 < total < timeout:
        # Conductor's TaskTimeoutConstraint refuses it too.
        yield Problem(
            f"{_join(path, 'timeoutSeconds')}",
            f"timeoutSeconds ({timeout}) must not exceed totalTimeoutSeconds ({total}): one "
            "attempt may not outlast the budget over all attempts",
        )


def _join(path: str, name: str) -> str:
    return name if path == "$" else f"{path}.{name}"


def _unclosed_problems(path: str, template: Any, step: Node | None = None) -> Iterator[Problem]:
    """A ``${`` that nothing closes would be sent on as literal text: refused, naming the step
    (its id, shown before the field's path within the step) and the field."""
    for suffix, text in expressions.unclosed(template):
        where = path + suffix
        said = (
            f"step {step.id!r}: {where[len(step.path) + 1 :]}"
            if step is not None and isinstance(step.id, str)
            else where
        )
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
    """Every problem the schema cannot see: unique ids, nesting and size limits, expressions
    (syntax, and whether each step they read is visible where they are evaluated), conditions,
    timer and sub-workflow settings, retry/timeout consistency."""
    problems: list[Problem] = []
    tree = Tree.of(raw.get("steps"))
    if len(tree.nodes) > MAX_STEPS:
        problems.append(
            Problem("steps", f"{len(tree.nodes)} steps, more than the {MAX_STEPS} allowed")
        )
    seen: dict[str, str] = {}
    too_deep = False
    for node in tree.nodes:
        path = node.path
        sid = node.id
        if node.depth > MAX_DEPTH and not too_deep:
            too_deep = True
            problems.append(Problem(path, f"nested deeper than {MAX_DEPTH} operators"))
        if isinstance(sid, str):
            if sid in RESERVED_ROOTS:
                problems.append(Problem(f"{path}.id", f"{sid!r} is reserved for expressions"))
            if sid in seen:
                problems.append(
                    Problem(f"{path}.id", f"duplicate step id {sid!r} (first at {seen[sid]})")
                )
            else:
                seen[sid] = path
        problems.extend(_step_problems(tree, node))
    root = raw.get("steps")
    end = tree.end_of((ROOT,), len(root) if isinstance(root, list) else 0)
    problems.extend(
        _expression_problems(tree, "outputParameters", _field(raw, "outputParameters"), end)
    )
    problems.extend(_failure_workflow_problems(_field(raw, "failureWorkflow")))
    return problems


def _failure_workflow_problems(name: Any) -> Iterator[Problem]:
    """A failure workflow given as ``${…}`` reads the failed instance (``workflow.*``) only."""
    for _, text in expressions.references(name):
        try:
            ref = expressions.parse(text)
        except expressions.ExpressionError as e:
            yield Problem("failureWorkflow", str(e))
            continue
        if ref.root != expressions.WORKFLOW:
            yield Problem(
                "failureWorkflow", f"${{{text}}}: a failure workflow's name reads workflow.* only"
            )


def _step_problems(tree: Tree, node: Node) -> Iterator[Problem]:
    step, path, kind = node.step, node.path, node.type
    here = tree.at_step(node)
    javascript_while = kind == "DO_WHILE" and _field(step, "whileLanguage") == "javascript"
    for name in (*_EVALUATED_AT_STEP.get(kind, ()), "input"):
        value = _field(step, name)
        if value is None or (name == "definition" and not isinstance(value, str)):
            continue  # an inline definition's expressions are its own steps'
        if javascript_while and name == "input":
            # Resolved for the while script, after each iteration: it may read the loop's steps.
            after = tree.end_of(
                (*node.lists, ListRef(str(node.id), "body")), _length(step.get("steps"))
            )
            yield from _expression_problems(tree, f"{path}.input", value, after, node)
        else:
            yield from _expression_problems(tree, f"{path}.{name}", value, here, node)
    given = step.get("input")
    if isinstance(given, str) and not expressions.is_whole_expression(given):
        yield Problem(f"{path}.input", "input is an object, or one ${…} expression giving one")
    if kind == "SERVICE_TASK":
        yield from _setting_problems(path, step)
        job_type = step.get("jobType")
        if isinstance(job_type, str) and job_type.lower().startswith(RESERVED_JOB_TYPE_PREFIX):
            yield Problem(
                f"{path}.jobType",
                f"job types starting with {RESERVED_JOB_TYPE_PREFIX!r} are the engine's own "
                "(an HTTP step makes its call as one): choose another name",
            )
    elif kind in ("HTTP", "HTTP_POLL"):
        yield from _setting_problems(path, step)
        if kind == "HTTP_POLL":
            yield from script_problems(
                f"{path}.terminationCondition",
                "javascript",
                _field(step, "terminationCondition"),
            )
        request = step.get("request")
        if isinstance(request, str) and not expressions.is_whole_expression(request):
            yield Problem(
                f"{path}.request", "request is an object, or one ${…} expression giving one"
            )
        for name, message in request_problems(request):
            yield Problem(f"{path}.request.{name}" if name else f"{path}.request", message)
    elif kind == "MAP":
        items = step.get("items")
        if (
            isinstance(items, str)
            and not expressions.is_whole_expression(items)
            and list_literal(items) is None
        ):
            yield Problem(
                f"{path}.items",
                "items is one ${…} expression giving a list, or a list written as JSON text",
            )
        key = step.get("key")
        for _suffix, text in expressions.references(key):
            # Resolved for each item when the MAP starts, from the item alone.
            try:
                ref = expressions.parse(text)
            except expressions.ExpressionError as e:
                yield Problem(f"{path}.key", str(e))
                continue
            if ref.root != expressions.MAP or ref.path[:1] == ("input",):
                yield Problem(f"{path}.key", "a key reads ${map.item…} and ${map.index} only")
        if step.get("inputs") is not None and key is None:
            yield Problem(f"{path}.inputs", "inputs are read by each item's key: give a key")
        if _field(step, "indexAs") is not None and (key is None or step.get("inputs") is not None):
            yield Problem(
                f"{path}.indexAs",
                "indexAs gives each item of a keyed MAP its index in ${map.input}: give a key "
                "and no inputs",
            )
    elif kind == "SWITCH":
        yield from _switch_problems(tree, node)
    elif kind == "DO_WHILE" and javascript_while:
        yield from script_problems(f"{path}.while", "javascript", step.get("while"))
    elif kind == "DO_WHILE":
        body = step.get("steps")
        end = tree.end_of((*node.lists, ListRef(str(node.id), "body")), _length(body))
        own = node.id if isinstance(node.id, str) else None
        yield from _condition_problems(tree, f"{path}.while", step.get("while"), end, own)
    elif kind in ("SCRIPT", "JQ"):
        # A program given as one ${…} is resolved when the step runs: its reference is checked
        # like the step's input, its text only then.
        name, language = ("script", "javascript") if kind == "SCRIPT" else ("query", "jq")
        code = step.get(name)
        if isinstance(code, str) and expressions.is_whole_expression(code):
            yield from _expression_problems(tree, f"{path}.{name}", code, tree.at_step(node), node)
        elif kind == "JQ" or step.get("language", "javascript") == "javascript":
            yield from script_problems(f"{path}.{name}", language, code)
    elif kind == "TIMER":
        yield from _timer_problems(path, step)
    elif kind == "SUB_WORKFLOW":
        yield from _sub_workflow_problems(path, step)
    elif kind == "EXCLUSIVE_JOIN":
        # The steps it joins on are read there as ${<id>.output} is: they must be visible.
        for name in ("joinOn", "defaultJoinOn"):
            ids = _field(step, name)
            for i, sid in enumerate(ids if isinstance(ids, list) else []):
                if isinstance(sid, str):
                    read = "${" + sid + ".output}"
                    yield from _expression_problems(tree, f"{path}.{name}[{i}]", read, here, node)
    elif kind == "EVENT":
        yield from _setting_problems(path, step)
        sink = step.get("sink")
        if isinstance(sink, str) and not any(expressions.references(sink)):
            try:
                parse_sink(sink)
            except ValueError as e:
                yield Problem(f"{path}.sink", str(e))
    elif kind == "START_WORKFLOW":
        yield from _start_request_problems(f"{path}.request", step.get("request"))


def _start_request_problems(path: str, request: Any) -> Iterator[Problem]:
    """A START_WORKFLOW's request given as an object names its definition (a ``${…}`` anywhere
    in it is resolved when the step starts)."""
    if isinstance(request, str) and not expressions.is_whole_expression(request):
        yield Problem(path, "request is an object, or one ${…} expression giving one")
    if not isinstance(request, dict):
        return
    name = request.get("name", request.get("definitionName"))
    if "name" in request and "definitionName" in request:
        yield Problem(path, "give the definition's name once: name or definitionName")
    elif not isinstance(name, str) or not name:
        yield Problem(path, "a request names the definition to start: name (or definitionName)")
    given = request.get("input")
    if given is not None and not isinstance(given, dict | str):
        yield Problem(f"{path}.input", "input is an object, or one ${…} expression giving one")


# Fields each step type evaluates as expressions when it starts (besides ``input``).
_EVALUATED_AT_STEP: dict[Any, tuple[str, ...]] = {
    "MAP": ("items", "inputs"),
    "SERVICE_TASK": ("jobType",),
    "SWITCH": ("on",),
    "TIMER": ("until",),
    "SET_VARIABLE": ("variables",),
    "TERMINATE": ("reason", "output"),
    "HTTP": ("request",),
    "HTTP_POLL": ("request",),
    "START_WORKFLOW": ("request",),
    "EVENT": ("sink",),
    "SUB_WORKFLOW": ("definitionName", "definitionVersion", "definition"),
}
# Job types the engine's system tasks claim (HTTP steps' ``baton:http``): no SERVICE_TASK's.
RESERVED_JOB_TYPE_PREFIX = "baton:"
RESERVED_ROOTS = frozenset({expressions.WORKFLOW, expressions.MAP})


def _length(steps: Any) -> int:
    return len(steps) if isinstance(steps, list) else 0


def script_problems(path: str, language: str, code: Any) -> Iterator[Problem]:
    """A script (``language`` javascript or jq) that does not parse, checked in the sandbox
    without running it (the size and emptiness are the schema's)."""
    if not isinstance(code, str) or not code.strip() or len(code) > MAX_SCRIPT_CHARS:
        if isinstance(code, str) and not code.strip() and code:
            yield Problem(path, "the script is blank")
        return
    from baton.scripting import ScriptFailed, default_sandbox

    try:
        default_sandbox().check(language, code)
    except ScriptFailed as e:  # a syntax error; the sandbox's own trouble is a 503 (Unavailable)
        what = "jq filter" if language == "jq" else "JavaScript"
        yield Problem(path, f"the {what} does not parse: {e}")


def _switch_problems(tree: Tree, node: Node) -> Iterator[Problem]:
    step, path = node.step, node.path
    cases, on, script = step.get("cases"), step.get("on"), step.get("script")
    if on is not None and script is not None:
        yield Problem(f"{path}.script", "a SWITCH selects its case by on or by script: not both")
    elif isinstance(cases, dict) and on is None and script is None:
        yield Problem(
            f"{path}.on", "cases given by value need the value to match: on (or a script)"
        )
    if script is not None:
        yield from script_problems(f"{path}.script", "javascript", script)
    if isinstance(cases, list):
        if on is not None:
            yield Problem(f"{path}.on", "cases given as conditions take no on")
        if script is not None:
            yield Problem(f"{path}.script", "cases given as conditions take no script")
        for c, case in enumerate(cases):
            if isinstance(case, dict):
                yield from _condition_problems(
                    tree, f"{path}.cases[{c}].condition", case.get("condition"), tree.at_step(node)
                )


def _condition_problems(
    tree: Tree, path: str, text: Any, at: Point, loop: str | None = None
) -> Iterator[Problem]:
    """Problems of a JSONata condition (or a ``${…}`` one) evaluated at ``at``. A DO_WHILE's
    ``while`` (``loop`` its id) may also read ``<loop>.output.iteration``, the iteration that
    just ended (from 1)."""
    if not isinstance(text, str):
        return
    try:
        condition = compile_condition(text)
    except ConditionError as e:
        yield Problem(path, str(e))
        return
    if condition.is_expression:
        yield from _expression_problems(tree, path, text, at)
        return
    for sid in condition_references(text):
        if sid == loop:
            continue
        visible, why, _ = tree.visibility(sid, at)
        if not visible:
            hint = f"; its running iteration is {sid}.iteration" if _is_loop_of(sid, at) else ""
            yield Problem(path, f"the condition reads {sid}.output, but {why}{hint}")
    for lid in iteration_references(text):
        why = _iteration_problem(tree, lid, at)
        if why:
            yield Problem(path, f"the condition reads {lid}.iteration, but {why}")


def _timer_problems(path: str, step: dict[str, Any]) -> Iterator[Problem]:
    duration, until = step.get("duration"), step.get("until")
    if (duration is None) == (until is None):
        yield Problem(path, "a TIMER waits for a duration or until a time: give one of them")
    if isinstance(duration, str):
        try:
            duration_seconds(duration)
        except ValueError as e:
            yield Problem(f"{path}.duration", str(e))
    if isinstance(until, str) and not expressions.has_expressions(until):
        try:
            parse_timestamp(until)
        except ValueError as e:
            yield Problem(f"{path}.until", str(e))


def _sub_workflow_problems(path: str, step: dict[str, Any]) -> Iterator[Problem]:
    name, inline = _field(step, "definitionName"), step.get("definition")
    if name is None and inline is None:
        yield Problem(path, "a SUB_WORKFLOW runs a stored definition or an inline one: give one")
    if name is not None and isinstance(inline, dict):
        # With a definition given as ${…}, a name is what runs when it gives none (Conductor's).
        yield Problem(path, "an inline definition names its child itself: give no definitionName")
    dialect = _field(step, "definitionDialect")
    if dialect not in (None, "baton") and not isinstance(inline, str):
        yield Problem(
            f"{path}.definitionDialect",
            "a dialect reads a definition given as ${…} when the child starts: an inline "
            "definition is a Baton one",
        )
    if isinstance(inline, dict):
        try:
            parse_definition(inline)
        except ValidationFailed as e:
            for p in e.problems:
                yield Problem(f"{path}.definition.{p.path}", p.message)


def _expression_problems(
    tree: Tree, path: str, template: Any, at: Point, step: Node | None = None
) -> Iterator[Problem]:
    yield from _unclosed_problems(path, template, step)
    for suffix, text in expressions.references(template):
        where = path + suffix
        try:
            ref = expressions.parse(text)
        except expressions.ExpressionError as e:
            yield Problem(where, str(e))
            continue
        if ref.root == expressions.MAP and not in_map(at.lists):
            yield Problem(where, f"${{{text}}} is only meaningful inside a MAP's steps")
        if ref.loop_id is not None:
            why = _iteration_problem(tree, ref.loop_id, at)
            if why:
                yield Problem(where, f"${{{text}}} reads a loop's iteration, but {why}")
            continue
        sid = ref.step_id or ref.record_of
        if sid is None:
            continue
        if ref.record_of is not None and step is not None and sid == step.id:
            if step.type != "SERVICE_TASK":
                yield Problem(
                    where, f"${{{text}}}: a step reads its own record in a SERVICE_TASK's input"
                )
            continue
        visible, why, _ = tree.visibility(sid, at)
        if not visible and ref.step_id is not None and _is_loop_of(sid, at):
            continue  # a DO_WHILE's output so far, read inside it (its iterations' outputs)
        if not visible:
            if why == "unknown step":
                yield Problem(where, f"${{{text}}} refers to unknown step {sid!r}")
            else:
                hint = (
                    f"; its running iteration is ${{{sid}.iteration}}"
                    if _is_loop_of(sid, at)
                    else ""
                )
                yield Problem(where, f"${{{text}}} reads step {sid!r}, but {why}{hint}")


def _is_loop_of(sid: str, at: Point) -> bool:
    """Is ``sid`` a DO_WHILE that ``at`` is inside?"""
    return sid in loops_of(at.lists)


def _iteration_problem(tree: Tree, lid: str, at: Point) -> str:
    """Why ``<lid>.iteration`` cannot be read at ``at`` ('' when it can)."""
    if _is_loop_of(lid, at):
        return ""
    node = tree.by_id.get(lid)
    if node is None:
        return f"there is no step {lid!r}"
    if node.type != "DO_WHILE":
        return f"step {lid!r} is a {node.type}, and only a DO_WHILE has iterations"
    return (
        f"it is read outside DO_WHILE {lid!r}'s steps and while (after the loop, "
        f"{lid}.output.iterations says how many ran)"
    )


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
        raise ValidationFailed(pydantic_problems(e, raw) + problems) from None
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
        raise ValidationFailed(pydantic_problems(e, raw) + problems) from None
    if problems:
        raise ValidationFailed(problems)
    return task_def
