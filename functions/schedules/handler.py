"""Schedules API: create, list, read (next fire times, recent actions), replace, delete, pause,
unpause, trigger now and backfill. The duty loop (the sweeper) fires them."""

from __future__ import annotations

from typing import Any

from baton.engine.schedule_ops import Schedules
from baton_lambda.http import Api

api = Api("schedules")


def _schedules() -> Schedules:
    return Schedules(api.engine())


@api.route("POST", "/v1/schedules")
def create() -> Any:
    body = api.json()
    created = _schedules().create(body)
    if isinstance(body, dict) and body.get("dryRun") is True:
        return api.ok(created)  # shown, not created
    api.log_keys(schedule_id=created["id"])
    return api.ok(created, 201)


@api.route("GET", "/v1/schedules")
def list_schedules() -> Any:
    return api.ok(
        _schedules().list_schedules(
            limit=api.query_int("limit", 50, high=100), page_token=api.query("pageToken")
        )
    )


@api.route("GET", "/v1/schedules/{id}")
def get(id: str) -> Any:
    return api.ok(_schedules().get(api.path(id)))


@api.route("PUT", "/v1/schedules/{id}")
def replace(id: str) -> Any:
    return api.ok(_schedules().replace(api.path(id), api.json()))


@api.route("DELETE", "/v1/schedules/{id}")
def delete(id: str) -> Any:
    return api.ok(_schedules().delete(api.path(id)))


@api.route("POST", "/v1/schedules/{id}/pause")
def pause(id: str) -> Any:
    body = api.json()
    note = body.get("note") if isinstance(body, dict) else None
    return api.ok(
        _schedules().set_paused(api.path(id), True, note if isinstance(note, str) else None)
    )


@api.route("POST", "/v1/schedules/{id}/unpause")
def unpause(id: str) -> Any:
    return api.ok(_schedules().set_paused(api.path(id), False))


@api.route("POST", "/v1/schedules/{id}/trigger")
def trigger(id: str) -> Any:
    return api.ok(_schedules().trigger(api.path(id)), 202)


@api.route("POST", "/v1/schedules/{id}/backfill")
def backfill(id: str) -> Any:
    return api.ok(_schedules().backfill(api.path(id), api.json()), 202)


handler = api.handler()
