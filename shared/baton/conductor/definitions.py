"""Conductor's workflow and task definitions ⇄ Baton's, pure functions.

Conductor → Baton (:func:`to_baton_workflow`, :func:`to_baton_task_def`) and back
(:func:`to_conductor_workflow`, :func:`to_conductor_task_def`). What has no faithful Baton
equivalent raises :class:`~baton.conductor.errors.Untranslatable` naming the task; nothing is
silently dropped.

+-----------------------------+------------------------------------------------------------+
| Conductor                   | Baton                                                      |
+=============================+============================================================+
| SIMPLE                      | SERVICE_TASK (``jobType`` = name, step id = reference)     |
| SWITCH (value-param)        | SWITCH ``on`` + ``cases`` object                           |
| SWITCH (javascript/graaljs) | SWITCH with that ``script`` (its value names the case)     |
| DECISION                    | SWITCH (``caseValueParam``: ``on``; ``caseExpression``:    |
|                             | ``script``)                                                |
| FORK_JOIN + JOIN            | PARALLEL                                                   |
| FORK_JOIN_DYNAMIC + JOIN    | MAP over ``forkTaskInputs`` of one ``forkTaskName`` task   |
|                             | (or ``forkTaskWorkflow`` sub-workflow), each item its input |
| DO_WHILE                    | DO_WHILE: ``loopCondition`` as JSONata where that is exact |
|                             | (simple comparisons), else as JavaScript (``whileLanguage``)|
| INLINE (javascript/graaljs) | SCRIPT (``expression``; ``$`` the other inputParameters)   |
| INLINE (value-param)        | SCRIPT giving that input parameter                         |
| LAMBDA                      | SCRIPT (``scriptExpression``, run as a function's body)    |
| JSON_JQ_TRANSFORM           | JQ (``queryExpression``; the other inputParameters input)  |
| HTTP                        | HTTP (``http_request`` or top-level ``uri``: http_task.py) |
| SUB_WORKFLOW                | SUB_WORKFLOW                                               |
| WAIT duration/until         | TIMER; WAIT without either: SIGNAL                         |
| HUMAN                       | USER_TASK                                                  |
| TERMINATE                   | TERMINATE                                                  |
| SET_VARIABLE                | SET_VARIABLE                                               |
+-----------------------------+------------------------------------------------------------+
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

from baton.conductor import http_task, js
from baton.conductor.errors import Untranslatable
from baton.errors import Problem
from baton.model import STEP_ID_PATTERN
from baton.steps import MAX_MAP_CONCURRENCY

SUPPORTED = (
    "SIMPLE",
    "SWITCH",
    "DECISION",
    "INLINE",
    "LAMBDA",
    "JSON_JQ_TRANSFORM",
    "HTTP",
    "FORK_JOIN",
    "FORK_JOIN_DYNAMIC",
    "JOIN",
    "DO_WHILE",
    "SUB_WORKFLOW",
    "WAIT",
    "HUMAN",
    "TERMINATE",
    "SET_VARIABLE",
)
# Conductor has no bound on a DO_WHILE; Baton needs one.
DO_WHILE_MAX_ITERATIONS = 1000
_STEP_ID = re.compile(STEP_ID_PATTERN)
_EXPR = re.compile(r"\$\{([^}]*)\}")
_WHOLE = re.compile(r"^\$\{([^}]*)\}$")
# ${workflow.X} names that differ between the two.
_WORKFLOW_FIELDS = {
    "input": "input",
    "variables": "variables",
    "workflowId": "instanceId",
    "correlationId": "correlationId",
    "workflowType": "definitionName",
    "createTime": "createTime",
}
_BACK_FIELDS = {v: k for k, v in _WORKFLOW_FIELDS.items()}
_TASK_SETTINGS = (
    "retryCount",
    "retryLogic",
    "retryDelaySeconds",
    "timeoutSeconds",
    "pollTimeoutSeconds",
    "responseTimeoutSeconds",
    "timeoutPolicy",
)
_TASK_DEF_FIELDS = (
    *_TASK_SETTINGS,
    "description",
    "inputKeys",
    "outputKeys",
    "inputTemplate",
    "concurrentExecLimit",
    "rateLimitPerFrequency",
    "rateLimitFrequencyInSeconds",
    "ownerEmail",
)
_DURATION = re.compile(
    r"(\d+)\s*(days?|d|hours?|hrs?|h|minutes?|mins?|m|seconds?|secs?|s)\b", re.IGNORECASE
)
_UNIT = {"d": 86400, "h": 3600, "m": 60, "s": 1}


def _fail(path: str, message: str) -> Untranslatable:
    return Untranslatable([Problem(path, message)])


# --- expressions ---------------------------------------------------------------------------------


def _expr_in(text: str, where: str) -> str:
    """A Conductor ``${…}`` reference in Baton's spelling."""
    if text.strip() == _OWN_TASK_ID:
        raise _fail(where, "${CPEWF_TASK_ID} is read in a SIMPLE task's inputParameters only")
    parts = text.strip().split(".")
    if parts[0] == "workflow" and len(parts) > 1:
        field = _WORKFLOW_FIELDS.get(parts[1])
        if field is None:
            raise _fail(where, f"${{{text}}}: workflow.{parts[1]} has no Baton equivalent")
        parts[1] = field
    return ".".join(parts)


def _expr_out(text: str) -> str:
    parts = text.strip().split(".")
    if parts[0] == "workflow" and len(parts) > 1 and parts[1] in _BACK_FIELDS:
        parts[1] = _BACK_FIELDS[parts[1]]
    elif parts[1:] == ["iteration"] and parts[0] != "map":
        parts[1:] = ["output", "iteration"]  # a loop's running iteration, as Conductor reads it
    return ".".join(parts)


def _map_values(value: Any, fn: Any, where: str) -> Any:
    if isinstance(value, str):
        return _EXPR.sub(lambda m: "${" + fn(m.group(1), where) + "}", value)
    if isinstance(value, dict):
        return {k: _map_values(v, fn, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, list):
        return [_map_values(v, fn, f"{where}[{i}]") for i, v in enumerate(value)]
    return value


def params_in(value: Any, where: str) -> Any:
    return _map_values(value, _expr_in, where)


def params_out(value: Any) -> Any:
    return _map_values(value, lambda t, _w: _expr_out(t), "")


# --- task definitions ----------------------------------------------------------------------------


def to_baton_task_def(raw: Any) -> dict[str, Any]:
    """A Conductor TaskDef as a Baton task definition body (unknown fields ignored)."""
    if not isinstance(raw, dict):
        raise _fail("$", "a task definition is a JSON object")
    out = {k: raw[k] for k in ("name", *_TASK_DEF_FIELDS) if raw.get(k) is not None}
    # Conductor's 0 means "no limit" where Baton's minimum is 1.
    for k in ("concurrentExecLimit", "rateLimitPerFrequency", "rateLimitFrequencyInSeconds"):
        if out.get(k) == 0:
            del out[k]
    if out.get("responseTimeoutSeconds") == 0:
        del out["responseTimeoutSeconds"]
    return out


def to_conductor_task_def(body: dict[str, Any]) -> dict[str, Any]:
    """A Baton task definition (wire form) as a Conductor TaskDef."""
    out = {k: body[k] for k in ("name", *_TASK_DEF_FIELDS) if body.get(k) is not None}
    out.setdefault("timeoutSeconds", 0)
    out.setdefault("ownerEmail", None)
    for src, dst in (("createdAt", "createTime"), ("updatedAt", "updateTime")):
        if body.get(src):
            out[dst] = epoch_ms(body[src])
    return {k: v for k, v in out.items() if v is not None}


def epoch_ms(iso: str | None) -> int | None:
    if not iso:
        return None
    return int(datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000)


# --- workflow definitions: Conductor → Baton -----------------------------------------------------


def to_baton_workflow(raw: Any) -> dict[str, Any]:
    """A Conductor WorkflowDef as a Baton definition (to be validated by Baton as usual)."""
    if not isinstance(raw, dict):
        raise _fail("$", "a workflow definition is a JSON object")
    tasks = raw.get("tasks")
    if not isinstance(raw.get("name"), str) or not raw["name"]:
        raise _fail("name", "a workflow definition needs a name")
    if not isinstance(tasks, list) or not tasks:
        raise _fail("tasks", "a workflow definition needs at least one task")
    out: dict[str, Any] = {"name": raw["name"], "steps": _tasks(tasks, "tasks")}
    if isinstance(raw.get("version"), int) and raw["version"] >= 1:
        out["version"] = raw["version"]
    if raw.get("description"):
        out["description"] = raw["description"]
    if raw.get("outputParameters"):
        out["outputParameters"] = params_in(raw["outputParameters"], "outputParameters")
    else:
        # Without outputParameters, Conductor's workflow output is its last task's output.
        out["outputParameters"] = "${" + out["steps"][-1]["id"] + ".output}"
    if raw.get("timeoutSeconds"):
        out["timeoutSeconds"] = raw["timeoutSeconds"]
    if raw.get("timeoutPolicy"):
        out["timeoutPolicy"] = raw["timeoutPolicy"]
    if raw.get("failureWorkflow"):
        out["failureWorkflow"] = params_in(raw["failureWorkflow"], "failureWorkflow")
    return _task_ids(_alias_joins(out))


_TASK_ID = re.compile(r"\$\{\s*([A-Za-z_][\w-]*)\.taskId\s*\}")


def _task_ids(out: dict[str, Any]) -> dict[str, Any]:
    """``${ref.taskId}``: the id Conductor's task view gives that task: a worker's task is its
    job and attempt (``<jobId>.<attempt>``, what the worker was handed), any other its step
    execution's id."""
    jobs: set[str] = set()

    def collect(value: Any) -> None:
        if isinstance(value, list):
            for v in value:
                collect(v)
        elif isinstance(value, dict):
            if value.get("type") in ("SERVICE_TASK", "HTTP") and isinstance(value.get("id"), str):
                jobs.add(value["id"])
            for v in value.values():
                if isinstance(v, list | dict):
                    collect(v)

    def one(m: re.Match[str]) -> str:
        ref = m.group(1)
        return f"${{{ref}.jobId}}.${{{ref}.attempt}}" if ref in jobs else f"${{{ref}.executionId}}"

    def rewrite(value: Any, key: str = "") -> Any:
        if isinstance(value, str) and key not in ("description", "script", "while", "query"):
            return _TASK_ID.sub(one, value)
        if isinstance(value, list):
            return [rewrite(v) for v in value]
        if isinstance(value, dict):
            return {k: rewrite(v, k) for k, v in value.items()}
        return value

    collect(out["steps"])
    return rewrite(out)  # type: ignore[no-any-return]


def _alias_joins(out: dict[str, Any]) -> dict[str, Any]:
    """A JOIN is no step of its own: ``${join.output.<task>…}`` reads that task's output
    (``${<task>.output…}``) and ``${join.output}`` the fork's (a PARALLEL's by branch, a MAP's
    list in item order)."""
    aliases: list[tuple[re.Pattern[str], str]] = []

    def collect(value: Any) -> None:
        if isinstance(value, list):
            for v in value:
                collect(v)
        elif isinstance(value, dict):
            note = _JOIN_NOTE.search(str(value.get("description") or ""))
            if note and value.get("type") in ("PARALLEL", "MAP"):
                join = re.escape(note.group(1))
                if value["type"] == "PARALLEL":
                    aliases.append(
                        (
                            re.compile(r"\$\{" + join + r"\.output\.([A-Za-z_][\w-]*)"),
                            r"${\1.output",
                        )
                    )
                aliases.append(
                    (re.compile(r"\$\{" + join + r"\.output\b"), f"${{{value['id']}.output")
                )
            for key in ("steps", "branches", "cases", "default"):
                inner = value.get(key)
                collect(list(inner.values()) if isinstance(inner, dict) else inner)

    def rewrite(value: Any, key: str = "") -> Any:
        if isinstance(value, str) and key != "description" and "${" in value:
            for pattern, replacement in aliases:
                value = pattern.sub(replacement, value)
            return value
        if isinstance(value, list):
            return [rewrite(v) for v in value]
        if isinstance(value, dict):
            return {k: rewrite(v, k) for k, v in value.items()}
        return value

    collect(out["steps"])
    return rewrite(out) if aliases else out


def _tasks(tasks: Any, where: str) -> list[dict[str, Any]]:
    if not isinstance(tasks, list):
        raise _fail(where, "expected a list of tasks")
    steps: list[dict[str, Any]] = []
    i = 0
    while i < len(tasks):
        task = tasks[i]
        path = f"{where}[{i}]"
        if not isinstance(task, dict):
            raise _fail(path, "a task is a JSON object")
        kind = task.get("type") or "SIMPLE"
        if kind in ("FORK_JOIN", "FORK_JOIN_DYNAMIC"):
            nxt = tasks[i + 1] if i + 1 < len(tasks) else None
            if not isinstance(nxt, dict) or nxt.get("type") != "JOIN":
                raise _fail(_label(task, path), f"a {kind} must be followed by its JOIN")
            fork = _fork if kind == "FORK_JOIN" else _fork_dynamic
            steps.append(fork(task, nxt, path))
            i += 2
            continue
        steps.append(_task(task, kind, path))
        i += 1
    return steps


def _label(task: dict[str, Any], path: str) -> str:
    ref = task.get("taskReferenceName") or task.get("name")
    return f"{path} ({ref})" if ref else path


def _base(task: dict[str, Any], path: str) -> dict[str, Any]:
    ref = task.get("taskReferenceName")
    if not isinstance(ref, str) or not _STEP_ID.fullmatch(ref):
        raise _fail(
            _label(task, path),
            "taskReferenceName must start with a letter or _ and hold only letters, digits, "
            "_ and - (at most 64 characters)",
        )
    # permissive, asyncComplete, rateLimited/rateLimitConfig, and startDelay on a task no worker
    # claims, are accepted without effect (docs/architecture.md, "Conductor-compatible
    # surface", says why).
    step: dict[str, Any] = {"id": ref}
    if task.get("optional") is True:
        step["optional"] = True
    if task.get("name") and task["name"] != ref:
        step["name"] = task["name"]
    if task.get("description"):
        step["description"] = task["description"]
    return step


def _input(task: dict[str, Any], path: str) -> dict[str, Any]:
    params = task.get("inputParameters") or {}
    if not isinstance(params, dict):
        raise _fail(_label(task, path), "inputParameters must be an object")
    mapped: dict[str, Any] = params_in(params, f"{path}.inputParameters")
    return mapped


def _task(task: dict[str, Any], kind: str, path: str) -> dict[str, Any]:
    label = _label(task, path)
    handler = _HANDLERS.get(kind)
    if handler is None:
        raise _fail(
            label,
            f"task type {kind} cannot be translated to Baton (supported: {', '.join(SUPPORTED)})",
        )
    return handler(task, path)


def _simple(task: dict[str, Any], path: str) -> dict[str, Any]:
    step = _base(task, path)
    step["name"] = task.get("name") or step["id"]
    # ${CPEWF_TASK_ID}: the task's own id as its worker is handed it (<jobId>.<attempt>).
    own = f"${{{step['id']}.jobId}}.${{{step['id']}.attempt}}"
    params = _own_task_id(task.get("inputParameters") or {}, own)
    step.update(
        type="SERVICE_TASK",
        jobType=task.get("name"),
        input=_input({**task, "inputParameters": params}, path),
    )
    inline = task.get("taskDefinition")
    if isinstance(inline, dict):
        step.update({k: inline[k] for k in _TASK_SETTINGS if inline.get(k) is not None})
        if step.get("responseTimeoutSeconds") == 0:
            del step["responseTimeoutSeconds"]
    if task.get("retryCount") is not None:
        step["retryCount"] = task["retryCount"]
    delay = task.get("startDelay")
    if delay:
        if not isinstance(delay, int) or isinstance(delay, bool) or delay < 0:
            raise _fail(_label(task, path), "startDelay must be a whole number of seconds")
        step["startDelaySeconds"] = delay
    return step


_OWN_TASK_ID = "CPEWF_TASK_ID"
_OWN_TASK_ID_EXPR = re.compile(r"\$\{\s*CPEWF_TASK_ID\s*\}")


def _own_task_id(value: Any, own: str) -> Any:
    if isinstance(value, str):
        return _OWN_TASK_ID_EXPR.sub(lambda _m: own, value)
    if isinstance(value, dict):
        return {k: _own_task_id(v, own) for k, v in value.items()}
    if isinstance(value, list):
        return [_own_task_id(v, own) for v in value]
    return value


def _switch(task: dict[str, Any], path: str) -> dict[str, Any]:
    label = _label(task, path)
    step = _base(task, path)
    params = task.get("inputParameters") or {}
    step.update(type="SWITCH", input=_input(task, path))
    cases = task.get("decisionCases") or {}
    if not isinstance(cases, dict):
        raise _fail(label, "decisionCases must be an object")
    evaluator = task.get("evaluatorType") or "value-param"
    expression = task.get("expression") or task.get("caseValueParam")
    if evaluator == "value-param":
        source = params.get(expression) if isinstance(expression, str) else None
        if not isinstance(source, str) or not _WHOLE.match(source):
            raise _fail(
                label,
                "value-param: expression must name an input parameter holding one ${…} expression",
            )
        step["on"] = params_in(source, label)
        step["cases"] = {str(k): _tasks(v, f"{path}.decisionCases.{k}") for k, v in cases.items()}
    elif evaluator in SCRIPT_EVALUATORS:
        # Run as JavaScript, as Conductor does: its value (as text) names the case.
        step["script"] = _script_text(expression, label, "expression", parameter=False)
        step["cases"] = {str(k): _tasks(v, f"{path}.decisionCases.{k}") for k, v in cases.items()}
    else:
        raise _fail(
            label,
            f"evaluatorType {evaluator!r} is not supported by Baton "
            f"(value-param, {', '.join(SCRIPT_EVALUATORS)})",
        )
    if task.get("defaultCase"):
        step["default"] = _tasks(task["defaultCase"], f"{path}.defaultCase")
    return step


def _decision(task: dict[str, Any], path: str) -> dict[str, Any]:
    """The legacy DECISION: ``caseValueParam`` names the input parameter to match (a SWITCH's
    value-param), ``caseExpression`` is JavaScript whose value names the case."""
    if task.get("caseExpression") is not None:
        evaluator, expression = "javascript", task["caseExpression"]
    else:
        evaluator, expression = "value-param", task.get("caseValueParam")
    return _switch({**task, "evaluatorType": evaluator, "expression": expression}, path)


# Conductor's JavaScript evaluators (both run as JavaScript in Baton's sandbox).
SCRIPT_EVALUATORS = ("javascript", "graaljs")


def _script_text(value: Any, label: str, field: str, *, parameter: bool = True) -> str:
    """A script as Conductor gives it. One given as an input ``parameter`` (INLINE's expression,
    a LAMBDA's or JSON_JQ_TRANSFORM's) is resolved by Conductor before it runs: a ``${…}`` in it
    is refused (read the value through ``$`` instead). A SWITCH's expression and a loopCondition
    are run as written (a JavaScript template literal's ``${…}`` included)."""
    if not isinstance(value, str) or not value.strip():
        raise _fail(label, f"{field} must be a non-empty script")
    if parameter and _EXPR.search(value):
        raise _fail(
            label,
            f"{field} holds a ${{…}} expression: pass the value as an input parameter and "
            "read it as $.<parameter> in the script",
        )
    return value


def _inline(task: dict[str, Any], path: str) -> dict[str, Any]:
    """INLINE: a javascript/graaljs ``expression`` over ``$`` (the other input parameters), or a
    value-param naming the input parameter to give; output ``{result}``."""
    label = _label(task, path)
    step = _base(task, path)
    params = dict(_input(task, path))
    evaluator = params.pop("evaluatorType", None) or "javascript"
    expression = params.pop("expression", None)
    if evaluator in SCRIPT_EVALUATORS:
        script = _script_text(expression, label, "inputParameters.expression")
    elif evaluator == "value-param":
        if not isinstance(expression, str) or expression not in params:
            raise _fail(label, "value-param: expression must name one of the inputParameters")
        script = f"$[{json.dumps(expression)}]"
    else:
        raise _fail(
            label,
            f"evaluatorType {evaluator!r} is not supported by Baton "
            f"(value-param, {', '.join(SCRIPT_EVALUATORS)})",
        )
    step.update(type="SCRIPT", language="javascript", script=script, input=params)
    return step


def _lambda(task: dict[str, Any], path: str) -> dict[str, Any]:
    """The legacy LAMBDA: ``scriptExpression`` is a function's body (it ``return``s its result),
    ``$`` the input parameters; output ``{result}``."""
    label = _label(task, path)
    step = _base(task, path)
    params = dict(_input(task, path))
    body = _script_text(params.pop("scriptExpression", None), label, "scriptExpression")
    script = f"function scriptFun() {{ {body}\n}} scriptFun();"
    step.update(type="SCRIPT", language="javascript", script=script, input=params)
    return step


def _json_jq_transform(task: dict[str, Any], path: str) -> dict[str, Any]:
    """JSON_JQ_TRANSFORM: ``queryExpression`` over the other input parameters; output
    ``{result, resultList}``."""
    label = _label(task, path)
    step = _base(task, path)
    params = dict(_input(task, path))
    query = _script_text(params.pop("queryExpression", None), label, "queryExpression")
    step.update(type="JQ", query=query, input=params)
    return step


def _resolver(params: dict[str, Any], label: str) -> Any:
    """``$.name.rest`` of a script → the JSONata path of input parameter ``name``."""

    def resolve(keys: list[str]) -> str:
        source = params.get(keys[0])
        rest = "".join(f".{k}" for k in keys[1:])
        if isinstance(source, str):
            m = _WHOLE.match(source)
            if m:
                return _expr_in(m.group(1), label) + rest
        if source is not None and not isinstance(source, dict | list) and not rest:
            return json.dumps(source)
        raise ValueError(f"$.{'.'.join(keys)} is not an input parameter holding one ${{…}}")

    return resolve


def _fork(task: dict[str, Any], join: dict[str, Any], path: str) -> dict[str, Any]:
    step = _base(task, path)
    branches = task.get("forkTasks")
    if not isinstance(branches, list) or not branches or not all(branches):
        raise _fail(_label(task, path), "forkTasks must be a non-empty list of task lists")
    join_ref = join.get("taskReferenceName")
    step.update(
        type="PARALLEL",
        branches=[_tasks(b, f"{path}.forkTasks[{n}]") for n, b in enumerate(branches)],
    )
    if task.get("inputParameters"):
        step["input"] = _input(task, path)
    if join_ref:
        # Kept so the definition reads back with its JOIN as it was registered.
        step["description"] = f"{step.get('description', '')}[join:{join_ref}]".strip()
    return step


# The step id of a dynamic fork's task, inside its MAP: the fork's reference plus this.
_FORKED = "_forked"


def _fork_dynamic(task: dict[str, Any], join: dict[str, Any], path: str) -> dict[str, Any]:
    """FORK_JOIN_DYNAMIC with ``forkTaskName`` (or ``forkTaskWorkflow``) and ``forkTaskInputs``:
    a MAP running that one task (or sub-workflow) per input, all at once, each input its whole
    input. The older form, a list of tasks chosen at run time (``dynamicForkTasksParam``), names
    the job types only at run time: Baton has no equivalent and refuses it."""
    label = _label(task, path)
    step = _base(task, path)
    params = task.get("inputParameters") or {}
    if not isinstance(params, dict):
        raise _fail(label, "inputParameters must be an object")
    name, flow = params.get("forkTaskName"), params.get("forkTaskWorkflow")
    inputs = params.get("forkTaskInputs")
    if (name is None and flow is None) or inputs is None:
        raise _fail(
            label,
            "FORK_JOIN_DYNAMIC is translated from forkTaskName (or forkTaskWorkflow) and "
            "forkTaskInputs; a list of tasks chosen at run time (dynamicForkTasksParam, "
            "dynamicTasks) has no Baton equivalent",
        )
    if not (isinstance(inputs, list) or (isinstance(inputs, str) and _WHOLE.match(inputs))):
        raise _fail(label, "forkTaskInputs must be a list or one ${…} expression giving one")
    inner: dict[str, Any] = {"id": f"{step['id'][: 64 - len(_FORKED)]}{_FORKED}"}
    if name is not None:
        if not isinstance(name, str) or not name:
            raise _fail(label, "forkTaskName must be a task name")
        inner.update(name=name, type="SERVICE_TASK", jobType=name)
    else:
        if not isinstance(flow, str) or not flow:
            raise _fail(label, "forkTaskWorkflow must be a workflow name")
        inner.update(type="SUB_WORKFLOW", definitionName=flow)
        version = params.get("forkTaskWorkflowVersion")
        if isinstance(version, int) and version >= 1:
            inner["definitionVersion"] = version
    inner["input"] = "${map.item}"
    step.update(
        type="MAP",
        items=params_in(inputs, f"{path}.inputParameters.forkTaskInputs"),
        maxConcurrency=MAX_MAP_CONCURRENCY,
        steps=[inner],
    )
    if join.get("taskReferenceName"):
        step["description"] = f"{step.get('description', '')}[join:{join['taskReferenceName']}]"
        step["description"] = step["description"].strip()
    return step


def _do_while_items(task: dict[str, Any], path: str) -> dict[str, Any]:
    """A DO_WHILE over ``items``: its tasks run once per item, one item after the other, reading
    ``${<loop>.output.loopItem}`` and ``.loopIndex`` (from 0): a MAP of concurrency 1 whose
    ``${map.item}`` and ``${map.index}`` they read."""
    label = _label(task, path)
    step = _base(task, path)
    items = task["items"]
    if task.get("loopCondition"):
        raise _fail(label, "a DO_WHILE over items is translated without a loopCondition")
    if not (isinstance(items, list) or (isinstance(items, str) and _WHOLE.match(items))):
        raise _fail(label, "items must be a list or one ${…} expression giving one")
    own = re.escape(step["id"])
    item = re.compile(r"\$\{\s*" + own + r"\.output\.loopItem\b")
    index = re.compile(r"\$\{\s*" + own + r"\.output\.loopIndex\s*\}")

    def rewrite(value: Any, key: str = "") -> Any:
        if isinstance(value, str) and key != "description":
            return index.sub("${map.index}", item.sub("${map.item", value))
        if isinstance(value, list):
            return [rewrite(v) for v in value]
        if isinstance(value, dict):
            return {k: rewrite(v, k) for k, v in value.items()}
        return value

    body = _tasks(rewrite(task.get("loopOver") or []), f"{path}.loopOver")
    step.update(
        type="MAP",
        items=params_in(items, f"{label}.items"),
        maxConcurrency=1,
        steps=body,
    )
    return step


def _do_while(task: dict[str, Any], path: str) -> dict[str, Any]:
    if task.get("items") is not None:
        return _do_while_items(task, path)
    label = _label(task, path)
    step = _base(task, path)
    params = task.get("inputParameters") or {}
    inner = {t.get("taskReferenceName") for t in task.get("loopOver") or [] if isinstance(t, dict)}
    by_parameter = _resolver(params, label)

    def resolve(keys: list[str]) -> str:
        # Conductor's loopCondition also reads the loop's own iteration ($.loop['iteration'])
        # and the loop's tasks' outputs ($.task['field']) without an input parameter.
        if keys[0] not in params:
            if keys[0] == step["id"] and keys[1:] == ["iteration"]:
                return f"{step['id']}.output.iteration"
            if keys[0] in inner and len(keys) > 1:
                return f"{keys[0]}.output." + ".".join(keys[1:])
        return str(by_parameter(keys))

    step.update(
        type="DO_WHILE",
        steps=_own_iteration(_tasks(task.get("loopOver") or [], f"{path}.loopOver"), step["id"]),
        maxIterations=DO_WHILE_MAX_ITERATIONS,
    )
    script = _script_text(task.get("loopCondition"), label, "loopCondition", parameter=False)
    try:
        # A simple comparison has an exact JSONata equivalent: no script to run. Its
        # inputParameters are resolved into the condition.
        step["while"] = js.to_jsonata(script, resolve)
    except ValueError:
        # Anything else runs as Conductor runs it: JavaScript over the loop's inputParameters
        # (resolved after each iteration), its tasks' outputs and its own iteration.
        step.update({"while": script, "whileLanguage": "javascript"})
        if params:
            step["input"] = _input(task, path)
    return step


def _own_iteration(steps: Any, loop_id: str) -> Any:
    """Conductor's loop tasks read the running iteration as ``${<loop>.output.iteration}`` (the
    loop's output is updated as each iteration starts); Baton's as ``${<loop>.iteration}``."""
    own = re.compile(r"\$\{\s*" + re.escape(loop_id) + r"\.output\.iteration\s*\}")

    def rewrite(value: Any, key: str = "") -> Any:
        if isinstance(value, str) and key != "description":
            return own.sub(f"${{{loop_id}.iteration}}", value)
        if isinstance(value, list):
            return [rewrite(v) for v in value]
        if isinstance(value, dict):
            return {k: rewrite(v, k) for k, v in value.items()}
        return value

    return rewrite(steps)


def _sub_workflow(task: dict[str, Any], path: str) -> dict[str, Any]:
    step = _base(task, path)
    param = task.get("subWorkflowParam") or {}
    if not isinstance(param, dict) or not (param.get("name") or param.get("workflowDefinition")):
        raise _fail(_label(task, path), "subWorkflowParam needs a name or a workflowDefinition")
    step.update(type="SUB_WORKFLOW", input=_input(task, path))
    inline = param.get("workflowDefinition")
    if isinstance(inline, dict):
        step["definition"] = to_baton_workflow(inline)
    else:
        # A name or version given as ${…} is resolved when the child starts.
        step["definitionName"] = params_in(param["name"], _label(task, path))
        version = param.get("version")
        if isinstance(version, int) or (isinstance(version, str) and _WHOLE.match(version)):
            step["definitionVersion"] = params_in(version, _label(task, path))
    if task.get("retryCount"):
        step["retryCount"] = task["retryCount"]
    return step


def _wait(task: dict[str, Any], path: str) -> dict[str, Any]:
    label = _label(task, path)
    step = _base(task, path)
    params = dict(task.get("inputParameters") or {})
    duration = params.pop("duration", None)
    until = params.pop("until", None)
    step["input"] = params_in(params, f"{path}.inputParameters")
    if duration is None and until is None:
        step["type"] = "SIGNAL"
        return step
    step["type"] = "TIMER"
    if duration is not None:
        step["duration"] = duration_seconds(str(duration), label)
    else:
        step["until"] = until_iso(str(until), label)
    return step


def duration_seconds(text: str, label: str) -> int:
    """Conductor's ``"1 days 2 hours 30 minutes"`` / ``"10s"`` as seconds."""
    if _EXPR.search(text):
        raise _fail(label, "a WAIT duration must be a literal in Baton")
    matches = list(_DURATION.finditer(text))
    left = _DURATION.sub("", text).replace(",", "").strip()
    if not matches or left:
        raise _fail(label, f"cannot read the WAIT duration {text!r}")
    return sum(int(m.group(1)) * _UNIT[m.group(2)[0].lower()] for m in matches)


def until_iso(text: str, label: str) -> str:
    """Conductor's ``until`` (``yyyy-MM-dd HH:mm[:ss] z`` or ISO) as an ISO timestamp."""
    if _EXPR.search(text):
        return params_in(text, label)  # type: ignore[no-any-return]
    for fmt in ("%Y-%m-%d %H:%M %Z", "%Y-%m-%d %H:%M:%S %Z", "%Y-%m-%d %H:%M", "%Y-%m-%d"):
        try:
            return datetime.strptime(text, fmt).replace(tzinfo=UTC).isoformat()
        except ValueError:
            continue
    try:
        return datetime.fromisoformat(text).isoformat()
    except ValueError:
        raise _fail(label, f"cannot read the WAIT until {text!r}") from None


def _human(task: dict[str, Any], path: str) -> dict[str, Any]:
    step = _base(task, path)
    step.update(type="USER_TASK", input=_input(task, path))
    return step


def _terminate(task: dict[str, Any], path: str) -> dict[str, Any]:
    label = _label(task, path)
    step = _base(task, path)
    params = task.get("inputParameters") or {}
    status = params.get("terminationStatus", "COMPLETED")
    if status not in ("COMPLETED", "FAILED"):
        raise _fail(label, f"terminationStatus {status!r}: Baton ends with COMPLETED or FAILED")
    step.update(type="TERMINATE", status=status)
    if params.get("terminationReason") is not None:
        step["reason"] = params_in(params["terminationReason"], label)
    if params.get("workflowOutput") is not None:
        step["output"] = params_in(params["workflowOutput"], label)
    return step


def _set_variable(task: dict[str, Any], path: str) -> dict[str, Any]:
    step = _base(task, path)
    step.update(type="SET_VARIABLE", variables=_input(task, path))
    return step


def _http(task: dict[str, Any], path: str) -> dict[str, Any]:
    return http_task.to_step(task, _base(task, path), _input(task, path), _label(task, path))


_HANDLERS = {
    "SIMPLE": _simple,
    "HTTP": _http,
    "SWITCH": _switch,
    "DECISION": _decision,
    "INLINE": _inline,
    "LAMBDA": _lambda,
    "JSON_JQ_TRANSFORM": _json_jq_transform,
    "DO_WHILE": _do_while,
    "SUB_WORKFLOW": _sub_workflow,
    "WAIT": _wait,
    "HUMAN": _human,
    "TERMINATE": _terminate,
    "SET_VARIABLE": _set_variable,
}


# --- workflow definitions: Baton → Conductor -----------------------------------------------------


def read_back(body: dict[str, Any], source: Any) -> dict[str, Any]:
    """A definition as ``GET /api/metadata/workflow`` answers it: the Conductor definition as
    registered (``source``: every field, lists in their order), with the version Baton gave it;
    one registered on /v1 (no source) is translated from what Baton runs."""
    if not isinstance(source, dict):
        return to_conductor_workflow(body)
    return {**source, "version": body.get("version", source.get("version", 1))}


def to_conductor_workflow(body: dict[str, Any]) -> dict[str, Any]:
    """A Baton definition (wire form) as a Conductor WorkflowDef."""
    out: dict[str, Any] = {
        "name": body["name"],
        "version": body.get("version", 1),
        "schemaVersion": 2,
        "tasks": _back(body.get("steps", [])),
        "inputParameters": [],
        # One expression (the last task's output) is what Conductor does without any.
        "outputParameters": (
            params_out(body["outputParameters"])
            if isinstance(body.get("outputParameters"), dict)
            else {}
        ),
        "timeoutSeconds": body.get("timeoutSeconds", 0),
        "timeoutPolicy": body.get("timeoutPolicy", "TIME_OUT_WF"),
        "restartable": True,
    }
    if body.get("description"):
        out["description"] = body["description"]
    if body.get("failureWorkflow"):
        out["failureWorkflow"] = body["failureWorkflow"]
    if body.get("createdAt"):
        out["createTime"] = epoch_ms(body["createdAt"])
    return out


_JOIN_NOTE = re.compile(r"\[join:([^\]]+)\]$")


def _back(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    tasks: list[dict[str, Any]] = []
    for s in steps:
        tasks.extend(_back_one(s))
    return tasks


def _back_one(s: dict[str, Any]) -> list[dict[str, Any]]:
    kind = s["type"]
    task: dict[str, Any] = {
        "name": s.get("name") or s["id"],
        "taskReferenceName": s["id"],
        "inputParameters": params_out(s.get("input") or {}),
    }
    description = s.get("description")
    if kind == "SERVICE_TASK":
        task["name"] = s["jobType"]
        task["type"] = "SIMPLE"
        if s.get("retryCount") is not None:
            task["retryCount"] = s["retryCount"]
        if s.get("startDelaySeconds"):
            task["startDelay"] = s["startDelaySeconds"]
        inline = {k: s[k] for k in _TASK_SETTINGS if k != "retryCount" and k in s}
        if inline:
            task["taskDefinition"] = {"name": s["jobType"], **inline}
    elif kind == "SWITCH":
        task["type"] = "SWITCH"
        cases = s.get("cases")
        params = task["inputParameters"]
        if s.get("script") is not None:
            task["evaluatorType"] = "javascript"
            task["expression"] = s["script"]
            task["decisionCases"] = {k: _back(v) for k, v in (cases or {}).items()}
        elif isinstance(cases, dict):
            on = params_out(s.get("on"))
            key = next((k for k, v in params.items() if v == on), None)
            if key is None:
                key = "switchCaseValue"
                params[key] = on
            task["evaluatorType"] = "value-param"
            task["expression"] = key
            task["decisionCases"] = {k: _back(v) for k, v in cases.items()}
        else:
            task["evaluatorType"] = "javascript"
            first = cases[0]["condition"] if cases else "true"
            task["expression"] = _jsonata_to_js(first, params)
            task["decisionCases"] = {}
            for c in cases or []:
                key = "false" if c["condition"].startswith("$not(") else "true"
                task["decisionCases"][key] = _back(c["steps"])
        task["defaultCase"] = _back(s.get("default") or [])
    elif kind == "PARALLEL":
        join_ref = f"{s['id']}_join"
        if description and (m := _JOIN_NOTE.search(description)):
            join_ref = m.group(1)
            description = description[: m.start()].strip() or None
        task["type"] = "FORK_JOIN"
        task["forkTasks"] = [_back(b) for b in s["branches"]]
        join = {
            "name": join_ref,
            "taskReferenceName": join_ref,
            "type": "JOIN",
            "inputParameters": {},
            "joinOn": [b[-1]["id"] for b in s["branches"] if b],
        }
        if description:
            task["description"] = description
        return [task, join]
    elif kind == "DO_WHILE":
        task["type"] = "DO_WHILE"
        if s.get("whileLanguage") == "javascript":
            task["loopCondition"] = s["while"]
        else:
            task["loopCondition"] = _jsonata_to_js(s["while"], task["inputParameters"])
        task["loopOver"] = _back(s["steps"])
    elif kind == "SUB_WORKFLOW":
        task["type"] = "SUB_WORKFLOW"
        param: dict[str, Any] = {}
        if s.get("definition"):
            param["name"] = s["definition"]["name"]
            param["workflowDefinition"] = to_conductor_workflow(s["definition"])
        else:
            param["name"] = s.get("definitionName")
            if s.get("definitionVersion") is not None:
                param["version"] = s["definitionVersion"]
        task["subWorkflowParam"] = param
        if s.get("retryCount"):
            task["retryCount"] = s["retryCount"]
    elif kind in ("TIMER", "SIGNAL"):
        task["type"] = "WAIT"
        if s.get("duration") is not None:
            d = s["duration"]
            task["inputParameters"]["duration"] = f"{d} seconds" if isinstance(d, int) else d
        if s.get("until") is not None:
            task["inputParameters"]["until"] = s["until"]
    elif kind == "USER_TASK":
        task["type"] = "HUMAN"
    elif kind == "TERMINATE":
        task["type"] = "TERMINATE"
        ends: dict[str, Any] = {"terminationStatus": s["status"]}
        if s.get("reason") is not None:
            ends["terminationReason"] = params_out(s["reason"])
        if s.get("output") is not None:
            ends["workflowOutput"] = params_out(s["output"])
        task["inputParameters"] = ends
    elif kind == "SCRIPT":
        task["type"] = "INLINE"
        task["inputParameters"] = {
            **task["inputParameters"],
            "evaluatorType": "javascript",
            "expression": s["script"],
        }
    elif kind == "JQ":
        task["type"] = "JSON_JQ_TRANSFORM"
        task["inputParameters"] = {**task["inputParameters"], "queryExpression": s["query"]}
    elif kind == "HTTP":
        http_task.to_task(s, task, params_out)
    elif kind == "SET_VARIABLE":
        task["type"] = "SET_VARIABLE"
        task["inputParameters"] = params_out(s["variables"])
    elif kind == "MAP" and _dynamic_fork(s) is not None:
        inner = _dynamic_fork(s)
        assert inner is not None
        task["type"] = "FORK_JOIN_DYNAMIC"
        if inner["type"] == "SERVICE_TASK":
            fork: dict[str, Any] = {"forkTaskName": inner["jobType"]}
        else:
            fork = {"forkTaskWorkflow": inner["definitionName"]}
            if inner.get("definitionVersion"):
                fork["forkTaskWorkflowVersion"] = inner["definitionVersion"]
        task["inputParameters"] = {**fork, "forkTaskInputs": params_out(s["items"])}
        task["dynamicForkTasksParam"] = "dynamicTasks"
        task["dynamicForkTasksInputParamName"] = "dynamicTasksInput"
        join_ref = f"{s['id']}_join"
        if description and (m := _JOIN_NOTE.search(description)):
            join_ref = m.group(1)
            description = description[: m.start()].strip() or None
        join = {"name": join_ref, "taskReferenceName": join_ref, "type": "JOIN"}
        if description:
            task["description"] = description
        return [task, {**join, "inputParameters": {}, "joinOn": []}]
    elif kind == "MAP":
        task["type"] = "FORK_JOIN_DYNAMIC"
        task["inputParameters"] = {"items": params_out(s["items"])}
        task["loopOver"] = _back(s["steps"])  # informational: Baton's MAP body
    else:  # pragma: no cover - every Baton step type is listed above
        task["type"] = kind
    if description:
        task["description"] = description
    if s.get("optional"):
        task["optional"] = True
    return [task]


def _dynamic_fork(s: dict[str, Any]) -> dict[str, Any] | None:
    """The one task of a MAP that reads as a FORK_JOIN_DYNAMIC (each item its whole input)."""
    body = s.get("steps") or []
    if len(body) != 1:
        return None
    inner = body[0]
    if inner.get("type") in ("SERVICE_TASK", "SUB_WORKFLOW") and inner.get("input") == (
        "${map.item}"
    ):
        return dict(inner)
    return None


def _jsonata_to_js(condition: str, params: dict[str, Any]) -> str:
    """A JSONata condition as the Conductor script it came from (paths read through input
    parameters); JSONata outside what :mod:`baton.conductor.js` makes is shown as it is."""
    try:
        return js.from_jsonata(condition, params)
    except ValueError:
        return condition
