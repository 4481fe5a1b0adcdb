"""The engine's metrics sink as CloudWatch EMF metrics (Powertools).

Each function owns an ``EphemeralMetrics``: Powertools' ``Metrics`` shares one metric set across
every instance in a process, so in the local server (every function in one process) one
function's flush would carry the others' metrics under its name.

The engine reports a value per job (``JobDispatchLatency`` for each job a poll claims), and
Powertools' ``add_metric`` costs more the more values a metric holds (it formats the whole
metric into a debug message at every call, about 12 µs a value at a poll of 100). The sink keeps
the invocation's values in a plain list per metric and hands each metric to Powertools whole
when the invocation ends (:meth:`EmfMetrics.publish`, before Powertools' flush): the same EMF
lines, at most 100 values of a metric in each, as Powertools writes them itself. With metrics
disabled (``POWERTOOLS_METRICS_DISABLED``, as ``baton dev`` runs) nothing is published.
"""

from __future__ import annotations

import threading
import warnings

from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit, single_metric
from aws_lambda_powertools.metrics.functions import is_metrics_disabled
from baton.metrics import Dimensions, Unit

# An invocation that produced no metric (a heartbeat, a GET, a reaper pass that found nothing)
# is normal, not worth a warning: Powertools' UserWarning was logged at every cold start.
warnings.filterwarnings("ignore", message="No application metrics to publish")


_UNITS = {
    "Count": MetricUnit.Count,
    "Milliseconds": MetricUnit.Milliseconds,
    "Seconds": MetricUnit.Seconds,
    "Bytes": MetricUnit.Bytes,
}
# CloudWatch takes at most 100 values of a metric in one EMF line; Powertools writes the line out
# when its 100th value is added.
MAX_VALUES = 100


class EmfMetrics:
    """The engine's metrics sink, as Powertools EMF metrics published once per invocation."""

    def __init__(self, metrics: EphemeralMetrics) -> None:
        self._m = metrics
        self._lock = threading.Lock()
        self._pending: dict[str, tuple[MetricUnit, list[float]]] = {}

    def add(
        self, name: str, value: float, unit: Unit = "Count", dimensions: Dimensions | None = None
    ) -> None:
        mu = _UNITS.get(unit, MetricUnit.Count)
        number = float(value)  # a value that is not a number fails here, at its caller
        with self._lock:
            kept = self._pending.get(name)
            if kept is None or kept[0] is not mu:
                # A new metric (or a new unit for it: Powertools keeps the last one too).
                kept = (mu, kept[1] if kept is not None else [])
                self._pending[name] = kept
            kept[1].append(number)
        if dimensions:
            # A dimensioned series of its own (e.g. TaskTimedOut by Policy), in its own EMF line.
            with single_metric(name=name, unit=mu, value=value, namespace=self._m.namespace) as one:
                for key, dim in dimensions.items():
                    one.add_dimension(name=key, value=dim)

    def publish(self) -> None:
        """Hand the values kept since the last call to Powertools' metric set (flushed by its
        ``log_metrics`` at the end of the invocation); with metrics disabled, drop them."""
        with self._lock:
            pending, self._pending = self._pending, {}
        if not pending or is_metrics_disabled():
            return
        for name, (unit, values) in pending.items():
            self._publish(name, unit, values)

    def _publish(self, name: str, unit: MetricUnit, values: list[float]) -> None:
        metrics = self._m
        done = 0
        while done < len(values):
            series = metrics.metric_set.get(name)
            if series is not None:
                # Up to the 99th value directly; the 100th through add_metric, which then
                # writes the full metric set out as one EMF line and clears it, as it always has.
                room = MAX_VALUES - 1 - len(series["Value"])
                if room > 0:
                    more = values[done : done + room]
                    series["Value"].extend(more)
                    done += len(more)
            if done < len(values):
                # Validates the name and unit (the first value of a metric comes this way).
                metrics.add_metric(name=name, unit=unit, value=values[done])
                done += 1
