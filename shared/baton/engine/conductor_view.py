"""What Conductor's surface reads of an instance besides its view, from the instance's plan and
its step execution rows (``instance_sql.STEPS_OF_INSTANCE``'s, with their state): the same
whether the instance is in the database (``get_instance(conductor_view=True)``) or archived (the
archiver stores it in the document's ``conductor``, as the rows' state is not in the document).

- The executions of the iterations a DO_WHILE's ``keepLastIterations`` no longer keeps are left
  out, as Conductor deletes a ``keepLastN`` loop's older tasks.
- ``forks``: each PARALLEL and MAP step of the definition by id, its ``description`` and the id
  of each branch's last step (``joinOn``), for the JOIN task Conductor shows after a fork.
- ``failedAtJoin``: the FAILED executions of those that failed once every branch or item had
  ended (over a permissive failure: Conductor's JOIN fails then), not at once (a required task's
  failure, which terminates a Conductor workflow and cancels its JOIN).
"""

from __future__ import annotations

from typing import Any

from baton.engine.operators.do_while import kept_iterations
from baton.engine.operators.map import failed_at_join as map_failed_at_join
from baton.engine.operators.parallel import failed_at_join as parallel_failed_at_join
from baton.engine.plan import Plan
from baton.status import StepStatus
from baton.steps import MapStep, ParallelStep


def conductor_extras(
    plan: Plan, rows: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """``rows`` without the executions of iterations no longer kept, and what Conductor's
    surface reads besides (``forks`` and ``failedAtJoin``; nothing for a definition without
    forks)."""
    kept = kept_iterations(plan, rows)
    forks = fork_steps(plan)
    if not forks:
        return kept, {}
    return kept, {"forks": forks, "failedAtJoin": failed_at_join(plan, kept)}


def fork_steps(plan: Plan) -> dict[str, Any]:
    """Each PARALLEL and MAP step of ``plan`` by id: its description and the id of each
    branch's last step (a MAP's one list's)."""
    out: dict[str, Any] = {}
    for step in plan.steps():
        if isinstance(step, ParallelStep):
            out[step.id] = {
                "description": step.description,
                "joinOn": [b[-1].id for b in step.branches],
            }
        elif isinstance(step, MapStep):
            out[step.id] = {"description": step.description, "joinOn": [step.steps[-1].id]}
    return out


def failed_at_join(plan: Plan, rows: list[dict[str, Any]]) -> list[str]:
    """The FAILED PARALLEL and MAP executions among ``rows`` that failed once every branch or
    item had ended."""
    out: list[str] = []
    for r in rows:
        if r["status"] != StepStatus.FAILED or not plan.has_step(r["step_id"]):
            continue
        step = plan.step(r["step_id"])
        if isinstance(step, ParallelStep):
            joined = parallel_failed_at_join(step, r.get("state"))
        elif isinstance(step, MapStep):
            joined = map_failed_at_join(r.get("state"))
        else:
            continue
        if joined:
            out.append(str(r["id"]))
    return out
