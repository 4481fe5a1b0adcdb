"""How work moves in a decision: scheduling a step (its operator decides how), completing it and
moving on along its list, the end of a list (its operator decides what follows), failures moving
up to the operator owning their scope, cancelling what an ended operator or instance leaves open,
and the instance's end.

When a step finishes, the next step of its list runs in the same scope; at the end of a list the
operator owning the scope decides (each operator is a module of ``engine.operators``, registered
by type). Work is a queue, not recursion, so a long chain of instant steps cannot exhaust the
stack. One statement cannot update a row twice, nor update a row it inserts: every write to a step
execution in one decision is folded into one insert or one update here.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from baton.engine import permissive
from baton.engine.decision_state import DecisionState
from baton.engine.operators import OPERATORS
from baton.engine.operators.sub_workflow import schedule_failure_workflow
from baton.engine.plan import Plan
from baton.engine.records import (
    AuditEvent,
    Changes,
    Exec,
    InstanceState,
    NewEvent,
    NewStep,
    OverLimit,
    Reader,
    StepUpdate,
    in_map_item,
    key_of,
)
from baton.expressions import ExpressionError
from baton.payload_ref import is_payload_ref
from baton.status import InstanceStatus, JobStatus, StepStatus
from baton.steps import Step

OPEN_STEP = (StepStatus.SCHEDULED, StepStatus.IN_PROGRESS)
# An instance's statuses in which work moves (a set: a status read from a row is a plain str, and
# its hash is its enum member's, so the look-up costs no enum comparisons).
_ACTIVE = frozenset({InstanceStatus.RUNNING, InstanceStatus.PAUSED})
# Step types whose object output is merged into the instance's variables: what work returns.
MERGED_OUTPUTS = frozenset({"SERVICE_TASK", "USER_TASK", "SIGNAL", "SUB_WORKFLOW"})


# The ends of a step an ``optional`` or ``permissive`` flag passes over: a failure, or a cancel
# (a cancelled child's SUB_WORKFLOW); not a TIME_OUT_WF timeout of the whole instance.
_PASSED_OVER = (InstanceStatus.FAILED, InstanceStatus.CANCELLED)


class DecisionFlow(DecisionState):
    """Scheduling, completing, failing and cancelling within one decision (the mechanics the
    decider's events and the operators drive)."""

    def start(self) -> None:
        """A new instance: its first step."""
        self.changes.audit.append(AuditEvent("INSTANCE_STARTED"))
        self.changes.count("InstancesStarted")
        self.later(lambda: self.schedule(self.plan.first(), ""))
        self.run()

    # --- mechanics: scheduling, completing, failing ---------------------------------------------

    def later(self, work: Callable[[], None]) -> None:
        self._work.append(work)

    def run(self) -> None:
        while self._work:
            self._work.popleft()()

    @property
    def active(self) -> bool:
        return self.instance.status in _ACTIVE

    def closed(self, scope: str) -> bool:
        """Whether ``scope`` lies in work this decision cancelled (under an operator that failed
        or an instance that ended): nothing more starts, ends or fails there."""
        if self.instance.status not in _ACTIVE:
            return True
        cancelled = self.changes.cancel_scopes
        return bool(cancelled) and any(scope.startswith(p) for p in cancelled)

    def schedule(self, step: Step, scope: str) -> None:
        """Start an execution of ``step`` in ``scope`` (its operator module decides how)."""
        if self.closed(scope):
            return
        created = self.instance.step_count + len(self.changes.new_steps)
        if created >= self.max_step_executions:
            self.fail_scope(
                scope,
                f"the instance reached {self.max_step_executions} step executions "
                f"(scheduling step {step.id!r})",
            )
            return
        OPERATORS[step.type].schedule(self, step, scope)

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
        """A new step execution row (``exec_id``: its id, when chosen before); its place in its
        operator (branch, item, iteration) is read off its scope."""
        key = key_of(scope)
        if key[:1] == "b":
            columns.setdefault("branch", int(key[1:]))
        elif key[:1] == "i":
            columns.setdefault("item_index", int(key[1:]))
        elif key[:1] == "k":
            columns.setdefault("iteration", int(key[1:]))
        new = NewStep(
            exec_id or uuid.uuid4(), step.id, step.type, status, step_input, scope, **columns
        )
        self.changes.new_steps[new.id] = new
        if status == StepStatus.COMPLETED:
            self._done_here.append((step.id, scope, columns.get("output")))
        return new

    def update_step(self, exec_id: uuid.UUID, status: StepStatus, **columns: Any) -> None:
        """Change a step execution: folded into its insert when this decision created it, else
        into this decision's one update of it."""
        # (An execution is in one of the two at most: one this decision created is never
        # updated apart from its insert.)
        current = self.changes.step_updates.get(exec_id)
        if current is not None:
            # Merged in place (the update is this decision's own; a MAP's execution is updated
            # once per item that ends, and copying the update each time cost more than the rest).
            current.status = status
            for name, value in columns.items():
                if value is not None and name != "scope":
                    setattr(current, name, value)
            return
        new = self.changes.new_steps.get(exec_id)
        if new is None:
            self.changes.step_updates[exec_id] = StepUpdate(exec_id, status, **columns)
            return
        new.status = status
        for name, value in columns.items():
            if name == "set_wake":
                continue
            if name == "error" and value == "":
                new.error = None  # '' clears an error: a row not yet written has none
            elif value is not None or name == "wake_at":
                setattr(new, name, value)

    def complete(self, e: Exec, output: Any) -> None:
        """Step execution ``e`` finished with ``output``: record it and move on."""
        merged = self.plan.step(e.step_id).type in MERGED_OUTPUTS
        if not merged:
            # An operator's output is built by the engine (a MAP's collected outputs can be
            # large): above the soft limit it is stored like a worker's.
            try:
                output = self.stored(output, "STEP_OUTPUT")
            except OverLimit as big:
                self.fail(e, f"its output {big}")
                return
        # An error an earlier attempt left (a retry's reason) is not the completed step's.
        self.update_step(e.id, StepStatus.COMPLETED, output=output, error="", scope=e.scope)
        self._done_here.append((e.step_id, e.scope, output))
        if (
            isinstance(output, dict)
            and output
            and merged
            and not in_map_item(e.scope)
            # An offloaded output stays the step's own: its reference is no variable.
            and not is_payload_ref(output)
        ):
            # A task's object output is merged into the instance's variables (but not inside a
            # MAP, whose items' outputs are collected as the MAP's output instead; an operator's
            # output only gathers its lists' outputs, already merged).
            self.instance.variables = {**self.instance.variables, **output}
        self.changes.instance_changed = True
        self.advance(e, output)

    def advance(self, e: Exec | NewStep, output: Any) -> None:
        """After ``e`` finished: the next step of its list, or the end of the list."""
        if self.closed(e.scope):
            return
        if self.instance.status == InstanceStatus.PAUSED:
            # The continuation waits for resume (with the failure a permissive last step leaves
            # its list, which its operator reads when the list's end is decided).
            payload: dict[str, Any] = {"stepId": e.step_id, "output": output}
            if e.scope in self._list_failures:
                payload["failure"] = self._list_failures[e.scope]
            self.changes.events.append(NewEvent(self.instance.id, "CONTINUE", e.id, payload))
            return
        nxt = self.plan.next_after(e.step_id)
        scope = e.scope
        if e.step_id in self.plan.permissive and permissive.passed(self, e, nxt):
            # A rerun (an instance retry's) of a permissive failure its list had gone past:
            # nothing moves on; the instance ends if nothing else is left.
            self.later(self._end_if_done)
            return
        if nxt is not None:
            self.later(lambda: self.schedule(nxt, scope))
        else:
            self.later(lambda: self.list_ended(scope, output))

    def list_ended(self, scope: str, output: Any) -> None:
        """The list of ``scope`` ran to its end with ``output`` (its last step's)."""
        if self.closed(scope):
            return
        if scope == "":
            self.end_instance()
            return
        owner = self.operator_execution(scope)
        OPERATORS[self.plan.step(owner.step_id).type].list_ended(self, owner, key_of(scope), output)

    def list_failure(self, scope: str) -> str | None:
        """Why the list of ``scope``, which just ended, ended on a failure its list went past (a
        permissive last step's), or None."""
        return self._list_failures.get(scope)

    def list_failure_within(self, scope: str) -> str | None:
        """As :meth:`list_failure`, for a list inside the list of ``scope`` (one that ended in
        this decision), or None."""
        return next((why for s, why in self._list_failures.items() if s.startswith(scope)), None)

    def end_instance(self) -> None:
        """The root list ended: the instance completes, unless it has permissive steps: then it
        waits for any rerun still open, and fails if a permissive step's latest execution
        failed (``engine.permissive``)."""
        if self.plan.permissive:
            if permissive.anything_open(self):
                return  # an instance retry's rerun of a permissive failure ends it
            reason = permissive.failures(self)
            if reason is not None:
                self.finish(InstanceStatus.FAILED, reason)
                return
        self.complete_instance()

    def _end_if_done(self) -> None:
        if not self.closed("") and permissive.root_ended(self):
            self.end_instance()

    def fail(
        self,
        e: Exec | NewStep,
        why: str,
        status: StepStatus = StepStatus.FAILED,
        instance_status: InstanceStatus = InstanceStatus.FAILED,
        *,
        output: Any = None,
    ) -> None:
        """Step execution ``e`` failed (``output``: what its worker gave with the failure, kept
        as the step's, as Conductor keeps a failed task's ``outputData``; dropped above the
        step output's hard limit); its operator (or, at the root, the instance) decides.
        An ``optional`` step's failure is recorded and its list goes on: the step is COMPLETED
        with its error (and that output) kept. A required step that timed out for good times
        the instance out. A ``permissive`` step stays failed and its list goes
        on (``engine.permissive``). Neither holds back a TIME_OUT_WF timeout (``instance_status``
        TIMED_OUT): it times the instance out, as Conductor's decider does before it looks at
        ``optional``."""
        said = why if status == StepStatus.TIMED_OUT else f"failed: {why}"  # "timed out: ..."
        if output is not None:
            try:
                output = self.stored(output, "STEP_OUTPUT")
            except OverLimit:
                output = None  # the failure stands; what came with it is over the limit
        if (
            self._optional(e)
            and instance_status in _PASSED_OVER  # TIME_OUT_WF times the instance out
            and not self.closed(e.scope)
        ):
            self.update_step(e.id, StepStatus.COMPLETED, output=output, error=said, scope=e.scope)
            self.changes.instance_changed = True
            self.changes.audit.append(
                AuditEvent(
                    "OPTIONAL_STEP_FAILED",
                    None,
                    {"stepId": e.step_id, "stepExecutionId": str(e.id), "error": said},
                )
            )
            self._done_here.append((e.step_id, e.scope, output))
            self.advance(e, output)
            return
        if (
            e.step_id in self.plan.permissive
            and self._flag(self.plan.step(e.step_id).permissive, e)
            and instance_status in _PASSED_OVER  # TIME_OUT_WF times the instance out
            and not self.closed(e.scope)
            and not self.plan.loops(f"step:{e.step_id}")  # a DO_WHILE fails on it at once
        ):
            self.update_step(e.id, status, output=output, error=why, scope=e.scope)
            self.changes.instance_changed = True
            self.changes.audit.append(
                AuditEvent(
                    "PERMISSIVE_STEP_FAILED",
                    None,
                    {"stepId": e.step_id, "stepExecutionId": str(e.id), "error": said},
                )
            )
            if self.plan.next_after(e.step_id) is None:
                self._list_failures[e.scope] = f"step {e.step_id!r} {said}"
            self.advance(e, None)
            return
        self.update_step(e.id, status, output=output, error=why, scope=e.scope)
        self.changes.instance_changed = True
        if status == StepStatus.TIMED_OUT:
            # A required step that timed out for good times the instance out (Conductor's
            # decider: a TIMED_OUT task with no retry left ends its workflow TIMED_OUT).
            instance_status = InstanceStatus.TIMED_OUT
        if output is not None:
            # Read by the output the failure leaves the instance (``_output_as_it_ended``),
            # as Conductor's reads its failed task's; later reads take completed steps only.
            self._done_here.append((e.step_id, e.scope, output))
        if self.failed_task is None:
            self.failed_task = e.id
        self.fail_scope(e.scope, f"step {e.step_id!r} {said}", instance_status)

    def _optional(self, e: Exec | NewStep) -> bool:
        return self._flag(self.plan.step(e.step_id).optional, e)

    def _flag(self, given: bool | str | None, e: Exec | NewStep) -> bool:
        """A step's ``optional`` or ``permissive`` for execution ``e``: the value, or what its
        ``${…}`` gives where ``e`` ran (true, or the text "true", as Jackson reads a Conductor
        task's)."""
        if not isinstance(given, str):
            return bool(given)
        try:
            value = self.resolve(given, f"step:{e.step_id}", e.scope)
        except ExpressionError:  # checked when registered; still, then it is not optional
            return False
        return value is True or (isinstance(value, str) and value.strip().lower() == "true")

    def fail_scope(
        self, scope: str, reason: str, instance_status: InstanceStatus = InstanceStatus.FAILED
    ) -> None:
        """Something in ``scope`` failed with ``reason``: tell the operator owning the scope."""
        if self.closed(scope):
            return
        if scope == "":
            # A failure that cancels the instance (a required step's cancelled child) starts
            # its failure workflow too, as Conductor's terminateWorkflow does for TERMINATED.
            self.finish(
                instance_status,
                reason,
                cancel=True,
                failure_workflow=instance_status == InstanceStatus.CANCELLED,
            )
            return
        owner = self.operator_execution(scope)
        OPERATORS[self.plan.step(owner.step_id).type].child_failed(
            self, owner, key_of(scope), reason, instance_status
        )

    def fail_operator(
        self, owner: Exec, reason: str, instance_status: InstanceStatus = InstanceStatus.FAILED
    ) -> None:
        """An operator execution fails: its open work is cancelled, and the failure moves up."""
        self.cancel_within(owner)
        self.update_step(owner.id, StepStatus.FAILED, error=reason, scope=owner.scope)
        self.changes.instance_changed = True
        self.fail_scope(owner.scope, reason, instance_status)

    def cancel_within(self, owner: Exec | NewStep) -> None:
        """Cancel the open work inside operator execution ``owner`` (not ``owner`` itself)."""
        self._cancel_scope(f"{owner.scope}{owner.id}#")

    def _cancel_scope(self, prefix: str) -> None:
        self.changes.cancel_scopes.append(prefix)
        # What this decision itself opened or reopened in that scope is cancelled here: the
        # statement's cancelling updates cannot see its own inserts.
        cancelled_steps: set[uuid.UUID] = set()
        for new in self.changes.new_steps.values():
            if new.scope.startswith(prefix) and new.status in OPEN_STEP:
                new.status = StepStatus.CANCELLED
                cancelled_steps.add(new.id)
        for update in list(self.changes.step_updates.values()):
            if update.scope.startswith(prefix) and update.status in OPEN_STEP:
                update.status = StepStatus.CANCELLED
        for job in self.changes.new_jobs:
            if job.step_execution_id in cancelled_steps:
                job.status = JobStatus.CANCELLED
        for child in self.changes.children:
            if child.state.parent_step_execution_id in cancelled_steps:
                self.changes.events.append(
                    NewEvent(child.state.id, "CANCEL", None, {"reason": "its parent step ended"})
                )
        for retry in list(self.changes.retried_jobs):
            if retry.job.scope.startswith(prefix):
                self.changes.retried_jobs.remove(retry)
                self.changes.cancelled_jobs.append(retry.job)

    def reopen(self, e: Exec, state: dict[str, Any] | None) -> Exec:
        """An operator execution that failed or was cancelled runs again (an instance retry),
        with its bookkeeping recomputed as ``state``."""
        opened = replace(e, status=StepStatus.IN_PROGRESS, state=state)
        self._execs[e.id] = opened
        self.update_step(e.id, StepStatus.IN_PROGRESS, state=state, error="", scope=e.scope)
        return opened

    def set_state(self, owner: Exec, state: dict[str, Any]) -> Exec:
        """Record an operator execution's new bookkeeping (kept for the rest of the decision)."""
        updated = owner.with_state(state)
        self._execs[owner.id] = updated
        self.update_step(owner.id, owner.status, state=state, scope=owner.scope)
        return updated

    def complete_instance(self) -> None:
        params = self.plan.definition.output_parameters
        output = (
            self.resolve(params, "output", "")
            if params is not None
            else dict(self.instance.variables)
        )
        try:
            self.instance.output = self.stored(output, "WORKFLOW_OUTPUT")
        except OverLimit as big:
            self.finish(InstanceStatus.FAILED, f"its output {big}")
            return
        self.finish(InstanceStatus.COMPLETED, None)

    def _output_as_it_ended(self) -> Any:
        """An instance ending unsuccessfully keeps what its ``outputParameters`` give of what
        ran (``${…}`` of what did not is null), as Conductor's ``updateWorkflowOutput`` sets a
        failed, timed-out or terminated workflow's output; None when it has none, or when they
        cannot be resolved (the instance ends all the same)."""
        params = self.plan.definition.output_parameters
        if params is None:
            return None
        try:
            return self.stored(self.resolve(params, "output", ""), "WORKFLOW_OUTPUT")
        except (ExpressionError, OverLimit):
            return None

    def finish(
        self,
        status: InstanceStatus,
        reason: str | None,
        *,
        cancel: bool = False,
        failure_workflow: bool = False,
    ) -> None:
        """The instance ends with ``status``; ``cancel`` ends its open work (and children);
        ``failure_workflow``: its definition's failure workflow starts whatever the status (a
        TERMINATE step's CANCELLED, as Conductor's TERMINATED by a TERMINATE task)."""
        if not self.active:
            return
        inst = self.instance
        if status != InstanceStatus.COMPLETED and inst.output is None:
            inst.output = self._output_as_it_ended()
        inst.status = status
        inst.reason = reason
        self.changes.instance_changed = True
        if cancel:
            self._cancel_scope("")
        detail = {"reason": reason} if reason else None
        self.changes.audit.append(AuditEvent(f"INSTANCE_{status}", None, detail))
        metric = {
            InstanceStatus.COMPLETED: "InstancesCompleted",
            InstanceStatus.CANCELLED: "InstancesCancelled",
        }
        self.changes.count(metric.get(status, "InstancesFailed"))
        if inst.parent_instance_id is not None:
            self.changes.events.append(
                NewEvent(
                    inst.parent_instance_id,
                    "CHILD_ENDED",
                    inst.parent_step_execution_id,
                    {
                        "childId": str(inst.id),
                        "status": status,
                        "output": inst.output,
                        "reason": reason,
                    },
                )
            )
        failure = self.plan.definition.failure_workflow
        if failure and (
            failure_workflow or status in (InstanceStatus.FAILED, InstanceStatus.TIMED_OUT)
        ):
            # A ${…} name is resolved over the failed instance; nothing (null, "") starts none.
            name = self.resolve(failure, "output", "")
            if isinstance(name, str) and name:
                schedule_failure_workflow(self, name, self.plan.definition.failure_workflow_version)
            elif name is not None and name != "":
                self.changes.audit.append(
                    AuditEvent("FAILURE_WORKFLOW_NOT_FOUND", None, {"name": str(name)})
                )

    def first_decision(self, plan: Plan, instance: InstanceState, reader: Reader) -> Changes:
        """A new instance's first decision (a child, a failure workflow), made with this
        decision's settings: the rows it writes."""
        first = type(self)(
            plan,
            instance,
            reader,
            self.now,
            max_job_input_bytes=self.max_job_input_bytes,
            max_step_executions=self.max_step_executions,
            unref=self.unref,
            offload=self.offload,
            payload_limits=self.payload_limits,
            sandbox=self.sandbox,
        )
        first.start()
        return first.changes
