"""Definitions API: workflow definitions, task definitions, and the OpenAPI document."""

from __future__ import annotations

from typing import Any

from baton.api.openapi import document
from baton.errors import Problem, ValidationFailed
from baton_lambda.http import Api

api = Api("definitions")


@api.route("GET", "/v1/openapi.json")
def openapi() -> Any:
    return api.ok(document())


@api.route("POST", "/v1/definitions")
def register() -> Any:
    from baton.api.problems import parse_json_body

    created = api.engine().register_definition(parse_json_body(api.raw_body()))
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
    try:
        number = int(version)
    except ValueError:
        raise ValidationFailed([Problem("version", f"{version!r} is not an integer")]) from None
    return api.ok(api.engine().get_definition(api.path(name), number))


@api.route("GET", "/v1/taskdefs")
def list_task_defs() -> Any:
    return api.ok(
        api.engine().list_task_defs(
            limit=api.query_int("limit", 50, high=100), page_token=api.query("pageToken")
        )
    )


@api.route("PUT", "/v1/taskdefs/{name}")
def put_task_def(name: str) -> Any:
    from baton.api.problems import parse_json_body

    body, created = api.engine().put_task_def(api.path(name), parse_json_body(api.raw_body()))
    return api.ok(body, 201 if created else 200)


@api.route("GET", "/v1/taskdefs/{name}")
def get_task_def(name: str) -> Any:
    return api.ok(api.engine().get_task_def(api.path(name)))


handler = api.handler()
