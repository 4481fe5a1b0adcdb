"""What an instance retry reads of each list when a definition has permissive steps
(``engine.permissive``): a list's last execution is its furthest step's (a rerun of a permissive
failure it went past is newer, not further), and the permissive failures a list went past are
the ones rerun on their own."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from baton.definitions import parse_definition
from baton.engine import permissive
from baton.engine.plan import Plan
from baton.engine.records import Exec
from baton.status import StepStatus


@dataclass
class _Decision:
    plan: Plan


def _plan() -> Plan:
    def task(step_id: str, **extra: Any) -> dict[str, Any]:
        return {"id": step_id, "type": "SERVICE_TASK", "jobType": step_id, **extra}

    return Plan(
        parse_definition(
            {
                "name": "lists",
                "steps": [
                    task("a", permissive=True),
                    task("b"),
                    task("opt", permissive=True, optional=True),
                    task("z", permissive=True),
                ],
            }
        )
    )


def _exec(step_id: str, status: StepStatus) -> Exec:
    return Exec(uuid.uuid4(), step_id, "", status)


def test_a_list_s_last_execution_is_its_furthest_step_s_not_its_newest() -> None:
    d: Any = _Decision(_plan())
    rerun_a = _exec("a", StepStatus.COMPLETED)  # created after b, by a retry
    b = _exec("b", StepStatus.COMPLETED)
    assert permissive.furthest(d, {"": {"b": b, "a": rerun_a}}) == {"": b}


def test_the_permissive_failures_a_list_went_past_are_rerun_and_no_other() -> None:
    d: Any = _Decision(_plan())
    assert d.plan.permissive == frozenset({"a", "z"})  # optional wins: opt is not one
    a = _exec("a", StepStatus.FAILED)
    b = _exec("b", StepStatus.COMPLETED)
    assert permissive.candidates(d, {"": {"a": a, "b": b}}) == [a]
    # The furthest execution is the walk's to rerun, not a candidate of its own.
    z = _exec("z", StepStatus.FAILED)
    assert permissive.candidates(d, {"": {"b": b, "z": z}}) == []
    # A cancelled rerun runs again; a completed one does not.
    cancelled = _exec("a", StepStatus.CANCELLED)
    assert permissive.candidates(d, {"": {"a": cancelled, "b": b}}) == [cancelled]
    done = _exec("a", StepStatus.COMPLETED)
    assert permissive.candidates(d, {"": {"a": done, "b": b}}) == []
