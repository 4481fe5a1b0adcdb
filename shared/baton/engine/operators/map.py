"""MAP: runs its steps once per element of ``items``, at most ``maxConcurrency`` items at a time
(the next item starts when one ends). Output: each item's last step output, in item order. An
item whose last step failed ``permissive``ly (its list went past it) fails the MAP once every item
has ended.

With a ``key`` (Conductor's dynamic fork), each item's key is resolved from it when the MAP
starts, and the output is an object by key; ``inputs`` (an object by key) gives each item its
``${map.input}``; ``indexAs`` gives it the item with its index instead. The MAP's stored input
is then ``{items, keys, inputs[, indexAs]}`` (else the list)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from baton import expressions
from baton.engine.operators.parallel import branch_outputs, list_done_at
from baton.engine.records import OverLimit, child_scope
from baton.status import InstanceStatus, StepStatus
from baton.steps import MAX_MAP_ITEMS, MapStep, SwitchStep, list_literal

if TYPE_CHECKING:
    from baton.engine.operators.protocol import Decision
    from baton.engine.records import Exec
    from baton.steps import Step


class Map:
    def schedule(self, d: Decision, step: Step, scope: str) -> None:
        assert isinstance(step, MapStep)
        literal = list_literal(step.items)
        items = d.resolve(step.items if literal is None else literal, f"step:{step.id}", scope)
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
        given: Any = items
        if step.key is not None:
            try:
                given = self._keyed(d, step, scope, items)
            except ValueError as e:
                d.fail(d.add_step(step, StepStatus.IN_PROGRESS, None, scope), str(e))
                return
        started = min(len(items), step.max_concurrency)
        try:
            # The items are the MAP's input: above the soft limit they live in S3 (each item's
            # ${map.item} reads them back through the per-process payload cache).
            stored = d.stored(given, "STEP_INPUT")
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
            d.complete(owner, {} if step.key is not None else [])
            return
        for i in range(started):
            self._start_item(d, step, owner, i)

    def _keyed(self, d: Decision, step: MapStep, scope: str, items: list[Any]) -> dict[str, Any]:
        """``{items, keys, inputs}``: each item's key (text, unique), and the inputs by key."""
        assert step.key is not None
        keys: list[str] = []
        for index, item in enumerate(items):
            seen = expressions.Scope(
                workflow={}, step_output=lambda _s: None, map={"item": item, "index": index}
            )
            key = expressions.resolve(step.key, seen)
            if not isinstance(key, str | int) or isinstance(key, bool) or key == "":
                raise ValueError(f"item {index}: key {step.key} gave {key!r}, not a name")
            if str(key) in keys:
                raise ValueError(f"item {index}: key {step.key} gave {key!r} twice")
            keys.append(str(key))
        inputs = None
        if step.inputs is not None:
            inputs = d.unref(d.resolve(step.inputs, f"step:{step.id}", scope))
            if inputs is None:
                inputs = {}
            if not isinstance(inputs, dict):
                kind = type(inputs).__name__
                raise ValueError(f"inputs resolved to {kind}, not an object by key")
        stored: dict[str, Any] = {"items": items, "keys": keys, "inputs": inputs}
        if step.index_as is not None:
            stored["indexAs"] = step.index_as
        return stored

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
        new_state = {"total": total, "next": nxt, "ended": ended}
        failed = dict(state.get("failed") or {})
        item = child_scope(owner, key)
        failure = d.list_failure(item)
        last = step.steps[-1]
        if failure is None and step.key is not None and isinstance(last, SwitchStep):
            # A dynamic fork: the task the item's SWITCH chose is Conductor's forked task, which
            # its JOIN waits on (its output is the item's, ``_case_outputs``).
            failure = d.list_failure_within(item)
        if failure is not None:  # the item's last step failed permissively
            failed[key[1:]] = failure
        if failed:
            new_state["failed"] = failed
        owner = d.set_state(owner, new_state)
        if ended < total:
            return
        if failed:  # every item ended: the first whose last step failed fails the MAP
            d.fail_operator(owner, failed[min(failed, key=int)])
            return
        self._join(d, step, owner, total)

    def _join(self, d: Decision, step: MapStep, owner: Exec, total: int) -> None:
        last = step.steps[-1]
        if step.key is not None and isinstance(last, SwitchStep):
            outputs = _case_outputs(d, owner, last)
        else:
            outputs = branch_outputs(d, owner, {last.id: 0}, "item_index")
        stored = d.unref(owner.input)
        if isinstance(stored, dict):
            # By key, as Conductor's JOIN of a dynamic fork: an item with no output (an optional
            # task that failed) has no entry, as a forked task's empty output has none there.
            keyed = {k: outputs.get(i) for i, k in enumerate(stored["keys"])}
            d.complete(owner, {k: v for k, v in keyed.items() if v is not None})
            return
        d.complete(owner, [outputs.get(i) for i in range(total)])

    def reopen(
        self, d: Decision, owner: Exec, lists: dict[str, Exec], rerun: Callable[[Exec], None]
    ) -> None:
        step = d.plan.step(owner.step_id)
        assert isinstance(step, MapStep)
        items = map_items(d.unref(owner.input))
        total = len(items)
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


def failed_at_join(state: Any) -> bool:
    """Did a FAILED MAP execution (its ``state``) fail once every item had ended (an item
    ending on a permissive failure), not at once (a required failure)?"""
    return isinstance(state, dict) and state.get("ended") == state.get("total")


def map_items(stored: Any) -> list[Any]:
    """A MAP's items from its stored input (the list, or a keyed MAP's ``{items, …}``)."""
    if isinstance(stored, dict):
        stored = stored.get("items")
    return stored if isinstance(stored, list) else []


def _case_outputs(d: Decision, owner: Exec, switch: SwitchStep) -> dict[int, Any]:
    """A keyed MAP whose steps end with a SWITCH (a dynamic fork choosing each item's task by its
    type): each item's value is the output of the last step of the case it took, not the
    SWITCH's own ``{case, …}``."""
    cases = switch.cases
    lists = list(cases.values()) if isinstance(cases, dict) else [c.steps for c in cases]
    lists.append(switch.default or [])
    leaves = {steps[-1].id for steps in lists if steps}
    prefix = f"{owner.scope}{owner.id}#"
    out: dict[int, Any] = {}
    for row in d.reader.outputs_within(prefix, sorted(leaves)):
        out[int(row["list"][1:])] = row["output"]
    for step_id, scope, output in d.done_here():
        if step_id in leaves and scope.startswith(prefix):
            out[int(scope[len(prefix) :].split("/", 1)[0][1:])] = output
    return d.unref_all(out)
