"""The engine's metrics sink (``baton_lambda.emf``): per-job values cost a list append, and the EMF
lines Powertools writes are the ones it wrote when every value went through ``add_metric``."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit


def _emf_lines(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines() if '"_aws"' in line]


def _values(lines: list[dict[str, Any]], name: str) -> list[float]:
    return [v for line in lines for v in line.get(name, [])]


def _run(add: Any, metrics: EphemeralMetrics, publish: Any = None) -> None:
    def handler(event: Any, context: Any) -> None:
        add("JobsClaimed", 250, MetricUnit.Count)
        for k in range(250):
            add("JobDispatchLatency", 1.5 + k, MetricUnit.Milliseconds)
        if publish is not None:
            publish()

    metrics.log_metrics(handler)({}, None)


def test_the_sink_writes_the_values_powertools_wrote_value_by_value(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from baton_lambda.emf import MAX_VALUES, EmfMetrics

    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "BatonTest")
    reference = EphemeralMetrics(service="baton-jobs")
    _run(lambda n, v, u: reference.add_metric(name=n, unit=u, value=v), reference)
    expected = _emf_lines(capsys.readouterr().out)

    metrics = EphemeralMetrics(service="baton-jobs")
    sink = EmfMetrics(metrics)
    _run(lambda n, v, u: sink.add(n, v, str(u.value)), metrics, sink.publish)  # type: ignore[arg-type]
    got = _emf_lines(capsys.readouterr().out)

    assert _values(got, "JobDispatchLatency") == [1.5 + k for k in range(250)]
    assert _values(got, "JobsClaimed") == [250.0]
    assert _values(got, "JobDispatchLatency") == _values(expected, "JobDispatchLatency")
    assert all(len(line.get("JobDispatchLatency", [])) <= MAX_VALUES for line in got)
    assert len(got) == len(expected)  # 100 + 100 + 50 values, a line each
    units = {
        m["Name"]: m["Unit"]
        for line in got
        for m in line["_aws"]["CloudWatchMetrics"][0]["Metrics"]
    }
    assert units == {"JobDispatchLatency": "Milliseconds", "JobsClaimed": "Count"}


def test_a_poll_of_many_jobs_calls_powertools_once_per_hundred_values(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # add_metric formats the whole metric into a debug message at every call: a value per job
    # through it cost ~12 µs a job at a poll of 100.
    from baton_lambda.emf import EmfMetrics

    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "BatonTest")
    calls = 0
    original = EphemeralMetrics.add_metric

    def counted(self: EphemeralMetrics, *args: Any, **kwargs: Any) -> None:
        nonlocal calls
        calls += 1
        original(self, *args, **kwargs)

    monkeypatch.setattr(EphemeralMetrics, "add_metric", counted)
    metrics = EphemeralMetrics(service="baton-jobs")
    sink = EmfMetrics(metrics)
    _run(lambda n, v, u: sink.add(n, v, str(u.value)), metrics, sink.publish)
    assert _values(_emf_lines(capsys.readouterr().out), "JobDispatchLatency") == [
        1.5 + k for k in range(250)
    ]
    assert calls <= 1 + 2 * 3  # JobsClaimed, then two calls per line of at most 100 values


def test_with_metrics_disabled_nothing_is_written_however_many_values(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Powertools wrote a metric out when its 100th value came, even with metrics disabled (as
    # baton dev runs): EMF lines in the local server's log every 100 jobs claimed.
    from baton_lambda.emf import EmfMetrics

    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "BatonTest")
    metrics = EphemeralMetrics(service="baton-jobs")
    sink = EmfMetrics(metrics)
    for _ in range(3):
        _run(lambda n, v, u: sink.add(n, v, str(u.value)), metrics, sink.publish)
    assert _emf_lines(capsys.readouterr().out) == []
    assert not metrics.metric_set
