"""The schedules' wire models (``/v1/schedules``): the OpenAPI document's source for them. The
engine validates a schedule itself (``baton.engine.schedule_ops.validate``), listing every
problem; these models describe the same contract."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import Field

from baton.api.models import ApiModel
from baton.model import INT32_MAX

OverlapPolicy = Literal[
    "SKIP", "BUFFER_ONE", "BUFFER_ALL", "CANCEL_OTHER", "TERMINATE_OTHER", "ALLOW_ALL"
]
ScheduleId = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")]


class ScheduleInterval(ApiModel):
    every_seconds: Annotated[int, Field(ge=1, le=10**9)]
    offset_seconds: Annotated[int, Field(ge=0, le=10**9)] = Field(
        default=0, description="Slots at epoch + offsetSeconds + k * everySeconds."
    )


class ScheduleSpec(ApiModel):
    cron: list[str] | None = Field(
        default=None,
        description="Cron expressions: 5 fields, 6 with seconds first, or @hourly, @daily, "
        "@weekly, @monthly, @yearly; read in timeZone's wall time.",
    )
    interval: ScheduleInterval | None = None
    time_zone: str | None = Field(
        default=None,
        description="An IANA time zone (default UTC). In a daylight-saving gap a slot fires at "
        "the first valid time after it; in a repeated hour, once, at the first occurrence.",
    )
    jitter_seconds: Annotated[int, Field(ge=0, le=86_400)] | None = None
    start_at: datetime | None = None
    end_at: datetime | None = None


class ScheduleRequest(ApiModel):
    """A schedule to create (``POST``) or the whole new schedule (``PUT``)."""

    id: ScheduleId | None = Field(
        default=None, description="Chosen by the client; a UUID if absent."
    )
    definition_name: str
    definition_version: Annotated[int, Field(ge=1, le=INT32_MAX)] | None = None
    input: dict[str, Any] | None = Field(
        default=None, description="May read ${schedule.time} (the slot) and ${schedule.id}."
    )
    spec: ScheduleSpec
    overlap_policy: OverlapPolicy = "SKIP"
    catchup_window_seconds: Annotated[int, Field(ge=0, le=366 * 86_400)] = 60
    pause_on_failure: bool = False
    paused: bool = False
    note: Annotated[str, Field(max_length=1000)] | None = None
    dry_run: bool = Field(
        default=False,
        description="Validate and answer the schedule as it would be, with its next fire "
        "times (200), keeping nothing.",
    )


class ScheduleAction(ApiModel):
    slot_time: datetime
    kind: Literal["SCHEDULED", "TRIGGER", "BACKFILL"]
    outcome: Literal["STARTED", "SKIPPED", "MISSED", "FAILED"]
    instance_id: str | None = None
    detail: str | None = None
    at: datetime | None = None


class Schedule(ApiModel):
    id: str
    definition_name: str
    definition_version: int | None = None
    input: dict[str, Any]
    spec: ScheduleSpec
    overlap_policy: OverlapPolicy
    catchup_window_seconds: int
    pause_on_failure: bool
    paused: bool
    note: str | None = None
    created_at: datetime
    updated_at: datetime
    next_fire_times: list[datetime] = Field(description="The next ten slot times.")
    recent_actions: list[ScheduleAction] | None = Field(
        default=None, description="The last ten settled slots (not in a list's items)."
    )


class SchedulePage(ApiModel):
    schedules: list[Schedule]
    next_page_token: str | None = None


class PauseScheduleRequest(ApiModel):
    note: Annotated[str, Field(max_length=1000)] | None = None


class ScheduleOperationRequest(ApiModel):
    """Unpause and trigger take no options (an empty object or no body)."""


class ScheduleTriggered(ApiModel):
    id: str
    slot_times: list[datetime]


class BackfillRequest(ApiModel):
    from_: datetime = Field(alias="from")
    to: datetime


class BackfillResponse(ApiModel):
    id: str
    slots: int = Field(description="Slots of the spec in the range.")
    added: int = Field(description="Slots added (a slot that fired already is left as it is).")
    slot_times: list[datetime] = Field(description="The first 100 slots added.")


class DeletedSchedule(ApiModel):
    id: str
    deleted: bool
