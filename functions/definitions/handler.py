"""Definitions API: workflow definitions, task definitions, the OpenAPI document and liveness."""

from __future__ import annotations

from typing import Any

from baton.api.openapi import document
from baton.engine.health import BucketProbe, health
from baton.engine.payloads import limits_view
from baton.model import INT32_MAX
from baton_lambda import runtime
from baton_lambda.http import Api

api = Api("definitions")


@api.route("GET", "/v1/openapi.json")
def openapi() -> Any:
    return api.ok(document())


@api.route("GET", "/v1/health")
def liveness() -> Any:
    settings = runtime.settings()
    bucket = settings.payload_bucket
    probe = BucketProbe(bucket, settings.s3_endpoint) if bucket else None
    status, body = health(api.engine().db, probe)
    headers = {"Cache-Control": "no-store"}
    if status == 503:
        headers["Retry-After"] = "5"
    return api.ok(body, status, headers)


@api.route("GET", "/v1/config")
def config() -> Any:
    return api.ok(limits_view(api.engine().settings.payload_limits))


@api.route("POST", "/v1/definitions")
def register() -> Any:
    created = api.engine().register_definition(api.json())
    location = f"/v1/definitions/{created['name']}/versions/{created['version']}"
    return api.ok(created, 201, {"Location": location})


@api.route("GET", "/v1/definitions")
def list_definitions() -> Any:
    return api.ok(
        api.engine().list_definitions(
            limit=api.query_int("limit", 50, high=100), page_token=api.query("pageToken")
        )
    )


@api.route("GET", "/v1/definitions/{name}")
def latest(name: str) -> Any:
    return api.ok(api.engine().get_definition(api.path(name)))


@api.route("GET", "/v1/definitions/{name}/versions/{version}")
def one_version(name: str, version: str) -> Any:
    number = api.path_int(version, "version", high=INT32_MAX)
    return api.ok(api.engine().get_definition(api.path(name), number))


@api.route("DELETE", "/v1/definitions/{name}/versions/{version}")
def delete_version(name: str, version: str) -> Any:
    number = api.path_int(version, "version", high=INT32_MAX)
    return api.ok(api.engine().delete_definition(api.path(name), number))


@api.route("GET", "/v1/taskdefs")
def list_task_defs() -> Any:
    return api.ok(
        api.engine().list_task_defs(
            limit=api.query_int("limit", 50, high=100), page_token=api.query("pageToken")
        )
    )


@api.route("PUT", "/v1/taskdefs/{name}")
def put_task_def(name: str) -> Any:
    body, created = api.engine().put_task_def(api.path(name), api.json())
    return api.ok(body, 201 if created else 200)


@api.route("GET", "/v1/taskdefs/{name}")
def get_task_def(name: str) -> Any:
    return api.ok(api.engine().get_task_def(api.path(name)))


@api.route("DELETE", "/v1/taskdefs/{name}")
def delete_task_def(name: str) -> Any:
    return api.ok(api.engine().delete_task_def(api.path(name)))


handler = api.handler()
