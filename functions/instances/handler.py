"""Instances API: start (one, or up to 100 in a batch), get (its steps and history a page at a
time), search, cancel, delete, retry, restart, pause, resume, user tasks, signals."""

from __future__ import annotations

from typing import Any

from baton.api import models as m
from baton.api.problems import from_error
from baton.engine.start_batch import StartAnswer, StartItem
from baton.errors import BatonError, Problem, ValidationFailed, listed
from baton_lambda import runtime
from baton_lambda.http import Api, RefusedItem

api = Api("instances")


@api.route("POST", "/v1/instances")
def start() -> Any:
    req = api.body(m.StartInstanceRequest)
    instance, created = api.engine().start_instance(
        definition_name=req.definition_name,
        definition_version=req.definition_version,
        definition=req.definition,
        input=_input(req),
        correlation_id=req.correlation_id,
        idempotency_key=req.idempotency_key,
    )
    api.log_keys(instance_id=instance["id"])
    api.logger.info("instance started" if created else "idempotent start repeated")
    return api.ok(
        instance, 201 if created else 200, {"Location": f"/v1/instances/{instance['id']}"}
    )


def _input(req: m.StartInstanceRequest) -> dict[str, Any] | None:
    """The start's input: as sent, or the WORKFLOW_INPUT payload uploaded at its path."""
    if req.input_payload_path is None:
        return req.input
    if req.input is not None:
        raise ValidationFailed(
            [Problem("inputPayloadPath", "give input or inputPayloadPath, not both")]
        )
    return runtime.payload_store(api.engine()).verify(
        req.input_payload_path, "WORKFLOW_INPUT", field="inputPayloadPath"
    )


@api.route("POST", "/v1/instances/batch")
def start_batch() -> Any:
    items: list[StartItem | BatonError] = []
    for r in api.body_items(m.StartInstancesRequest, "instances", m.StartInstanceRequest):
        if isinstance(r, RefusedItem):  # malformed: this item only, never its neighbours
            items.append(r.error)
            continue
        try:
            input = _input(r)
        except BatonError as e:  # a bad payload path, both inputs given: this item only
            items.append(e)
            continue
        items.append(
            StartItem(
                definition_name=r.definition_name,
                definition_version=r.definition_version,
                definition=r.definition,
                input=input,
                correlation_id=r.correlation_id,
                idempotency_key=r.idempotency_key,
            )
        )
    answers = api.engine().start_instances(items)
    results = [_outcome(k, a) for k, a in enumerate(answers)]
    started = sum(1 for a in answers if a.outcome == "STARTED")
    api.logger.info("batch started", extra={"items": len(answers), "started": started})
    return api.ok({"results": results})


def _outcome(index: int, answer: StartAnswer) -> dict[str, Any]:
    out: dict[str, Any] = {"index": index, "outcome": answer.outcome}
    if answer.instance is not None:
        out["instance"] = answer.instance
    if answer.error is not None:
        error = answer.error
        out["error"] = (
            listed(error.problems) if isinstance(error, ValidationFailed) else error.detail
        )
        out["problem"] = from_error(error)[1]
    return out


@api.route("POST", "/v1/payloads")
def create_payload() -> Any:
    req = api.body(m.CreatePayloadRequest)
    store = runtime.payload_store(api.engine())
    grant = store.grant_upload(req.kind, req.size_bytes, req.content_sha256)
    api.logger.info("payload upload granted", extra={"path": grant.path, "kind": req.kind})
    return api.ok(grant.as_dict(), 201)


@api.route("GET", "/v1/instances")
def search() -> Any:
    return api.ok(
        api.engine().search_instances(
            status=api.query("status"),
            definition_name=api.query("definitionName"),
            correlation_id=api.query("correlationId"),
            created_after=api.query("createdAfter"),
            created_before=api.query("createdBefore"),
            limit=api.query_int("limit", 20, high=100),
            page_token=api.query("pageToken"),
            archived=api.query_bool("archived", False),
            ended_from=api.query("from"),
            ended_to=api.query("to"),
        )
    )


@api.route("GET", "/v1/instances/{id}")
def get(id: str) -> Any:
    include_steps = api.query_bool("includeSteps", True)
    resolve = api.query_bool("resolvePayloads", False)
    engine = api.engine()
    instance = engine.get_instance(api.path(id), include_steps=include_steps)
    if engine.offload is not None:  # a bucket: offloaded fields get a URL (or, small, inlined)
        runtime.payload_store(engine).present(instance, resolve=resolve, reader=engine.payloads)
    return api.ok(instance)


@api.route("GET", "/v1/instances/{id}/steps")
def steps(id: str) -> Any:
    engine = api.engine()
    page = engine.list_steps(
        api.path(id),
        limit=api.query_int("limit", 100, high=1000),
        page_token=api.query("pageToken"),
    )
    if engine.offload is not None:  # offloaded inputs and outputs get a URL, as in the view
        runtime.payload_store(engine).present({"steps": page["steps"]})
    return api.ok(page)


@api.route("GET", "/v1/instances/{id}/history")
def history(id: str) -> Any:
    return api.ok(
        api.engine().history(
            api.path(id),
            limit=api.query_int("limit", 100, high=1000),
            page_token=api.query("pageToken"),
        )
    )


@api.route("POST", "/v1/instances/{id}/cancel")
def cancel(id: str) -> Any:
    req = api.body(m.CancelInstanceRequest)
    api.log_keys(instance_id=id)
    return api.ok(api.engine().cancel_instance(api.path(id), req.reason))


@api.route("POST", "/v1/instances/{id}/retry")
def retry(id: str) -> Any:
    api.body(m.InstanceOperationRequest)
    api.log_keys(instance_id=id)
    return api.ok(api.engine().retry_instance(api.path(id)))


@api.route("POST", "/v1/instances/{id}/rerun")
def rerun(id: str) -> Any:
    req = api.body(m.RerunInstanceRequest)
    api.log_keys(instance_id=id)
    return api.ok(
        api.engine().rerun_instance(
            api.path(id),
            from_step_execution=req.from_step_execution_id,
            input=req.input,
            step_input=req.step_input,
            correlation_id=req.correlation_id,
            at_join=req.at_join,
        )
    )


@api.route("POST", "/v1/instances/{id}/restart")
def restart(id: str) -> Any:
    req = api.body(m.RestartInstanceRequest)
    api.log_keys(instance_id=id)
    return api.ok(
        api.engine().restart_instance(api.path(id), use_latest_definition=req.use_latest_definition)
    )


@api.route("POST", "/v1/instances/{id}/pause")
def pause(id: str) -> Any:
    api.body(m.InstanceOperationRequest)
    api.log_keys(instance_id=id)
    return api.ok(api.engine().pause_instance(api.path(id)))


@api.route("POST", "/v1/instances/{id}/resume")
def resume(id: str) -> Any:
    api.body(m.InstanceOperationRequest)
    api.log_keys(instance_id=id)
    return api.ok(api.engine().resume_instance(api.path(id)))


@api.route("DELETE", "/v1/instances/{id}")
def delete(id: str) -> Any:
    api.log_keys(instance_id=id)
    return api.ok(api.engine().delete_instance(api.path(id)))


@api.route("POST", "/v1/instances/{id}/user-tasks/{stepId}/complete")
def complete_user_task(id: str, stepId: str) -> Any:
    req = api.body(m.CompleteUserTaskRequest)
    api.log_keys(instance_id=id)
    return api.ok(
        api.engine().complete_user_task(
            api.path(id),
            api.path(stepId),
            req.variables_to_set,
            step_execution_id=req.step_execution_id,
        )
    )


@api.route("POST", "/v1/instances/{id}/signals/{stepId}")
def signal(id: str, stepId: str) -> Any:
    req = api.body(m.SignalRequest)
    api.log_keys(instance_id=id)
    return api.ok(
        api.engine().signal(
            api.path(id), api.path(stepId), req.payload, step_execution_id=req.step_execution_id
        )
    )


handler = api.handler()
