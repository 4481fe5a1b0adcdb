"""What every task translator shares: errors naming the task, ``${…}`` expressions in each
direction, a task's base step, scripts given as input parameters, and the two list translations
(:func:`tasks`, :func:`back`) through the registry :mod:`baton.conductor.tasks.dispatch` fills.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from baton.conductor import js
from baton.conductor.errors import Untranslatable
from baton.conductor.tasks.refused import unsupported
from baton.errors import Problem
from baton.model import STEP_ID_PATTERN
from baton.steps import list_literal

STEP_ID = re.compile(STEP_ID_PATTERN)
EXPR = re.compile(r"\$\{([^}]*)\}")
WHOLE = re.compile(r"^\$\{([^}]*)\}$")
# ${workflow.X} names that differ between the two.
_WORKFLOW_FIELDS = {
    "input": "input",
    "variables": "variables",
    "workflowId": "instanceId",
    "correlationId": "correlationId",
    "workflowType": "definitionName",
    "createTime": "createTime",
}
_WORKFLOW_REF = re.compile(r"^workflow\.([A-Za-z_]\w*)(.*)$", re.S)
_BACK_FIELDS = {v: k for k, v in _WORKFLOW_FIELDS.items()}
TASK_SETTINGS = (
    "retryCount",
    "retryLogic",
    "retryDelaySeconds",
    "maxRetryDelaySeconds",
    "backoffScaleFactor",
    "backoffJitterMs",
    "totalTimeoutSeconds",
    "timeoutSeconds",
    "pollTimeoutSeconds",
    "responseTimeoutSeconds",
    "timeoutPolicy",
)
OWN_TASK_ID = "CPEWF_TASK_ID"
# Conductor's JavaScript evaluators (both run as JavaScript in Baton's sandbox).
SCRIPT_EVALUATORS = ("javascript", "graaljs")
# A fork's JOIN is no step of its own: its reference is kept at the end of the fork's description.
JOIN_NOTE = re.compile(r"\[join:([^\]]+)\]$")

# Conductor task → Baton step (``task``, ``path``); a FORK with its JOIN (``task``, ``join``,
# ``path``); Baton step → Conductor tasks. Filled by :mod:`baton.conductor.tasks.dispatch`.
Translator = Callable[[dict[str, Any], str], dict[str, Any]]
ForkTranslator = Callable[[dict[str, Any], dict[str, Any], str], dict[str, Any]]
BackTranslator = Callable[[dict[str, Any], dict[str, Any]], list[dict[str, Any]]]
HANDLERS: dict[str, Translator] = {}
FORKS: dict[str, ForkTranslator] = {}
BACK: dict[str, BackTranslator] = {}
# The whole-workflow translations ("in": Conductor → Baton, "out": back), for a SUB_WORKFLOW's
# inline definition. Set by :mod:`baton.conductor.definitions`, which imports the table.
WORKFLOW: dict[str, Callable[[Any], dict[str, Any]]] = {}


def fail(path: str, message: str) -> Untranslatable:
    return Untranslatable([Problem(path, message)])


# --- expressions ---------------------------------------------------------------------------------


def expr_in(text: str, where: str) -> str:
    """A Conductor ``${…}`` reference in Baton's spelling."""
    if text.strip() == OWN_TASK_ID:
        raise fail(where, "${CPEWF_TASK_ID} is read in a SIMPLE task's inputParameters only")
    m = _WORKFLOW_REF.match(text.strip())
    if m is None:
        return text.strip()
    field = _WORKFLOW_FIELDS.get(m.group(1))
    if field is None:
        raise fail(where, f"${{{text}}}: workflow.{m.group(1)} has no Baton equivalent")
    return f"workflow.{field}{m.group(2)}"


def _expr_out(text: str) -> str:
    parts = text.strip().split(".")
    if parts[0] == "workflow" and len(parts) > 1 and parts[1] in _BACK_FIELDS:
        parts[1] = _BACK_FIELDS[parts[1]]
    elif parts[1:] == ["iteration"] and parts[0] != "map":
        parts[1:] = ["output", "iteration"]  # a loop's running iteration, as Conductor reads it
    return ".".join(parts)


def _map_values(value: Any, fn: Any, where: str) -> Any:
    if isinstance(value, str):
        return EXPR.sub(lambda m: "${" + fn(m.group(1), where) + "}", value)
    if isinstance(value, dict):
        return {k: _map_values(v, fn, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, list):
        return [_map_values(v, fn, f"{where}[{i}]") for i, v in enumerate(value)]
    return value


def params_in(value: Any, where: str) -> Any:
    return _map_values(value, expr_in, where)


def items_in(value: Any, where: str) -> str:
    """A list to run over as a Baton MAP's ``items``: one ``${…}`` as it is, a literal list as
    its JSON text (its ``${…}`` in Baton's spelling, resolved when the MAP starts)."""
    mapped = params_in(value, where)
    if isinstance(mapped, list):
        return json.dumps(mapped, separators=(",", ":"), ensure_ascii=False)
    return str(mapped)


def items_out(items: str) -> Any:
    """A MAP's ``items`` as Conductor gives it: a list written as JSON text is the list."""
    literal = list_literal(items)
    return params_out(items if literal is None else literal)


def params_out(value: Any) -> Any:
    return _map_values(value, lambda t, _w: _expr_out(t), "")


def rewrite_strings(value: Any, fn: Callable[[str], str], skip: tuple[str, ...]) -> Any:
    """``value`` with ``fn`` applied to every string in it, except under the keys ``skip``."""

    def walk(v: Any, key: str = "") -> Any:
        if isinstance(v, str) and key not in skip:
            return fn(v)
        if isinstance(v, list):
            return [walk(x) for x in v]
        if isinstance(v, dict):
            return {k: walk(x, k) for k, x in v.items()}
        return v

    return walk(value)


# --- a task's parts ------------------------------------------------------------------------------


def label(task: dict[str, Any], path: str) -> str:
    ref = task.get("taskReferenceName") or task.get("name")
    return f"{path} ({ref})" if ref else path


def base(task: dict[str, Any], path: str) -> dict[str, Any]:
    ref = task.get("taskReferenceName")
    if not isinstance(ref, str) or not STEP_ID.fullmatch(ref):
        raise fail(
            label(task, path),
            "taskReferenceName must hold only letters, digits, _ and - (not first), at most "
            "128 characters",
        )
    # asyncComplete, rateLimited/rateLimitConfig, and startDelay on a task no worker claims,
    # are accepted without effect (docs/architecture.md, "Conductor-compatible surface", says
    # why). optional and permissive are the step's own flags (optional wins in the engine).
    step: dict[str, Any] = {"id": ref}
    if task.get("optional") is True:
        step["optional"] = True
    if task.get("permissive") is True:
        step["permissive"] = True
    if task.get("name") and task["name"] != ref:
        step["name"] = task["name"]
    if task.get("description"):
        step["description"] = task["description"]
    return step


def task_input(task: dict[str, Any], path: str) -> dict[str, Any]:
    params = task.get("inputParameters") or {}
    if not isinstance(params, dict):
        raise fail(label(task, path), "inputParameters must be an object")
    mapped: dict[str, Any] = params_in(params, f"{path}.inputParameters")
    return mapped


def worker_settings(task: dict[str, Any], step: dict[str, Any], path: str) -> None:
    """The worker task's own settings: an inline ``taskDefinition``'s, the WorkflowTask's
    ``retryCount`` and ``startDelay``."""
    inline = task.get("taskDefinition")
    if isinstance(inline, dict):
        step.update({k: inline[k] for k in TASK_SETTINGS if inline.get(k) is not None})
        for unset in ("responseTimeoutSeconds", "maxRetryDelaySeconds"):  # Conductor's 0: none
            if step.get(unset) == 0:
                del step[unset]
        timeout, response = step.get("timeoutSeconds"), step.get("responseTimeoutSeconds")
        if isinstance(timeout, int) and isinstance(response, int) and 0 < timeout < response:
            # Conductor does not validate an inline definition (its own test harness's have
            # responseTimeoutSeconds 3600 over timeoutSeconds 120): the attempt times out first,
            # so its lease is the timeout (a registered task definition is still refused).
            step["responseTimeoutSeconds"] = timeout
    if task.get("retryCount") is not None:
        step["retryCount"] = task["retryCount"]
    delay = task.get("startDelay")
    if delay:
        if not isinstance(delay, int) or isinstance(delay, bool) or delay < 0:
            raise fail(label(task, path), "startDelay must be a whole number of seconds")
        step["startDelaySeconds"] = delay


def back_worker_settings(s: dict[str, Any], task: dict[str, Any]) -> None:
    if s.get("retryCount") is not None:
        task["retryCount"] = s["retryCount"]
    if s.get("startDelaySeconds"):
        task["startDelay"] = s["startDelaySeconds"]
    inline = {k: s[k] for k in TASK_SETTINGS if k != "retryCount" and k in s}
    if inline:
        task["taskDefinition"] = {"name": s["jobType"], **inline}


def script_text(value: Any, where: str, field: str) -> str:
    """A script as Conductor gives it: non-empty text (what ``${…}`` in it means is up to the
    task type: an INLINE's, LAMBDA's and JSON_JQ_TRANSFORM's program is an input parameter that
    Conductor resolves before it runs; a SWITCH's expression and a loopCondition are run as
    written, a JavaScript template literal's ``${…}`` included)."""
    if not isinstance(value, str) or not value.strip():
        raise fail(where, f"{field} must be a non-empty script")
    return value


def jsonata_to_js(condition: str, params: dict[str, Any]) -> str:
    """A JSONata condition as the Conductor script it came from (paths read through input
    parameters); JSONata outside what :mod:`baton.conductor.js` makes is shown as it is."""
    try:
        return js.from_jsonata(condition, params)
    except ValueError:
        return condition


def join_note(step: dict[str, Any], join: dict[str, Any]) -> None:
    """Keeps the JOIN's reference in the fork step's description, so it reads back as sent."""
    if join.get("taskReferenceName"):
        step["description"] = f"{step.get('description', '')}[join:{join['taskReferenceName']}]"
        step["description"] = step["description"].strip()


def join_back(s: dict[str, Any], task: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The JOIN's reference kept by :func:`join_note` (or ``<fork>_join``), and ``task`` with
    the rest of the description."""
    description = s.get("description")
    join_ref = f"{s['id']}_join"
    if description and (m := JOIN_NOTE.search(description)):
        join_ref = m.group(1)
        description = description[: m.start()].strip() or None
    if description:
        task["description"] = description
    return join_ref, task


# --- lists ---------------------------------------------------------------------------------------


def tasks(items: Any, where: str) -> list[dict[str, Any]]:
    """A list of Conductor tasks as Baton steps (a FORK and its JOIN become one step)."""
    if not isinstance(items, list):
        raise fail(where, "expected a list of tasks")
    steps: list[dict[str, Any]] = []
    i = 0
    while i < len(items):
        task = items[i]
        path = f"{where}[{i}]"
        if not isinstance(task, dict):
            raise fail(path, "a task is a JSON object")
        kind = task.get("type") or "SIMPLE"
        fork = FORKS.get(kind)
        if fork is not None:
            nxt = items[i + 1] if i + 1 < len(items) else None
            if not isinstance(nxt, dict) or nxt.get("type") != "JOIN":
                raise fail(label(task, path), f"a {kind} must be followed by its JOIN")
            steps.append(fork(task, nxt, path))
            i += 2
            continue
        handler = HANDLERS.get(kind)
        if handler is None:
            raise fail(label(task, path), unsupported(kind, [*HANDLERS, *FORKS, "JOIN"]))
        steps.append(handler(task, path))
        i += 1
    return steps


def back(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Baton steps (wire form) as Conductor tasks."""
    out: list[dict[str, Any]] = []
    for s in steps:
        out.extend(_back_one(s))
    return out


def _back_one(s: dict[str, Any]) -> list[dict[str, Any]]:
    task: dict[str, Any] = {
        "name": s.get("name") or s["id"],
        "taskReferenceName": s["id"],
        "inputParameters": params_out(s.get("input") or {}),
    }
    translated = BACK[s["type"]](s, task)
    if len(translated) == 1:
        # A fork's description is its own (without the JOIN's note): set by its translator.
        if s.get("description") and "description" not in task:
            task["description"] = s["description"]
        if s.get("optional"):
            task["optional"] = True
        if s.get("permissive"):
            task["permissive"] = True
    return translated
