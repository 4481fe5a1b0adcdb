"""INLINE and the legacy LAMBDA ⇄ SCRIPT (JavaScript, output ``{result}``), JSON_JQ_TRANSFORM ⇄
JQ (output ``{result, resultList}``). The script is an input parameter; the other input
parameters are ``$`` (jq's input)."""

from __future__ import annotations

import json
from typing import Any

from baton.conductor.tasks.common import (
    SCRIPT_EVALUATORS,
    base,
    fail,
    label,
    script_text,
    task_input,
)


def inline(task: dict[str, Any], path: str) -> dict[str, Any]:
    """INLINE: a javascript/graaljs ``expression`` over ``$`` (the other input parameters), or a
    value-param naming the input parameter to give; output ``{result}``."""
    where = label(task, path)
    step = base(task, path)
    params = dict(task_input(task, path))
    evaluator = params.pop("evaluatorType", None) or "javascript"
    expression = params.pop("expression", None)
    if evaluator in SCRIPT_EVALUATORS:
        script = script_text(expression, where, "inputParameters.expression")
    elif evaluator == "value-param":
        if not isinstance(expression, str) or expression not in params:
            raise fail(where, "value-param: expression must name one of the inputParameters")
        script = f"$[{json.dumps(expression)}]"
    else:
        raise fail(
            where,
            f"evaluatorType {evaluator!r} is not supported by Baton "
            f"(value-param, {', '.join(SCRIPT_EVALUATORS)})",
        )
    step.update(type="SCRIPT", language="javascript", script=script, input=params)
    return step


def lambda_(task: dict[str, Any], path: str) -> dict[str, Any]:
    """The legacy LAMBDA: ``scriptExpression`` is a function's body (it ``return``s its result),
    ``$`` the input parameters; output ``{result}``."""
    where = label(task, path)
    step = base(task, path)
    params = dict(task_input(task, path))
    body = script_text(params.pop("scriptExpression", None), where, "scriptExpression")
    script = f"function scriptFun() {{ {body}\n}} scriptFun();"
    step.update(type="SCRIPT", language="javascript", script=script, input=params)
    return step


def json_jq_transform(task: dict[str, Any], path: str) -> dict[str, Any]:
    """JSON_JQ_TRANSFORM: ``queryExpression`` over the other input parameters; output
    ``{result, resultList}``."""
    where = label(task, path)
    step = base(task, path)
    params = dict(task_input(task, path))
    query = script_text(params.pop("queryExpression", None), where, "queryExpression")
    step.update(type="JQ", query=query, input=params)
    return step


def back_script(s: dict[str, Any], task: dict[str, Any]) -> list[dict[str, Any]]:
    task["type"] = "INLINE"
    task["inputParameters"] = {
        **task["inputParameters"],
        "evaluatorType": "javascript",
        "expression": s["script"],
    }
    return [task]


def back_jq(s: dict[str, Any], task: dict[str, Any]) -> list[dict[str, Any]]:
    task["type"] = "JSON_JQ_TRANSFORM"
    task["inputParameters"] = {**task["inputParameters"], "queryExpression": s["query"]}
    return [task]
