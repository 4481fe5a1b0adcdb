"""Conditions (a SWITCH case's ``condition``, a DO_WHILE's ``while``) in JSONata, the query
language AWS Step Functions uses, through the pure-Python ``jsonata-python``. Never ``eval``.

A condition sees the same context as ``${…}`` expressions: ``workflow.input``,
``workflow.variables``, ``<stepId>.output``, in a MAP ``map.item`` / ``map.index``, and in a
DO_WHILE's steps and ``while`` ``<loopId>.iteration``. Written as
one ``${…}`` instead, it is that value's truthiness. A condition is compiled once per definition
snapshot; each evaluation gets a frame of its own (evaluation is then thread-safe) with bounds on
CPU time and depth, so a runaway expression fails its step instead of hanging a decision.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

EVAL_TIMEOUT_MS = 1_000
EVAL_MAX_DEPTH = 200
_WHOLE_EXPRESSION = re.compile(r"\s*\$\{[^}]*\}\s*")


class ConditionError(ValueError):
    """A condition that does not compile, or failed while evaluated."""


@dataclass(frozen=True, slots=True)
class Condition:
    text: str
    compiled: Any  # a jsonata.Jsonata, or None for a ${…} condition

    @property
    def is_expression(self) -> bool:
        return self.compiled is None

    def evaluate(self, context: Mapping[str, Any]) -> Any:
        """The JSONata result over ``context`` (``ConditionError`` on a failure)."""
        from jsonata import JException

        frame = self.compiled.create_frame(self.compiled.environment)
        _Bounds(frame)
        try:
            return self.compiled.evaluate(dict(context), frame)
        except (JException, RecursionError, TypeError, ValueError) as e:
            raise ConditionError(f"{self.text!r} failed: {e}") from None


class _Bounds:
    """Bounds on one evaluation: depth, and the CPU time of the evaluating thread.

    jsonata-python's own ``set_runtime_bounds`` measures wall-clock time, so a busy machine (or
    the clock being stepped) fails a cheap expression that merely waited for the CPU; the
    thread's CPU time counts only the work the expression itself does."""

    def __init__(self, frame: Any) -> None:
        from jsonata import JException

        start = time.thread_time()
        depth = 0

        def check() -> None:
            if depth > EVAL_MAX_DEPTH:
                raise JException("D1011", -1)
            if (time.thread_time() - start) * 1000 > EVAL_TIMEOUT_MS:
                raise JException("D1012", -1, EVAL_TIMEOUT_MS)

        def enter(exp: Any, input: Any, env: Any) -> None:
            nonlocal depth
            if not env.is_parallel_call:
                depth += 1
                check()

        def leave(exp: Any, input: Any, env: Any, res: Any) -> None:
            nonlocal depth
            if not env.is_parallel_call:
                depth -= 1
                check()

        frame.set_evaluate_entry_callback(enter)
        frame.set_evaluate_exit_callback(leave)


def compile_condition(text: str) -> Condition:
    """Compile ``text``; a syntax error is a ``ConditionError`` with the parser's message."""
    if _WHOLE_EXPRESSION.fullmatch(text):
        return Condition(text, None)
    from jsonata import JException, Jsonata  # imported only by definitions that have conditions

    try:
        return Condition(text, Jsonata(text))
    except (JException, RecursionError, ValueError) as e:
        raise ConditionError(f"{text!r} is not a valid JSONata expression: {e}") from None


def truthy(value: Any) -> bool:
    """JSONata's boolean cast: empty, zero, null and false are false; an array is true when any
    element is."""
    if value is None or value is False:
        return False
    if value is True:
        return True
    if isinstance(value, int | float):
        return value != 0
    if isinstance(value, str):
        return value != ""
    if isinstance(value, list):
        return any(truthy(v) for v in value)
    if isinstance(value, dict):
        return bool(value)
    return bool(value)
