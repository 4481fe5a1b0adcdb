"""Queues API: push, stats, peek, purge, direct consumption (dequeue, ack, nack), listing queues
and their tasks, and redriving dead letters."""

from __future__ import annotations

from typing import Any

from baton.api import models as m
from baton_lambda import runtime
from baton_lambda.http import Api

api = Api("queues")


def _queues() -> Any:
    return runtime.queues(api.engine())


@api.route("POST", "/v1/queues/{name}/push")
def push(name: str) -> Any:
    req = api.body(m.PushRequest)
    queues = _queues()
    pushed = queues.push(api.path(name), req.title, req.body, req.priority, req.max_retries)
    api.log_keys(queue_task_id=pushed["id"])
    # Nudge the queue's triggers now, so a triggered workflow does not wait a whole tick.
    runtime.queue_triggers(api.engine()).dispatch(api.path(name), nudged=True)
    return api.ok(pushed, 201)


@api.route("GET", "/v1/queues/{name}/stats")
def stats(name: str) -> Any:
    return api.ok(_queues().stats(api.path(name)))


@api.route("GET", "/v1/queues/{name}/peek")
def peek(name: str) -> Any:
    return api.ok(_queues().peek(api.path(name), api.query_int("limit", 10, high=100)))


@api.route("DELETE", "/v1/queues/{name}")
def purge(name: str) -> Any:
    return api.ok(_queues().purge(api.path(name)))


@api.route("GET", "/v1/queues")
def list_queues() -> Any:
    return api.ok(
        _queues().list_queues(
            limit=api.query_int("limit", 50, high=100), page_token=api.query("pageToken")
        )
    )


@api.route("GET", "/v1/queues/{name}/tasks")
def list_tasks(name: str) -> Any:
    return api.ok(
        _queues().list_tasks(
            api.path(name),
            status=api.query("status"),
            limit=api.query_int("limit", 50, high=100),
            page_token=api.query("pageToken"),
        )
    )


@api.route("POST", "/v1/queues/{name}/redrive")
def redrive(name: str) -> Any:
    req = api.body(m.RedriveRequest)
    result = _queues().redrive(api.path(name), req.task_ids)
    if result["redriven"]:
        # Redriven tasks are pending again: let the queue's triggers take them now.
        runtime.queue_triggers(api.engine()).dispatch(api.path(name), nudged=True)
    return api.ok(result)


@api.route("POST", "/v1/queues/{name}/dequeue")
def dequeue(name: str) -> Any:
    req = api.body(m.DequeueRequest)
    tasks = _queues().dequeue(
        api.path(name),
        req.consumer_id,
        visibility_timeout_secs=req.visibility_timeout_secs,
        max_tasks=req.max_tasks,
    )
    return api.ok({"tasks": tasks})


@api.route("POST", "/v1/queues/{name}/tasks/{taskId}/ack")
def ack(name: str, taskId: str) -> Any:
    req = api.body(m.AckRequest)
    return api.ok(_queues().ack(api.path(name), api.path(taskId), req.receipt))


@api.route("POST", "/v1/queues/{name}/tasks/{taskId}/nack")
def nack(name: str, taskId: str) -> Any:
    req = api.body(m.NackRequest)
    result = _queues().nack(api.path(name), api.path(taskId), req.receipt, req.error, req.retryable)
    return api.ok(result)


handler = api.handler()
