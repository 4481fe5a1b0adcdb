"""An instance retry: a FAILED or TIMED_OUT instance runs again from what failed, keeping what
completed.

The decision reads the last execution of every list (every scope: the execution of the furthest
step reached there) and walks down from the root:
a list whose last execution completed moves on from there; an operator execution that failed or
was cancelled is reopened (its bookkeeping recomputed from its lists, each unfinished list
rerun); any other execution that did not complete (a failed task, a cancelled sibling, a failed
sub-workflow, an operator that failed before its lists started) runs again as a new execution in
the same place, with a new job, a new child or a new wait, and its retry counters reset. The
executions that failed stay as they were, so the run's history keeps them. A permissive step
whose latest execution failed in a list that went past it runs again too, on its own
(``engine.permissive``).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping

from baton.engine import permissive
from baton.engine.operators import OPERATORS
from baton.engine.operators.protocol import Decision
from baton.engine.records import Exec, key_of, parent_of
from baton.status import StepStatus


class Lists:
    """The last execution of each list of each operator execution, by owner and key."""

    def __init__(self, lasts: Mapping[str, Exec]) -> None:
        self.root = lasts[""]
        self.by_owner: dict[uuid.UUID, dict[str, Exec]] = {}
        for scope, e in lasts.items():
            owner = parent_of(scope)
            if owner is not None:
                self.by_owner.setdefault(owner, {})[key_of(scope)] = e

    def of(self, owner: Exec) -> dict[str, Exec]:
        return self.by_owner.get(owner.id, {})


def reopen_instance(d: Decision, latest: Mapping[str, Mapping[str, Exec]]) -> None:
    """Rerun what did not finish, from the root list down (``latest``: by scope, the latest
    execution of each step there)."""
    lasts = permissive.furthest(d, latest)
    if d.plan.permissive:
        # The permissive failures the lists went past run again first, so that a list ending
        # in this decision waits for them (``engine.permissive``).
        for e in permissive.candidates(d, latest):
            _again(d, e)
    if "" not in lasts:  # nothing ran at all
        first = d.plan.first()
        d.later(lambda: d.schedule(first, ""))
        return
    lists = Lists(lasts)
    rerun(d, lists, lists.root)


def _again(d: Decision, e: Exec) -> None:
    """A new execution of ``e``'s step in its place."""
    step = d.plan.step(e.step_id)
    d.later(lambda: d.schedule(step, e.scope))


def rewind(
    d: Decision,
    latest: Mapping[str, Mapping[str, Exec]],
    target: Exec | None,
    *,
    wait: bool,
    waits: frozenset[uuid.UUID] = frozenset(),
) -> None:
    """An ended instance runs again from ``target`` (Conductor's rerun from a task): ``latest``
    is, by scope, the latest execution of each step there, with what came after ``target`` in
    its list and in each list holding it gone, and ``target`` and the operator executions
    holding it given as unfinished. ``target`` runs again as a new execution in its place, or,
    ``wait``, waits again in place (a SUB_WORKFLOW whose child runs again); None: the operator
    executions given as unfinished are reopened and carry on from their lists (a JOIN's rerun).
    Unfinished lists of the operators reopened on the way run again, as in a retry, but for the
    SUB_WORKFLOW executions in ``waits``, which wait again in place on their child (retried in
    place after this decision)."""
    lists = Lists(permissive.furthest(d, latest))

    def carry(e: Exec) -> None:
        if e.id in waits or (target is not None and e.id == target.id and wait):
            d.reopen(e, e.state)
        elif target is not None and e.id == target.id:
            _again(d, e)
        else:
            rerun(d, lists, e, carry)

    carry(lists.root)


def rerun(d: Decision, lists: Lists, e: Exec, carry: Callable[[Exec], None] | None = None) -> None:
    """Carry on the list ``e`` is the last execution of (``carry``: how each unfinished list of
    a reopened operator is carried on; this function by default)."""
    if e.status == StepStatus.COMPLETED:
        nxt = d.plan.next_after(e.step_id)
        if nxt is not None:
            d.later(lambda: d.schedule(nxt, e.scope))
        else:
            d.later(lambda: d.list_ended(e.scope, e.output))
        return
    step = d.plan.step(e.step_id)
    inside = lists.of(e)
    if inside:
        OPERATORS[step.type].reopen(d, e, inside, carry or (lambda last: rerun(d, lists, last)))
        return
    d.later(lambda: d.schedule(step, e.scope))
