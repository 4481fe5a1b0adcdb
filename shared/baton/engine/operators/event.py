"""EVENT: a message the engine publishes, outside the decision. Scheduling resolves the step's
``sink`` and input and creates a job of the reserved type ``baton:event``, as an HTTP step creates
one of ``baton:http``; the system-tasks function claims it and publishes the message
(``engine.event_sink``), so its retries, timeouts and audit trail are a SERVICE_TASK's. The job's
input is the step's resolved input with, under ``baton:event``, the sink and the instance's
fields the message carries; the step shows its input with the resolved ``sink``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from baton.engine.operators.work import ServiceTask
from baton.httpcall import EVENT_JOB_TYPE, EVENT_KEY
from baton.sinks import OWN_QUEUE, own_queue, parse_sink
from baton.steps import EventStep

if TYPE_CHECKING:
    from baton.engine.operators.protocol import Decision
    from baton.steps import Step


class Event(ServiceTask):
    def job_type(self, d: Decision, step: Step, scope: str) -> str:
        return EVENT_JOB_TYPE

    def own_input(self, d: Decision, step: Step, scope: str, record: dict[str, Any]) -> Any:
        assert isinstance(step, EventStep)
        own = d.resolve_input(step, scope, record)
        sink = d.resolve(step.sink, f"step:{step.id}", scope)
        parse_sink(sink)  # ValueError (the step fails saying why) for one it cannot publish to
        inst = d.instance
        if sink == OWN_QUEUE:
            sink = f"{OWN_QUEUE}:{own_queue(inst.definition_name, step.id)}"
        fields = {
            "sink": sink,
            "workflowInstanceId": str(inst.id),
            "workflowType": inst.definition_name,
            "correlationId": inst.correlation_id,
        }
        return {**own, EVENT_KEY: fields}

    def shown_input(self, step_input: Any) -> Any:
        if not isinstance(step_input, dict) or EVENT_KEY not in step_input:
            return step_input
        shown = {k: v for k, v in step_input.items() if k != EVENT_KEY}
        return {**shown, "sink": step_input[EVENT_KEY]["sink"]}
