"""The table of task translators, one module per Conductor task type, as
``engine/operators`` is one module per step type: Conductor type → Baton step, a fork type
(followed by its JOIN) → Baton step, Baton step type → Conductor tasks. Adding a type is a
module and a line here."""

from __future__ import annotations

from typing import Any

from baton.conductor import http_task
from baton.conductor.tasks import (
    common,
    do_while,
    dynamic,
    event,
    exclusive_join,
    fork,
    fork_dynamic,
    http_poll,
    scripts,
    simple,
    start_workflow,
    sub_workflow,
    switch,
    terminate,
    wait,
)


def _http(task: dict[str, Any], path: str) -> dict[str, Any]:
    return http_task.to_step(
        task,
        common.base(task, path),
        common.task_input(task, path),
        common.label(task, path),
    )


def _back_service_task(s: dict[str, Any], task: dict[str, Any]) -> list[dict[str, Any]]:
    # A job type given as an expression is a DYNAMIC task's.
    if str(s["jobType"]).startswith("${"):
        return dynamic.back(s, task)
    return simple.back(s, task)


def _back_http(s: dict[str, Any], task: dict[str, Any]) -> list[dict[str, Any]]:
    http_task.to_task(s, task, common.params_out)
    return [task]


def _back_http_poll(s: dict[str, Any], task: dict[str, Any]) -> list[dict[str, Any]]:
    return http_poll.back(s, task, common.params_out)


common.HANDLERS.update(
    {
        "SIMPLE": simple.to_step,
        "SWITCH": switch.to_step,
        "DECISION": switch.decision,
        "INLINE": scripts.inline,
        "LAMBDA": scripts.lambda_,
        "JSON_JQ_TRANSFORM": scripts.json_jq_transform,
        "HTTP": _http,
        "DO_WHILE": do_while.to_step,
        "DYNAMIC": dynamic.to_step,
        "SUB_WORKFLOW": sub_workflow.to_step,
        "START_WORKFLOW": start_workflow.to_step,
        "EXCLUSIVE_JOIN": exclusive_join.to_step,
        "HTTP_POLL": http_poll.to_step,
        "EVENT": event.to_step,
        "WAIT": wait.to_step,
        "HUMAN": wait.human,
        "TERMINATE": terminate.to_step,
        "SET_VARIABLE": terminate.set_variable,
        "NOOP": terminate.noop,
    }
)
common.FORKS.update(
    {
        "FORK_JOIN": fork.to_step,
        "FORK_JOIN_DYNAMIC": fork_dynamic.to_step,
    }
)
common.BACK.update(
    {
        "SERVICE_TASK": _back_service_task,
        "SWITCH": switch.back_switch,
        "PARALLEL": fork.back_parallel,
        "MAP": fork_dynamic.back_map,
        "DO_WHILE": do_while.back_do_while,
        "SUB_WORKFLOW": sub_workflow.back_sub_workflow,
        "START_WORKFLOW": start_workflow.back,
        "EXCLUSIVE_JOIN": exclusive_join.back,
        "HTTP_POLL": _back_http_poll,
        "EVENT": event.back,
        "TIMER": wait.back_wait,
        "SIGNAL": wait.back_wait,
        "USER_TASK": wait.back_human,
        "TERMINATE": terminate.back_terminate,
        "SET_VARIABLE": terminate.back_set_variable,
        "NOOP": terminate.back_noop,
        "SCRIPT": scripts.back_script,
        "JQ": scripts.back_jq,
        "HTTP": _back_http,
    }
)

SUPPORTED = (*common.HANDLERS, *common.FORKS, "JOIN")
