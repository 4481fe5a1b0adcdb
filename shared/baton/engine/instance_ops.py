"""Workflow instances: start, read, search, cancel, and the steps completed through the API
(user tasks and signals)."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, NamedTuple

from psycopg.types.json import Jsonb

from baton.definitions import WorkflowDefinition, parse_definition
from baton.engine import paging, views, writer
from baton.engine.archive_reads import ArchiveReads
from baton.engine.conductor_view import conductor_extras
from baton.engine.core import log
from baton.engine.decide import AuditEvent, Decider, Exec, InstanceState
from baton.engine.ids import parse_uuid, path_uuid
from baton.engine.plan import Plan, task_def_names
from baton.engine.reads import exec_from_row
from baton.engine.rerun_ops import RerunOps
from baton.engine.retention_ops import RetentionOps
from baton.errors import (
    BatonError,
    Conflict,
    DefinitionNotFound,
    InstanceNotFound,
    Problem,
    StepNotFound,
    ValidationFailed,
)
from baton.payload_ref import is_payload_ref
from baton.status import InstanceStatus, StepStatus
from baton.store import definition_sql, instance_sql
from baton.store.db import Conn, first_in_transaction


class Started(NamedTuple):
    """What :meth:`InstanceOps.start_in` did: the instance's id, whether it created it (a
    repeated idempotency key did not), and, if asked for, its rows as read after the COMMIT
    (GET_INSTANCE's row, STEPS_OF_INSTANCE's rows)."""

    id: uuid.UUID
    created: bool
    read: tuple[dict[str, Any] | None, list[dict[str, Any]]] | None = None


class InstanceOps(RetentionOps, ArchiveReads, RerunOps):
    def start_instance(
        self,
        *,
        definition_name: str | None = None,
        definition_version: int | None = None,
        definition: Any = None,
        input: dict[str, Any] | None = None,
        correlation_id: str | None = None,
        idempotency_key: str | None = None,
        conductor_source: dict[str, Any] | None = None,
    ) -> tuple[dict[str, Any], bool]:
        """Start an instance; returns (instance, created). ``conductor_source``: the Conductor
        WorkflowDef an inline ``definition`` was translated from (kept with its snapshot, whose
        system tasks without a task definition are not retried, as Conductor's). A repeated
        idempotency key returns
        the instance it first created, with ``created`` False.

        Round trips: the definition with its task definitions (and the BEGIN), then the
        instance, its first step and job, the audit rows and the COMMIT, then the read-back.
        """
        input = input or {}
        self._check_size(input, "instance input")
        inline: WorkflowDefinition | None = None
        if definition is not None:
            inline = parse_definition(definition)
            if definition_name is not None and definition_name != inline.name:
                raise ValidationFailed(
                    [Problem("definitionName", "differs from the inline definition's name")]
                )
        elif definition_name is None:
            raise ValidationFailed(
                [Problem("definitionName", "give definitionName or an inline definition")]
            )

        source_text = None
        if inline is not None and conductor_source is not None:
            source_text = json.dumps(conductor_source, separators=(",", ":"))
        fingerprint = None
        if idempotency_key is not None:
            # An offloaded input is matched by its content, not its path (a retried start
            # uploads it again, to a new path): read once, cached for the decision that follows.
            content = self.payloads(input) if self.payloads and is_payload_ref(input) else input
            fingerprint = start_fingerprint(
                definition_name, definition_version, inline, content, correlation_id
            )

        def work(conn: Conn) -> tuple[Started, str]:
            if inline is not None:
                row = first_in_transaction(
                    conn,
                    definition_sql.TASK_DEFS_AS_TEXT,
                    {"names": sorted(task_def_names(inline))},
                )
                snapshot_id, plan = self.snapshots.of_inline(
                    conn,
                    inline,
                    row["task_defs"] if row else None,
                    conductor_source=source_text,
                )
                name, version = inline.name, None
            else:
                assert definition_name is not None
                stored = first_in_transaction(
                    conn,
                    definition_sql.DEFINITION_WITH_TASK_DEFS,
                    {"name": definition_name, "version": definition_version},
                )
                if stored is None:
                    raise DefinitionNotFound(definition_name, definition_version)
                snapshot_id, plan = self.snapshots.of_stored(conn, stored)
                name, version = stored["name"], stored["version"]
            started = self.start_in(
                conn,
                plan,
                snapshot_id,
                name=name,
                version=version,
                input=input,
                correlation_id=correlation_id,
                idempotency_key=idempotency_key,
                idempotency_fingerprint=fingerprint,
                read_back=True,
            )
            return started, name

        started, name = self.db.transaction(work, explicit_begin=True)
        iid = started.id
        log.info(
            "instance started" if started.created else "instance start repeated",
            extra={"instance_id": str(iid), "definition": name},
        )
        if started.read is not None and not self.has_pending():
            # Nothing to deliver after the commit: the instance as its own COMMIT left it, read
            # in the same round trip.
            head, steps = started.read
            return self._instance_view(head, steps, str(iid)), started.created
        self.deliver_pending()  # events for other instances, which may move this one
        return self.get_instance(str(iid)), started.created

    def start_in(
        self,
        conn: Conn,
        plan: Plan,
        snapshot_id: int,
        *,
        name: str,
        version: int | None,
        input: dict[str, Any],
        correlation_id: str | None = None,
        idempotency_key: str | None = None,
        idempotency_fingerprint: str | None = None,
        queue_task_id: uuid.UUID | None = None,
        instance_id: uuid.UUID | None = None,
        commit: bool = True,
        read_back: bool = False,
    ) -> Started:
        """Start an instance inside the caller's open transaction (queue triggers use it too).

        ``commit`` False leaves the transaction open for the caller's further writes.
        ``read_back`` (with ``commit``): the instance and its steps are read after the COMMIT, in
        the same round trip (``Started.read``, None if no instance was created). ``instance_id``:
        the id to give the instance (a queue trigger's claim names it first), else a new one.
        """
        iid = instance_id or uuid.uuid4()
        insert = instance_row(
            iid,
            plan,
            snapshot_id,
            name=name,
            version=version,
            input=input,
            correlation_id=correlation_id,
            idempotency_key=idempotency_key,
            idempotency_fingerprint=idempotency_fingerprint,
            queue_task_id=queue_task_id,
        )
        insert_with_writes: dict[str, Any] | None = insert
        if idempotency_key is not None:
            # Find out first whether this key started an instance already.
            if conn.execute(instance_sql.INSERT_INSTANCE, insert).fetchone() is None:
                existing = conn.execute(
                    instance_sql.ID_BY_IDEMPOTENCY_KEY, {"key": idempotency_key}
                ).fetchone()
                assert existing is not None
                if existing["idempotency_fingerprint"] != idempotency_fingerprint:
                    raise key_reused(idempotency_key, existing["id"])
                return Started(existing["id"], False)
            insert_with_writes = None
        state = InstanceState(
            id=iid,
            definition_name=name,
            status=InstanceStatus.RUNNING,
            version=1,
            input=input,
            variables={},
            correlation_id=correlation_id,
            queue_task_id=queue_task_id,
        )
        decider = self.decider(conn, plan, state, datetime.now(UTC))
        decider.start()
        reads = (
            [
                (instance_sql.GET_INSTANCE, {"id": iid}),
                (instance_sql.STEPS_OF_INSTANCE, {"id": iid}),
            ]
            if read_back and commit
            else []
        )
        cursors = writer.write_start(
            conn,
            state,
            decider.changes,
            insert=insert_with_writes,
            commit=commit,
            outbox=self.settings.outbox,
            reads=reads,
        )
        self._report(decider)
        self._note_deliveries(iid, decider.changes)
        if not cursors:
            return Started(iid, True)
        head, steps = cursors
        return Started(iid, True, (head.fetchone(), steps.fetchall()))

    def get_instance(
        self, instance_id: str, *, include_steps: bool = True, conductor_view: bool = False
    ) -> dict[str, Any]:
        """An instance with its step executions (in creation order). The steps stop before the
        view's JSON passes ``paging.PAGE_BUDGET_BYTES`` (``stepsTruncated`` then says so, and
        ``GET …/steps`` pages through them all); ``include_steps=False`` leaves them out.

        ``conductor_view``: as Conductor's surface reads an instance, from its definition's
        plan (``engine.conductor_view``): without the executions of the iterations a DO_WHILE's
        ``keepLastIterations`` no longer keeps, as Conductor deletes a ``keepLastN`` loop's
        older tasks (before the byte budget, which counts only those kept), and with ``forks``
        and ``failedAtJoin`` for the JOIN task Conductor shows after a fork,
        ``conductorSource`` (the Conductor WorkflowDef an inline start on ``/api`` gave) and
        ``childDefinitions`` (the definition name and version of each child, by id); an
        archived instance alike, from what its document kept of it."""
        iid = path_uuid(instance_id, InstanceNotFound)
        extras: dict[str, Any] = {}
        row, step_rows = self.db.autocommit(
            lambda conn: self._read_instance(conn, iid, extras, include_steps, conductor_view)
        )
        if row is None:  # archived (its retention passed), or never was
            return self.archived_view(
                iid, instance_id, include_steps=include_steps, conductor_view=conductor_view
            )
        out = self._instance_view(row, step_rows, instance_id)
        out.update(extras)
        return out

    def _read_instance(
        self,
        conn: Conn,
        iid: uuid.UUID,
        extras: dict[str, Any],
        include_steps: bool = True,
        conductor_view: bool = False,
    ) -> tuple[dict[str, Any] | None, list[dict[str, Any]] | None]:
        """``get_instance``'s reads on ``conn``: the instance's row and its steps' (None: not
        wanted), what a Conductor view reads besides added to ``extras``."""
        if not include_steps:
            return conn.execute(instance_sql.GET_INSTANCE, {"id": iid}).fetchone(), None
        with conn.pipeline():  # the reads in one round trip
            head = conn.execute(instance_sql.GET_INSTANCE, {"id": iid})
            steps = conn.execute(instance_sql.STEPS_OF_INSTANCE, {"id": iid})
            if conductor_view:
                source = conn.execute(instance_sql.INSTANCE_CONDUCTOR_SOURCE, {"id": iid})
                children = conn.execute(instance_sql.CHILD_DEFINITIONS, {"id": iid})
        row, rows = head.fetchone(), steps.fetchall()
        if conductor_view:
            found_source = source.fetchone()
            if found_source is not None and found_source["conductor"] is not None:
                extras["conductorSource"] = found_source["conductor"]
            kids = children.fetchall()
            if kids:
                extras["childDefinitions"] = {
                    str(k["id"]): (k["definition_name"], k["definition_version"]) for k in kids
                }
        if conductor_view and row is not None and rows:
            plan = self.snapshots.plan(conn, row["snapshot_id"])
            rows, found = conductor_extras(plan, rows)
            extras.update(found)
        return row, rows

    @staticmethod
    def _instance_view(
        row: dict[str, Any] | None, step_rows: list[dict[str, Any]] | None, instance_id: str
    ) -> dict[str, Any]:
        """The instance's view from GET_INSTANCE's row and STEPS_OF_INSTANCE's (None: no
        steps wanted)."""
        if row is None:
            raise InstanceNotFound(instance_id)
        out = views.instance(row)
        if step_rows is not None:
            steps = [views.step(s) for s in step_rows]
            fit = paging.within_budget(steps, paging.PAGE_BUDGET_BYTES - paging.json_size(out))
            out["steps"] = steps[:fit]
            if fit < len(steps):
                out["stepsTruncated"] = True
        return out

    def list_steps(
        self, instance_id: str, *, limit: int = 100, page_token: str | None = None
    ) -> dict[str, Any]:
        """One page of an instance's step executions in creation order, byte-budgeted."""
        return self._page_of_instance(
            instance_id, instance_sql.STEPS_PAGE, "steps", views.step, "seq", limit, page_token
        )

    def history(
        self, instance_id: str, *, limit: int = 100, page_token: str | None = None
    ) -> dict[str, Any]:
        """The instance's history in the order it happened: every dispatch, completion,
        failure, retry, timeout, signal, user task and transition of the instance (its audit
        log), one page at a time."""
        return self._page_of_instance(
            instance_id,
            instance_sql.HISTORY_PAGE,
            "events",
            views.history_event,
            "id",
            limit,
            page_token,
        )

    def _page_of_instance(  # noqa: PLR0917 (two private callers)
        self,
        instance_id: str,
        sql: str,
        key: str,
        view: Callable[[dict[str, Any]], dict[str, Any]],
        position: str,
        limit: int,
        page_token: str | None,
    ) -> dict[str, Any]:
        """One byte-budgeted page of rows of an instance that ``sql`` orders by the integer
        column ``position`` (the page token carries the last one served)."""
        iid = path_uuid(instance_id, InstanceNotFound)
        limit = paging.clamp(limit, self.settings.max_page_limit)
        after = _int_token(page_token) if page_token else 0

        def work(conn: Conn) -> list[dict[str, Any]] | None:
            if conn.execute(instance_sql.INSTANCE_EXISTS, {"id": iid}).fetchone() is None:
                return None
            return conn.execute(sql, {"id": iid, "after": after, "limit": limit + 1}).fetchall()

        rows = self.db.autocommit(work)
        if rows is None:  # archived (its page token is a position in its document), or never was
            return self.archived_page(iid, instance_id, key, limit, after)
        items = [view(r) for r in rows[:limit]]
        served = paging.within_budget(items)
        token = None
        if served < len(rows):
            token = paging.encode_token(str(rows[served - 1][position]))
        return paging.page(key, items[:served], token)

    def audit_trail(self, instance_id: str) -> list[dict[str, Any]]:
        """Every audit row of an instance, oldest first (an archived one's, from its document)."""
        iid = path_uuid(instance_id, InstanceNotFound)
        rows = self.db.autocommit(
            lambda c: c.execute(instance_sql.AUDIT_OF_INSTANCE, {"id": iid}).fetchall()
        )
        if not rows and self._archived_entry(iid) is not None:  # from its history events
            doc = self._archived_document(iid, instance_id)
            return [
                {
                    "id": e["seq"],
                    "at": e["at"],
                    "jobId": e.get("jobId"),
                    "event": e["type"],
                    "detail": e.get("detail"),
                }
                for e in doc["history"]
            ]
        return self._audit_view(rows)

    @staticmethod
    def _audit_view(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """AUDIT_OF_INSTANCE's rows as ``audit_trail`` gives them."""
        return [
            {
                "id": r["id"],
                "at": views.ts(r["at"]),
                "jobId": None if r["job_id"] is None else str(r["job_id"]),
                "event": r["event"],
                "detail": r["detail"],
            }
            for r in rows
        ]

    def search_instances(
        self,
        *,
        status: str | None = None,
        definition_name: str | None = None,
        correlation_id: str | None = None,
        created_after: str | None = None,
        created_before: str | None = None,
        limit: int = 20,
        page_token: str | None = None,
        archived: bool = False,
        ended_from: str | None = None,
        ended_to: str | None = None,
    ) -> dict[str, Any]:
        """Instances, newest first, filtered by status, definition, correlation id and when
        they were created (``created_after`` inclusive, ``created_before`` exclusive, ISO-8601;
        a time without a zone is UTC). ``archived``: the archived instances instead, latest end
        first, by when they ended (``ended_from`` inclusive, ``ended_to`` exclusive)."""
        if archived or ended_from is not None or ended_to is not None:
            misplaced = [
                Problem(name, "with archived=true, filter by end time: from and to")
                for name, value in (
                    ("createdAfter", created_after),
                    ("createdBefore", created_before),
                )
                if value is not None
            ]
            if not archived:
                misplaced.append(
                    Problem("archived", "from and to search the archive: add archived=true")
                )
            if misplaced:
                raise ValidationFailed(misplaced)
            return self.search_archived(
                definition_name=definition_name,
                status=status,
                correlation_id=correlation_id,
                **_time_range(ended_from, ended_to, "from", "to"),
                limit=limit,
                page_token=page_token,
            )
        window = _time_range(created_after, created_before, "createdAfter", "createdBefore")
        since, until = window["since"], window["until"]
        if status is not None and status not in InstanceStatus.__members__:
            raise ValidationFailed(
                [Problem("status", f"one of {', '.join(InstanceStatus)}, not {status!r}")]
            )
        limit = paging.clamp(limit, self.settings.max_search_limit)
        cursor = _search_cursor(page_token) if page_token else None
        rows = self.db.autocommit(
            lambda c: c.execute(
                instance_sql.SEARCH,
                {
                    "status": status,
                    "definition_name": definition_name,
                    "correlation_id": correlation_id,
                    "since": since,
                    "until": until,
                    "after_created": cursor[0] if cursor else None,
                    "after_id": cursor[1] if cursor else None,
                    "limit": limit + 1,
                },
            ).fetchall()
        )
        token = None
        if len(rows) > limit:
            last = rows[limit - 1]
            token = paging.encode_token(last["created_at"].isoformat(), str(last["id"]))
        return paging.page("instances", [views.instance(r) for r in rows[:limit]], token)

    def cancel_instance(self, instance_id: str, reason: str | None = None) -> dict[str, Any]:
        """Cancel a running (or paused) instance with its open steps, jobs and child
        instances."""
        iid = path_uuid(instance_id, InstanceNotFound)

        def work(conn: Conn) -> None:
            row = self._lock_instance(conn, iid)
            _expect(
                row,
                instance_id,
                "it has ended already",
                InstanceStatus.RUNNING,
                InstanceStatus.PAUSED,
            )
            self._decide(conn, row, lambda d: d.cancel(reason or "cancelled through the API"))

        self.db.transaction(work, explicit_begin=True)
        self.deliver_pending()
        log.info("instance cancelled", extra={"instance_id": instance_id})
        return self.get_instance(instance_id)

    def pause_instance(self, instance_id: str) -> dict[str, Any]:
        """Pause a running instance: it schedules no new work until resumed (jobs in flight may
        finish; what would follow them waits). Pausing a paused instance changes nothing."""
        iid = path_uuid(instance_id, InstanceNotFound)

        def work(conn: Conn) -> None:
            row = self._lock_instance(conn, iid)
            if row["status"] == InstanceStatus.PAUSED:
                return
            _expect(
                row, instance_id, "only a running instance can be paused", InstanceStatus.RUNNING
            )
            self._decide(conn, row, lambda d: d.pause())

        self.db.transaction(work, explicit_begin=True)
        log.info("instance paused", extra={"instance_id": instance_id})
        return self.get_instance(instance_id)

    def resume_instance(self, instance_id: str) -> dict[str, Any]:
        """Resume a paused instance: what waited for the resume runs now, and the timers that
        fell due meanwhile fire, in the same decision. Resuming a running instance changes
        nothing."""
        iid = path_uuid(instance_id, InstanceNotFound)

        def work(conn: Conn) -> None:
            row = self._lock_instance(conn, iid)
            if row["status"] == InstanceStatus.RUNNING:
                return
            _expect(
                row, instance_id, "only a paused instance can be resumed", InstanceStatus.PAUSED
            )
            with conn.pipeline():
                waiting = conn.execute(
                    instance_sql.EVENTS_OF_INSTANCE, {"id": iid, "kinds": ["CONTINUE"]}
                )
                due = conn.execute(instance_sql.TIMERS_DUE_OF_INSTANCE, {"id": iid})
            events, timers = waiting.fetchall(), due.fetchall()

            def act(d: Decider) -> None:
                d.resume()
                for event in events:
                    e = d.reader.execution(event["step_execution_id"])
                    payload = event["payload"] or {}
                    if e is None:
                        d.changes.consumed_events.append(event["id"])
                        continue
                    d.continue_after(e, payload.get("output"), event["id"], payload.get("failure"))
                for timer in timers:
                    d.timer_fired(exec_from_row(timer))

            self._decide(conn, row, act)

        self.db.transaction(work, explicit_begin=True)
        self.deliver_pending()
        log.info("instance resumed", extra={"instance_id": instance_id})
        return self.get_instance(instance_id)

    def retry_instance(self, instance_id: str) -> dict[str, Any]:
        """Run a FAILED, TIMED_OUT or CANCELLED instance again from what failed or was
        cancelled, keeping what completed (see ``engine.reopen``), as Conductor retries a
        TERMINATED workflow too."""
        iid = path_uuid(instance_id, InstanceNotFound)

        def work(conn: Conn) -> None:
            row = self._lock_instance(conn, iid)
            _expect(
                row,
                instance_id,
                "only a failed, timed-out or cancelled instance can be retried (restart runs "
                "any ended one)",
                InstanceStatus.FAILED,
                InstanceStatus.TIMED_OUT,
                InstanceStatus.CANCELLED,
            )
            with conn.pipeline():
                last = conn.execute(instance_sql.LATEST_BY_STEP, {"id": iid})
                waiting = conn.execute(
                    instance_sql.EVENTS_OF_INSTANCE, {"id": iid, "kinds": ["CONTINUE"]}
                )
            rows = last.fetchall()
            latest: dict[str, dict[str, Exec]] = {}
            for r in rows:
                latest.setdefault(r["scope"], {})[r["step_id"]] = exec_from_row(r)
            stale = [e["id"] for e in waiting.fetchall()]
            for r in rows:
                if r["step_type"] == "TERMINATE" and r["status"] == StepStatus.COMPLETED:
                    raise Conflict(
                        f"instance {instance_id} was ended by its TERMINATE step "
                        f"{r['step_id']!r}; there is nothing to retry (restart it to run it again)"
                    )

            def act(d: Decider) -> None:
                d.changes.consumed_events.extend(stale)
                d.retry(latest)

            self._decide(conn, row, act)

        self.db.transaction(work, explicit_begin=True)
        self.revive_payloads(iid)  # its objects may have been tagged for expiry when it ended
        self._run_parents_again(iid)
        self.deliver_pending()
        log.info("instance retried", extra={"instance_id": instance_id})
        return self.get_instance(instance_id)

    def _run_parents_again(self, iid: uuid.UUID) -> None:
        """After instance ``iid`` ran again: its ended parents run again with it (see
        ``engine.rerun_ops``), and the other children they wait on again are retried in place."""
        for parent, sibling in self._reopen_parents(iid):
            try:
                self.retry_instance(str(sibling))
            except BatonError as refused:
                self._hand_back(parent, sibling, str(refused))

    def rerun_instance(
        self,
        instance_id: str,
        *,
        from_step_execution: str | None = None,
        input: dict[str, Any] | None = None,
        step_input: dict[str, Any] | None = None,
        correlation_id: str | None = None,
        at_join: bool = False,
    ) -> dict[str, Any]:
        """Run an ended instance again from one of its step executions (Conductor's rerun; see
        ``engine.rerun_ops``), or from its start without one (a restart); ``input`` and
        ``correlation_id`` replace the instance's, ``step_input`` the input of the execution
        run again. ``at_join``: the execution, a PARALLEL or MAP, keeps its lists as they ended
        and joins them again (those that did not complete run again first)."""
        iid = path_uuid(instance_id, InstanceNotFound)
        if input is not None:
            self._check_size(input, "instance input")
        if step_input is not None:
            self._check_size(step_input, "step input")
        if from_step_execution is None:
            return self.restart_instance(instance_id, input=input, correlation_id=correlation_id)
        target = parse_uuid(from_step_execution, "fromStepExecutionId")
        self._rerun_from(
            iid,
            target,
            input=input,
            step_input=step_input,
            correlation_id=correlation_id,
            at_join=at_join,
        )
        self.revive_payloads(iid)
        self._run_parents_again(iid)
        self.deliver_pending()
        log.info(
            "instance rerun",
            extra={"instance_id": instance_id, "step_execution_id": from_step_execution},
        )
        return self.get_instance(instance_id)

    def restart_instance(
        self,
        instance_id: str,
        *,
        use_latest_definition: bool = False,
        input: dict[str, Any] | None = None,
        correlation_id: str | None = None,
    ) -> dict[str, Any]:
        """Run an ended instance again from the start with the same input (or ``input``), as
        the next run of the same id: the previous run's steps and jobs are replaced (its audit
        trail stays). ``use_latest_definition`` runs the newest version of its definition
        instead of the one it ran; ``correlation_id`` replaces its own."""
        iid = path_uuid(instance_id, InstanceNotFound)

        def work(conn: Conn) -> None:
            row = self._lock_instance(conn, iid)
            if not InstanceStatus(row["status"]).terminal:
                raise Conflict(
                    f"instance {instance_id} is {row['status']}; only an ended instance can be "
                    "restarted (cancel it first)"
                )
            snapshot_id, plan = row["snapshot_id"], self.snapshots.plan(conn, row["snapshot_id"])
            version = row["definition_version"]
            if use_latest_definition:
                stored = conn.execute(
                    definition_sql.DEFINITION_WITH_TASK_DEFS,
                    {"name": row["definition_name"], "version": None},
                ).fetchone()
                if stored is None:
                    raise DefinitionNotFound(row["definition_name"], None)
                snapshot_id, plan = self.snapshots.of_stored(conn, stored)
                version = stored["version"]
            if input is not None or correlation_id is not None:
                row = {
                    **row,
                    "input": row["input"] if input is None else input,
                    "correlation_id": correlation_id or row["correlation_id"],
                }
            with conn.pipeline():
                conn.execute(instance_sql.CLEAR_RUN, {"id": iid})
                conn.execute(
                    instance_sql.RESTART_INSTANCE,
                    {
                        "id": iid,
                        "expected": row["version"],
                        "snapshot_id": snapshot_id,
                        "definition_version": version,
                        "timeout_seconds": plan.definition.timeout_seconds,
                        "input": None if input is None else Jsonb(input),
                        "correlation_id": correlation_id,
                    },
                )
            state = writer.state_from_row(
                {**row, "status": InstanceStatus.RUNNING, "variables": {}, "step_count": 0}
            )
            state.version = row["version"] + 1
            decider = self.decider(conn, plan, state, row["now"])
            decider.changes.audit.append(
                AuditEvent("INSTANCE_RESTARTED", None, {"run": row["run"] + 1})
            )
            decider.start()
            writer.write_start(
                conn, state, decider.changes, insert=None, commit=True, outbox=self.settings.outbox
            )
            self._report(decider)
            self._note_deliveries(iid, decider.changes)

        self.db.transaction(work, explicit_begin=True)
        self.revive_payloads(iid)  # its input's object may have been tagged for expiry
        self._run_parents_again(iid)
        self.deliver_pending()
        log.info("instance restarted", extra={"instance_id": instance_id})
        return self.get_instance(instance_id)

    def complete_user_task(
        self,
        instance_id: str,
        step_id: str,
        variables: dict[str, Any] | None = None,
        *,
        step_execution_id: str | None = None,
    ) -> dict[str, Any]:
        """Complete a waiting USER_TASK step; ``variables`` become its output."""
        return self._resume_waiting(
            instance_id,
            step_id,
            "USER_TASK",
            variables or {},
            "USER_TASK_COMPLETED",
            step_execution_id,
        )

    def signal(
        self,
        instance_id: str,
        step_id: str,
        payload: Any = None,
        *,
        step_execution_id: str | None = None,
    ) -> dict[str, Any]:
        """Deliver a signal to a waiting SIGNAL step; ``payload`` becomes its output."""
        return self._resume_waiting(
            instance_id,
            step_id,
            "SIGNAL",
            payload if payload is not None else {},
            "SIGNAL_RECEIVED",
            step_execution_id,
        )

    def complete_sub_workflow(
        self,
        instance_id: str,
        step_id: str,
        output: dict[str, Any] | None = None,
        *,
        step_execution_id: str | None = None,
    ) -> dict[str, Any]:
        """Complete a running SUB_WORKFLOW step from outside with ``output`` (Conductor lets a
        SUB_WORKFLOW task be completed by its id): the instance goes on; the child runs on by
        itself, and its end no longer reaches the step."""
        return self._resume_waiting(
            instance_id,
            step_id,
            "SUB_WORKFLOW",
            output or {},
            "SUB_WORKFLOW_COMPLETED",
            step_execution_id,
        )

    def complete_timer(
        self,
        instance_id: str,
        step_id: str,
        output: dict[str, Any] | None = None,
        *,
        step_execution_id: str | None = None,
    ) -> dict[str, Any]:
        """End a waiting TIMER before its due time with ``output`` (Conductor completes a WAIT
        task with a duration through a task update, as one without)."""
        return self._resume_waiting(
            instance_id, step_id, "TIMER", output or {}, "TIMER_COMPLETED", step_execution_id
        )

    def fail_waiting(
        self,
        instance_id: str,
        step_id: str,
        reason: str,
        output: dict[str, Any] | None = None,
        *,
        step_execution_id: str | None = None,
    ) -> dict[str, Any]:
        """Fail a waiting USER_TASK, SIGNAL, TIMER or SUB_WORKFLOW execution from outside, with
        ``reason`` and ``output`` kept as the step's (Conductor's task update with FAILED): it
        fails as a failed task does, its retries and ``optional`` applied."""
        return self._resume_waiting(
            instance_id,
            step_id,
            WAITING_TYPES,
            output or {},
            "WAITING_STEP_FAILED",
            step_execution_id,
            failure=reason,
        )

    def _resume_waiting(  # noqa: PLR0917 (the public callers name their arguments)
        self,
        instance_id: str,
        step_id: str,
        step_type: str | tuple[str, ...],
        output: Any,
        event: str,
        step_execution_id: str | None,
        *,
        failure: str | None = None,
    ) -> dict[str, Any]:
        """Complete a waiting execution of ``step_id``: the one named, else the oldest waiting
        (a step inside a MAP or a loop may wait in several executions at once); ``failure``:
        fail it with that reason instead."""
        iid = path_uuid(instance_id, InstanceNotFound)
        exec_id = (
            None if step_execution_id is None else parse_uuid(step_execution_id, "stepExecutionId")
        )
        self._check_size(output, "payload")

        def work(conn: Conn) -> None:
            row = self._lock_instance(conn, iid)
            plan = self.snapshots.plan(conn, row["snapshot_id"])
            if not plan.has_step(step_id):
                raise StepNotFound(instance_id, step_id)
            actual = plan.step(step_id).type
            wanted = (step_type,) if isinstance(step_type, str) else step_type
            if actual not in wanted:
                raise Conflict(f"step {step_id!r} is a {actual}, not a {' or a '.join(wanted)}")
            _expect(
                row,
                instance_id,
                "its steps wait no more",
                InstanceStatus.RUNNING,
                InstanceStatus.PAUSED,
            )
            found = conn.execute(
                instance_sql.WAITING_EXECUTION,
                {"instance_id": iid, "step_id": step_id, "exec_id": exec_id},
            ).fetchone()
            if found is None and exec_id is not None:
                raise Conflict(f"step {step_id!r} has no execution {step_execution_id}")
            if found is None or found["status"] != StepStatus.IN_PROGRESS:
                where = "has not started" if found is None else f"is {found['status']}"
                raise Conflict(f"step {step_id!r} {where}; it is not waiting")
            e = exec_from_row(found)
            self._decide(conn, row, lambda d: d.resume_waiting(e, output, event, failure))

        self.db.transaction(work, explicit_begin=True)
        self.deliver_pending()
        return self.get_instance(instance_id)


# The step types that wait for something from outside (or a due time) in one execution.
WAITING_TYPES = ("USER_TASK", "SIGNAL", "TIMER", "SUB_WORKFLOW")


def _expect(row: dict[str, Any], instance_id: str, what: str, *allowed: InstanceStatus) -> None:
    """Refuse an operation on an instance whose status does not allow it (409)."""
    if row["status"] not in allowed:
        wanted = " or ".join(allowed)
        raise Conflict(f"instance {instance_id} is {row['status']}, not {wanted}: {what}")


def _search_cursor(token: str) -> tuple[datetime, uuid.UUID]:
    """The (created_at, id) after which a search page starts, from its token."""
    created, iid = paging.decode_token(token, 2)
    try:
        return datetime.fromisoformat(created), uuid.UUID(iid)
    except ValueError:
        raise ValidationFailed([Problem("pageToken", "not a token this API issued")]) from None


def instance_row(
    iid: uuid.UUID,
    plan: Plan,
    snapshot_id: int,
    *,
    name: str,
    version: int | None,
    input: dict[str, Any],
    correlation_id: str | None,
    idempotency_key: str | None,
    idempotency_fingerprint: str | None,
    queue_task_id: uuid.UUID | None = None,
) -> dict[str, Any]:
    """The parameters of ``instance_sql.INSERT_INSTANCE`` for a top-level instance starting."""
    return {
        "id": iid,
        "definition_name": name,
        "definition_version": version,
        "snapshot_id": snapshot_id,
        "input": Jsonb(input),
        "variables": Jsonb({}),
        "correlation_id": correlation_id,
        "idempotency_key": idempotency_key,
        "idempotency_fingerprint": idempotency_fingerprint,
        "timeout_seconds": plan.definition.timeout_seconds,
        "queue_task_id": queue_task_id,
        "parent_instance_id": None,
        "parent_step_execution_id": None,
        "depth": 0,
        "status": None,
        "output": None,
        "reason": None,
        "step_count": None,
    }


def key_reused(key: str, instance_id: uuid.UUID) -> Conflict:
    """The refusal of an idempotency key repeated with a different request."""
    return Conflict(
        f"idempotency key {key!r} was first used with a different request (instance "
        f"{instance_id}); use a new key for a new request"
    )


def start_fingerprint(
    name: str | None,
    version: int | None,
    inline: WorkflowDefinition | None,
    input: dict[str, Any],
    correlation_id: str | None,
) -> str:
    """What a start asked for, so a reused idempotency key can be matched to its request."""
    request = {
        "definitionName": inline.name if inline is not None else name,
        "definitionVersion": version,
        "definition": inline.digest() if inline is not None else None,
        "input": input,
        "correlationId": correlation_id,
    }
    canonical = json.dumps(request, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def _int_token(token: str) -> int:
    """The position inside a page token of ``list_steps`` or ``history``."""
    (value,) = paging.decode_token(token, 1)
    if not value.isdigit() or len(value) > 18:
        raise ValidationFailed([Problem("pageToken", "not a token this API issued")])
    return int(value)


def _time_range(
    start: str | None, end: str | None, start_field: str, end_field: str
) -> dict[str, datetime | None]:
    """A search's time window (start inclusive, end exclusive): an empty or inverted one is
    refused rather than answered with an empty page that looks like "nothing there"."""
    since, until = _timestamp(start, start_field), _timestamp(end, end_field)
    if since is not None and until is not None and since >= until:
        raise ValidationFailed(
            [
                Problem(
                    end_field,
                    f"must be later than {start_field} ({since.isoformat()}): "
                    f"{start_field} is inclusive and {end_field} exclusive",
                )
            ]
        )
    return {"since": since, "until": until}


def _timestamp(value: str | None, field: str) -> datetime | None:
    """An ISO-8601 timestamp from a query (``Z`` or an offset; none means UTC)."""
    if value is None:
        return None
    try:
        at = datetime.fromisoformat(value.strip().replace("z", "Z").replace("Z", "+00:00"))
    except ValueError:
        at = None
    if at is None or not 1 <= at.year <= 9999:
        shown = value if len(value) <= 40 else value[:40] + "…"
        raise ValidationFailed(
            [Problem(field, f"an ISO-8601 time such as 2026-01-31T12:00:00Z, not {shown!r}")]
        )
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)
