"""DO_WHILE: runs its steps, then again while ``while`` holds (evaluated at the end of each
iteration, reading that iteration's steps), at most ``maxIterations`` times; reaching the limit
while the condition still holds fails the step. Output: the last iteration's output and
``iterations``. Each iteration's executions are kept (``iteration`` on each). Its steps read the
running iteration (from 1) as ``${<loop id>.iteration}`` (in a JSONata condition
``<loop id>.iteration``), read off their scope; the ``while`` reads the iteration that just ended
the same way (or as ``<loop id>.output.iteration``).

A JavaScript ``while`` (``whileLanguage`` javascript) reads ``$`` as Conductor's ``loopCondition``
does: the loop's ``input`` resolved after the iteration, plus each of its steps' output by id
(``$.<step id>.<field>``) and ``$.<loop id>``, its output so far (``iteration`` and each iteration's
step outputs, ``$.<loop id>['1'].<step id>``); the loop goes on while its value is true or a
number above 0.

With ``iterationOutputs`` (set for Conductor's DO_WHILE) the loop ends with that output so far
instead, trimmed to its last ``keepLastIterations`` iterations: what Conductor's later tasks read
as ``${loop.output.iteration}`` and ``${loop.output.3.<task>.<field>}``."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from baton.conditions import ConditionError, truthy
from baton.engine.operators.protocol import list_done
from baton.engine.operators.script import failure
from baton.engine.operators.switch import joined
from baton.engine.plan import nested
from baton.engine.records import InputNotObject, OverLimit, child_scope
from baton.scripting import ScriptFailed
from baton.status import InstanceStatus, StepStatus
from baton.steps import DoWhileStep
from baton.structure import condition_references

if TYPE_CHECKING:
    from baton.engine.operators.protocol import Decision
    from baton.engine.plan import Plan
    from baton.engine.records import Exec
    from baton.steps import Step


class DoWhile:
    def schedule(self, d: Decision, step: Step, scope: str) -> None:
        assert isinstance(step, DoWhileStep)
        shown = _input_at_start(d, step, scope)
        new = d.add_step(step, StepStatus.IN_PROGRESS, shown, scope, state={"iteration": 1})
        self._iterate(d, step, d.execution(new.id), 1)

    def _iterate(self, d: Decision, step: DoWhileStep, owner: Exec, k: int) -> None:
        first = step.steps[0]
        d.later(lambda: d.schedule(first, child_scope(owner, f"k{k}")))

    def list_ended(self, d: Decision, owner: Exec, key: str, output: Any) -> None:
        step = d.plan.step(owner.step_id)
        assert isinstance(step, DoWhileStep)
        k = int(key[1:])
        body_scope = child_scope(owner, f"k{k}")
        point = f"while:{step.id}"
        try:
            if step.while_language == "javascript":
                holds = _javascript_holds(d, step, point, body_scope, k)
            elif (condition := d.plan.condition(f"{step.id}#while", step.while_)).is_expression:
                holds = truthy(d.resolve(step.while_, point, body_scope))
            else:
                refs = [r for r in condition_references(step.while_) if r != step.id]
                context = d.context(point, body_scope, refs)
                # The loop's own counter: <loop>.iteration, as in its steps (the context has
                # it), and <loop>.output.iteration, the spelling Conductor's translation uses.
                context.setdefault(step.id, {})["output"] = {"iteration": k}
                holds = truthy(condition.evaluate(context))
        except (ConditionError, InputNotObject) as e:
            d.fail_operator(owner, f"step {step.id!r} failed: {e}")
            return
        except ScriptFailed as e:
            d.changes.count("ScriptsFailed", Kind=e.kind)
            said = failure("javascript", e).replace("the script", "its while script", 1)
            d.fail_operator(owner, f"step {step.id!r} failed: {said}")
            return
        if not holds:
            if step.iteration_outputs:
                d.complete(owner, _by_iteration(d, step, point, body_scope, k))
            else:
                d.complete(owner, joined("iterations", k, d.unref(output)))
            return
        if k >= step.max_iterations:
            d.fail_operator(
                owner,
                f"step {step.id!r} failed: it reached maxIterations ({step.max_iterations}) "
                "while its condition still holds",
            )
            return
        owner = d.set_state(owner, {"iteration": k + 1})
        self._iterate(d, step, owner, k + 1)

    def child_failed(
        self, d: Decision, owner: Exec, key: str, reason: str, instance_status: InstanceStatus
    ) -> None:
        d.fail_operator(owner, reason, instance_status)

    def reopen(
        self, d: Decision, owner: Exec, lists: dict[str, Exec], rerun: Callable[[Exec], None]
    ) -> None:
        k = max(int(key[1:]) for key in lists)
        last = lists[f"k{k}"]
        owner = d.reopen(owner, {"iteration": k})
        if list_done(d, last):  # the iteration ended; its condition (or the limit) failed it
            scope = child_scope(owner, f"k{k}")
            d.later(lambda: d.list_ended(scope, last.output))
        else:
            rerun(last)


def _input_at_start(d: Decision, step: DoWhileStep, scope: str) -> Any:
    """The loop's input as it stands when the loop starts, kept on its execution to be read
    (Conductor shows it as the DO_WHILE task's inputData). Only read: a JavaScript ``while``
    resolves the input again after each iteration. None when the loop has none, or when it is
    no object or past the hard limit (the condition meets that, as before)."""
    if not step.input:
        return None
    try:
        return d.stored(d.resolve_input(step, scope), "STEP_INPUT")
    except (InputNotObject, OverLimit):
        return None


def _javascript_holds(d: Decision, step: DoWhileStep, point: str, body_scope: str, k: int) -> bool:
    """A JavaScript ``while``'s verdict, as Conductor's evalBool: true, or a number above 0."""
    ids = _step_ids(step.steps)
    context = d.context(point, body_scope, ids)
    given = d.resolve(step.input, point, body_scope)
    if not isinstance(given, dict):
        raise InputNotObject(f"its input resolved to {type(given).__name__}, not an object")
    bindings: dict[str, Any] = dict(given)
    for sid in ids:
        bindings[sid] = context[sid]["output"]
    # The loop's own output so far, as Conductor binds it: {iteration, "1": {step: output}, …};
    # read only for a script that may look past its iteration (reading every iteration's
    # outputs after each one makes a long loop's iterations ever dearer).
    so_far = (
        d.resolve(f"${{{step.id}.output}}", point, body_scope)
        if _reads_past_iteration(step.while_, step.id)
        else None
    )
    bindings[step.id] = so_far if isinstance(so_far, dict) else {"iteration": k}
    value = d.sandbox.javascript(step.while_, bindings)
    if isinstance(value, bool):
        return value
    return isinstance(value, int | float) and value > 0


def _by_iteration(
    d: Decision, step: DoWhileStep, point: str, body_scope: str, k: int
) -> dict[str, Any]:
    """The output of a loop with ``iterationOutputs``, as Conductor's DO_WHILE task ends:
    ``iteration`` and, by iteration (``"1"``…), each of its steps' outputs by id; with
    ``keepLastIterations`` n, only the last n iterations (Conductor's ``keepLastN``: the
    output so far keeps no more, ``Decision.loop_so_far``)."""
    so_far = d.resolve(f"${{{step.id}.output}}", point, body_scope)
    out: dict[str, Any] = dict(so_far) if isinstance(so_far, dict) else {}
    out["iteration"] = k
    return out


def kept_iterations(plan: Plan, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """An instance's step execution rows (``instance_sql.STEPS_OF_INSTANCE``'s) without those
    run in an iteration a DO_WHILE with ``keepLastIterations`` n no longer keeps (before the
    last n begun, at any depth: a step inside a SWITCH or an inner loop of such an iteration
    too), as Conductor's DoWhile deletes the older iterations' tasks of a ``keepLastN`` loop."""
    first_kept: dict[Any, int] = {}
    for row in rows:
        if row["step_type"] != "DO_WHILE" or not plan.has_step(row["step_id"]):
            continue
        step = plan.step(row["step_id"])
        state = row.get("state")
        running = state.get("iteration") if isinstance(state, dict) else None
        keep = step.keep_last_iterations if isinstance(step, DoWhileStep) else None
        if keep and isinstance(running, int) and running > keep:
            first_kept[row["id"]] = running - keep + 1
    if not first_kept:
        return rows
    parents = {row["id"]: row for row in rows}
    gone: dict[Any, bool] = {}

    def dropped(row: dict[str, Any]) -> bool:
        # Each row's verdict once, from its parent's (the nesting is a few levels deep).
        rid = row["id"]
        if rid not in gone:
            parent = parents.get(row.get("parent_step_execution_id"))
            k, since = row.get("iteration"), first_kept.get(row.get("parent_step_execution_id"))
            gone[rid] = (isinstance(k, int) and since is not None and k < since) or (
                parent is not None and dropped(parent)
            )
        return gone[rid]

    return [row for row in rows if not dropped(row)]


def _reads_past_iteration(script: str, loop_id: str) -> bool:
    """Whether a loop's JavaScript ``while`` may read more of the loop's own output than its
    ``iteration``: it names the loop other than as ``<id>.iteration``, ``<id>['iteration']``
    or ``<id>["iteration"]`` (a script that never names it, or only so, gets ``{iteration}``)."""
    named = re.finditer(re.escape(loop_id), script)
    return any(not _ITERATION_ONLY.match(script, m.end()) for m in named)


# What may follow a loop's id in a script that reads only its iteration.
# (The id may end a bracketed name, ``$['my loop'].iteration``.)
_ITERATION_ONLY = re.compile(
    r"""(?:['"]\s*\])?\s*(?:\.\s*iteration|\[\s*(['"])iteration\1\s*\])(?![\w$])"""
)


def _step_ids(steps: Any) -> list[str]:
    """The ids of ``steps`` and of every step nested in them."""
    out: list[str] = []
    for s in steps:
        out.append(s.id)
        for _, inner in nested(s):
            out.extend(_step_ids(inner))
    return out
