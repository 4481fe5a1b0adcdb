"""INLINE and the legacy LAMBDA ⇄ SCRIPT (JavaScript, output ``{result}``), JSON_JQ_TRANSFORM ⇄
JQ (output ``{result, resultList}``). The script is an input parameter; the other input
parameters are ``$`` (jq's input)."""

from __future__ import annotations

import json
from typing import Any

from baton.conductor.tasks.common import (
    EXPR,
    SCRIPT_EVALUATORS,
    WHOLE,
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
        script = _program(expression, where, "inputParameters.expression", params)
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


# The input parameter holding a program given partly by data (LAMBDA, INLINE): Conductor's
# expression, as it names it.
_PROGRAM = "expression"


def _program(expression: Any, where: str, field: str, params: dict[str, Any]) -> str:
    """An INLINE's JavaScript as Baton runs it. Conductor resolves ``${…}`` in the expression (an
    input parameter like the others) before it runs it: one ``${…}`` alone gives the program
    (a Baton SCRIPT resolves a script that is one expression when it runs); ``${…}`` inside the
    text is resolved with the input (values as text, objects and lists as JSON) and the text
    evaluated, the parameter kept in ``$`` as Conductor keeps it."""
    text = script_text(expression, where, field)
    if WHOLE.match(text) or not EXPR.search(text):
        return text
    params[_PROGRAM] = text
    return f"(0, eval)($[{json.dumps(_PROGRAM)}])"


def lambda_(task: dict[str, Any], path: str) -> dict[str, Any]:
    """The legacy LAMBDA: ``scriptExpression`` is a function's body (it ``return``s its result),
    ``$`` the input parameters; output ``{result}``."""
    where = label(task, path)
    step = base(task, path)
    params = dict(task_input(task, path))
    body = script_text(params.pop("scriptExpression", None), where, "scriptExpression")
    if EXPR.search(body):  # given by data: resolved as the input, then run (see _program)
        params[_PROGRAM] = body
        script = (
            f"(0, eval)('function scriptFun() {{ ' + $[{json.dumps(_PROGRAM)}] + "
            "'\\n} scriptFun();')"
        )
    else:
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
    if EXPR.search(query) and not WHOLE.match(query):
        raise fail(
            where,
            "queryExpression holds ${…} inside its text: Baton builds no jq program from text; "
            "give the whole program as one ${…} expression (resolved when the task runs), or "
            "pass the value as an input parameter and read it as .<parameter>",
        )
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
