"""Scalars as Conductor's Jackson model reads them: a definition may give a number or a boolean
field as text (``"retryCount": "3"``, ``"optional": "true"``), which Jackson's default scalar
coercion turns into the field's type. The translation reads a copy coerced so; what is read back
is still the definition as it was sent.

Only the fields of Conductor's model that are numbers or booleans are coerced, and only text that
Jackson would take: an integer's digits (``"3000"``), ``"true"``/``"false"``. Anything else is left
for the translation to refuse as it is.
"""

from __future__ import annotations

import re
from typing import Any

_INTEGER = re.compile(r"[+-]?\d{1,10}")

# WorkflowDef, WorkflowTask, TaskDef and SubWorkflowParams: their integer and boolean fields.
_INTEGERS = frozenset(
    {
        "version",
        "schemaVersion",
        "timeoutSeconds",
        "failureWorkflowVersion",
        "startDelay",
        "retryCount",
        "retryDelaySeconds",
        "responseTimeoutSeconds",
        "pollTimeoutSeconds",
        "totalTimeoutSeconds",
        "concurrentExecLimit",
        "rateLimitPerFrequency",
        "rateLimitFrequencyInSeconds",
        "backoffScaleFactor",
        "backoffJitterMs",
    }
)
_BOOLEANS = frozenset(
    {
        "optional",
        "asyncComplete",
        "permissive",
        "rateLimited",
        "restartable",
        "workflowStatusListenerEnabled",
        "enforceSchema",
    }
)
# Where WorkflowTasks (and their TaskDefs) nest in a WorkflowTask.
_TASK_LISTS = ("defaultCase", "loopOver", "tasks")


def _scalar(key: str, value: Any) -> Any:
    if not isinstance(value, str):
        return value
    if key in _INTEGERS and _INTEGER.fullmatch(value.strip()):
        return int(value)
    if key in _BOOLEANS and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    return value


def _tasks(value: Any) -> Any:
    return [coerce(t) for t in value] if isinstance(value, list) else value


def coerce(raw: Any) -> Any:
    """A WorkflowDef, WorkflowTask or TaskDef with its number and boolean fields given as text
    coerced (nested tasks, inline task definitions and sub-workflow parameters too)."""
    if not isinstance(raw, dict):
        return raw
    out = {k: _scalar(k, v) for k, v in raw.items()}
    for key in _TASK_LISTS:
        if key in out:
            out[key] = _tasks(out[key])
    if isinstance(out.get("decisionCases"), dict):
        out["decisionCases"] = {k: _tasks(v) for k, v in out["decisionCases"].items()}
    if isinstance(out.get("forkTasks"), list):
        out["forkTasks"] = [_tasks(b) for b in out["forkTasks"]]
    for key in ("taskDefinition", "subWorkflowParam"):
        if isinstance(out.get(key), dict):
            out[key] = coerce(out[key])
    sub = out.get("subWorkflowParam")
    if isinstance(sub, dict) and isinstance(sub.get("workflowDefinition"), dict):
        out["subWorkflowParam"] = {**sub, "workflowDefinition": coerce(sub["workflowDefinition"])}
    return out
