"""Conductor's workflow routes: start (by request or by name, with the definition's
``inputTemplate`` defaults), synchronous execution, get, status, search, terminate, pause,
resume, retry, restart and remove, each of those five in bulk, and the decider (a no-op)."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime
from typing import Any

from baton.conductor import definitions as cdefs
from baton.conductor import sync as csync
from baton.conductor import views as cviews
from baton.engine.long_poll import MAX_INSTANCE_WAIT_SECONDS, wait_for_instance
from baton.errors import BatonError, Conflict, Problem, ValidationFailed
from baton.store import conductor_sql

from baton_lambda.conductor.common import (
    MAX_TIMEOUT_MS,
    Routes,
    empty_answer,
    for_conductor,
    json_answer,
    text_answer,
)
from baton_lambda.http import Api

# Conductor's bulk operations take at most this many workflows.
MAX_BULK = 1000


class WorkflowRoutes(Routes):
    def __init__(self, api: Api) -> None:
        super().__init__(api)
        self.route("POST", "/api/workflow", self.start)
        self.route("POST", "/api/workflow/execute/{name}/{version}", self.execute)
        self.route("GET", "/api/workflow/search", self.search)
        for method, action in (
            ("PUT", "pause"),
            ("PUT", "resume"),
            ("POST", "retry"),
            ("POST", "restart"),
            ("POST", "terminate"),
        ):
            self.route(method, f"/api/workflow/bulk/{action}", self._bulk(action))
        self.route("PUT", "/api/workflow/decide/{workflow}", self.decide)
        self.route("POST", "/api/workflow/{workflow}", self.start_by_name)
        self.route("GET", "/api/workflow/{workflow}/correlated/{correlationId}", self.correlated)
        self.route("GET", "/api/workflow/{workflow}", self.get_workflow)
        self.route("GET", "/api/workflow/{workflow}/status", self.workflow_status)
        self.route("DELETE", "/api/workflow/{workflow}", self.terminate)
        self.route("PUT", "/api/workflow/{workflow}/pause", self.pause)
        self.route("PUT", "/api/workflow/{workflow}/resume", self.resume)
        self.route("POST", "/api/workflow/{workflow}/retry", self.retry)
        self.route("POST", "/api/workflow/{workflow}/restart", self.restart)
        self.route("POST", "/api/workflow/{workflow}/rerun", self.rerun)
        self.route("DELETE", "/api/workflow/{workflow}/remove", self.remove)

    # --- starting ----------------------------------------------------------------------------

    def _start(
        self,
        *,
        name: str | None,
        version: Any,
        input: Any,
        correlation_id: Any,
        inline: Any = None,
        idempotency_key: Any = None,
    ) -> str:
        """Start a workflow as Conductor's start calls ask; its id."""
        if input is not None and not isinstance(input, dict):
            raise ValidationFailed([Problem("input", "must be an object")])
        definition = cdefs.to_baton_workflow(inline) if isinstance(inline, dict) else None
        if definition is None and not (isinstance(name, str) and name):
            raise ValidationFailed([Problem("name", "give a workflow name or a workflowDef")])
        if version is not None and not isinstance(version, int):
            raise ValidationFailed([Problem("version", "must be a whole number")])
        wanted = version if isinstance(version, int) and version > 0 else None
        instance, _ = self.api.engine().start_instance(
            definition_name=None if definition is not None else name,
            definition_version=wanted,
            definition=definition,
            input=self._with_defaults(input or {}, inline, name, wanted),
            correlation_id=correlation_id if isinstance(correlation_id, str) else None,
            idempotency_key=idempotency_key if isinstance(idempotency_key, str) else None,
            conductor_source=inline if definition is not None else None,
        )
        self.api.log_keys(instance_id=instance["id"])
        return str(instance["id"])

    def _with_defaults(
        self, given: dict[str, Any], inline: Any, name: str | None, version: int | None
    ) -> dict[str, Any]:
        """The input with the definition's ``inputTemplate`` defaults under it (given keys win),
        as Conductor starts a workflow. The template is read from the definition as
        registered."""
        source = inline
        if not isinstance(inline, dict) and isinstance(name, str) and name:
            try:
                source = self.api.engine().get_definition_source(name, version)[1]
            except BatonError:
                return given  # the start answers the missing definition itself
        template = source.get("inputTemplate") if isinstance(source, dict) else None
        return {**template, **given} if isinstance(template, dict) and template else given

    def start(self) -> Any:
        req = self.object_body()
        return text_answer(
            self._start(
                name=req.get("name"),
                version=req.get("version"),
                input=req.get("input"),
                correlation_id=req.get("correlationId"),
                inline=req.get("workflowDef"),
                idempotency_key=req.get("idempotencyKey"),
            )
        )

    def start_by_name(self, workflow: str) -> Any:
        api = self.api
        return text_answer(
            self._start(
                name=api.path(workflow),
                version=self.version(api.query("version")),
                input=api.json(),
                correlation_id=api.query("correlationId"),
            )
        )

    def execute(self, name: str, version: str) -> Any:
        # Conductor's WorkflowResourceSync: the path's name and version win over the body's (a
        # StartWorkflowRequest); version 0 is the latest. Clients send waitForSeconds up to 30
        # (conductor-python's workflow client's default): it is cut to 25 s, not refused.
        api = self.api
        req = self.object_body()
        wait = min(
            self.query_int("waitForSeconds", csync.DEFAULT_WAIT_SECONDS, 0, MAX_TIMEOUT_MS),
            MAX_INSTANCE_WAIT_SECONDS,
        )
        refs = csync.task_refs(api.query("waitUntilTaskRef"))
        wid = self._start(
            name=api.path(name),
            version=self.version(version, low=0),
            input=req.get("input"),
            correlation_id=req.get("correlationId"),
            inline=req.get("workflowDef"),  # ConductorWorkflow.execute sends its definition
            idempotency_key=req.get("idempotencyKey"),
        )
        engine = api.engine()
        instance = wait_for_instance(
            lambda: engine.get_instance(wid, conductor_view=True),
            lambda i: csync.reached(i, refs),
            wid,
            wait,
            engine.wakeups,
            gone=api.client_gone(),
        )
        instance = for_conductor(engine, instance)
        run = csync.workflow_run(instance, engine.audit_trail(wid), api.query("requestId"))
        return json_answer(run)

    # --- reading -----------------------------------------------------------------------------

    def search(self) -> Any:
        """Conductor's workflow search: ``query`` (conditions joined by AND: ``field = v``,
        ``field IN (a,b)``, ``field > v``, ``field < v``, a ``*`` in a value matching anything;
        fields workflowId, correlationId, workflowType, status, startTime, endTime, updateTime
        (epoch ms), parentWorkflowId), ``freeText`` (an id or a correlation id; ``*``: any),
        ``sort`` (``field:ASC|DESC``, repeatable), ``start`` and ``size`` (at most 100)."""
        api = self.api
        size = self.query_int("size", 100, 1, 100)
        # Conductor's server form-decodes queries: a "+" is a space.
        query = (api.query("query") or "").replace("+", " ")
        conditions = [c for clause in re.split(r"\s+AND\s+", query) for c in _condition(clause)]
        sort = [_order(s) for s in api.query_all("sort") for s in s.split(",") if s.strip()]
        free = (api.query("freeText") or "").strip()
        total, found = api.engine().search_for_conductor(
            conditions=conditions,
            free_text=None if free in ("", "*") else free,
            start=self.query_int("start", 0, 0, 10_000),
            size=size,
            sort=sort,
        )
        return json_answer({"totalHits": total, "results": [cviews.summary(i) for i in found]})

    def correlated(self, workflow: str, correlationId: str) -> Any:
        page = self.api.engine().search_instances(
            definition_name=self.api.path(workflow),
            correlation_id=self.api.path(correlationId),
            limit=100,
        )
        found = page.get("instances", [])
        return json_answer([cviews.workflow(i, include_tasks=False) for i in found])

    def get_workflow(self, workflow: str) -> Any:
        engine = self.api.engine()
        wid = self.api.path(workflow)
        include = self.query_bool("includeTasks", True)
        instance = for_conductor(engine, engine.get_instance(wid, conductor_view=True))
        # A failed workflow's reason names its task as the tasks show it, from the history.
        failed = instance["status"] in ("FAILED", "TIMED_OUT")
        audit = engine.audit_trail(wid) if include or failed else None
        return json_answer(cviews.workflow(instance, audit, include_tasks=include))

    def workflow_status(self, workflow: str) -> Any:
        i = self.api.engine().get_instance(self.api.path(workflow))
        body: dict[str, Any] = {
            "workflowId": i["id"],
            "correlationId": i.get("correlationId"),
            "status": cviews.workflow_status(i["status"]),
        }
        if self.query_bool("includeOutput", False):
            body["output"] = i.get("output") or {}
        if self.query_bool("includeVariables", False):
            body["variables"] = i.get("variables") or {}
        return json_answer({k: v for k, v in body.items() if v is not None})

    # --- acting ------------------------------------------------------------------------------

    def terminate(self, workflow: str) -> Any:
        engine = self.api.engine()
        wid = self.api.path(workflow)
        instance = engine.get_instance(wid)
        if instance["status"] in ("RUNNING", "PAUSED"):
            # The client form-encodes this query (a space is "+"), as Conductor's server
            # decodes it.
            reason = self.api.query("reason")
            engine.cancel_instance(wid, reason.replace("+", " ") if reason else None)
        return empty_answer()

    def pause(self, workflow: str) -> Any:
        self.api.engine().pause_instance(self.api.path(workflow))
        return empty_answer()

    def resume(self, workflow: str) -> Any:
        self.api.engine().resume_instance(self.api.path(workflow))
        return empty_answer()

    def retry(self, workflow: str) -> Any:
        """Retry an ended workflow; ``resumeSubworkflowTasks=true`` retries, in its place, the
        sub-workflow its first unsuccessful task waited on (and that one's, down the chain),
        and its parents wait on it again, as Conductor does; without it a failed SUB_WORKFLOW
        task starts a new child."""
        engine = self.api.engine()
        wid = self.api.path(workflow)
        if self.query_bool("resumeSubworkflowTasks", False):
            wid = self._last_failed_child(wid)
        engine.retry_instance(wid)
        return empty_answer()

    def _last_failed_child(self, wid: str) -> str:
        """The workflow whose first unsuccessful task is not a SUB_WORKFLOW, going down from
        ``wid`` through each first unsuccessful SUB_WORKFLOW task's child (Conductor's
        findLastFailedSubWorkflowIfAny)."""
        engine = self.api.engine()
        seen = {wid}
        while True:
            steps = engine.get_instance(wid)["steps"]
            # Conductor's tasks: an operator's own execution (a fork, a loop) is no task there.
            first = next(
                (
                    s
                    for s in steps
                    if s["status"] in ("FAILED", "TIMED_OUT", "CANCELLED")
                    and s["type"] not in ("PARALLEL", "MAP", "DO_WHILE", "SWITCH")
                ),
                None,
            )
            child = first.get("childInstanceId") if first is not None else None
            if first is None or first["type"] != "SUB_WORKFLOW" or not child or child in seen:
                return wid
            seen.add(child)
            wid = child

    def restart(self, workflow: str) -> Any:
        latest = self.query_bool("useLatestDefinitions", False)
        self.api.engine().restart_instance(self.api.path(workflow), use_latest_definition=latest)
        return empty_answer()

    def rerun(self, workflow: str) -> Any:
        """Conductor's rerun (a RerunWorkflowRequest): an ended workflow runs again from the
        task ``reRunFromTaskId`` names, in it or in one of its sub-workflows (that one runs
        again, and its parents with it), with ``taskInput`` as that task's input; without a
        task, from its start. ``workflowInput`` and ``correlationId`` replace the workflow's
        (not a parent's, when the task is in a sub-workflow: its parents wait on it again as
        they were). The path's workflow is the one rerun, as in Conductor
        (``reRunFromWorkflowId`` is ignored). Answers the workflow's id."""
        req = self.object_body()
        wid = self.api.path(workflow)
        fields: dict[str, Any] = {}
        for key in ("workflowInput", "taskInput"):
            value = req.get(key)
            if value is not None and not isinstance(value, dict):
                raise ValidationFailed([Problem(key, "must be an object")])
            fields[key] = value
        correlation_id = req.get("correlationId")
        if correlation_id is not None and not isinstance(correlation_id, str):
            raise ValidationFailed([Problem("correlationId", "must be a string")])
        task = req.get("reRunFromTaskId")
        if task is not None and not isinstance(task, str):
            raise ValidationFailed([Problem("reRunFromTaskId", "must be a string")])
        engine = self.api.engine()
        status = engine.get_instance(wid, include_steps=False)["status"]
        if status in ("RUNNING", "PAUSED"):
            # Conductor refuses a workflow still running before it looks for the task.
            raise Conflict(f"workflow {wid} is {status}; only an ended workflow can be rerun")
        if not task:
            engine.rerun_instance(wid, input=fields["workflowInput"], correlation_id=correlation_id)
            return text_answer(wid)
        where, at_join = self._rerun_target(wid, task)
        owner, execution = where
        self.api.log_keys(instance_id=owner)
        engine.rerun_instance(
            owner,
            from_step_execution=execution,
            # The workflow's own input and correlation id are the path's workflow's.
            input=fields["workflowInput"] if owner == wid else None,
            step_input=fields["taskInput"],
            correlation_id=correlation_id if owner == wid else None,
            at_join=at_join,
        )
        return text_answer(wid)

    def _rerun_target(self, wid: str, task: str) -> tuple[tuple[str, str], bool]:
        """(workflow, step execution) of the task a rerun names, and whether it is a JOIN (the
        fork's execution then rejoins its branches as they ended)."""
        engine = self.api.engine()
        key, _ = cviews.parse_task_id(task)
        found = engine.find_execution(wid, key)
        if found is not None:
            return found, False
        for owner, fork in engine.forks_of(wid):
            if cviews.join_task_id(fork) == task:
                return (owner, fork), True
        raise ValidationFailed(
            [
                Problem(
                    "reRunFromTaskId",
                    f"Task {task} not found in workflow {wid} or its sub-workflows",
                )
            ]
        )

    def decide(self, workflow: str) -> Any:
        """Conductor's runDecider: Baton decides as each event lands, so there is nothing to
        run; the workflow must exist."""
        self.api.engine().get_instance(self.api.path(workflow), include_steps=False)
        return empty_answer()

    def _bulk(self, action: str) -> Any:
        """Conductor's bulk operation ``action`` over a list of workflow ids (at most 1000, as
        Conductor's): a BulkResponse of the ids it succeeded for and, by id, why it did not
        for the others (each id is its own operation, as in Conductor)."""

        def view() -> Any:
            ids = self.api.json()
            if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
                raise ValidationFailed([Problem("$", "the request body must be a list of ids")])
            if len(ids) > MAX_BULK:
                message = f"at most {MAX_BULK} workflows at once, not {len(ids)}"
                raise ValidationFailed([Problem("$", message)])
            engine = self.api.engine()
            reason = self.api.query("reason")
            latest = self.query_bool("useLatestDefinitions", False)
            done: list[str] = []
            errors: dict[str, str] = {}
            for wid in dict.fromkeys(ids):
                try:
                    if action == "pause":
                        engine.pause_instance(wid)
                    elif action == "resume":
                        engine.resume_instance(wid)
                    elif action == "retry":
                        engine.retry_instance(wid)
                    elif action == "restart":
                        engine.restart_instance(wid, use_latest_definition=latest)
                    elif engine.get_instance(wid, include_steps=False)["status"] in (
                        "RUNNING",
                        "PAUSED",
                    ):
                        engine.cancel_instance(wid, reason.replace("+", " ") if reason else None)
                except BatonError as e:
                    errors[wid] = str(e)
                else:
                    done.append(wid)
            return json_answer({"bulkSuccessfulResults": done, "bulkErrorResults": errors})

        return view

    def remove(self, workflow: str) -> Any:
        self.api.engine().delete_instance(self.api.path(workflow))
        return empty_answer()


# The fields of Conductor's workflow search, as the instance's columns.
SEARCH_FIELDS = {
    "workflowId": "id",
    "correlationId": "correlation_id",
    "workflowType": "definition_name",
    "status": "status",
    "startTime": "created_at",
    "endTime": "completed_at",
    "updateTime": "updated_at",
    "parentWorkflowId": "parent_instance_id",
}
_TIMES = ("created_at", "completed_at", "updated_at")
_IDS = ("id", "parent_instance_id")
_CLAUSE = re.compile(r"\s*([A-Za-z]+)\s*(=|>|<|\bIN\b)\s*(.*?)\s*", re.IGNORECASE | re.DOTALL)


def _condition(clause: str) -> list[conductor_sql.Condition]:
    """A clause of a search query as its condition (none for an empty clause), as Conductor's
    query builder reads it: quotes and parentheses dropped, values split at commas."""
    if not clause.strip():
        return []
    m = _CLAUSE.fullmatch(clause)
    if m is None:
        message = f"{clause.strip()!r} is not a condition (field = value, field IN (a,b), >, <)"
        raise ValidationFailed([Problem("query", message)])
    field, op, raw = m.group(1), m.group(2).upper(), m.group(3)
    column = SEARCH_FIELDS.get(field)
    if column is None:
        message = f"unknown field {field!r}: one of {', '.join(SEARCH_FIELDS)}"
        raise ValidationFailed([Problem("query", message)])
    values = [v.strip() for v in re.sub(r"[\"'()]", "", raw).split(",") if v.strip()]
    if not values:
        raise ValidationFailed([Problem("query", f"{field} has no value")])
    if op in (">", "<") and column not in _TIMES:
        raise ValidationFailed([Problem("query", f"{field} takes = or IN, not {op}")])
    if op != "IN" and len(values) > 1:
        raise ValidationFailed([Problem("query", f"{field} {op} takes one value")])
    typed = [_search_value(field, column, v) for v in values]
    if op == "=" and isinstance(typed[0], str) and "*" in typed[0] and column not in _IDS:
        pattern = typed[0].replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        return [conductor_sql.Condition(column, "LIKE", (pattern.replace("*", "%"),))]
    if op == "=" or (op == "IN" and len(typed) == 1):
        op = "IN"  # one form: = ANY(...), typed alike
    kept = tuple(v for v in typed if v is not None)
    if op == "IN" and not kept:
        kept = (None,)  # ids that are no UUIDs: nothing matches
    return [conductor_sql.Condition(column, op, kept)]


def _search_value(field: str, column: str, value: str) -> Any:
    """A query value as its column holds it: a time from epoch milliseconds, a UUID (None for
    anything else: no workflow has that id), a status in Baton's words."""
    if column in _TIMES:
        try:
            return datetime.fromtimestamp(int(value) / 1000, UTC)
        except (ValueError, OverflowError, OSError):
            raise ValidationFailed(
                [Problem("query", f"{field} takes epoch milliseconds, not {value!r}")]
            ) from None
    if column in _IDS:
        try:
            return uuid.UUID(value)
        except ValueError:
            return None
    if column == "status":
        status = "CANCELLED" if value == "TERMINATED" else value
        if status not in cviews.WORKFLOW_STATUS:
            raise ValidationFailed([Problem("query", f"unknown status {value!r}")])
        return status
    return value


def _order(spec: str) -> tuple[str, str]:
    """A ``sort`` value (``field:ASC``, ``field:DESC``, or ``field``: ascending) as (column,
    order)."""
    field, _, order = spec.strip().partition(":")
    column = SEARCH_FIELDS.get(field.strip())
    direction = (order.strip() or "ASC").upper()
    if column is None or direction not in conductor_sql.SEARCH_ORDERS:
        message = f"{spec.strip()!r}: sort by one of {', '.join(SEARCH_FIELDS)}, :ASC or :DESC"
        raise ValidationFailed([Problem("sort", message)])
    return column, direction
