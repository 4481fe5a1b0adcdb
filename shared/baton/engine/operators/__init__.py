"""Every step type as a module registered here by its ``type``: how it starts, and, for an
operator with nested lists, what happens when one of its lists ends or fails. The decider has no
branch per step type; adding a type is a module and a line in this table."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from baton.status import InstanceStatus

if TYPE_CHECKING:
    from baton.engine.decide import Decider, Exec
    from baton.steps import Step


class Operator(Protocol):
    def schedule(self, d: Decider, step: Step, scope: str) -> None:
        """Start an execution of ``step`` in ``scope``."""

    def list_ended(self, d: Decider, owner: Exec, key: str, output: Any) -> None:
        """The list ``key`` of ``owner`` (this operator's execution) ran to its end."""

    def child_failed(
        self, d: Decider, owner: Exec, key: str, reason: str, instance_status: InstanceStatus
    ) -> None:
        """Something in the list ``key`` of ``owner`` failed with ``reason``."""

    def reopen(
        self, d: Decider, owner: Exec, lists: dict[str, Exec], rerun: Callable[[Exec], None]
    ) -> None:
        """An instance retry runs ``owner`` (failed or cancelled) again; ``lists`` holds the last
        execution of each of its lists by key, and ``rerun`` carries an unfinished one on."""


def _table() -> dict[str, Operator]:
    from baton.engine.operators import do_while, map, parallel, sub_workflow, switch, work

    return {
        "SERVICE_TASK": work.ServiceTask(),
        "USER_TASK": work.Waiting(),
        "SIGNAL": work.Waiting(),
        "TIMER": work.Timer(),
        "SET_VARIABLE": work.SetVariable(),
        "TERMINATE": work.Terminate(),
        "SUB_WORKFLOW": sub_workflow.SubWorkflow(),
        "SWITCH": switch.Switch(),
        "PARALLEL": parallel.Parallel(),
        "MAP": map.Map(),
        "DO_WHILE": do_while.DoWhile(),
    }


class _Table(dict[str, Operator]):
    """Filled on first use (the operator modules import the decider)."""

    def __missing__(self, key: str) -> Operator:
        if not self:
            self.update(_table())
            return self[key]
        raise KeyError(key)


OPERATORS: dict[str, Operator] = _Table()
