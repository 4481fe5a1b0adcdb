"""Schedules: create, read, list, replace, delete, pause and unpause, trigger now, backfill.

A schedule starts a definition (by name, optional version) on the slots of its spec
(:mod:`baton.engine.schedule_spec`); the duty loop fires them (:mod:`baton.engine.schedule_firing`).
Every request is validated whole: a 422 lists every problem.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from psycopg.types.json import Jsonb

from baton.engine import paging, views
from baton.engine.schedule_spec import OVERLAP_POLICIES, Spec, iso, parse_spec
from baton.engine.service import Engine
from baton.errors import Conflict, NotFound, Problem, ValidationFailed
from baton.store import schedule_sql
from baton.store.db import Conn

ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
ID_RULE = "1 to 128 letters, digits, '.', '_', ':' or '-', starting with a letter or digit"
DEFAULT_CATCHUP_SECONDS = 60
MAX_CATCHUP_SECONDS = 366 * 86_400
NEXT_FIRE_TIMES = 10
RECENT_ACTIONS = 10
# A backfill (or a trigger) adds at most this many slots in one call.
MAX_BACKFILL_SLOTS = 10_000
_FIELDS = {
    "id",
    "definitionName",
    "definitionVersion",
    "input",
    "spec",
    "overlapPolicy",
    "catchupWindowSeconds",
    "pauseOnFailure",
    "paused",
    "note",
    "dryRun",
}


class ScheduleNotFound(NotFound):
    def __init__(self, ident: str) -> None:
        super().__init__("schedule", ident)


def validate(body: Any, path_id: str | None = None) -> dict[str, Any]:
    """A schedule request as the columns it sets, with its parsed spec under ``_spec``."""
    problems: list[Problem] = []
    if not isinstance(body, dict):
        raise ValidationFailed([Problem("", "a JSON object: a schedule")])
    problems.extend(Problem(k, "unknown field") for k in body if k not in _FIELDS)
    sid = body.get("id", path_id)
    if path_id is not None and sid != path_id:
        problems.append(Problem("id", f"differs from the path's id {path_id!r}"))
    if sid is None:
        sid = str(uuid.uuid4())
    elif not isinstance(sid, str) or not ID_PATTERN.fullmatch(sid):
        problems.append(Problem("id", ID_RULE))
    name = body.get("definitionName")
    if not isinstance(name, str) or not name:
        problems.append(Problem("definitionName", "the name of the definition to start"))
    version = body.get("definitionVersion")
    if version is not None and (
        isinstance(version, bool) or not isinstance(version, int) or version < 1
    ):
        problems.append(
            Problem("definitionVersion", "a version number (1 or more), or absent for the latest")
        )
    data = body.get("input", {})
    if data is None:
        data = {}
    if not isinstance(data, dict):
        problems.append(Problem("input", "a JSON object"))
    policy = body.get("overlapPolicy", "SKIP")
    if policy not in OVERLAP_POLICIES:
        problems.append(Problem("overlapPolicy", f"one of {', '.join(OVERLAP_POLICIES)}"))
    catchup = body.get("catchupWindowSeconds", DEFAULT_CATCHUP_SECONDS)
    if (
        isinstance(catchup, bool)
        or not isinstance(catchup, int)
        or not 0 <= catchup <= MAX_CATCHUP_SECONDS
    ):
        problems.append(
            Problem("catchupWindowSeconds", f"an integer from 0 to {MAX_CATCHUP_SECONDS}")
        )
    for flag in ("pauseOnFailure", "paused", "dryRun"):
        if not isinstance(body.get(flag, False), bool):
            problems.append(Problem(flag, "true or false"))
    note = body.get("note")
    if note is not None and (not isinstance(note, str) or len(note) > 1000):
        problems.append(Problem("note", "a string of at most 1000 characters"))
    spec = parse_spec(body.get("spec"), problems)
    if problems:
        raise ValidationFailed(problems)
    return {
        "id": sid,
        "definition_name": name,
        "definition_version": version,
        "input": data,
        "spec_json": body["spec"],
        "overlap_policy": policy,
        "catchup_window_seconds": catchup,
        "pause_on_failure": bool(body.get("pauseOnFailure", False)),
        "paused": bool(body.get("paused", False)),
        "note": note,
        "_spec": spec,
        "_dry_run": body.get("dryRun") is True,
    }


def spec_of(row: dict[str, Any]) -> Spec:
    problems: list[Problem] = []
    spec = parse_spec(row["spec"], problems)
    assert spec is not None, problems  # validated when stored
    return spec


def _time_param(value: Any, field: str, problems: list[Problem]) -> datetime | None:
    if isinstance(value, str):
        try:
            t = datetime.fromisoformat(value.replace("Z", "+00:00"))
            if t.tzinfo is not None:
                return t.astimezone(UTC)
        except ValueError:
            pass
    problems.append(Problem(field, "an ISO 8601 time with an offset, e.g. 2026-01-01T00:00:00Z"))
    return None


def action_view(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "slotTime": iso(row["slot_time"]),
        "kind": row["kind"],
        "outcome": row["status"],
        "instanceId": None if row["instance_id"] is None else str(row["instance_id"]),
        "detail": row["detail"],
        "at": views.ts(row["settled_at"]),
    }


def _params(checked: dict[str, Any]) -> dict[str, Any]:
    """The statement parameters of a validated schedule, its slots counted from now."""
    params = dict(checked)
    spec: Spec = params.pop("_spec")
    params["spec"] = Jsonb(params.pop("spec_json"))
    params["input"] = Jsonb(params["input"])
    params["now"] = datetime.now(UTC)
    params["next_fire_at"] = spec.next_after(params["now"])
    return params


class _Previewed(Exception):
    """A dry run's view, carried out of its transaction so that the transaction rolls back."""

    def __init__(self, view: dict[str, Any]) -> None:
        super().__init__("dry run")
        self.view = view


class Schedules:
    """The schedule operations, over an engine."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.db = engine.db

    def view(
        self, row: dict[str, Any], conn: Conn | None = None, *, full: bool = False
    ) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": row["id"],
            "definitionName": row["definition_name"],
            "definitionVersion": row["definition_version"],
            "input": row["input"],
            "spec": row["spec"],
            "overlapPolicy": row["overlap_policy"],
            "catchupWindowSeconds": row["catchup_window_seconds"],
            "pauseOnFailure": row["pause_on_failure"],
            "paused": row["paused"],
            "note": row["note"],
            "createdAt": views.ts(row["created_at"]),
            "updatedAt": views.ts(row["updated_at"]),
        }
        spec = spec_of(row)
        now = datetime.now(UTC)
        times = spec.fire_times(now - timedelta(microseconds=1))
        out["nextFireTimes"] = [iso(t) for _, t in zip(range(NEXT_FIRE_TIMES), times, strict=False)]
        if full and conn is not None:
            rows = conn.execute(
                schedule_sql.RECENT_ACTIONS, {"id": row["id"], "limit": RECENT_ACTIONS}
            ).fetchall()
            out["recentActions"] = [action_view(r) for r in rows]
        return out

    def create(self, body: Any) -> dict[str, Any]:
        """Create a schedule. With ``dryRun: true``, everything a create does (validation, the
        id's uniqueness, the view with its next fire times), then rolled back: nothing kept."""
        params = _params(validate(body))
        dry_run = params.pop("_dry_run")

        def work(conn: Conn) -> dict[str, Any]:
            row = conn.execute(schedule_sql.INSERT, params).fetchone()
            if row is None:
                raise Conflict(
                    f"schedule {params['id']!r} exists already: PUT /v1/schedules/{params['id']} "
                    "replaces it, or choose another id"
                )
            shown = self.view(row, conn, full=True)
            if dry_run:
                raise _Previewed(shown)
            return shown

        return self._run(work)

    def _run(self, work: Callable[[Conn], dict[str, Any]]) -> dict[str, Any]:
        try:
            return self.db.transaction(work)
        except _Previewed as previewed:  # a dry run: its transaction rolled back
            return previewed.view

    def get(self, schedule_id: str) -> dict[str, Any]:
        def work(conn: Conn) -> dict[str, Any]:
            row = conn.execute(schedule_sql.GET, {"id": schedule_id}).fetchone()
            if row is None:
                raise ScheduleNotFound(schedule_id)
            return self.view(row, conn, full=True)

        return self.db.transaction(work)

    def list_schedules(self, *, limit: int = 50, page_token: str | None = None) -> dict[str, Any]:
        limit = paging.clamp(limit, 100)
        after = paging.decode_token(page_token, 1)[0] if page_token else None
        rows = self.db.autocommit(
            lambda c: c.execute(schedule_sql.LIST, {"after": after, "limit": limit + 1}).fetchall()
        )
        token = paging.encode_token(rows[limit - 1]["id"]) if len(rows) > limit else None
        return paging.page("schedules", [self.view(r) for r in rows[:limit]], token)

    def replace(self, schedule_id: str, body: Any) -> dict[str, Any]:
        """Replace a schedule whole; ``dryRun: true`` shows the result and keeps nothing."""
        params = _params(validate(body, schedule_id))
        dry_run = params.pop("_dry_run")

        def work(conn: Conn) -> dict[str, Any]:
            if conn.execute(schedule_sql.LOCK, {"id": schedule_id}).fetchone() is None:
                raise ScheduleNotFound(schedule_id)
            conn.execute(schedule_sql.DROP_PENDING, {"id": schedule_id})
            row = conn.execute(schedule_sql.UPDATE, params).fetchone()
            assert row is not None
            shown = self.view(row, conn, full=True)
            if dry_run:
                raise _Previewed(shown)
            return shown

        return self._run(work)

    def delete(self, schedule_id: str) -> dict[str, Any]:
        row = self.db.autocommit(
            lambda c: c.execute(schedule_sql.DELETE, {"id": schedule_id}).fetchone()
        )
        if row is None:
            raise ScheduleNotFound(schedule_id)
        return {"id": schedule_id, "deleted": True}

    def set_paused(self, schedule_id: str, paused: bool, note: str | None = None) -> dict[str, Any]:
        def work(conn: Conn) -> dict[str, Any]:
            locked = conn.execute(schedule_sql.LOCK, {"id": schedule_id}).fetchone()
            if locked is None:
                raise ScheduleNotFound(schedule_id)
            # Scheduled slots not fired yet are dropped: the paused time's are never fired.
            conn.execute(schedule_sql.DROP_PENDING, {"id": schedule_id})
            # Unpaused, it fires from now on (or from where it got to, if that is later).
            since = max(datetime.now(UTC), locked["materialized_until"])
            params = {
                "id": schedule_id,
                "paused": paused,
                "note": note,
                "now": since,
                "next_fire_at": spec_of(locked).next_after(since),
            }
            row = conn.execute(schedule_sql.SET_PAUSED, params).fetchone()
            assert row is not None
            return self.view(row, conn, full=True)

        return self.db.transaction(work)

    def trigger(self, schedule_id: str) -> dict[str, Any]:
        """A slot now (kind TRIGGER), fired by the next pass of the duty loop with the overlap
        policy (even while the schedule is paused)."""
        clock = datetime.now(UTC)
        now = clock.replace(microsecond=clock.microsecond // 1000 * 1000)  # as iso() spells it
        added = self._add_slots(schedule_id, [now], "TRIGGER")
        return {"id": schedule_id, "slotTimes": added}

    def backfill(self, schedule_id: str, body: Any) -> dict[str, Any]:
        """Slots of the spec in ``[from, to]`` (kind BACKFILL), fired in order by the duty loop
        whatever the catch-up window; a slot that already fired is left as it is."""
        problems: list[Problem] = []
        if not isinstance(body, dict):
            raise ValidationFailed([Problem("", "a JSON object: {from, to}")])
        problems.extend(Problem(k, "unknown field") for k in body if k not in ("from", "to"))
        start = _time_param(body.get("from"), "from", problems)
        end = _time_param(body.get("to"), "to", problems)
        if start and end and end < start:
            problems.append(Problem("to", "not before from"))
        if problems:
            raise ValidationFailed(problems)
        assert start is not None and end is not None
        row = self.db.autocommit(
            lambda c: c.execute(schedule_sql.GET, {"id": schedule_id}).fetchone()
        )
        if row is None:
            raise ScheduleNotFound(schedule_id)
        times: list[datetime] = []
        for t in spec_of(row).fire_times(start - timedelta(microseconds=1), end):
            if len(times) == MAX_BACKFILL_SLOTS:
                raise ValidationFailed(
                    [
                        Problem(
                            "to", f"more than {MAX_BACKFILL_SLOTS} slots: backfill a shorter range"
                        )
                    ]
                )
            times.append(t)
        added = self._add_slots(schedule_id, times, "BACKFILL")
        return {
            "id": schedule_id,
            "slots": len(times),
            "added": len(added),
            "slotTimes": added[:100],
        }

    def _add_slots(self, schedule_id: str, times: list[datetime], kind: str) -> list[str]:
        def work(conn: Conn) -> list[str]:
            if conn.execute(schedule_sql.LOCK, {"id": schedule_id}).fetchone() is None:
                raise ScheduleNotFound(schedule_id)
            added = []
            for t in times:
                params = {"id": schedule_id, "slot_time": t, "kind": kind}
                if conn.execute(schedule_sql.INSERT_SLOT, params).fetchone() is not None:
                    added.append(iso(t))
            return added

        return self.db.transaction(work)
