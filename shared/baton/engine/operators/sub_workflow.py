"""SUB_WORKFLOW: starts a child instance in the same statement as the decision that schedules the
step, and waits for it. The child's end reaches the parent as an ``instance_event`` (no
transaction ever locks two instances); its output becomes the step's output; a failed child fails
the step, or starts a new child while ``retryCount`` allows. Cancelling the parent (or the part of
it holding the step) cancels the child the same way. Also the failure workflow a definition
names, started when an instance fails."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from psycopg.types.json import Jsonb

from baton import dialects
from baton.definitions import parse_definition
from baton.engine.operators.work import open_with_input
from baton.engine.records import (
    AuditEvent,
    ChildPlan,
    ChildStart,
    Exec,
    InstanceState,
    NewEvent,
    NoReads,
    OverLimit,
)
from baton.errors import ValidationFailed, listed
from baton.model import NAME_PATTERN
from baton.payload_ref import is_payload_ref
from baton.status import InstanceStatus, StepStatus
from baton.steps import SubWorkflowStep

if TYPE_CHECKING:
    from baton.engine.operators.protocol import Decision
    from baton.steps import Step

MAX_NESTING = 32

_NAME = re.compile(NAME_PATTERN)


@dataclass(frozen=True, slots=True)
class _StartsOnly(NoReads):
    """A new instance's first decision reads nothing but may start children of its own."""

    reader: Any

    def child_plan(
        self,
        name: str | None,
        version: int | None,
        inline: dict[str, Any] | None,
        *,
        from_conductor: bool = False,
    ) -> ChildPlan | None:
        found: ChildPlan | None = self.reader.child_plan(
            name, version, inline, from_conductor=from_conductor
        )
        return found


def start_instance(
    d: Decision,
    child: ChildPlan,
    input: dict[str, Any],
    *,
    parent_step: uuid.UUID | None,
    correlation_id: str | None = None,
    depth: int = 0,
    instance_id: uuid.UUID | None = None,
) -> uuid.UUID:
    """Start a new instance in the same statement as ``d``'s decision; its id (``instance_id``,
    or a new one). A child (of ``parent_step``) has its parent's correlation id and is one level
    deeper; an instance without a parent has ``correlation_id`` and ``depth``."""
    inst = d.instance
    state = InstanceState(
        id=instance_id or uuid.uuid4(),
        definition_name=child.name,
        status=InstanceStatus.RUNNING,
        version=1,
        input=input,
        variables={},
        correlation_id=inst.correlation_id if parent_step is not None else correlation_id,
        parent_instance_id=inst.id if parent_step is not None else None,
        parent_step_execution_id=parent_step,
        depth=inst.depth + 1 if parent_step is not None else depth,
    )
    changes = d.first_decision(child.plan, state, _StartsOnly(d.reader))
    insert = {
        "id": state.id,
        "definition_name": child.name,
        "definition_version": child.version,
        "snapshot_id": child.snapshot_id,
        "input": Jsonb(input),
        "variables": Jsonb({}),
        "correlation_id": state.correlation_id,
        "idempotency_key": None,
        "idempotency_fingerprint": None,
        "timeout_seconds": child.plan.definition.timeout_seconds,
        "queue_task_id": None,
        "parent_instance_id": state.parent_instance_id,
        "parent_step_execution_id": parent_step,
        "depth": state.depth,
    }
    d.changes.children.append(ChildStart(state, changes, insert))
    d.changes.count("ChildInstancesStarted")
    return state.id


class SubWorkflow:
    def schedule(self, d: Decision, step: Step, scope: str) -> None:
        assert isinstance(step, SubWorkflowStep)
        # The child's input: above the soft limit it lives in S3 (the child reads it back).
        opened = open_with_input(d, step, scope, "WORKFLOW_INPUT")
        if opened is None:
            return
        own, step_input = opened
        self.start_child(d, step, own, step_input, attempt=1)

    def start_child(
        self, d: Decision, step: SubWorkflowStep, e: Exec, step_input: Any, *, attempt: int
    ) -> None:
        if d.instance.depth + 1 > MAX_NESTING:
            d.fail(e, f"sub-workflows nest deeper than {MAX_NESTING} levels")
            return
        point = f"step:{step.id}"
        name = d.resolve(step.definition_name, point, e.scope)  # a ${…} name or version
        version = d.resolve(step.definition_version, point, e.scope)
        if isinstance(version, str) and version.isdigit():
            version = int(version)
        inline = step.definition
        if isinstance(inline, str):
            # A definition document given when the child starts, in the step's dialect; when
            # it gives none, the definition the step names runs (as Conductor does).
            document = d.unref(d.resolve(inline, point, e.scope))
            if document is None and step.definition_name is not None:
                inline = None
        if isinstance(inline, str):
            try:
                inline = dialects.to_baton(step.definition_dialect, document)
                parse_definition(inline)
            except dialects.DialectError as bad:
                d.fail(e, f"{step.definition} {bad.detail}")
                return
            except ValidationFailed as bad:
                d.fail(
                    e,
                    f"{step.definition} gave an invalid definition: {listed(bad.problems)}",
                )
                return
        if inline is None and not (isinstance(name, str) and _NAME.fullmatch(name)):
            d.fail(e, f"{step.definition_name} gave {name!r}, not a definition name")
            return
        if version is not None and not (isinstance(version, int) and version >= 1):
            d.fail(e, f"{step.definition_version} gave {version!r}, not a version (1 or more)")
            return
        conductor = isinstance(step.definition, str) and step.definition_dialect == "conductor"
        child = d.reader.child_plan(name, version, inline, from_conductor=conductor)
        if child is None:
            said = f" version {version}" if version else ""
            d.fail(e, f"definition {name!r}{said} not found")
            return
        child_id = start_instance(d, child, dict(step_input or {}), parent_step=e.id)
        d.update_step(
            e.id, StepStatus.IN_PROGRESS, child_instance_id=child_id, attempt=attempt, scope=e.scope
        )
        d.changes.audit.append(
            AuditEvent(
                "CHILD_STARTED",
                None,
                {"stepId": step.id, "childId": str(child_id), "attempt": attempt},
            )
        )

    def list_ended(self, d: Decision, owner: Exec, key: str, output: Any) -> None:
        raise AssertionError("a SUB_WORKFLOW has no nested lists")

    def child_failed(
        self, d: Decision, owner: Exec, key: str, reason: str, instance_status: InstanceStatus
    ) -> None:
        raise AssertionError("a SUB_WORKFLOW has no nested lists")

    def reopen(
        self, d: Decision, owner: Exec, lists: dict[str, Exec], rerun: Callable[[Exec], None]
    ) -> None:
        raise AssertionError("a SUB_WORKFLOW has no nested lists")


def child_ended(d: Decision, e: Exec, status: str, output: Any, reason: str | None) -> None:
    """The child of SUB_WORKFLOW execution ``e`` ended with ``status``."""
    if e.status not in (StepStatus.IN_PROGRESS,) or not d.active:
        return  # the step was cancelled (or retried) meanwhile: a stale notification
    step = d.plan.step(e.step_id)
    assert isinstance(step, SubWorkflowStep)
    d.changes.audit.append(
        AuditEvent(
            "CHILD_ENDED",
            None,
            {"stepId": e.step_id, "childId": str(e.child_instance_id), "status": status},
        )
    )
    if status == InstanceStatus.COMPLETED:
        d.complete(e, output)
        return
    why = f"child instance {e.child_instance_id} ended {status}" + (f": {reason}" if reason else "")
    if status == InstanceStatus.CANCELLED:
        # A cancelled child cancels its step, which is not retried, and a required step's
        # cancel cancels the instance: Conductor's SUB_WORKFLOW task is CANCELED when its
        # child is TERMINATED, and a CANCELED task terminates its workflow.
        d.fail(
            e,
            why,
            StepStatus.CANCELLED,
            InstanceStatus.CANCELLED,
            output=output,
        )
        return
    if e.attempt <= step.retry_count:
        SubWorkflow().start_child(d, step, e, e.input, attempt=e.attempt + 1)
        return
    # The child's output as it ended is the step's, as Conductor's SUB_WORKFLOW task's.
    d.fail(e, why, output=output)


def failed_workflow(
    d: Decision,
    original: Any,
    output: Any,
    told: dict[str, Any],
    tasks: list[dict[str, Any]] | None,
) -> dict[str, Any]:
    """The failed instance (its input ``original``, read back if it was kept in the payload
    bucket) as a failure workflow is told of it (``failedWorkflow``): Conductor's workflow
    fields the instance has as it ended (``output``, before it named its failure workflow;
    ``told``: its status and reason then), and ``tasks``, Conductor's view of its tasks as they
    ended (from the engine's ``failed_view``, the Conductor surface's; None: left out)."""
    inst = d.instance
    failed: dict[str, Any] = {
        "workflowId": str(inst.id),
        "workflowName": inst.definition_name,
        "correlationId": inst.correlation_id,
        "status": told["failureStatus"],
        "input": original,
        "output": {} if output is None else output,
        "reasonForIncompletion": told["reason"],
        "variables": inst.variables,
    }
    if "failureTaskId" in told:
        failed["failedTaskId"] = told["failureTaskId"]
    if inst.parent_instance_id is not None:
        failed["parentWorkflowId"] = str(inst.parent_instance_id)
    if tasks is not None:
        failed["tasks"] = tasks
    return failed


def failed_task_id(d: Decision) -> str:
    """The id Conductor's view gives the task whose failure failed the instance: a worker's
    task is its job and attempt (``<jobId>.<attempt>``, ``baton.conductor.views.task_id``),
    any other its step execution's id."""
    assert d.failed_task is not None
    if d.failed_job is not None and d.failed_job[0] == d.failed_task:
        _, job_id, attempt = d.failed_job
        return f"{job_id}.{attempt}"
    return str(d.failed_task)


# How Conductor names the status a failure workflow is told of (``failureStatus``).
_FAILURE_STATUS = {"CANCELLED": "TERMINATED"}
# The key of the failed instance's output naming its failure workflow, as Conductor's.
FAILURE_WORKFLOW_KEY = "conductor.failure_workflow"
# The event a failed instance leaves itself for its failure workflow's start.
FAILURE_WORKFLOW_EVENT = "FAILURE_WORKFLOW"


def schedule_failure_workflow(d: Decision, name: str, version: int | None = None) -> None:
    """Have ``name`` (Conductor's ``failureWorkflow``; ``version``, its
    ``failureWorkflowVersion``: None for the latest) started for the instance ending in this
    decision, once the decision has committed: an event the instance leaves itself
    (``FAILURE_WORKFLOW``, delivered by the operation after its commit, the sweeper being the
    backstop), so that the failure workflow is told of the instance's tasks as they ended
    (:func:`start_failure_workflow`). What only this decision knows goes with it: the failure
    workflow's id (named in the instance's output as ``conductor.failure_workflow``, as
    Conductor does; not in an output stored in the payload bucket), the status and reason the
    instance ended with and the task whose failure ended it. No definition of that name (and
    version): an audit row says so, and the output names the failure workflow that could not
    start with Conductor's words."""
    inst = d.instance
    if d.reader.child_plan(name, version, None) is None:
        d.changes.audit.append(
            AuditEvent("FAILURE_WORKFLOW_NOT_FOUND", None, _named(name, version))
        )
        _name_in_output(
            d,
            f"Error workflow {name} failed to start.  reason: No such workflow defined. "
            f"name={name}, version={'null' if version is None else version}",
        )
        return
    fid = uuid.uuid4()
    told: dict[str, Any] = {
        "instanceId": str(inst.id),
        "workflowId": str(inst.id),
        "reason": inst.reason,
        "failureStatus": _FAILURE_STATUS.get(str(inst.status), str(inst.status)),
    }
    if d.failed_task is not None:
        told["failureTaskId"] = failed_task_id(d)
        told["failedStepExecutionId"] = str(d.failed_task)
    d.changes.events.append(
        NewEvent(
            inst.id,
            FAILURE_WORKFLOW_EVENT,
            None,
            {**_named(name, version), "id": str(fid), "told": told},
        )
    )
    _name_in_output(d, str(fid))


def _name_in_output(d: Decision, said: str) -> None:
    """``conductor.failure_workflow`` in the instance's output (not in one stored in the payload
    bucket): the failure workflow's id, or why it could not start (Conductor's
    ``terminateWorkflow``)."""
    inst = d.instance
    if inst.output is None or (isinstance(inst.output, dict) and not is_payload_ref(inst.output)):
        inst.output = {**(inst.output or {}), FAILURE_WORKFLOW_KEY: said}


def start_failure_workflow(
    d: Decision, payload: dict[str, Any], output: Any, view: dict[str, Any] | None
) -> None:
    """Start the failure workflow a ``FAILURE_WORKFLOW`` event (its ``payload``) asks for, in a
    decision on the instance that ended (``d``; ``output``: its output as it ended), with the
    failed instance's correlation id and the id the event names. Its input: the failed
    instance's input (an object's keys, as Conductor's) and over it its id (``workflowId``, and
    Baton's ``instanceId``), ``reason``, ``failureStatus`` (as Conductor names it),
    ``failureTaskId`` (Conductor's id of the task whose failure failed it, if one did:
    ``failed_task_id``; Baton's step execution id is ``failedStepExecutionId``),
    ``failedWorkflow`` (the instance as it ended, with ``tasks``: see ``failed_workflow``) and
    ``input``. ``view``: Conductor's view of the failed instance (the engine's
    ``failed_view``): its ``tasks``, and its ``reasonForIncompletion`` when it was written for
    Conductor (then the ``reason`` told). Above the workflow input's hard limit, without the
    tasks; above it still, without the input's keys and ``failedWorkflow``. An audit row says it
    started, or that no such definition exists (any more)."""
    name, version = str(payload["name"]), payload.get("version")
    child = d.reader.child_plan(name, version, None)
    if child is None:
        d.changes.audit.append(
            AuditEvent("FAILURE_WORKFLOW_NOT_FOUND", None, _named(name, version))
        )
        return
    inst = d.instance
    told: dict[str, Any] = dict(payload["told"])
    view = view or {}
    if view.get("reasonForIncompletion") is not None:
        told["reason"] = view["reasonForIncompletion"]
    tasks: list[dict[str, Any]] | None = view.get("tasks")
    if isinstance(output, dict) and FAILURE_WORKFLOW_KEY in output:
        output = {k: v for k, v in output.items() if k != FAILURE_WORKFLOW_KEY} or None
    original = d.unref(inst.input)  # an input kept in the payload bucket, read back
    own = original if isinstance(original, dict) else {}
    given: dict[str, Any] | None = None
    for shown in (tasks, None) if tasks is not None else (None,):
        whole = {**own, **told, "failedWorkflow": failed_workflow(d, original, output, told, shown)}
        try:
            given = d.stored({**whole, "input": original}, "WORKFLOW_INPUT")
            break
        except OverLimit:
            continue
    if given is None:
        given = {**told, "input": inst.input}
    started = start_instance(
        d,
        child,
        given,
        parent_step=None,
        correlation_id=inst.correlation_id,
        instance_id=uuid.UUID(str(payload["id"])),
    )
    d.changes.audit.append(
        AuditEvent(
            "FAILURE_WORKFLOW_STARTED",
            None,
            {**_named(name, version), "instanceId": str(started)},
        )
    )


def _named(name: str, version: int | None) -> dict[str, Any]:
    """A failure workflow's name, and its version when one is asked for."""
    return {"name": name} if version is None else {"name": name, "version": version}
