"""SCRIPT (JavaScript) and JQ (a jq filter): run by the engine within the decision, like
SET_VARIABLE, in the script sandbox (``baton.scripting``: child processes, bounded in time and
memory). ``$`` (SCRIPT) or the filter's input (JQ) is the step's resolved ``input``.

A ``script`` (``query``) that is exactly one ``${…}`` expression is resolved when the step runs and
gives the program (which must be text): Conductor's INLINE ``expression`` and JSON_JQ_TRANSFORM
``queryExpression`` may come from data that way.

Output: SCRIPT ``{"result": <completion value>}``; JQ ``{"result": <first result or null>,
"resultList": [<every result>]}`` (Conductor's INLINE and JSON_JQ_TRANSFORM shapes). A script that
throws, overruns its time or memory, or gives a value too large to store fails the step with the
sandbox's reason as its error. No automatic retry: the same script on the same input fails the
same way; an instance retry runs it again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from baton.engine.operators.work import Leaf
from baton.engine.records import InputNotObject, OverLimit
from baton.expressions import is_whole_expression
from baton.scripting import ScriptFailed
from baton.status import StepStatus
from baton.steps import MAX_SCRIPT_CHARS, JqStep, ScriptStep

if TYPE_CHECKING:
    from baton.engine.operators.protocol import Decision
    from baton.steps import Step


def failure(language: str, e: ScriptFailed) -> str:
    """A sandbox failure as a step's error: what ran, what happened."""
    what = "the jq filter" if language == "jq" else "the script"
    said = str(e)
    if said.startswith(("the program", "the script", "the jq program")):
        return said.replace("the program", what, 1)
    if e.kind == "syntax":
        return f"{what} does not parse: {said}"
    if e.kind == "script" and language != "jq":
        return f"{what} threw {said}"
    return f"{what} failed: {said}"


class _Run(Leaf):
    language = ""

    def schedule(self, d: Decision, step: Step, scope: str) -> None:
        try:
            step_input = d.resolve_input(step, scope)
        except InputNotObject as e:
            d.fail(d.add_step(step, StepStatus.IN_PROGRESS, None, scope), str(e))
            return
        try:
            kept = d.stored(step_input, "STEP_INPUT")
        except OverLimit as big:
            d.fail(d.add_step(step, StepStatus.IN_PROGRESS, None, scope), f"its input {big}")
            return
        try:
            program = self.program(d, step, scope)
        except ProgramNotText as e:
            d.fail(d.add_step(step, StepStatus.IN_PROGRESS, kept, scope), str(e))
            return
        try:
            output = self.run(d, program, step_input)
        except ScriptFailed as e:
            d.changes.count("ScriptsFailed", Kind=e.kind)
            d.fail(d.add_step(step, StepStatus.IN_PROGRESS, kept, scope), failure(self.language, e))
            return
        new = d.add_step(step, StepStatus.IN_PROGRESS, kept, scope)
        d.complete(d.execution(new.id), output)

    def text(self, step: Step) -> str:
        raise NotImplementedError

    def program(self, d: Decision, step: Step, scope: str) -> str:
        """The program to run: the step's text, or, when that is exactly one ``${…}``, the text
        it gives now (neither JavaScript nor jq can start with ``${``: Conductor's INLINE
        expression and JSON_JQ_TRANSFORM queryExpression are input parameters, resolved before
        they run). The sandbox compiles it as any other, in its bounded cache."""
        text = self.text(step)
        if not is_whole_expression(text):
            return text
        what = "jq filter" if self.language == "jq" else "script"
        value = d.unref(d.resolve(text, f"step:{step.id}", scope))
        if not isinstance(value, str) or not value.strip():
            shown = "null" if value is None else type(value).__name__
            if isinstance(value, str):
                shown = "blank text"
            raise ProgramNotText(f"its {what} {text} gave {shown}, not a program to run")
        if len(value) > MAX_SCRIPT_CHARS:
            raise ProgramNotText(
                f"its {what} {text} gave {len(value)} characters, more than {MAX_SCRIPT_CHARS}"
            )
        return value

    def run(self, d: Decision, program: str, value: Any) -> dict[str, Any]:
        raise NotImplementedError


class ProgramNotText(ValueError):
    """A program given as ``${…}`` that resolved to no program text."""


class Script(_Run):
    language = "javascript"

    def text(self, step: Step) -> str:
        assert isinstance(step, ScriptStep)
        return step.script

    def run(self, d: Decision, program: str, value: Any) -> dict[str, Any]:
        return {"result": d.sandbox.javascript(program, d.unref(value))}


class Jq(_Run):
    language = "jq"

    def text(self, step: Step) -> str:
        assert isinstance(step, JqStep)
        return step.query

    def run(self, d: Decision, program: str, value: Any) -> dict[str, Any]:
        results = d.sandbox.jq(program, d.unref(value))
        return {"result": results[0] if results else None, "resultList": results}
