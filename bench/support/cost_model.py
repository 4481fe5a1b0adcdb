"""The money side of ``bench/cost.py``: the price table (``bench/prices.json``, with its date and
region), each function's memory from the CDK app's configuration, what a measured usage costs on
AWS, what Step Functions would bill for the same workflow, and the stack's fixed monthly floor."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PRICES = ROOT / "bench" / "prices.json"
SECONDS_PER_MONTH = 730 * 3600
# A floor line billed only in the outbox dispatch mode (the relay is paused otherwise).
OUTBOX_ONLY = "(outbox mode only)"


def load_prices(path: Path = PRICES) -> dict[str, Any]:
    prices: dict[str, Any] = json.loads(path.read_text())
    return prices


def _cdk_app_importable() -> None:
    for p in (ROOT / "infra", ROOT / "shared"):
        if str(p) not in sys.path:
            sys.path.append(str(p))


def function_memory_mb() -> dict[str, int]:
    """Each function's memory as the CDK app deploys it (infra/baton_infra/config.py)."""
    _cdk_app_importable()
    from baton.routes import MIGRATION_FUNCTION, SCHEDULED_FUNCTIONS, api_functions
    from baton_infra.config import API_DEFAULT, FUNCTION_SIZING, SCHEDULED_DEFAULT

    memory = {f: (FUNCTION_SIZING.get(f) or API_DEFAULT).memory_mb for f in api_functions()}
    for f in SCHEDULED_FUNCTIONS:
        memory[f] = (FUNCTION_SIZING.get(f) or SCHEDULED_DEFAULT).memory_mb
    memory[MIGRATION_FUNCTION] = API_DEFAULT.memory_mb
    return memory


def looping_functions() -> dict[str, tuple[int, int]]:
    """Scheduled functions that loop their duty most of each minute: name -> (memory MB, loop
    seconds per minute). They bill the same with or without work: the fixed floor."""
    _cdk_app_importable()
    from baton_infra.config import FUNCTION_SIZING

    return {
        name: (s.memory_mb, s.duty_loop_seconds)
        for name, s in FUNCTION_SIZING.items()
        if s.duty_loop_seconds
    }


@dataclass(slots=True)
class Usage:
    """What one measured run used, in total (divide by the workflows it ran)."""

    api_requests: dict[str, int] = field(default_factory=dict)  # by function
    invocations: dict[str, int] = field(default_factory=dict)
    billed_ms: dict[str, int] = field(default_factory=dict)
    aws_requests: dict[str, int] = field(default_factory=dict)  # "sqs.ReceiveMessage": n
    pg_cpu_seconds: float = 0.0

    @classmethod
    def between(cls, before: dict[str, Any], after: dict[str, Any], pg_cpu: float) -> Usage:
        def diff(key: str) -> dict[str, int]:
            a, b = after.get(key, {}), before.get(key, {})
            return {k: v - b.get(k, 0) for k, v in a.items() if v - b.get(k, 0)}

        return cls(
            diff("apiRequests"),
            diff("invocations"),
            diff("billedMs"),
            diff("awsRequests"),
            pg_cpu,
        )

    def plus_client_calls(self, calls: dict[str, int]) -> Usage:
        merged = dict(self.aws_requests)
        for k, v in calls.items():
            merged[k] = merged.get(k, 0) + v
        return Usage(
            self.api_requests, self.invocations, self.billed_ms, merged, self.pg_cpu_seconds
        )


@dataclass(slots=True)
class Bill:
    """Dollars of one run, by line (per the run's total; scale as needed)."""

    lines: dict[str, float]

    @property
    def total(self) -> float:
        return sum(self.lines.values())


def bill(
    usage: Usage,
    prices: dict[str, Any],
    memory: dict[str, int],
    *,
    api_type: str,
    per_request_functions: frozenset[str],
) -> Bill:
    """The AWS bill of ``usage`` behind an API of ``api_type`` (``rest`` or ``http``). Only the
    ``per_request_functions`` (the API's) count: the scheduled ones loop every minute whatever
    the load, and are in the fixed floor."""
    api_price = prices["apiGateway"]["httpPerMillion" if api_type == "http" else "restPerMillion"]
    lam = prices["lambda"]
    requests = sum(usage.api_requests.values())
    invocations = sum(n for f, n in usage.invocations.items() if f in per_request_functions)
    gb_seconds = sum(
        ms / 1000 * memory.get(f, 512) / 1024
        for f, ms in usage.billed_ms.items()
        if f in per_request_functions
    )
    sqs = sum(n for k, n in usage.aws_requests.items() if k.startswith("sqs."))
    s3_put = sum(
        n
        for k, n in usage.aws_requests.items()
        if k.startswith("s3.") and k.split(".", 1)[1].startswith(("Put", "Copy", "Post", "List"))
    )
    s3_get = sum(n for k, n in usage.aws_requests.items() if k.startswith("s3.")) - s3_put
    aurora = prices["auroraServerlessV2"]
    acu_seconds = usage.pg_cpu_seconds / aurora["vcpuPerAcu"] / aurora["targetUtilization"]
    return Bill(
        {
            f"API Gateway ({api_type.upper()})": requests * api_price / 1e6,
            "Lambda requests": invocations * lam["requestsPerMillion"] / 1e6,
            "Lambda duration": gb_seconds * lam["gbSecondArm64"],
            "SQS": sqs * prices["sqs"]["fifoPerMillion"] / 1e6,
            "S3": (s3_put * prices["s3"]["putPerMillion"] + s3_get * prices["s3"]["getPerMillion"])
            / 1e6,
            "Aurora ACU": acu_seconds / 3600 * aurora["acuHour"],
        }
    )


def step_functions(transitions: int, seconds: float, prices: dict[str, Any]) -> tuple[float, float]:
    """Standard and Express dollars per workflow of ``transitions`` states lasting ``seconds``."""
    sf = prices["stepFunctions"]
    standard = transitions * sf["standardPerMillionTransitions"] / 1e6
    billed = max(sf["expressMinimumBilledSeconds"], -(-seconds // 0.1) * 0.1)
    express = sf["expressPerMillionRequests"] / 1e6 + (
        billed * sf["expressMinimumMemoryGb"] * sf["expressGbSecond"]
    )
    return standard, express


def fixed_floor(prices: dict[str, Any], context: dict[str, Any]) -> dict[str, float]:
    """What the stack bills a month with no traffic (cdk.json's context for min ACU)."""
    hours = prices["fixed"]["hoursPerMonth"]
    aurora, proxy = prices["auroraServerlessV2"], prices["rdsProxy"]
    min_acu = float(context.get("dbMinAcu", 0.5))
    lines = {
        f"Aurora at its minimum ({min_acu} ACU)": min_acu * aurora["acuHour"] * hours,
        f"RDS Proxy (minimum {proxy['minimumAcu']} ACU)": proxy["minimumAcu"]
        * proxy["acuHour"]
        * hours,
    }
    loops = looping_functions()
    per_gb_s = prices["lambda"]["gbSecondArm64"]
    for name, (memory_mb, seconds) in sorted(loops.items()):
        gb_s = seconds * 60 * hours * memory_mb / 1024
        what = f"{name} loop ({seconds} s a minute at {memory_mb} MB)"
        if name == "relay" and context.get("dispatchMode", "polling") != "outbox":
            what = f"{OUTBOX_ONLY} {what}"  # paused unless in outbox mode
        lines[what] = gb_s * per_gb_s
    endpoints = 2 if context.get("vpcLogsEndpoint", True) else 1  # Secrets Manager (+ Logs)
    fixed = prices["fixed"]
    lines["VPC interface endpoints (2 AZs each)"] = (
        endpoints * 2 * fixed["interfaceEndpointAzHour"] * hours
    )
    lines["CloudWatch dashboard and ~10 alarms"] = (
        fixed["cloudwatchDashboardMonth"] + 10 * fixed["cloudwatchAlarmMonth"]
    )
    lines["secrets (database, /api key) and KMS key"] = (
        2 * fixed["secretMonth"] + fixed["kmsKeyMonth"]
    )
    return lines
