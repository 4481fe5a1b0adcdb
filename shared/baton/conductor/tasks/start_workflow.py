"""START_WORKFLOW ⇄ START_WORKFLOW: ``inputParameters.startWorkflow`` (Conductor's
StartWorkflowRequest: ``name``, ``version``, ``input``, ``correlationId``…, or one ``${…}``
giving one) is the step's ``request``; the inputParameters are its input, as Conductor shows
them. ``idempotencyKey``/``idempotencyStrategy``, ``taskToDomain`` and ``priority`` are accepted
and unused (Conductor OSS's START_WORKFLOW does not use the idempotency key either); an inline
``workflowDef`` is refused."""

from __future__ import annotations

from typing import Any

from baton.conductor.tasks.common import WHOLE, base, fail, label, params_out, task_input


def to_step(task: dict[str, Any], path: str) -> dict[str, Any]:
    where = label(task, path)
    step = base(task, path)
    params = task_input(task, path)
    request = params.get("startWorkflow")
    if isinstance(request, str) and WHOLE.match(request):
        pass
    elif isinstance(request, dict):
        if request.get("workflowDef") is not None:
            raise fail(
                where,
                "startWorkflow.workflowDef: Baton starts a registered definition only; "
                "register it and give its name",
            )
        if not isinstance(request.get("name"), str) or not request["name"]:
            raise fail(where, "startWorkflow needs the name of the workflow to start")
    else:
        raise fail(
            where,
            "inputParameters.startWorkflow must be an object ({name, version, input, "
            "correlationId}) or one ${…} expression giving one",
        )
    step.update(type="START_WORKFLOW", request=request, input=params)
    return step


def back(s: dict[str, Any], task: dict[str, Any]) -> list[dict[str, Any]]:
    task["type"] = "START_WORKFLOW"
    if "startWorkflow" not in task["inputParameters"]:
        request = params_out(s["request"])
        if isinstance(request, dict) and "definitionName" in request:
            request = {"name": request.pop("definitionName"), **request}
        task["inputParameters"] = {**task["inputParameters"], "startWorkflow": request}
    return [task]
