"""SWITCH and the legacy DECISION ⇄ SWITCH.

value-param (DECISION's ``caseValueParam``): ``on`` the input parameter named by ``expression``
and ``cases`` by value; javascript/graaljs (DECISION's ``caseExpression``): the ``script`` whose
value, as text, names the case. A Baton SWITCH with a list of JSONata ``cases`` reads back as a
javascript SWITCH with ``true``/``false`` cases."""

from __future__ import annotations

import json
from typing import Any

from baton.conductor.tasks.common import (
    SCRIPT_EVALUATORS,
    back,
    base,
    fail,
    jsonata_to_js,
    label,
    params_in,
    params_out,
    script_text,
    task_input,
    tasks,
)


def to_step(task: dict[str, Any], path: str) -> dict[str, Any]:
    where = label(task, path)
    step = base(task, path)
    params = task.get("inputParameters") or {}
    step.update(type="SWITCH", input=task_input(task, path))
    cases = task.get("decisionCases") or {}
    if not isinstance(cases, dict):
        raise fail(where, "decisionCases must be an object")
    evaluator = task.get("evaluatorType") or "value-param"
    expression = task.get("expression") or task.get("caseValueParam")
    if evaluator == "value-param":
        step["on"] = _value_param(params, expression, where)
        step["cases"] = {str(k): tasks(v, f"{path}.decisionCases.{k}") for k, v in cases.items()}
    elif evaluator in SCRIPT_EVALUATORS:
        # Run as JavaScript, as Conductor does: its value (as text) names the case.
        step["script"] = script_text(expression, where, "expression")
        step["cases"] = {str(k): tasks(v, f"{path}.decisionCases.{k}") for k, v in cases.items()}
    else:
        raise fail(
            where,
            f"evaluatorType {evaluator!r} is not supported by Baton "
            f"(value-param, {', '.join(SCRIPT_EVALUATORS)})",
        )
    if task.get("defaultCase"):
        step["default"] = tasks(task["defaultCase"], f"{path}.defaultCase")
    return step


def _value_param(params: dict[str, Any], expression: Any, where: str) -> str:
    """The case value of a value-param: Conductor's ValueParamEvaluator takes the input parameter
    ``expression`` names, resolved, whatever it holds (``${…}``, text around ``${…}``, plain text,
    a number...; absent is null), and its text (``"" + value``) names the case. Baton's ``on`` is
    a template: a string parameter is one as it is, any other value is its JSON text (``5``,
    ``true``, ``null``), which is how Baton names a case by a value that is no string."""
    if not isinstance(expression, str):
        raise fail(where, "value-param: expression must name an input parameter")
    source = params.get(expression)
    if isinstance(source, str):
        on: str = params_in(source, where)
        return on
    return json.dumps(source, separators=(",", ":")).replace("${", "$${")


def decision(task: dict[str, Any], path: str) -> dict[str, Any]:
    """The legacy DECISION: ``caseValueParam`` names the input parameter to match (a SWITCH's
    value-param), ``caseExpression`` is JavaScript whose value names the case."""
    if task.get("caseExpression") is not None:
        evaluator, expression = "javascript", task["caseExpression"]
    else:
        evaluator, expression = "value-param", task.get("caseValueParam")
    return to_step({**task, "evaluatorType": evaluator, "expression": expression}, path)


def back_switch(s: dict[str, Any], task: dict[str, Any]) -> list[dict[str, Any]]:
    task["type"] = "SWITCH"
    cases = s.get("cases")
    params = task["inputParameters"]
    if s.get("script") is not None:
        task["evaluatorType"] = "javascript"
        task["expression"] = s["script"]
        task["decisionCases"] = {k: back(v) for k, v in (cases or {}).items()}
    elif isinstance(cases, dict):
        on = params_out(s.get("on"))
        key = next((k for k, v in params.items() if v == on), None)
        if key is None:
            key = "switchCaseValue"
            params[key] = on
        task["evaluatorType"] = "value-param"
        task["expression"] = key
        task["decisionCases"] = {k: back(v) for k, v in cases.items()}
    else:
        task["evaluatorType"] = "javascript"
        first = cases[0]["condition"] if cases else "true"
        task["expression"] = jsonata_to_js(first, params)
        task["decisionCases"] = {}
        for c in cases or []:
            key = "false" if c["condition"].startswith("$not(") else "true"
            task["decisionCases"][key] = back(c["steps"])
    task["defaultCase"] = back(s.get("default") or [])
    return [task]
