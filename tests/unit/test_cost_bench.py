"""bench/cost.py's arithmetic: the price table's date and region head every result it prints,
each function is billed at the memory the CDK app gives it (duration in ms, rounded up by the
meter), scheduled loops stay in the fixed floor, and Step Functions is priced per state."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture(scope="module")
def cost() -> ModuleType:
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    return importlib.import_module("cost")


def _usage(cost: ModuleType, **kw: object) -> object:
    return cost.Usage(**kw)


def test_every_result_names_the_price_tables_date_and_region(
    cost: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    prices = cost.load_prices()
    one = cost.workloads(0.01, "t")[0]
    usage = _usage(
        cost,
        api_requests={"jobs": 22, "instances": 1},
        invocations={"jobs": 22, "instances": 1, "sweeper": 60},
        billed_ms={"jobs": 1200, "instances": 50, "sweeper": 59000},
        aws_requests={},
        pg_cpu_seconds=0.08,
    )
    idle = {"outbox": (_usage(cost, aws_requests={"sqs.ReceiveMessage": 3}), 60.0)}
    cost.report([(one, usage, 1.0)], idle, prices, {"jobs": 1024, "instances": 1024}, {})
    out = capsys.readouterr().out
    stamp = f"prices of {prices['date']}, {prices['region']}"
    headers = ("$ per million", "parts of the", "an idle worker", "fixed monthly floor")
    sections = [line for line in out.splitlines() if line.startswith(headers)]
    assert len(sections) == len(headers)
    assert all(stamp in line for line in sections), sections


def test_the_bill_uses_each_functions_memory_and_leaves_the_loops_to_the_floor(
    cost: ModuleType,
) -> None:
    prices = cost.load_prices()
    usage = _usage(
        cost,
        api_requests={"jobs": 1_000_000},
        invocations={"jobs": 1_000_000, "sweeper": 5},
        billed_ms={"jobs": 10_000_000, "sweeper": 10_000_000},
        aws_requests={"sqs.ReceiveMessage": 1_000_000, "s3.PutObject": 1_000_000},
        pg_cpu_seconds=3600 * 0.25 * 0.7,  # one ACU-hour under the table's assumption
    )
    rest = cost.bill(
        usage, prices, {"jobs": 1024}, api_type="rest", per_request_functions=frozenset({"jobs"})
    )
    http = cost.bill(
        usage, prices, {"jobs": 1024}, api_type="http", per_request_functions=frozenset({"jobs"})
    )
    assert rest.lines["API Gateway (REST)"] == pytest.approx(3.50)
    assert http.lines["API Gateway (HTTP)"] == pytest.approx(1.00)
    assert rest.lines["Lambda requests"] == pytest.approx(0.20)
    assert rest.lines["Lambda duration"] == pytest.approx(10_000 * 0.0000133334)  # 1 GB
    assert rest.lines["SQS"] == pytest.approx(0.50)
    assert rest.lines["S3"] == pytest.approx(5.00)
    assert rest.lines["Aurora ACU"] == pytest.approx(0.12)
    standard, express = cost.step_functions(2, 0.0, prices)
    assert standard * 1e6 == pytest.approx(50.0)  # the issue's >= $50 per million
    assert express * 1e6 == pytest.approx(1.0 + 0.1 * 0.0625 * 0.00001667 * 1e6)


def test_the_floor_prices_the_cdk_apps_loops_and_minimums(cost: ModuleType) -> None:
    floor = cost.fixed_floor(cost.load_prices(), {"dbMinAcu": 0.5})
    assert floor["Aurora at its minimum (0.5 ACU)"] == pytest.approx(0.5 * 0.12 * 730)
    assert floor["RDS Proxy (minimum 8 ACU)"] == pytest.approx(8 * 0.015 * 730)
    loops = [k for k in floor if "loop" in k]
    assert any(k.startswith("sweeper") for k in loops)
    assert any(k.startswith(cost.OUTBOX_ONLY) and "relay" in k for k in loops)
