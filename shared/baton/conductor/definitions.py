"""Conductor's workflow and task definitions ⇄ Baton's, pure functions.

Conductor → Baton (:func:`to_baton_workflow`, :func:`to_baton_task_def`) and back
(:func:`to_conductor_workflow`, :func:`to_conductor_task_def`). Each task type has its own
translator module in :mod:`baton.conductor.tasks` (the table is ``tasks/dispatch.py``); this
module holds what concerns a whole workflow: its fields, the JOIN aliases and ``${ref.taskId}``.
What has no faithful Baton equivalent raises :class:`~baton.conductor.errors.Untranslatable`
naming the task; nothing is silently dropped.

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
| HTTP_POLL                   | HTTP_POLL (an HTTP request, and its polling fields)        |
| EVENT                       | EVENT (``conductor:<q>``: Baton queue ``<q>``; ``sqs:<q>``) |
| SUB_WORKFLOW                | SUB_WORKFLOW                                               |
| WAIT duration/until         | TIMER; WAIT without either: SIGNAL                         |
| HUMAN                       | USER_TASK                                                  |
| TERMINATE                   | TERMINATE (``terminationStatus`` TERMINATED: CANCELLED)    |
| SET_VARIABLE                | SET_VARIABLE                                               |
| NOOP                        | NOOP                                                       |
| START_WORKFLOW              | START_WORKFLOW (``startWorkflow``: its ``request``)        |
| EXCLUSIVE_JOIN              | EXCLUSIVE_JOIN (``defaultExclusiveJoinTask``:              |
|                             | ``defaultJoinOn``)                                         |
+-----------------------------+------------------------------------------------------------+
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from baton.conductor.coerce import coerce
from baton.conductor.tasks import dispatch
from baton.conductor.tasks.common import (
    JOIN_NOTE,
    TASK_SETTINGS,
    WORKFLOW,
    back,
    fail,
    params_in,
    params_out,
    tasks,
)
from baton.conductor.tasks.do_while import DO_WHILE_MAX_ITERATIONS
from baton.conductor.tasks.wait import duration_seconds, until_iso

SUPPORTED = dispatch.SUPPORTED
_TASK_DEF_FIELDS = (
    *TASK_SETTINGS,
    "description",
    "inputKeys",
    "outputKeys",
    "inputTemplate",
    "concurrentExecLimit",
    "rateLimitPerFrequency",
    "rateLimitFrequencyInSeconds",
    "ownerEmail",
)
__all__ = [
    "DO_WHILE_MAX_ITERATIONS",
    "SUPPORTED",
    "duration_seconds",
    "epoch_ms",
    "params_in",
    "params_out",
    "read_back",
    "to_baton_task_def",
    "to_baton_workflow",
    "to_conductor_task_def",
    "to_conductor_workflow",
    "until_iso",
]


# --- task definitions ----------------------------------------------------------------------------


def to_baton_task_def(raw: Any) -> dict[str, Any]:
    """A Conductor TaskDef as a Baton task definition body (unknown fields ignored)."""
    if not isinstance(raw, dict):
        raise fail("$", "a task definition is a JSON object")
    raw = coerce(raw)
    out = {k: raw[k] for k in ("name", *_TASK_DEF_FIELDS) if raw.get(k) is not None}
    # Conductor's 0 means "no limit" where Baton's minimum is 1.
    if out.get("concurrentExecLimit") == 0:
        del out["concurrentExecLimit"]
    # A rate limit is the pair: no limit when either is 0 or absent (Conductor's clients send
    # their defaults, rateLimitPerFrequency 0 per rateLimitFrequencyInSeconds 1).
    if not out.get("rateLimitPerFrequency") or not out.get("rateLimitFrequencyInSeconds"):
        out.pop("rateLimitPerFrequency", None)
        out.pop("rateLimitFrequencyInSeconds", None)
    for unset in ("responseTimeoutSeconds", "maxRetryDelaySeconds"):  # Conductor's 0: none
        if out.get(unset) == 0:
            del out[unset]
    return out


def to_conductor_task_def(body: dict[str, Any]) -> dict[str, Any]:
    """A Baton task definition (wire form) as a Conductor TaskDef."""
    out = {k: body[k] for k in ("name", *_TASK_DEF_FIELDS) if body.get(k) is not None}
    out.setdefault("timeoutSeconds", 0)
    out.setdefault("backoffScaleFactor", 1)  # Conductor's TaskDef shows its default
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
        raise fail("$", "a workflow definition is a JSON object")
    raw = coerce(raw)
    raw_tasks = raw.get("tasks")
    if not isinstance(raw.get("name"), str) or not raw["name"]:
        raise fail("name", "a workflow definition needs a name")
    if not isinstance(raw_tasks, list) or not raw_tasks:
        raise fail("tasks", "a workflow definition needs at least one task")
    out: dict[str, Any] = {"name": raw["name"], "steps": tasks(raw_tasks, "tasks")}
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
        out["failureWorkflow"] = params_in(
            _failure_workflow(raw["failureWorkflow"]), "failureWorkflow"
        )
        version = raw.get("failureWorkflowVersion")
        if version is not None:
            out["failureWorkflowVersion"] = version  # (an int ≥ 1: the model refuses others)
    return _unknown_to_null(_task_ids(_alias_joins(out)))


def _failure_workflow(name: Any) -> Any:
    """Conductor's legacy ``$workflow.input.<key>`` (``$`` without braces): its WorkflowExecutor
    takes the third dot-separated part of a name starting with ``$`` as a key of the workflow's
    input, whatever the first two say; the same as ``${workflow.input.<key>}``."""
    if not isinstance(name, str) or not name.startswith("$") or name.startswith("${"):
        return name
    parts = name.split(".")
    if len(parts) < 3 or not parts[2] or "'" in parts[2] or "}" in parts[2]:
        raise fail(
            "failureWorkflow",
            f"failureWorkflow {name!r} starts with '$' but names no input parameter: write "
            "$workflow.input.<name> or ${workflow.input.<name>}",
        )
    return "${workflow.input['" + parts[2] + "']}"


_REFERENCE = re.compile(r"(?<!\$)\$\{\s*(\w[\w-]*)?[^}]*\}")
# A bracket whose inside starts with a bare name: Jayway's PathCompiler takes only a quote, a
# digit, '-', ':', '*', '?' there ("Could not parse token starting at position …").
_BARE_BRACKET = re.compile(r"\[\s*[A-Za-z_]")
# Step fields that hold programs, not templates: their ${…} is the script's own.
_PROGRAMS = ("description", "script", "while", "query")


def _unknown_to_null(out: dict[str, Any]) -> dict[str, Any]:
    """A ``${…}`` whose first key names no task of the workflow (nor ``workflow``) reads null in
    Conductor (its JSONPath finds nothing there): it is null here too, and ``null`` inside text
    (Java's ``Objects.toString(null)``), instead of a definition Baton's native check refuses.
    So does one whose path Jayway cannot compile (a bracket holding a bare name,
    ``tasks[charge_ref]``, as Conductor's own error-handling guide writes): ``ParametersUtils``
    reads any path that throws as null."""
    known: set[str] = {"workflow", "map"}

    def collect(value: Any) -> None:
        if isinstance(value, list):
            for v in value:
                collect(v)
        elif isinstance(value, dict):
            if isinstance(value.get("id"), str) and isinstance(value.get("type"), str):
                known.add(value["id"])
            for key in ("steps", "branches", "cases", "default"):
                inner = value.get(key)
                collect(list(inner.values()) if isinstance(inner, dict) else inner)

    def unknown(m: re.Match[str]) -> bool:
        return (
            m.group(1) is None or m.group(1) not in known or bool(_BARE_BRACKET.search(m.group(0)))
        )

    def text(m: re.Match[str]) -> str:
        if not unknown(m):
            return m.group(0)
        return "" if not m.group(0)[2:-1].strip() else "null"  # ${} is "" in Conductor

    def rewrite(value: Any, key: str = "") -> Any:
        if isinstance(value, str) and key not in _PROGRAMS and "${" in value:
            whole = _REFERENCE.fullmatch(value)
            if whole and unknown(whole):
                return text(whole) if key == "on" or not whole.group(0)[2:-1].strip() else None
            return _REFERENCE.sub(text, value)
        if isinstance(value, list):
            return [rewrite(v) for v in value]
        if isinstance(value, dict):
            # An inline sub-workflow definition was translated (and checked) on its own.
            return {
                k: v if k == "definition" and isinstance(v, dict) else rewrite(v, k)
                for k, v in value.items()
            }
        return value

    collect(out["steps"])
    return rewrite(out)  # type: ignore[no-any-return]


# Steps run as jobs: their Conductor task id is their job's and attempt.
_JOB_STEPS = ("SERVICE_TASK", "HTTP", "HTTP_POLL", "EVENT")
_TASK_ID = re.compile(r"\$\{\s*(\w[\w-]*)\.taskId\s*\}")


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
            kind = value.get("type")
            if kind in _JOB_STEPS and isinstance(value.get("id"), str):
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
    (``${<task>.output…}``) and ``${join.output}`` the fork's (a MAP's by its tasks' reference
    names); a FORK_JOIN's JOIN output, given whole, is its forked tasks' outputs by reference
    name (each branch's last task), as Conductor's JOIN gives it, and so is the workflow's
    output when the workflow ends with that JOIN and has no outputParameters."""
    aliases: list[tuple[re.Pattern[str], str]] = []
    # "${<join>.output}" (and "${<fork>.output}", the default output of a workflow ending with
    # it) of each PARALLEL: its branches' last steps' outputs by id.
    whole: dict[str, dict[str, str]] = {}

    def collect(value: Any) -> None:
        if isinstance(value, list):
            for v in value:
                collect(v)
        elif isinstance(value, dict):
            note = JOIN_NOTE.search(str(value.get("description") or ""))
            if note and value.get("type") in ("PARALLEL", "MAP"):
                join = re.escape(note.group(1))
                if value["type"] == "PARALLEL":
                    lasts = [b[-1]["id"] for b in value.get("branches") or [] if b]
                    joined = {ref: "${" + ref + ".output}" for ref in lasts}
                    whole["${" + note.group(1) + ".output}"] = joined
                    if value is out["steps"][-1] and out.get("outputParameters") == (
                        "${" + value["id"] + ".output}"
                    ):
                        out["outputParameters"] = dict(joined)
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
            if value.strip() in whole:
                return dict(whole[value.strip()])
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
        "tasks": back(body.get("steps", [])),
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


WORKFLOW.update({"in": to_baton_workflow, "out": to_conductor_workflow})
