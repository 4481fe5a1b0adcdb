"""PARALLEL: its branches run concurrently and join when all have finished; the join is a
decision on the instance like any other, so two branches finishing at once (two transactions)
are serialized by the fencing token and the join fires exactly once. Output: each branch's last
step output by branch index. A failing branch fails the step and cancels the other branches' open
work, unless ``failFast`` is false (the others then finish first). A branch whose last step failed
``permissive``ly (its list went past it) fails the step once every branch has ended."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from baton.engine.operators.protocol import list_done
from baton.engine.records import child_scope
from baton.status import InstanceStatus, StepStatus
from baton.steps import ParallelStep

if TYPE_CHECKING:
    from baton.engine.operators.protocol import Decision
    from baton.engine.records import Exec
    from baton.steps import Step


class Parallel:
    def schedule(self, d: Decision, step: Step, scope: str) -> None:
        assert isinstance(step, ParallelStep)
        new = d.add_step(
            step, StepStatus.IN_PROGRESS, None, scope, state={"ended": [], "failed": {}}
        )
        owner = d.execution(new.id)
        for b, branch in enumerate(step.branches):
            self._start_branch(d, branch[0], child_scope(owner, f"b{b}"))

    @staticmethod
    def _start_branch(d: Decision, first: Step, scope: str) -> None:
        d.later(lambda: d.schedule(first, scope))

    def list_ended(self, d: Decision, owner: Exec, key: str, output: Any) -> None:
        # A branch ending on a permissive step's failure fails the step once all have ended.
        self._ended(d, owner, int(key[1:]), d.list_failure(child_scope(owner, key)))

    def child_failed(
        self, d: Decision, owner: Exec, key: str, reason: str, instance_status: InstanceStatus
    ) -> None:
        step = d.plan.step(owner.step_id)
        assert isinstance(step, ParallelStep)
        branch = int(key[1:])
        if step.fail_fast:
            d.fail_operator(owner, reason, instance_status)
            return
        self._ended(d, owner, branch, reason)

    def _ended(self, d: Decision, owner: Exec, branch: int, failure: str | None) -> None:
        step = d.plan.step(owner.step_id)
        assert isinstance(step, ParallelStep)
        state = dict(owner.state or {})
        ended = sorted({*state.get("ended", []), branch})
        failed = dict(state.get("failed", {}))
        if failure is not None:
            failed[str(branch)] = failure
        owner = d.set_state(owner, {"ended": ended, "failed": failed})
        if len(ended) == len(step.branches):
            self._join(d, owner, failed)

    def _join(self, d: Decision, owner: Exec, failed: dict[str, str]) -> None:
        step = d.plan.step(owner.step_id)
        assert isinstance(step, ParallelStep)
        if failed:
            first = failed[min(failed, key=int)]
            d.fail_operator(owner, first)
            return
        last = {branch[-1].id: b for b, branch in enumerate(step.branches)}
        outputs = branch_outputs(d, owner, last, "branch")
        d.complete(owner, {str(b): outputs.get(b) for b in range(len(step.branches))})

    def reopen(
        self, d: Decision, owner: Exec, lists: dict[str, Exec], rerun: Callable[[Exec], None]
    ) -> None:
        step = d.plan.step(owner.step_id)
        assert isinstance(step, ParallelStep)
        done = [b for b in range(len(step.branches)) if list_done_at(d, lists, f"b{b}")]
        owner = d.reopen(owner, {"ended": done, "failed": {}})
        for b, branch in enumerate(step.branches):
            last = lists.get(f"b{b}")
            if last is None:
                self._start_branch(d, branch[0], child_scope(owner, f"b{b}"))
            elif not list_done(d, last):
                rerun(last)
        if len(done) == len(step.branches):
            self._join(d, owner, {})


def list_done_at(d: Decision, lists: dict[str, Exec], key: str) -> bool:
    last = lists.get(key)
    return last is not None and list_done(d, last)


def branch_outputs(
    d: Decision, owner: Exec, last_steps: dict[str, int], column: str
) -> dict[int, Any]:
    """The last output of each list of ``owner`` (by branch or item index): the executions of
    each list's last step, from this decision or read."""
    out: dict[int, Any] = {}
    for row in d.reader.last_outputs(owner.id, list(last_steps)):
        index = row[column]
        if index is not None:
            out[int(index)] = row["output"]
    prefix = f"{owner.scope}{owner.id}#"
    for step_id, scope, output in d.done_here():
        if step_id in last_steps and scope.startswith(prefix):
            out[_index_of(scope[len(prefix) :])] = output
    # The join is one value: offloaded outputs are read back (the whole is stored again, by
    # the operator's completion, if it is large).
    return d.unref_all(out)


def _index_of(key_path: str) -> int:
    key = key_path.split("/", 1)[0]
    return int(key[1:])


def failed_at_join(step: ParallelStep, state: Any) -> bool:
    """Did a FAILED execution of ``step`` (its ``state``) fail once every branch had ended (a
    branch ending on a permissive failure, or any failure without ``failFast``), not at once?"""
    ended = state.get("ended") if isinstance(state, dict) else None
    return isinstance(ended, list) and len(ended) == len(step.branches)
