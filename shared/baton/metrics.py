"""A metrics sink the engine reports to; the Lambda edge plugs in Powertools EMF metrics."""

from __future__ import annotations

from typing import Literal, Protocol

Unit = Literal["Count", "Milliseconds"]


class MetricsSink(Protocol):
    def add(self, name: str, value: float, unit: Unit = "Count") -> None: ...


class NullMetrics:
    def add(self, name: str, value: float, unit: Unit = "Count") -> None:
        return None


class CountingMetrics:
    """Keeps totals in memory (tests, the local server's debug view)."""

    def __init__(self) -> None:
        self.totals: dict[str, float] = {}

    def add(self, name: str, value: float, unit: Unit = "Count") -> None:
        self.totals[name] = self.totals.get(name, 0.0) + value
