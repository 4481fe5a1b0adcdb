"""The ``conductor`` definition dialect (:mod:`baton.dialects`): a Conductor WorkflowDef met at
run time (a SUB_WORKFLOW's ``workflowDefinition`` given as ``${…}``) is translated as one
registered on ``/api`` is. Registered where functions start up; the translator modules load at
the first such definition, not at every cold start."""

from __future__ import annotations

from typing import Any

from baton import dialects


def _to_baton(document: Any) -> dict[str, Any]:
    from baton.conductor.definitions import to_baton_workflow

    return to_baton_workflow(document)


def register() -> None:
    """Let this process's engine read Conductor WorkflowDefs met at run time."""
    dialects.register("conductor", _to_baton)
