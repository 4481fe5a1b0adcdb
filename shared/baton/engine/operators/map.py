"""MAP: runs its steps once per element of ``items``, at most ``maxConcurrency`` items at a time
(the next item starts when one ends). Output: each item's last step output, in item order."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from baton.engine.operators.parallel import branch_outputs
from baton.status import InstanceStatus, StepStatus
from baton.steps import MAX_MAP_ITEMS, MapStep

if TYPE_CHECKING:
    from baton.engine.decide import Decider, Exec
    from baton.steps import Step


class Map:
    def schedule(self, d: Decider, step: Step, scope: str) -> None:
        assert isinstance(step, MapStep)
        items = d.resolve(step.items, f"step:{step.id}", scope)
        if not isinstance(items, list):
            kind = "null" if items is None else type(items).__name__
            d.fail(
                d.add_step(step, StepStatus.IN_PROGRESS, None, scope),
                f"items resolved to {kind}, not a list",
            )
            return
        if len(items) > MAX_MAP_ITEMS:
            d.fail(
                d.add_step(step, StepStatus.IN_PROGRESS, None, scope),
                f"items has {len(items)} elements, more than the {MAX_MAP_ITEMS} a MAP runs",
            )
            return
        started = min(len(items), step.max_concurrency)
        new = d.add_step(
            step,
            StepStatus.IN_PROGRESS,
            items,
            scope,
            state={"total": len(items), "next": started, "ended": 0},
        )
        owner = d.execution(new.id)
        if not items:
            d.complete(owner, [])
            return
        for i in range(started):
            self._start_item(d, step, owner, i)

    def _start_item(self, d: Decider, step: MapStep, owner: Exec, i: int) -> None:
        first = step.steps[0]
        d.later(lambda: d.schedule(first, f"{owner.scope}{owner.id}#i{i}/"))

    def list_ended(self, d: Decider, owner: Exec, key: str, output: Any) -> None:
        step = d.plan.step(owner.step_id)
        assert isinstance(step, MapStep)
        state = dict(owner.state or {})
        total, nxt, ended = state["total"], state["next"], state["ended"] + 1
        if nxt < total:
            self._start_item(d, step, owner, nxt)
            nxt += 1
        owner = d.set_state(owner, {"total": total, "next": nxt, "ended": ended})
        if ended < total:
            return
        outputs = branch_outputs(d, owner, {step.steps[-1].id: 0}, "item_index")
        d.complete(owner, [outputs.get(i) for i in range(total)])

    def child_failed(
        self, d: Decider, owner: Exec, key: str, reason: str, instance_status: InstanceStatus
    ) -> None:
        d.fail_operator(owner, reason, instance_status)
