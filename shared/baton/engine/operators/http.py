"""HTTP: a call the engine makes, outside the decision. Scheduling resolves the step's ``request``
and creates a job of the reserved type ``baton:http`` (``baton:http:<task definition>`` when its
task definition sets limits: :func:`http_job_type`), as a SERVICE_TASK creates one for its
workers; the system-tasks function claims these jobs with the same claim as any worker and
completes or fails them through the same calls (``engine.system_tasks``), so leases, retries,
timeouts and the audit trail are a SERVICE_TASK's. The job's input is the step's resolved
``input`` with the resolved request under ``request``; the step execution stores and shows it
with the values of sensitive headers (Authorization, Cookie, API keys, tokens…) redacted."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from baton.engine.operators.work import ServiceTask
from baton.engine.plan import http_task_def_name
from baton.engine.records import InputNotObject
from baton.httpcall import HTTP_JOB_TYPE, redacted_input
from baton.steps import HttpStep

if TYPE_CHECKING:
    from baton.engine.operators.protocol import Decision
    from baton.steps import Step


class Http(ServiceTask):
    def job_type(self, d: Decision, step: Step, scope: str) -> str:
        assert isinstance(step, HttpStep)
        return http_job_type(step)

    def own_input(self, d: Decision, step: Step, scope: str, record: dict[str, Any]) -> Any:
        assert isinstance(step, HttpStep)
        own = d.resolve_input(step, scope, record)
        request = d.unref(d.resolve(step.request, f"step:{step.id}", scope))
        if not isinstance(request, dict):
            kind = "null" if request is None else type(request).__name__
            raise InputNotObject(f"its request resolved to {kind}, not an object")
        return {**own, "request": request}

    def shown_input(self, step_input: Any) -> Any:
        # Credentials in headers are sent, never stored with the step nor shown (its input,
        # history, Conductor's inputData); the job alone keeps them, to make the call.
        return redacted_input(step_input)


def http_job_type(step: HttpStep) -> str:
    """The job type of an HTTP step's calls: ``baton:http``, or ``baton:http:<task definition>``
    when its task definition limits them (``concurrentExecLimit``, ``rateLimitPerFrequency``),
    so that the system tasks' claim counts them against those limits as a worker's claim counts
    its job type's (the type's limit row follows the task definition: ``engine.definition_ops``)."""
    td = step.task_def
    if td is not None and (
        td.concurrent_exec_limit is not None or td.rate_limit_per_frequency is not None
    ):
        return f"{HTTP_JOB_TYPE}:{http_task_def_name(step.name, step.id)}"
    return HTTP_JOB_TYPE
