"""MAP: runs its steps once per element of ``items``, at most ``maxConcurrency`` items at a time
(the next item starts when one ends). Output: each item's last step output, in item order."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from baton.engine.operators.parallel import branch_outputs, list_done_at
from baton.engine.records import OverLimit, child_scope
from baton.status import InstanceStatus, StepStatus
from baton.steps import MAX_MAP_ITEMS, MapStep

if TYPE_CHECKING:
    from baton.engine.operators.protocol import Decision
    from baton.engine.records import Exec
    from baton.steps import Step


class Map:
    def schedule(self, d: Decision, step: Step, scope: str) -> None:
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
        try:
            # The items are the MAP's input: above the soft limit they live in S3 (each item's
            # ${map.item} reads them back through the per-process payload cache).
            stored = d.stored(items, "STEP_INPUT")
        except OverLimit as big:
            d.fail(d.add_step(step, StepStatus.IN_PROGRESS, None, scope), f"its items {big}")
            return
        new = d.add_step(
            step,
            StepStatus.IN_PROGRESS,
            stored,
            scope,
            state={"total": len(items), "next": started, "ended": 0},
        )
        owner = d.execution(new.id)
        if not items:
            d.complete(owner, [])
            return
        for i in range(started):
            self._start_item(d, step, owner, i)

    def _start_item(self, d: Decision, step: MapStep, owner: Exec, i: int) -> None:
        first = step.steps[0]
        d.later(lambda: d.schedule(first, child_scope(owner, f"i{i}")))

    def list_ended(self, d: Decision, owner: Exec, key: str, output: Any) -> None:
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
        self._join(d, step, owner, total)

    def _join(self, d: Decision, step: MapStep, owner: Exec, total: int) -> None:
        outputs = branch_outputs(d, owner, {step.steps[-1].id: 0}, "item_index")
        d.complete(owner, [outputs.get(i) for i in range(total)])

    def reopen(
        self, d: Decision, owner: Exec, lists: dict[str, Exec], rerun: Callable[[Exec], None]
    ) -> None:
        step = d.plan.step(owner.step_id)
        assert isinstance(step, MapStep)
        items = d.unref(owner.input)
        total = len(items) if isinstance(items, list) else 0
        started = [int(key[1:]) for key in lists]
        nxt = max(started) + 1 if started else 0
        done = [i for i in range(nxt) if list_done_at(d, lists, f"i{i}")]
        # Unfinished items run again, then new ones start while the concurrency allows.
        again = [i for i in range(nxt) if i not in done]
        fresh = max(0, min(step.max_concurrency - len(again), total - nxt))
        owner = d.reopen(owner, {"total": total, "next": nxt + fresh, "ended": len(done)})
        for i in again:
            last = lists.get(f"i{i}")
            if last is None:
                self._start_item(d, step, owner, i)
            else:
                rerun(last)
        for i in range(nxt, nxt + fresh):
            self._start_item(d, step, owner, i)
        if len(done) == total:
            self._join(d, step, owner, total)

    def child_failed(
        self, d: Decision, owner: Exec, key: str, reason: str, instance_status: InstanceStatus
    ) -> None:
        d.fail_operator(owner, reason, instance_status)
