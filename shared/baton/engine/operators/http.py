"""HTTP: a call the engine makes, outside the decision. Scheduling resolves the step's ``request``
and creates a job of the reserved type ``baton:http`` (``baton:http:<task definition>`` when its
task definition sets limits: :func:`http_job_type`), as a SERVICE_TASK creates one for its
workers; the system-tasks function claims these jobs with the same claim as any worker and
completes or fails them through the same calls (``engine.system_tasks``), so leases, retries,
timeouts and the audit trail are a SERVICE_TASK's. The job's input is the step's resolved
``input`` with the resolved request under ``request`` (an HTTP_POLL's also how to poll, under
``baton:poll``); the step execution stores and shows it with the values of sensitive headers
(Authorization, Cookie, API keys, tokens…) redacted, and without how to poll."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from baton.engine.operators.work import ServiceTask
from baton.engine.plan import http_task_def_name
from baton.engine.records import InputNotObject
from baton.httpcall import HTTP_JOB_TYPE, POLL_KEY, redacted_input
from baton.steps import HttpCall, HttpPollStep

if TYPE_CHECKING:
    from baton.engine.operators.protocol import Decision
    from baton.steps import Step


class Http(ServiceTask):
    def job_type(self, d: Decision, step: Step, scope: str) -> str:
        assert isinstance(step, HttpCall)
        return http_job_type(step)

    def own_input(self, d: Decision, step: Step, scope: str, record: dict[str, Any]) -> Any:
        assert isinstance(step, HttpCall)
        own = d.resolve_input(step, scope, record)
        request = d.unref(d.resolve(step.request, f"step:{step.id}", scope))
        if not isinstance(request, dict):
            kind = "null" if request is None else type(request).__name__
            raise InputNotObject(f"its request resolved to {kind}, not an object")
        if isinstance(step, HttpPollStep):
            # How the system-tasks function polls (``baton.engine.http_poll``).
            poll = {
                "terminationCondition": step.termination_condition,
                "intervalSeconds": step.polling_interval_seconds,
                "strategy": step.polling_strategy,
                "maxPollCount": step.max_poll_count,
            }
            return {**own, "request": request, POLL_KEY: poll}
        return {**own, "request": request}

    def shown_input(self, step_input: Any) -> Any:
        # Credentials in headers are sent, never stored with the step nor shown (its input,
        # history, Conductor's inputData); the job alone keeps them, to make the call.
        shown = redacted_input(step_input)
        if isinstance(shown, dict) and POLL_KEY in shown:
            shown = {k: v for k, v in shown.items() if k != POLL_KEY}
        return shown


def http_job_type(step: HttpCall) -> str:
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
