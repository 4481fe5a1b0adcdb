"""FORK_JOIN + JOIN ⇄ PARALLEL: one branch per ``forkTasks`` list. The JOIN is no step of its
own (its reference is kept in the step's description, so it reads back as registered)."""

from __future__ import annotations

from typing import Any

from baton.conductor.tasks.common import (
    back,
    base,
    fail,
    join_back,
    join_note,
    label,
    task_input,
    tasks,
)


def to_step(task: dict[str, Any], join: dict[str, Any], path: str) -> dict[str, Any]:
    step = base(task, path)
    branches = task.get("forkTasks")
    if not isinstance(branches, list) or not branches or not all(branches):
        raise fail(label(task, path), "forkTasks must be a non-empty list of task lists")
    step.update(
        type="PARALLEL",
        branches=[tasks(b, f"{path}.forkTasks[{n}]") for n, b in enumerate(branches)],
    )
    if task.get("inputParameters"):
        step["input"] = task_input(task, path)
    join_note(step, join)
    return step


def back_parallel(s: dict[str, Any], task: dict[str, Any]) -> list[dict[str, Any]]:
    task["type"] = "FORK_JOIN"
    task["forkTasks"] = [back(b) for b in s["branches"]]
    join_ref, task = join_back(s, task)
    join = {
        "name": join_ref,
        "taskReferenceName": join_ref,
        "type": "JOIN",
        "inputParameters": {},
        "joinOn": [b[-1]["id"] for b in s["branches"] if b],
    }
    return [task, join]
