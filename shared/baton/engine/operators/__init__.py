"""Every step type as a module registered here by its ``type``: how it starts, and, for an
operator with nested lists, what happens when one of its lists ends or fails. The decider has no
branch per step type; adding a type is a module and a line in this table.

The operators see the decision through ``operators.protocol.Decision`` only; the decider imports
this table."""

from __future__ import annotations

from baton.engine.operators import (
    do_while,
    event,
    http,
    map,
    parallel,
    script,
    start_workflow,
    sub_workflow,
    switch,
    work,
)
from baton.engine.operators.protocol import Operator

OPERATORS: dict[str, Operator] = {
    "SERVICE_TASK": work.ServiceTask(),
    "USER_TASK": work.Waiting(),
    "SIGNAL": work.Waiting(),
    "TIMER": work.Timer(),
    "SET_VARIABLE": work.SetVariable(),
    "TERMINATE": work.Terminate(),
    "NOOP": work.Noop(),
    "EXCLUSIVE_JOIN": work.ExclusiveJoin(),
    "SCRIPT": script.Script(),
    "JQ": script.Jq(),
    "HTTP": http.Http(),
    "HTTP_POLL": http.Http(),
    "EVENT": event.Event(),
    "SUB_WORKFLOW": sub_workflow.SubWorkflow(),
    "START_WORKFLOW": start_workflow.StartWorkflow(),
    "SWITCH": switch.Switch(),
    "PARALLEL": parallel.Parallel(),
    "MAP": map.Map(),
    "DO_WHILE": do_while.DoWhile(),
}
