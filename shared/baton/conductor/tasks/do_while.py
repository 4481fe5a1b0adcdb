"""DO_WHILE ⇄ DO_WHILE (or, over ``items``, a MAP of concurrency 1).

A ``loopCondition`` runs as JavaScript (``whileLanguage``), as Conductor runs it: even a
simple comparison, whose JSONata twin would differ from JavaScript where types differ
(``"0" > 0``, ``1 == "1"``, a missing field). Baton needs a bound: translated loops get
:data:`DO_WHILE_MAX_ITERATIONS`."""

from __future__ import annotations

import re
from typing import Any

from baton.conductor.tasks.common import (
    WHOLE,
    back,
    base,
    fail,
    items_in,
    jsonata_to_js,
    label,
    rewrite_strings,
    script_text,
    task_input,
    tasks,
)

# Conductor has no bound on a DO_WHILE; Baton needs one.
DO_WHILE_MAX_ITERATIONS = 1000


def _over_items(task: dict[str, Any], path: str) -> dict[str, Any]:
    """A DO_WHILE over ``items``: its tasks run once per item, one item after the other, reading
    ``${<loop>.output.loopItem}`` and ``.loopIndex`` (from 0): a MAP of concurrency 1 whose
    ``${map.item}`` and ``${map.index}`` they read."""
    where = label(task, path)
    step = base(task, path)
    items = task["items"]
    if task.get("loopCondition"):
        raise fail(where, "a DO_WHILE over items is translated without a loopCondition")
    if not (isinstance(items, list) or (isinstance(items, str) and WHOLE.match(items))):
        raise fail(where, "items must be a list or one ${…} expression giving one")
    own = re.escape(step["id"])
    item = re.compile(r"\$\{\s*" + own + r"\.output\.loopItem\b")
    index = re.compile(r"\$\{\s*" + own + r"\.output\.loopIndex\s*\}")
    body = rewrite_strings(
        task.get("loopOver") or [],
        lambda v: index.sub("${map.index}", item.sub("${map.item", v)),
        ("description",),
    )
    step.update(
        type="MAP",
        items=items_in(items, f"{where}.items"),
        maxConcurrency=1,
        steps=tasks(body, f"{path}.loopOver"),
    )
    return step


def to_step(task: dict[str, Any], path: str) -> dict[str, Any]:
    if task.get("items") is not None:
        return _over_items(task, path)
    where = label(task, path)
    step = base(task, path)
    params = task.get("inputParameters") or {}
    step.update(
        type="DO_WHILE",
        steps=_own_iteration(tasks(task.get("loopOver") or [], f"{path}.loopOver"), step["id"]),
        maxIterations=DO_WHILE_MAX_ITERATIONS,
        # Later tasks read the loop's output as Conductor keeps it: ${loop.output.iteration},
        # ${loop.output.3.<task>.<field>}; keepLastN (a literal integer in its
        # inputParameters, as Conductor's DoWhile reads it) keeps the last n iterations of it.
        iterationOutputs=True,
    )
    keep = params.get("keepLastN")
    if isinstance(keep, int) and not isinstance(keep, bool) and keep >= 1:
        step["keepLastIterations"] = min(keep, DO_WHILE_MAX_ITERATIONS)
    if params:
        # Read by a JavaScript loopCondition (resolved after each iteration); shown, as it
        # stood when the loop started, as the DO_WHILE task's inputData.
        step["input"] = task_input(task, path)
    given = task.get("loopCondition")
    if given is None or (isinstance(given, str) and not given.strip()):
        # Conductor's DoWhile evaluates an absent or blank loopCondition as false (its
        # evalBool of no value): the loop runs once.
        step["while"] = "false"
        return step
    script = script_text(given, where, "loopCondition")
    # JavaScript over the loop's inputParameters (resolved after each iteration), its tasks'
    # outputs and its own iteration, as Conductor runs it.
    step.update({"while": script, "whileLanguage": "javascript"})
    return step


def _own_iteration(steps: Any, loop_id: str) -> Any:
    """Conductor's loop tasks read the running iteration as ``${<loop>.output.iteration}`` (the
    loop's output is updated as each iteration starts); Baton's as ``${<loop>.iteration}``."""
    own = re.compile(r"\$\{\s*" + re.escape(loop_id) + r"\.output\.iteration\s*\}")
    mine = f"${{{loop_id}.iteration}}"
    return rewrite_strings(steps, lambda v: own.sub(mine, v), ("description",))


def back_do_while(s: dict[str, Any], task: dict[str, Any]) -> list[dict[str, Any]]:
    task["type"] = "DO_WHILE"
    if s.get("whileLanguage") == "javascript":
        task["loopCondition"] = s["while"]
    else:
        task["loopCondition"] = jsonata_to_js(s["while"], task["inputParameters"])
    task["loopOver"] = back(s["steps"])
    return [task]
