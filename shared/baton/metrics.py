"""A metrics sink the engine reports to; the Lambda edge plugs in Powertools EMF metrics."""

from __future__ import annotations

from typing import Literal, Protocol

Unit = Literal["Count", "Milliseconds", "Seconds", "Bytes"]


Dimensions = dict[str, str]


class MetricsSink(Protocol):
    def add(
        self, name: str, value: float, unit: Unit = "Count", dimensions: Dimensions | None = None
    ) -> None:
        """Record ``value`` under ``name`` (and, with ``dimensions``, under those too)."""


class NullMetrics:
    def add(
        self, name: str, value: float, unit: Unit = "Count", dimensions: Dimensions | None = None
    ) -> None:
        return None


class CountingMetrics:
    """Keeps totals in memory (tests, the local server's debug view). A dimensioned metric is
    also counted as ``Name[key=value,...]``."""

    def __init__(self) -> None:
        self.totals: dict[str, float] = {}

    def add(
        self, name: str, value: float, unit: Unit = "Count", dimensions: Dimensions | None = None
    ) -> None:
        self.totals[name] = self.totals.get(name, 0.0) + value
        if dimensions:
            key = name + "[" + ",".join(f"{k}={v}" for k, v in sorted(dimensions.items())) + "]"
            self.totals[key] = self.totals.get(key, 0.0) + value
