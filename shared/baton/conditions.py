"""Conditions (a SWITCH case's ``condition``, a DO_WHILE's ``while``) in JSONata, the query
language AWS Step Functions uses, through the pure-Python ``jsonata-python``. Never ``eval``.

A condition sees the same context as ``${…}`` expressions: ``workflow.input``,
``workflow.variables``, ``<stepId>.output`` and, in a MAP, ``map.item`` / ``map.index``. Written as
one ``${…}`` instead, it is that value's truthiness. A condition is compiled once per definition
snapshot; each evaluation gets a frame of its own (evaluation is then thread-safe) with bounds on
time and depth, so a runaway expression fails its step instead of hanging a decision.
"""

from __future__ import annotations

import re
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
        frame.set_runtime_bounds(EVAL_TIMEOUT_MS, EVAL_MAX_DEPTH)
        try:
            return self.compiled.evaluate(dict(context), frame)
        except (JException, RecursionError, TypeError, ValueError) as e:
            raise ConditionError(f"{self.text!r} failed: {e}") from None


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
