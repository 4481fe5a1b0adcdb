"""The engine's public operations. Each is one short transaction on the instance it touches.

Round trips on the hot path: a poll is one statement for a whole batch; a complete or fail is two
(lock instance+job and read, then every write and the commit pipelined together).
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Literal, TypeVar

from psycopg.types.json import Jsonb

from baton.definitions import (
    ServiceTaskStep,
    TaskDef,
    WorkflowDefinition,
    parse_definition,
    parse_task_def,
)
from baton.engine import views
from baton.engine.decide import RUNNING, AuditEvent, Decider, InstanceState
from baton.engine.plan import Plan, PlanCache, job_types
from baton.errors import (
    Conflict,
    DefinitionNotFound,
    InstanceNotFound,
    JobNotFound,
    LeaseNotHeld,
    NotFound,
    PayloadTooLarge,
    Problem,
    StaleVersion,
    StepNotFound,
    ValidationFailed,
)
from baton.metrics import MetricsSink, NullMetrics
from baton.settings import EngineSettings
from baton.store import definitions as defs_sql
from baton.store import instances as inst_sql
from baton.store import jobs as jobs_sql
from baton.store.db import RETRYABLE, Conn, Database, first_in_transaction

log = logging.getLogger("baton.engine")

Verdict = Literal["apply", "duplicate"]
T = TypeVar("T")
SEARCH_STATUSES = ("RUNNING", "COMPLETED", "FAILED", "TIMED_OUT", "CANCELLED")


def completion_verdict(row: dict[str, Any], worker_id: str) -> Verdict:
    """May ``worker_id`` complete this job? Repeats are accepted and applied once."""
    status = row["job_status"]
    if status == "COMPLETED":
        return "duplicate"
    if status in ("CANCELLED", "FAILED"):
        raise Conflict(f"job {row['job_id']} is {status}; it can no longer be completed")
    if row["worker_id"] == worker_id and status == "LOCKED":
        return "apply"
    # A late complete from a worker whose lease expired is still good work: accept it once.
    if worker_id in row["previous_worker_ids"]:
        return "apply"
    if status == "LOCKED":
        raise LeaseNotHeld(str(row["job_id"]), worker_id, "another worker holds the lease")
    raise LeaseNotHeld(str(row["job_id"]), worker_id, "the job is not claimed by this worker")


def failure_verdict(row: dict[str, Any], worker_id: str) -> Verdict:
    status = row["job_status"]
    if status == "FAILED":
        return "duplicate"
    if status in ("COMPLETED", "CANCELLED"):
        raise Conflict(f"job {row['job_id']} is {status}; it can no longer fail")
    if status == "LOCKED" and row["worker_id"] == worker_id:
        return "apply"
    raise LeaseNotHeld(str(row["job_id"]), worker_id, "the lease is not held by this worker")


def _uuid(value: str, what: str) -> uuid.UUID:
    try:
        return uuid.UUID(str(value))
    except ValueError:
        raise ValidationFailed([Problem(what, f"{value!r} is not a UUID")]) from None


def _json_size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":")))


class Engine:
    def __init__(
        self,
        db: Database,
        settings: EngineSettings | None = None,
        metrics: MetricsSink | None = None,
    ) -> None:
        self.db = db
        self.settings = settings or EngineSettings()
        self.metrics: MetricsSink = metrics or NullMetrics()
        self._plans = PlanCache()
        self._snapshots: dict[tuple[str, str | None], tuple[int, Plan]] = {}

    # --- definitions -------------------------------------------------------------------------

    def register_definition(self, raw: Any) -> dict[str, Any]:
        definition = parse_definition(raw)
        body = definition.model_dump_json(by_alias=True, exclude_none=True, exclude={"version"})

        params = {
            "name": definition.name,
            "version": definition.version,
            "body": body,
            "trigger_queue": definition.trigger_queue(),
        }
        if definition.version is not None:
            row = self.db.autocommit(
                lambda c: c.execute(defs_sql.INSERT_VERSION, params).fetchone()
            )
            if row is None:
                raise Conflict(
                    f"definition {definition.name} version {definition.version} already exists"
                )
        else:
            # Next version = max + 1; two registrations racing for the same number meet on the
            # primary key and the loser takes the next one (no lock: RDS Proxy-friendly).
            for _ in range(20):
                row = self.db.autocommit(
                    lambda c: c.execute(defs_sql.INSERT_NEXT_VERSION, params).fetchone()
                )
                if row is not None:
                    break
            else:
                raise Conflict(f"too many concurrent registrations of {definition.name}")
        return views.definition({**row, "body": json.loads(body)})

    def get_definition(self, name: str, version: int | None = None) -> dict[str, Any]:
        return views.definition(self._definition_row(name, version))

    def _definition_row(self, name: str, version: int | None) -> dict[str, Any]:
        def work(conn: Conn) -> dict[str, Any] | None:
            if version is None:
                return conn.execute(defs_sql.GET_LATEST, {"name": name}).fetchone()
            return conn.execute(defs_sql.GET_VERSION, {"name": name, "version": version}).fetchone()

        row = self.db.autocommit(work)
        if row is None:
            raise DefinitionNotFound(name, version)
        return row

    def list_definitions(self, limit: int = 50, page_token: str | None = None) -> dict[str, Any]:
        limit = max(1, min(limit, self.settings.max_search_limit))
        after = _decode_token(page_token)[0] if page_token else None
        rows = self.db.autocommit(
            lambda c: c.execute(
                defs_sql.LIST_LATEST, {"after": after, "limit": limit + 1}
            ).fetchall()
        )
        more = len(rows) > limit
        rows = rows[:limit]
        token = _encode_token(rows[-1]["name"]) if more else None
        return _page("definitions", [views.definition(r) for r in rows], token)

    def put_task_def(self, name: str, raw: Any) -> tuple[dict[str, Any], bool]:
        if isinstance(raw, dict):
            body_name = raw.get("name")
            if body_name is not None and body_name != name:
                raise ValidationFailed(
                    [Problem("name", f"body names {body_name!r} but the path names {name!r}")]
                )
            raw = {**raw, "name": name}
        task_def = parse_task_def(raw)
        body = task_def.model_dump_json(by_alias=True, exclude_none=True)
        row = self.db.transaction(
            lambda c: c.execute(defs_sql.UPSERT_TASK_DEF, {"name": name, "body": body}).fetchone()
        )
        assert row is not None
        return views.task_def(row), bool(row["created"])

    def get_task_def(self, name: str) -> dict[str, Any]:
        row = self.db.autocommit(
            lambda c: c.execute(defs_sql.GET_TASK_DEF, {"name": name}).fetchone()
        )
        if row is None:
            raise NotFound("task definition", name)
        return views.task_def(row)

    def list_task_defs(self, limit: int = 50, page_token: str | None = None) -> dict[str, Any]:
        limit = max(1, min(limit, self.settings.max_search_limit))
        after = _decode_token(page_token)[0] if page_token else None
        rows = self.db.autocommit(
            lambda c: c.execute(
                defs_sql.LIST_TASK_DEFS, {"after": after, "limit": limit + 1}
            ).fetchall()
        )
        more = len(rows) > limit
        rows = rows[:limit]
        token = _encode_token(rows[-1]["name"]) if more else None
        return _page("taskDefs", [views.task_def(r) for r in rows], token)

    # --- instances ---------------------------------------------------------------------------

    def start_instance(
        self,
        *,
        definition_name: str | None = None,
        definition_version: int | None = None,
        definition: Any = None,
        input: dict[str, Any] | None = None,
        correlation_id: str | None = None,
        idempotency_key: str | None = None,
    ) -> tuple[dict[str, Any], bool]:
        """Start an instance; returns (instance, created). A repeated idempotency key returns
        the instance it first created, with ``created`` False.

        Round trips: the definition with its task definitions (and the BEGIN), then the
        instance, its first step and job, the audit rows and the COMMIT, then the read-back.
        """
        input = input or {}
        if (size := _json_size(input)) > self.settings.max_payload_bytes:
            raise PayloadTooLarge(size, self.settings.max_payload_bytes, "instance input")
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

        def work(conn: Conn) -> tuple[uuid.UUID, bool, str]:
            if inline is not None:
                row = first_in_transaction(
                    conn, defs_sql.TASK_DEFS_AS_TEXT, {"names": sorted(job_types(inline))}
                )
                snapshot_id, plan = self._snapshot(
                    conn,
                    inline.model_dump_json(by_alias=True, exclude_none=True),
                    row["task_defs"] if row else None,
                    inline,
                )
                name, version = inline.name, None
            else:
                assert definition_name is not None
                stored = first_in_transaction(
                    conn,
                    defs_sql.DEFINITION_WITH_TASK_DEFS,
                    {"name": definition_name, "version": definition_version},
                )
                if stored is None:
                    raise DefinitionNotFound(definition_name, definition_version)
                snapshot_id, plan = self.snapshot_of(conn, stored)
                name, version = stored["name"], stored["version"]
            iid, created = self.start_in(
                conn,
                plan,
                snapshot_id,
                name=name,
                version=version,
                input=input,
                correlation_id=correlation_id,
                idempotency_key=idempotency_key,
            )
            return iid, created, name

        iid, created, name = self.db.transaction(work, explicit_begin=True)
        log.info(
            "instance started" if created else "instance start repeated",
            extra={"instance_id": str(iid), "definition": name},
        )
        return self.get_instance(str(iid)), created

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
        queue_task_id: uuid.UUID | None = None,
        timeout_seconds: int | None = None,
        commit: bool = True,
    ) -> tuple[uuid.UUID, bool]:
        """Start an instance inside the caller's open transaction (queue triggers use it too).

        ``commit`` False leaves the transaction open for the caller's further writes.
        """
        iid = uuid.uuid4()
        insert = {
            "id": iid,
            "definition_name": name,
            "definition_version": version,
            "snapshot_id": snapshot_id,
            "input": Jsonb(input),
            "variables": Jsonb({}),
            "correlation_id": correlation_id,
            "idempotency_key": idempotency_key,
            "timeout_seconds": timeout_seconds or plan.definition.timeout_seconds,
            "queue_task_id": queue_task_id,
        }
        if idempotency_key is not None:
            # Find out first whether this key started an instance already.
            if conn.execute(inst_sql.INSERT_INSTANCE, insert).fetchone() is None:
                existing = conn.execute(
                    inst_sql.ID_BY_IDEMPOTENCY_KEY, {"key": idempotency_key}
                ).fetchone()
                assert existing is not None
                return existing["id"], False
            insert_now = None
        else:
            insert_now = insert  # travels in the write pipeline, ahead of its step and job
        state = InstanceState(
            id=iid,
            definition_name=name,
            status=RUNNING,
            version=1,
            input=input,
            variables={},
            correlation_id=correlation_id,
            queue_task_id=queue_task_id,
        )
        # A start computes no due times from the clock (they are computed by the database).
        decider = Decider(plan, state, lambda _sid: None, datetime.now(UTC))
        decider.start()
        inst_sql.write(
            conn, state, decider.changes, new_instance=True, commit=commit, insert=insert_now
        )
        self._report(decider)
        return iid, True

    def snapshot_of(self, conn: Conn, stored: dict[str, Any]) -> tuple[int, Plan]:
        """The snapshot of a stored definition row (from DEFINITION_WITH_TASK_DEFS)."""
        return self._snapshot(conn, stored["body"], stored["task_defs"], None)

    def _snapshot(
        self,
        conn: Conn,
        body_text: str,
        task_defs_text: str | None,
        parsed: WorkflowDefinition | None,
    ) -> tuple[int, Plan]:
        """Embed task definitions and store the immutable snapshot (deduplicated by digest).

        Cached per engine by (definition, task definitions) text: a repeated start of the same
        definition costs no snapshot round trip and no parsing.
        """
        key = (body_text, task_defs_text)
        hit = self._snapshots.get(key)
        if hit is not None:
            return hit
        definition = parsed or WorkflowDefinition.model_validate_json(body_text)
        task_defs = {
            n: TaskDef.model_validate(b) for n, b in json.loads(task_defs_text or "{}").items()
        }
        steps = [
            s.model_copy(update={"task_def": task_defs.get(s.job_type, s.task_def)})
            if isinstance(s, ServiceTaskStep)
            else s
            for s in definition.steps
        ]
        embedded = definition.model_copy(update={"steps": steps})
        body = embedded.model_dump_json(by_alias=True, exclude_none=True)
        params = {"digest": embedded.digest(), "body": body}
        row = conn.execute(inst_sql.UPSERT_SNAPSHOT, params).fetchone()
        if row is None:
            # A concurrent start inserted the same snapshot after this statement's snapshot
            # was taken; a new statement sees its committed row.
            row = conn.execute(inst_sql.SNAPSHOT_BY_DIGEST, params).fetchone()
        assert row is not None
        result = (int(row["id"]), self._plans.compile(row["id"], body))
        # Cache only a row that was committed before this transaction: one inserted here could
        # still roll back, and a cached id would then point at nothing.
        if not row.get("inserted"):
            if len(self._snapshots) >= 1024:
                self._snapshots.pop(next(iter(self._snapshots)))
            self._snapshots[key] = result
        return result

    def _plan(self, conn: Conn, snapshot_id: int) -> Plan:
        plan = self._plans.get(snapshot_id)
        if plan is None:  # first time this process sees the snapshot: one extra read
            row = conn.execute(inst_sql.SNAPSHOT_BODY, {"id": snapshot_id}).fetchone()
            assert row is not None
            plan = self._plans.compile(snapshot_id, row["body"])
        return plan

    def get_instance(self, instance_id: str) -> dict[str, Any]:
        iid = _uuid(instance_id, "id")

        def work(conn: Conn) -> dict[str, Any]:
            with conn.pipeline():  # both reads in one round trip
                head = conn.execute(inst_sql.GET_INSTANCE, {"id": iid})
                steps = conn.execute(inst_sql.STEPS_OF_INSTANCE, {"id": iid})
            row = head.fetchone()
            if row is None:
                raise InstanceNotFound(instance_id)
            return views.instance(row, steps.fetchall())

        return self.db.autocommit(work)

    def audit_trail(self, instance_id: str) -> list[dict[str, Any]]:
        iid = _uuid(instance_id, "id")
        rows = self.db.autocommit(
            lambda c: c.execute(inst_sql.AUDIT_OF_INSTANCE, {"id": iid}).fetchall()
        )
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
        limit: int = 20,
        page_token: str | None = None,
    ) -> dict[str, Any]:
        if status is not None and status not in SEARCH_STATUSES:
            raise ValidationFailed(
                [Problem("status", f"one of {', '.join(SEARCH_STATUSES)}, not {status!r}")]
            )
        limit = max(1, min(limit, self.settings.max_search_limit))
        cursor: tuple[str, str] | None = None
        if page_token:
            parts = _decode_token(page_token)
            if len(parts) != 2:
                raise ValidationFailed([Problem("pageToken", "not a token this API issued")])
            cursor = (parts[0], parts[1])
        rows = self.db.autocommit(
            lambda c: c.execute(
                inst_sql.SEARCH,
                {
                    "status": status,
                    "definition_name": definition_name,
                    "correlation_id": correlation_id,
                    "after_created": cursor[0] if cursor else None,
                    "after_id": cursor[1] if cursor else None,
                    "limit": limit + 1,
                },
            ).fetchall()
        )
        more = len(rows) > limit
        rows = rows[:limit]
        token = (
            _encode_token(rows[-1]["created_at"].isoformat(), str(rows[-1]["id"])) if more else None
        )
        return _page("instances", [views.instance(r) for r in rows], token)

    def cancel_instance(self, instance_id: str, reason: str | None = None) -> dict[str, Any]:
        iid = _uuid(instance_id, "id")

        def work(conn: Conn) -> None:
            row = self._lock_instance(conn, iid, instance_id)
            if row["status"] != RUNNING:
                raise Conflict(f"instance {instance_id} is {row['status']}, not RUNNING")
            plan = self._plan(conn, row["snapshot_id"])
            state = inst_sql.state_from_row(row)
            decider = Decider(plan, state, lambda _sid: None, row["now"])
            decider.cancel(reason or "cancelled through the API")
            inst_sql.write(conn, state, decider.changes, new_instance=False)
            self._report(decider)

        self.db.transaction(work, explicit_begin=True)
        log.info("instance cancelled", extra={"instance_id": instance_id})
        return self.get_instance(instance_id)

    def complete_user_task(
        self, instance_id: str, step_id: str, variables: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        return self._resume_waiting(
            instance_id, step_id, "USER_TASK", variables or {}, "USER_TASK_COMPLETED"
        )

    def signal(self, instance_id: str, step_id: str, payload: Any = None) -> dict[str, Any]:
        return self._resume_waiting(
            instance_id,
            step_id,
            "SIGNAL",
            payload if payload is not None else {},
            "SIGNAL_RECEIVED",
        )

    def _resume_waiting(
        self, instance_id: str, step_id: str, step_type: str, output: Any, event: str
    ) -> dict[str, Any]:
        iid = _uuid(instance_id, "id")
        if (size := _json_size(output)) > self.settings.max_payload_bytes:
            raise PayloadTooLarge(size, self.settings.max_payload_bytes)

        def work(conn: Conn) -> None:
            row = self._lock_instance(conn, iid, instance_id)
            plan = self._plan(conn, row["snapshot_id"])
            if not plan.has_step(step_id):
                raise StepNotFound(instance_id, step_id)
            actual = plan.step(step_id).type
            if actual != step_type:
                raise Conflict(f"step {step_id!r} is a {actual}, not a {step_type}")
            if row["status"] != RUNNING:
                raise Conflict(f"instance {instance_id} is {row['status']}, not RUNNING")
            step_row = conn.execute(
                inst_sql.LATEST_STEP, {"instance_id": iid, "step_id": step_id}
            ).fetchone()
            if step_row is None or step_row["status"] != "IN_PROGRESS":
                where = "has not started" if step_row is None else f"is {step_row['status']}"
                raise Conflict(f"step {step_id!r} {where}; it is not waiting")
            state = inst_sql.state_from_row(row)
            decider = Decider(
                plan, state, lambda sid: inst_sql.latest_output(conn, iid, sid), row["now"]
            )
            decider.changes.audit.append(AuditEvent(event, None, {"stepId": step_id}))
            decider.step_completed(step_id, step_row["id"], output)
            inst_sql.write(conn, state, decider.changes, new_instance=False)
            self._report(decider)

        self.db.transaction(work, explicit_begin=True)
        return self.get_instance(instance_id)

    def _lock_instance(self, conn: Conn, iid: uuid.UUID, instance_id: str) -> dict[str, Any]:
        row = first_in_transaction(conn, inst_sql.LOCK_INSTANCE, {"id": iid})
        if row is None:
            raise InstanceNotFound(instance_id)
        return row

    # --- jobs --------------------------------------------------------------------------------

    def poll(self, worker_id: str, job_types: list[str], max_jobs: int = 1) -> list[dict[str, Any]]:
        """Claim up to ``max_jobs`` jobs of ``job_types`` for ``worker_id`` (one statement)."""
        max_jobs = max(1, min(max_jobs, self.settings.max_jobs_per_poll))
        rows = self.db.autocommit(
            lambda c: jobs_sql.claim(
                c,
                worker_id=worker_id,
                job_types=list(dict.fromkeys(job_types)),
                max_jobs=max_jobs,
                max_bytes=self.settings.max_poll_response_bytes,
            )
        )
        m = self.metrics
        if not rows:
            m.add("JobPollEmpty", 1)
            return []
        m.add("JobsClaimed", len(rows))
        reclaimed = sum(1 for r in rows if r["reclaimed"])
        if reclaimed:
            m.add("LeasesExpired", reclaimed)
        for r in rows:
            m.add(
                "JobDispatchLatency", r["dispatch_latency"].total_seconds() * 1000, "Milliseconds"
            )
        return [views.claimed_job(r) for r in rows]

    def complete_job(
        self, job_id: str, worker_id: str, variables: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        jid = _uuid(job_id, "jobId")
        output = variables or {}
        if (size := _json_size(output)) > self.settings.max_payload_bytes:
            raise PayloadTooLarge(size, self.settings.max_payload_bytes, "job output")

        def decide(conn: Conn, row: dict[str, Any], locked: bool) -> bool:
            if completion_verdict(row, worker_id) == "duplicate":
                return False
            plan = self._plan(conn, row["snapshot_id"])
            state = inst_sql.state_from_row(row)
            decider = Decider(
                plan, state, lambda sid: inst_sql.latest_output(conn, row["id"], sid), row["now"]
            )
            decider.job_completed(jid, row["step_id"], row["step_execution_id"], output)
            inst_sql.write(conn, state, decider.changes, new_instance=False, in_transaction=locked)
            self._report(decider)
            return True

        applied = self._on_job(jid, job_id, decide)
        return {"jobId": job_id, "status": "COMPLETED", "applied": applied}

    def fail_job(
        self,
        job_id: str,
        worker_id: str,
        error_message: str,
        retryable: bool = True,
        *,
        next_retry_delay_seconds: float | None = None,
    ) -> dict[str, Any]:
        jid = _uuid(job_id, "jobId")

        def decide(conn: Conn, row: dict[str, Any], locked: bool) -> dict[str, Any]:
            if failure_verdict(row, worker_id) == "duplicate":
                return {"jobId": job_id, "status": "FAILED", "applied": False}
            plan = self._plan(conn, row["snapshot_id"])
            state = inst_sql.state_from_row(row)
            decider = Decider(plan, state, lambda _sid: None, row["now"])
            decider.job_failed(
                jid,
                row["step_id"],
                row["step_execution_id"],
                attempt=row["attempt"],
                retries_remaining=row["retries_remaining"],
                error=error_message,
                retryable=retryable,
                delay_override=next_retry_delay_seconds,
            )
            inst_sql.write(conn, state, decider.changes, new_instance=False, in_transaction=locked)
            self._report(decider)
            retry = decider.changes.retried_jobs
            if retry:
                return {
                    "jobId": job_id,
                    "status": "RETRY_SCHEDULED",
                    "applied": True,
                    "nextAttemptAt": views.ts(retry[0].run_at),
                }
            return {"jobId": job_id, "status": "FAILED", "applied": True}

        return self._on_job(jid, job_id, decide)

    def _on_job(
        self,
        jid: uuid.UUID,
        job_id: str,
        decide: Callable[[Conn, dict[str, Any], bool], T],
    ) -> T:
        """Run a job decision: optimistic first, under locks if that was raced.

        Optimistic: read job and instance without locks, decide, and write everything in one
        atomic statement whose instance update carries the version read (the fencing token).
        If anything changed the instance meanwhile, the database refuses the write and nothing
        of it lands; the decision is then made again on a locked, current state. Two round
        trips and two statements per completion, with no lock held between them.
        """

        def optimistic(conn: Conn) -> T:
            row = conn.execute(jobs_sql.READ_JOB_WITH_INSTANCE, {"job_id": jid}).fetchone()
            if row is None:
                raise JobNotFound(job_id)
            return decide(conn, row, False)

        def locked(conn: Conn) -> T:
            return decide(conn, self._lock_job(conn, jid, job_id), True)

        try:
            return self.db.autocommit(optimistic)
        except (StaleVersion, *RETRYABLE):
            return self.db.transaction(locked, explicit_begin=True)

    def heartbeat(self, job_id: str, worker_id: str) -> dict[str, Any]:
        jid = _uuid(job_id, "jobId")

        def work(conn: Conn) -> datetime:
            row = conn.execute(
                jobs_sql.HEARTBEAT, {"job_id": jid, "worker_id": worker_id}
            ).fetchone()
            if row is not None:
                expires: datetime = row["lock_expires_at"]
                return expires
            state = conn.execute(jobs_sql.JOB_STATE, {"job_id": jid}).fetchone()
            if state is None:
                raise JobNotFound(job_id)
            raise LeaseNotHeld(job_id, worker_id, f"the job is {state['status']}")

        expires = self.db.autocommit(work)  # one statement: one round trip
        return {"jobId": job_id, "lockExpiresAt": views.ts(expires)}

    def _lock_job(self, conn: Conn, jid: uuid.UUID, job_id: str) -> dict[str, Any]:
        row = first_in_transaction(conn, jobs_sql.LOCK_JOB_WITH_INSTANCE, {"job_id": jid})
        if row is None:
            raise JobNotFound(job_id)
        return row

    # --- scheduled duties --------------------------------------------------------------------

    def reap_expired_leases(self, limit: int = 1000) -> int:
        """Return expired leases to UNLOCKED and count them (the lease reaper)."""
        row = self.db.autocommit(
            lambda c: c.execute(jobs_sql.REAP_EXPIRED, {"limit": limit}).fetchone()
        )
        n = int(row["n"]) if row else 0
        if n:
            self.metrics.add("LeasesExpired", n)
            log.info("expired leases returned", extra={"count": n})
        return n

    def sweep(self, limit: int = 500) -> dict[str, int]:
        """Enforce instance timeouts (the sweeper). Returns what it did."""
        due = self.db.autocommit(
            lambda c: c.execute(inst_sql.TIMED_OUT_DUE, {"limit": limit}).fetchall()
        )
        timed_out = 0
        for r in due:
            timed_out += self._time_out_instance(r["id"])
        return {"instancesTimedOut": timed_out}

    def _time_out_instance(self, iid: uuid.UUID) -> int:
        def work(conn: Conn) -> int:
            row = first_in_transaction(conn, inst_sql.LOCK_INSTANCE_IF_DUE, {"id": iid})
            if row is None:
                return 0  # completed or changed meanwhile
            plan = self._plan(conn, row["snapshot_id"])
            state = inst_sql.state_from_row(row)
            decider = Decider(plan, state, lambda _sid: None, row["now"])
            if plan.definition.timeout_policy == "ALERT_ONLY":
                decider.changes.audit.append(AuditEvent("INSTANCE_TIMEOUT_ALERT"))
                decider.changes.instance_changed = True
                decider.changes.count("InstancesTimedOutAlert")
                state.clear_timeout = True
            else:
                decider.time_out(f"workflow timed out after {plan.definition.timeout_seconds}s")
            inst_sql.write(conn, state, decider.changes, new_instance=False)
            self._report(decider)
            return 1

        return self.db.transaction(work, explicit_begin=True)

    def _report(self, decider: Decider) -> None:
        for name, value in decider.changes.counters.items():
            self.metrics.add(name, value)


def _page(key: str, items: list[dict[str, Any]], token: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {key: items}
    if token:
        out["nextPageToken"] = token
    return out


def _encode_token(*parts: str) -> str:
    return base64.urlsafe_b64encode("\x1f".join(parts).encode()).decode().rstrip("=")


def _decode_token(token: str) -> list[str]:
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise ValidationFailed([Problem("pageToken", "not a token this API issued")]) from None
    return raw.split("\x1f")


__all__ = ["Engine", "completion_verdict", "failure_verdict"]
