"""A definition compiled for execution: step lookup by id and structured navigation.

Control flow is structured: a step lives in a list, the list belongs to a container step (or is the
root list). After a step finishes, execution moves to the next step of its list; at the end of a
list, the container decides what happens (the root list ending completes the instance).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from baton.definitions import (
    DEFAULT_RESPONSE_TIMEOUT_SECONDS,
    DEFAULT_RETRY_COUNT,
    DEFAULT_RETRY_DELAY_SECONDS,
    DEFAULT_RETRY_LOGIC,
    RetryLogic,
    ServiceTaskStep,
    Step,
    TimeoutPolicy,
    WorkflowDefinition,
)


@dataclass(frozen=True, slots=True)
class Position:
    """Where a step sits: its list (a tuple of steps), its index there, and the container."""

    steps: tuple[Step, ...]
    index: int
    container_id: str | None  # None: the root list


@dataclass(frozen=True, slots=True)
class TaskPolicy:
    """Effective retry/timeout settings of a SERVICE_TASK: step > task definition > default."""

    retry_count: int
    retry_logic: RetryLogic
    retry_delay_seconds: int
    max_retry_delay_seconds: int | None
    lease_seconds: int
    timeout_seconds: int
    poll_timeout_seconds: int
    timeout_policy: TimeoutPolicy
    input_template: dict[str, Any]


def task_policy(step: ServiceTaskStep) -> TaskPolicy:
    td = step.task_def

    def pick(name: str, default: Any) -> Any:
        value = getattr(step, name)
        if value is None and td is not None:
            value = getattr(td, name)
        return default if value is None else value

    return TaskPolicy(
        retry_count=pick("retry_count", DEFAULT_RETRY_COUNT),
        retry_logic=RetryLogic(pick("retry_logic", DEFAULT_RETRY_LOGIC)),
        retry_delay_seconds=pick("retry_delay_seconds", DEFAULT_RETRY_DELAY_SECONDS),
        max_retry_delay_seconds=pick("max_retry_delay_seconds", None),
        lease_seconds=pick("response_timeout_seconds", DEFAULT_RESPONSE_TIMEOUT_SECONDS),
        timeout_seconds=pick("timeout_seconds", 0),
        poll_timeout_seconds=pick("poll_timeout_seconds", 0),
        timeout_policy=TimeoutPolicy(pick("timeout_policy", TimeoutPolicy.TIME_OUT_WF)),
        input_template=dict(td.input_template or {}) if td is not None else {},
    )


class Plan:
    """Immutable; built once per definition snapshot and cached by the process."""

    def __init__(self, definition: WorkflowDefinition) -> None:
        self.definition = definition
        self.root: tuple[Step, ...] = tuple(definition.steps)
        self._positions: dict[str, Position] = {}
        self._index(self.root, None)
        self._policies: dict[str, TaskPolicy] = {
            s.id: task_policy(s) for s in self.steps() if isinstance(s, ServiceTaskStep)
        }

    def _index(self, steps: Sequence[Step], container_id: str | None) -> None:
        tup = tuple(steps)
        for i, step in enumerate(tup):
            self._positions[step.id] = Position(tup, i, container_id)
            # Container step types index their nested lists here, with themselves as container.

    def steps(self) -> list[Step]:
        return [p.steps[p.index] for p in self._positions.values()]

    def step(self, step_id: str) -> Step:
        pos = self._positions[step_id]
        return pos.steps[pos.index]

    def has_step(self, step_id: str) -> bool:
        return step_id in self._positions

    def first(self) -> Step:
        return self.root[0]

    def next_after(self, step_id: str) -> Step | None:
        """The step that follows ``step_id`` in its own list, or None at the list's end."""
        pos = self._positions[step_id]
        nxt = pos.index + 1
        return pos.steps[nxt] if nxt < len(pos.steps) else None

    def container_of(self, step_id: str) -> str | None:
        return self._positions[step_id].container_id

    def policy(self, step_id: str) -> TaskPolicy:
        return self._policies[step_id]

    def job_types(self) -> frozenset[str]:
        return frozenset(s.job_type for s in self.steps() if isinstance(s, ServiceTaskStep))


class PlanCache:
    """Compiled plans by snapshot id, for one database (ids are per database).

    Snapshots never change, so entries never go stale; any eviction is safe.
    """

    def __init__(self, max_size: int = 1024) -> None:
        self._plans: dict[int, Plan] = {}
        self._max = max_size

    def get(self, snapshot_id: int) -> Plan | None:
        return self._plans.get(snapshot_id)

    def compile(self, snapshot_id: int, body_json: str) -> Plan:
        plan = self._plans.get(snapshot_id)
        if plan is None:
            plan = Plan(WorkflowDefinition.model_validate_json(body_json))
            if len(self._plans) >= self._max:
                self._plans.pop(next(iter(self._plans)))
            self._plans[snapshot_id] = plan
        return plan


def job_types(definition: WorkflowDefinition) -> set[str]:
    """Every job type a definition's service tasks use."""
    return {s.job_type for s in definition.steps if isinstance(s, ServiceTaskStep)}
