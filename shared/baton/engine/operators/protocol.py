"""What an operator sees of the decision it runs in (:class:`Decision`), and what the decider
asks of an operator (:class:`Operator`).

The operators depend on these protocols, never on the decider itself: the decider
(``baton.engine.decide``) imports the operator table, so an operator importing it back would
close a circle (an import-linter contract keeps it out).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Protocol

from baton.engine.plan import Plan
from baton.engine.records import Changes, Exec, InstanceState, NewStep, Reader
from baton.scripting import Sandbox
from baton.status import InstanceStatus, StepStatus
from baton.steps import Step


class Decision(Protocol):
    """One decision on one instance, as an operator uses it: what it knows, the values it
    resolves, the rows it adds and how work moves on."""

    plan: Plan
    instance: InstanceState
    reader: Reader
    now: datetime
    changes: Changes
    max_job_input_bytes: int
    unref: Callable[[Any], Any]
    sandbox: Sandbox
    # The step execution whose failure (after its retries) failed the instance in this
    # decision, if one did (Conductor's ``failedTaskId``, told to a failure workflow).
    failed_task: uuid.UUID | None
    # The step execution, job and attempt of the last job failed in this decision.
    failed_job: tuple[uuid.UUID, uuid.UUID, int] | None

    @property
    def active(self) -> bool:
        """Whether the instance still runs (RUNNING or PAUSED)."""

    # --- values -----------------------------------------------------------------------------

    def resolve(self, template: Any, point: str, scope: str) -> Any:
        """``template`` with its ``${…}`` resolved at ``point`` in ``scope``."""

    def resolve_input(self, step: Step, scope: str, own: dict[str, Any] | None = None) -> Any:
        """``step``'s input resolved where it is scheduled (an object, else InputNotObject);
        ``own``: the record of the execution being scheduled, read as ``${<step>.executionId}``
        and the like."""

    def context(self, point: str, scope: str, step_ids: Sequence[str]) -> dict[str, Any]:
        """The JSONata context of a condition at ``point`` in ``scope``."""

    def stored(self, value: Any, kind: str) -> Any:
        """``value`` as the engine keeps it: inline, or offloaded above ``kind``'s soft limit."""

    def unref_all(self, values: dict[int, Any]) -> dict[int, Any]:
        """``values`` with each offloaded element read back."""

    def payload_json(self, value: Any) -> str:
        """``value``'s JSON as a job carries it."""

    def done_here(self) -> list[tuple[str, str, Any]]:
        """(step id, scope, output) of every execution completed in this decision so far."""

    def execution(self, exec_id: uuid.UUID) -> Exec:
        """One step execution, from this decision or read."""

    # --- rows -------------------------------------------------------------------------------

    def add_step(
        self,
        step: Step,
        status: StepStatus,
        step_input: Any,
        scope: str,
        *,
        exec_id: uuid.UUID | None = None,
        **columns: Any,
    ) -> NewStep:
        """A new step execution row in ``scope``."""

    def update_step(self, exec_id: uuid.UUID, status: StepStatus, **columns: Any) -> None:
        """Change a step execution (folded into this decision's one write of it)."""

    def set_state(self, owner: Exec, state: dict[str, Any]) -> Exec:
        """Record an operator execution's new bookkeeping."""

    def reopen(self, e: Exec, state: dict[str, Any] | None) -> Exec:
        """An operator execution that failed or was cancelled runs again, with ``state``."""

    # --- flow -------------------------------------------------------------------------------

    def later(self, work: Callable[[], None]) -> None:
        """Queue ``work`` to run after what is running now."""

    def schedule(self, step: Step, scope: str) -> None:
        """Start an execution of ``step`` in ``scope``."""

    def complete(self, e: Exec, output: Any) -> None:
        """Step execution ``e`` finished with ``output``: record it and move on."""

    def list_ended(self, scope: str, output: Any) -> None:
        """The list of ``scope`` ran to its end with ``output``."""

    def list_failure(self, scope: str) -> str | None:
        """Why the list of ``scope``, which just ended, ended on a permissive step's failure
        (its list went past it), or None."""

    def list_failure_within(self, scope: str) -> str | None:
        """As :meth:`list_failure`, for a list inside the list of ``scope`` that ended in this
        decision, or None."""

    def fail(
        self,
        e: Exec | NewStep,
        why: str,
        status: StepStatus = StepStatus.FAILED,
        instance_status: InstanceStatus = InstanceStatus.FAILED,
        *,
        output: Any = None,
    ) -> None:
        """Step execution ``e`` failed (``output``: what came with the failure, kept as the
        step's); its operator (or, at the root, the instance) decides."""

    def fail_operator(
        self, owner: Exec, reason: str, instance_status: InstanceStatus = InstanceStatus.FAILED
    ) -> None:
        """An operator execution fails: its open work is cancelled, the failure moves up."""

    def finish(
        self,
        status: InstanceStatus,
        reason: str | None,
        *,
        cancel: bool = False,
        failure_workflow: bool = False,
    ) -> None:
        """The instance ends with ``status`` (``failure_workflow``: its failure workflow starts
        whatever the status)."""

    def first_decision(self, plan: Plan, instance: InstanceState, reader: Reader) -> Changes:
        """A new instance's first decision (a child, a failure workflow), made with this
        decision's settings: the rows it writes."""


class Operator(Protocol):
    def schedule(self, d: Decision, step: Step, scope: str) -> None:
        """Start an execution of ``step`` in ``scope``."""

    def list_ended(self, d: Decision, owner: Exec, key: str, output: Any) -> None:
        """The list ``key`` of ``owner`` (this operator's execution) ran to its end."""

    def child_failed(
        self, d: Decision, owner: Exec, key: str, reason: str, instance_status: InstanceStatus
    ) -> None:
        """Something in the list ``key`` of ``owner`` failed with ``reason``."""

    def reopen(
        self, d: Decision, owner: Exec, lists: dict[str, Exec], rerun: Callable[[Exec], None]
    ) -> None:
        """An instance retry runs ``owner`` (failed or cancelled) again; ``lists`` holds the last
        execution of each of its lists by key, and ``rerun`` carries an unfinished one on."""


def list_done(d: Decision, last: Exec) -> bool:
    """Whether a list whose last execution is ``last`` ran to its end."""
    return last.status == StepStatus.COMPLETED and d.plan.next_after(last.step_id) is None
