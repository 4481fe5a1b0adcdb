"""START_WORKFLOW: starts another instance in the same statement as the decision, as a
SUB_WORKFLOW starts its child, and completes at once with the new instance's id: nothing waits
for it and nothing ties it to this one (no parent; cancelling this instance leaves it running).

The new instance's first decision runs inside this one's, so a definition that starts itself
would start instances without end in one statement: an instance started this way is one level
deeper than its starter (``depth``, the sub-workflow nesting count), and a start deeper than
:data:`~baton.engine.operators.sub_workflow.MAX_NESTING` fails the step."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from baton.engine.operators.sub_workflow import MAX_NESTING, start_instance
from baton.engine.operators.work import Leaf, open_with_input
from baton.engine.records import AuditEvent, OverLimit
from baton.model import NAME_PATTERN
from baton.steps import StartWorkflowStep

if TYPE_CHECKING:
    from baton.engine.operators.protocol import Decision
    from baton.engine.records import Exec
    from baton.steps import Step

_NAME = re.compile(NAME_PATTERN)


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def parse_request(request: Any) -> tuple[str, int | None, dict[str, Any], str | None]:
    """(name, version, input, correlationId) of a resolved request; ValueError saying what is
    wrong with it."""
    if not isinstance(request, dict):
        raise ValueError(f"its request resolved to {_kind(request)}, not an object")
    name = request.get("name", request.get("definitionName"))
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(f"its request names no definition (name {name!r})")
    version = request.get("version")
    if isinstance(version, str) and version.isdigit():
        version = int(version)
    if version is not None and (
        not isinstance(version, int) or isinstance(version, bool) or version < 1
    ):
        raise ValueError(f"its request's version {version!r} is not a version (1 or more)")
    given = request.get("input")
    if given is not None and not isinstance(given, dict):
        raise ValueError(f"its request's input is {_kind(given)}, not an object")
    correlation = request.get("correlationId")
    if correlation is not None and not isinstance(correlation, str):
        raise ValueError(f"its request's correlationId is {_kind(correlation)}, not text")
    return name, version, dict(given or {}), correlation or None


class StartWorkflow(Leaf):
    def schedule(self, d: Decision, step: Step, scope: str) -> None:
        assert isinstance(step, StartWorkflowStep)
        opened = open_with_input(d, step, scope)
        if opened is None:
            return
        self.start(d, step, opened[0])

    def start(self, d: Decision, step: StartWorkflowStep, e: Exec) -> None:
        if d.instance.depth + 1 > MAX_NESTING:
            d.fail(e, f"instances started by START_WORKFLOW nest deeper than {MAX_NESTING} levels")
            return
        request = d.unref(d.resolve(step.request, f"step:{step.id}", e.scope))
        try:
            name, version, given, correlation = parse_request(request)
        except ValueError as bad:
            d.fail(e, str(bad))
            return
        child = d.reader.child_plan(name, version, None)
        if child is None:
            said = f" version {version}" if version else ""
            d.fail(e, f"definition {name!r}{said} not found")
            return
        try:
            child_input = d.stored(given, "WORKFLOW_INPUT")
        except OverLimit as big:
            d.fail(e, f"its request's input {big}")
            return
        started = start_instance(
            d,
            child,
            child_input,
            parent_step=None,
            correlation_id=correlation or d.instance.correlation_id,
            depth=d.instance.depth + 1,
        )
        d.changes.audit.append(
            AuditEvent(
                "WORKFLOW_STARTED",
                None,
                {"stepId": step.id, "name": child.name, "instanceId": str(started)},
            )
        )
        d.complete(e, {"workflowId": str(started), "instanceId": str(started)})
