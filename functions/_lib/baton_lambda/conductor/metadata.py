"""Conductor's metadata routes: task definitions and workflow definitions, translated to and
from Baton's (``baton.conductor.definitions``); a workflow definition reads back exactly as it
was registered."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from baton.conductor import definitions as cdefs
from baton.errors import BatonError, Conflict, Problem, ValidationFailed

from baton_lambda.conductor.common import Routes, empty_answer, json_answer
from baton_lambda.http import Api


class MetadataRoutes(Routes):
    def __init__(self, api: Api) -> None:
        super().__init__(api)
        self.route("POST", "/api/metadata/taskdefs", self.register_task_defs)
        self.route("PUT", "/api/metadata/taskdefs", self.update_task_def)
        self.route("GET", "/api/metadata/taskdefs", self.all_task_defs)
        self.route("GET", "/api/metadata/taskdefs/{name}", self.get_task_def)
        self.route("DELETE", "/api/metadata/taskdefs/{name}", self.delete_task_def)
        self.route("POST", "/api/metadata/workflow", self.register_workflow)
        self.route("PUT", "/api/metadata/workflow", self.update_workflows)
        self.route("GET", "/api/metadata/workflow", self.all_workflows)
        self.route("GET", "/api/metadata/workflow/{name}", self.get_workflow_def)
        self.route("DELETE", "/api/metadata/workflow/{name}/{version}", self.delete_workflow_def)

    # --- task definitions --------------------------------------------------------------------

    def _put_task_def(self, raw: dict[str, Any]) -> None:
        body = cdefs.to_baton_task_def(raw)
        name = body.get("name")
        if not isinstance(name, str) or not name:
            raise ValidationFailed([Problem("name", "a task definition needs a name")])
        self.api.engine().put_task_def(name, body)

    def register_task_defs(self) -> Any:
        for raw in self.list_body():
            self._put_task_def(raw)
        return empty_answer()

    def update_task_def(self) -> Any:
        self._put_task_def(self.object_body())
        return empty_answer()

    def all_task_defs(self) -> Any:
        engine = self.api.engine()
        pages = _every(lambda t: engine.list_task_defs(limit=100, page_token=t))
        return json_answer(
            [cdefs.to_conductor_task_def(d) for p in pages for d in p.get("taskDefs", [])]
        )

    def get_task_def(self, name: str) -> Any:
        found = self.api.engine().get_task_def(self.api.path(name))
        return json_answer(cdefs.to_conductor_task_def(found))

    def delete_task_def(self, name: str) -> Any:
        self.api.engine().delete_task_def(self.api.path(name))
        return empty_answer()

    # --- workflow definitions ----------------------------------------------------------------

    def _register_workflow(self, raw: dict[str, Any], overwrite: bool) -> dict[str, Any]:
        body = cdefs.to_baton_workflow(raw)
        engine = self.api.engine()
        version = body.get("version")
        if version is not None:
            try:
                existing = engine.get_definition(body["name"], version)
            except BatonError:
                existing = None
            if existing is not None:
                if not overwrite:
                    raise Conflict(f"workflow {body['name']} version {version} already exists")
                engine.delete_definition(body["name"], version)
        return engine.register_definition(body, conductor=raw)

    def register_workflow(self) -> Any:
        self._register_workflow(self.object_body(), self.query_bool("overwrite", False))
        return empty_answer()

    def update_workflows(self) -> Any:
        for raw in self.list_body():
            self._register_workflow(raw, self.query_bool("overwrite", True))
        return json_answer({"bulkSuccessfulResults": [], "bulkErrorResults": {}})

    def all_workflows(self) -> Any:
        engine = self.api.engine()
        pages = _every(lambda t: engine.list_definition_sources(limit=100, page_token=t))
        return json_answer(
            [
                cdefs.read_back(d["definition"], d["conductor"])
                for p in pages
                for d in p.get("definitions", [])
            ]
        )

    def get_workflow_def(self, name: str) -> Any:
        version = self.version(self.api.query("version"))
        source = self.api.engine().get_definition_source(self.api.path(name), version)
        return json_answer(cdefs.read_back(*source))

    def delete_workflow_def(self, name: str, version: str) -> Any:
        v = self.version(version)
        assert v is not None
        self.api.engine().delete_definition(self.api.path(name), v)
        return empty_answer()


def _every(fetch: Callable[[str | None], dict[str, Any]]) -> list[dict[str, Any]]:
    """Every page ``fetch(token)`` serves, following ``nextPageToken``."""
    pages = [fetch(None)]
    while token := pages[-1].get("nextPageToken"):
        pages.append(fetch(token))
    return pages
