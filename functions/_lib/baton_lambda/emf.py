"""The engine's metrics sink as CloudWatch EMF metrics (Powertools).

Each function owns an ``EphemeralMetrics``: Powertools' ``Metrics`` shares one metric set across
every instance in a process, so in the local server (every function in one process) one
function's flush would carry the others' metrics under its name.
"""

from __future__ import annotations

import warnings

from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit, single_metric
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


class EmfMetrics:
    """The engine's metrics sink, as Powertools EMF metrics."""

    def __init__(self, metrics: EphemeralMetrics) -> None:
        self._m = metrics

    def add(
        self, name: str, value: float, unit: Unit = "Count", dimensions: Dimensions | None = None
    ) -> None:
        mu = _UNITS.get(unit, MetricUnit.Count)
        self._m.add_metric(name=name, unit=mu, value=value)
        if dimensions:
            # A dimensioned series of its own (e.g. TaskTimedOut by Policy), in its own EMF line.
            with single_metric(name=name, unit=mu, value=value, namespace=self._m.namespace) as one:
                for key, dim in dimensions.items():
                    one.add_dimension(name=key, value=dim)
