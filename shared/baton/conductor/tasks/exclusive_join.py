"""EXCLUSIVE_JOIN ⇄ EXCLUSIVE_JOIN: ``joinOn`` and ``defaultExclusiveJoinTask`` (reference
names) are the step's ``joinOn`` and ``defaultJoinOn``; its input is what Conductor hands the
task (both lists), so the task shows the same ``inputData``."""

from __future__ import annotations

from typing import Any

from baton.conductor.tasks.common import base, fail, label


def _refs(task: dict[str, Any], field: str, where: str) -> list[str] | None:
    refs = task.get(field)
    if refs is None or refs == []:
        return None
    if not isinstance(refs, list) or not all(isinstance(r, str) and r for r in refs):
        raise fail(where, f"{field} must be a list of task reference names")
    return list(refs)


def to_step(task: dict[str, Any], path: str) -> dict[str, Any]:
    where = label(task, path)
    step = base(task, path)
    join_on = _refs(task, "joinOn", where)
    if join_on is None:
        raise fail(where, "an EXCLUSIVE_JOIN needs joinOn: the tasks that may end its branches")
    default = _refs(task, "defaultExclusiveJoinTask", where)
    step.update(type="EXCLUSIVE_JOIN", joinOn=join_on, input={"joinOn": join_on})
    if default is not None:
        step["defaultJoinOn"] = default
        step["input"]["defaultExclusiveJoinTask"] = default
    return step


def back(s: dict[str, Any], task: dict[str, Any]) -> list[dict[str, Any]]:
    task["type"] = "EXCLUSIVE_JOIN"
    params = dict(task["inputParameters"])
    params.pop("joinOn", None)
    params.pop("defaultExclusiveJoinTask", None)
    task["inputParameters"] = params
    task["joinOn"] = list(s["joinOn"])
    if s.get("defaultJoinOn"):
        task["defaultExclusiveJoinTask"] = list(s["defaultJoinOn"])
    return [task]
