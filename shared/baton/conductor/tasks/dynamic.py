"""DYNAMIC ⇄ a SERVICE_TASK whose ``jobType`` is resolved when it starts.

``dynamicTaskNameParam`` names the input parameter holding the task's name (usually a ``${…}``
read of the workflow input or an earlier task's output); the task's input is every input
parameter, that one included, as Conductor hands it to the worker. The job type is resolved when
the step starts: a value that is no job type fails the step with that reason. Its retry and
timeout settings are the task's own (``retryCount``, an inline ``taskDefinition``) or Baton's
defaults: the task definition of a name known only at run time is not read (its rate and
concurrency limits still apply, at the claim)."""

from __future__ import annotations

import re
from typing import Any

from baton.conductor.tasks.common import (
    WHOLE,
    back_worker_settings,
    base,
    fail,
    label,
    params_in,
    params_out,
    task_input,
    worker_settings,
)
from baton.model import JOB_TYPE_PATTERN

# The input parameter a DYNAMIC read back from a /v1 definition names, when none holds its name.
NAME_PARAM = "taskToExecute"
_JOB_TYPE = re.compile(JOB_TYPE_PATTERN)


def to_step(task: dict[str, Any], path: str) -> dict[str, Any]:
    where = label(task, path)
    step = base(task, path)
    params = task.get("inputParameters") or {}
    param = task.get("dynamicTaskNameParam")
    if not isinstance(param, str) or not param:
        raise fail(
            where, "a DYNAMIC task needs dynamicTaskNameParam: the input parameter naming it"
        )
    if not isinstance(params, dict) or param not in params:
        raise fail(where, f"dynamicTaskNameParam {param!r} names no input parameter")
    name = params[param]
    if not isinstance(name, str) or not (WHOLE.match(name) or _JOB_TYPE.fullmatch(name)):
        raise fail(
            where,
            f"inputParameters.{param} must be a task name or one ${{…}} expression giving one",
        )
    step.update(
        type="SERVICE_TASK",
        jobType=params_in(name, f"{path}.inputParameters.{param}"),
        input=task_input(task, path),
    )
    worker_settings(task, step, path)
    return step


def back(s: dict[str, Any], task: dict[str, Any]) -> list[dict[str, Any]]:
    """A SERVICE_TASK whose ``jobType`` is an expression reads back as a DYNAMIC."""
    name = params_out(s["jobType"])
    params = task["inputParameters"]
    param = next((k for k, v in params.items() if v == name), None)
    if param is None:
        param = NAME_PARAM
        params[param] = name
    task["type"] = "DYNAMIC"
    task["dynamicTaskNameParam"] = param
    back_worker_settings(s, task)
    return [task]
