"""Workflow definitions (named, versioned) and task definitions (defaults per job type)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from baton.definitions import parse_definition, parse_task_def
from baton.engine import paging, views
from baton.engine.core import EngineCore
from baton.errors import Conflict, DefinitionNotFound, NotFound, Problem, ValidationFailed
from baton.httpcall import HTTP_JOB_TYPE
from baton.store import definition_sql
from baton.store.db import Conn

# Registrations racing for the same next version number retry this often before giving up.
_VERSION_RACE_ATTEMPTS = 20


class DefinitionOps(EngineCore):
    def register_definition(self, raw: Any, *, conductor: Any = None) -> dict[str, Any]:
        """Validate and store a definition; its version is the next free one unless given.
        ``conductor``: the Conductor definition ``raw`` was translated from, kept as sent (see
        :meth:`get_definition_source`)."""
        definition = parse_definition(raw)
        body = definition.model_dump_json(by_alias=True, exclude_none=True, exclude={"version"})
        params = {
            "name": definition.name,
            "version": definition.version,
            "body": body,
            "trigger_queue": definition.trigger_queue(),
            "conductor": None if conductor is None else json.dumps(conductor),
        }
        if definition.version is not None:
            row = self.db.autocommit(
                lambda c: c.execute(definition_sql.INSERT_VERSION, params).fetchone()
            )
            if row is None:
                raise Conflict(
                    f"definition {definition.name} version {definition.version} already exists"
                )
        else:
            # Next version = max + 1; two registrations racing for the same number meet on the
            # primary key and the loser takes the next one (no lock: RDS Proxy-friendly).
            for _ in range(_VERSION_RACE_ATTEMPTS):
                row = self.db.autocommit(
                    lambda c: c.execute(definition_sql.INSERT_NEXT_VERSION, params).fetchone()
                )
                if row is not None:
                    break
            else:
                raise Conflict(f"too many concurrent registrations of {definition.name}")
        return views.definition({**row, "body": json.loads(body)})

    def get_definition(self, name: str, version: int | None = None) -> dict[str, Any]:
        """One version of a definition, or its latest."""
        return views.definition(self._definition_row(name, version))

    def get_definition_source(
        self, name: str, version: int | None = None
    ) -> tuple[dict[str, Any], Any]:
        """One version of a definition (or its latest) and the Conductor definition it was
        registered as on /api, as sent (None when registered on /v1)."""
        row = self._definition_row(name, version)
        return views.definition(row), row.get("conductor")

    def list_definition_sources(
        self, limit: int = 50, page_token: str | None = None
    ) -> dict[str, Any]:
        """:meth:`list_definitions` with each definition's Conductor source:
        ``{"definitions": [{"definition", "conductor"}…], "nextPageToken"}``."""
        return self._page_by_name(
            definition_sql.LIST_LATEST,
            "definitions",
            lambda r: {"definition": views.definition(r), "conductor": r.get("conductor")},
            limit,
            page_token,
        )

    def _definition_row(self, name: str, version: int | None) -> dict[str, Any]:
        def work(conn: Conn) -> dict[str, Any] | None:
            if version is None:
                return conn.execute(definition_sql.GET_LATEST, {"name": name}).fetchone()
            return conn.execute(
                definition_sql.GET_VERSION, {"name": name, "version": version}
            ).fetchone()

        row = self.db.autocommit(work)
        if row is None:
            raise DefinitionNotFound(name, version)
        return row

    def list_definitions(self, limit: int = 50, page_token: str | None = None) -> dict[str, Any]:
        """The latest version of every definition, by name, one page at a time."""
        return self._page_by_name(
            definition_sql.LIST_LATEST, "definitions", views.definition, limit, page_token
        )

    def put_task_def(self, name: str, raw: Any) -> tuple[dict[str, Any], bool]:
        """Create or replace a task definition; returns (task definition, created)."""
        if isinstance(raw, dict):
            body_name = raw.get("name")
            if body_name is not None and body_name != name:
                raise ValidationFailed(
                    [Problem("name", f"body names {body_name!r} but the path names {name!r}")]
                )
            raw = {**raw, "name": name}
        task_def = parse_task_def(raw)
        body = task_def.model_dump_json(by_alias=True, exclude_none=True)
        limits = {
            "name": name,
            "concurrent": task_def.concurrent_exec_limit,
            "rate_per": task_def.rate_limit_per_frequency,
            "rate_seconds": task_def.rate_limit_frequency_in_seconds,
        }
        limited = limits["concurrent"] is not None or limits["rate_per"] is not None
        # The same limits for the HTTP steps it names (their jobs' own type).
        http = {**limits, "name": f"{HTTP_JOB_TYPE}:{name}"}

        def work(conn: Conn) -> dict[str, Any] | None:
            row = conn.execute(
                definition_sql.UPSERT_TASK_DEF, {"name": name, "body": body}
            ).fetchone()
            conn.execute(
                definition_sql.UPSERT_LIMIT if limited else definition_sql.DELETE_LIMIT, limits
            )
            conn.execute(definition_sql.UPSERT_LIMIT if limited else definition_sql.UNLIMIT, http)
            return row

        row = self.db.transaction(work)
        assert row is not None
        self._limits = (float("-inf"), frozenset())  # this process sees the change at once
        return views.task_def(row), bool(row["created"])

    def get_task_def(self, name: str) -> dict[str, Any]:
        """One task definition."""
        row = self.db.autocommit(
            lambda c: c.execute(definition_sql.GET_TASK_DEF, {"name": name}).fetchone()
        )
        if row is None:
            raise NotFound("task definition", name)
        return views.task_def(row)

    def delete_task_def(self, name: str) -> dict[str, Any]:
        """Delete a task definition; returns it as it was. Running instances keep the copy
        embedded in their snapshot; instances started later run with the engine's defaults."""

        def work(conn: Conn) -> dict[str, Any] | None:
            conn.execute(definition_sql.DELETE_LIMIT, {"name": name})
            conn.execute(definition_sql.UNLIMIT, {"name": f"{HTTP_JOB_TYPE}:{name}"})
            return conn.execute(definition_sql.DELETE_TASK_DEF, {"name": name}).fetchone()

        row = self.db.transaction(work)
        if row is None:
            raise NotFound("task definition", name)
        self._limits = (float("-inf"), frozenset())
        return views.task_def(row)

    def list_task_defs(self, limit: int = 50, page_token: str | None = None) -> dict[str, Any]:
        """Task definitions by name, one page at a time."""
        return self._page_by_name(
            definition_sql.LIST_TASK_DEFS, "taskDefs", views.task_def, limit, page_token
        )

    def _page_by_name(
        self,
        query: str,
        key: str,
        view: Callable[[dict[str, Any]], dict[str, Any]],
        limit: int,
        page_token: str | None,
    ) -> dict[str, Any]:
        limit = paging.clamp(limit, self.settings.max_search_limit)
        after = paging.decode_token(page_token, 1)[0] if page_token else None
        rows = self.db.autocommit(
            lambda c: c.execute(query, {"after": after, "limit": limit + 1}).fetchall()
        )
        token = paging.encode_token(rows[limit - 1]["name"]) if len(rows) > limit else None
        return paging.page(key, [view(r) for r in rows[:limit]], token)
