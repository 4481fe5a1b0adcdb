"""SWITCH: runs the steps of the first matching case (by ``on``'s string value, by the value of its
JavaScript ``script``, or by conditions in order), else ``default``. Output: ``case`` plus the
last step output of the list taken."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from baton.conditions import ConditionError, truthy
from baton.engine.operators.protocol import list_done
from baton.engine.operators.script import failure
from baton.engine.records import InputNotObject, child_scope
from baton.scripting import ScriptFailed
from baton.status import InstanceStatus, StepStatus
from baton.steps import SwitchStep
from baton.structure import condition_references

if TYPE_CHECKING:
    from baton.engine.operators.protocol import Decision
    from baton.engine.records import Exec
    from baton.steps import Step


def joined(label: str, key: Any, output: Any) -> dict[str, Any]:
    """An operator's output: its own ``label`` plus a list's last output (an object is merged,
    anything else is ``output``)."""
    base = dict(output) if isinstance(output, dict) else {"output": output}
    return {**base, label: key}


class Switch:
    def schedule(self, d: Decision, step: Step, scope: str) -> None:
        assert isinstance(step, SwitchStep)
        point = f"step:{step.id}"
        try:
            choice = self._choose(d, step, point, scope)
        except (ConditionError, InputNotObject) as e:
            d.fail(d.add_step(step, StepStatus.IN_PROGRESS, None, scope), str(e))
            return
        except ScriptFailed as e:
            d.changes.count("ScriptsFailed", Kind=e.kind)
            d.fail(d.add_step(step, StepStatus.IN_PROGRESS, None, scope), failure("javascript", e))
            return
        if choice is None:  # no case matched and there is no default: nothing to run
            new = d.add_step(step, StepStatus.IN_PROGRESS, None, scope, state={"case": None})
            d.complete(d.execution(new.id), {"case": None})
            return
        name, key, steps = choice
        new = d.add_step(step, StepStatus.IN_PROGRESS, {"case": name}, scope, state={"case": name})
        owner = d.execution(new.id)
        d.later(lambda: d.schedule(steps[0], f"{owner.scope}{owner.id}#{key}/"))

    def _choose(
        self, d: Decision, step: SwitchStep, point: str, scope: str
    ) -> tuple[str | None, str, tuple[Step, ...]] | None:
        if isinstance(step.cases, dict):
            if step.script is not None:  # its value names the case, as Conductor's javascript
                value = d.sandbox.javascript(step.script, d.resolve_input(step, scope))
            else:
                value = d.resolve(step.on, point, scope)
            wanted = value if isinstance(value, str) else _as_case(value)
            for k, (name, steps) in enumerate(step.cases.items()):
                if name == wanted and steps:
                    return name, f"c{k}", tuple(steps)
        else:
            for k, case in enumerate(step.cases):
                condition = d.plan.condition(f"{step.id}#c{k}", case.condition)
                if condition.is_expression:
                    holds = truthy(d.resolve(case.condition, point, scope))
                else:
                    refs = condition_references(case.condition)
                    holds = truthy(condition.evaluate(d.context(point, scope, refs)))
                if holds and case.steps:
                    return str(k), f"c{k}", tuple(case.steps)
        if step.default:
            return "default", "cd", tuple(step.default)
        return None

    def list_ended(self, d: Decision, owner: Exec, key: str, output: Any) -> None:
        name = (owner.state or {}).get("case")
        d.complete(owner, joined("case", name, d.unref(output)))

    def child_failed(
        self, d: Decision, owner: Exec, key: str, reason: str, instance_status: InstanceStatus
    ) -> None:
        d.fail_operator(owner, reason, instance_status)

    def reopen(
        self, d: Decision, owner: Exec, lists: dict[str, Exec], rerun: Callable[[Exec], None]
    ) -> None:
        owner = d.reopen(owner, owner.state)
        ((key, last),) = lists.items()  # the one case taken
        if list_done(d, last):
            scope = child_scope(owner, key)
            d.later(lambda: d.list_ended(scope, last.output))
        else:
            rerun(last)


def _as_case(value: Any) -> str:
    """A non-string ``on`` value as its case name: JSON text (true, 3, null)."""
    import json

    return json.dumps(value)
