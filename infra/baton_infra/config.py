"""Deployment configuration: cdk.json's context, typed and validated once, read nowhere else.

``cdk synth``/``cdk deploy`` hand the CLI's context (cdk.json plus ``-c key=value``) to the app
through the environment; ``python infra/app.py`` and ``cdk.App()`` in tests do not read
cdk.json at all. :func:`load_cdk_json_context` is the one loader both paths use, so every way of
synthesizing produces the same template.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from aws_cdk import RemovalPolicy
from aws_cdk import aws_logs as logs
from baton.httpcall import AddressPolicy
from baton.settings import (
    DISPATCH_MODES,
    ENV_STEP_INPUT_HARD_LIMIT,
    ENV_STEP_INPUT_SOFT_LIMIT,
    ENV_STEP_OUTPUT_HARD_LIMIT,
    ENV_STEP_OUTPUT_SOFT_LIMIT,
    ENV_WORKFLOW_INPUT_HARD_LIMIT,
    ENV_WORKFLOW_INPUT_SOFT_LIMIT,
    PayloadLimit,
    PayloadLimits,
    SettingsError,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
CDK_JSON = REPO_ROOT / "cdk.json"
FUNCTIONS_DIR = REPO_ROOT / "functions"
DEFAULT_LAYER_DIR = REPO_ROOT / "layers" / "build"

AuthMode = Literal["apiKey", "iam"]
AUTH_MODES: tuple[AuthMode, ...] = ("apiKey", "iam")
# The API Gateway type fronting the functions: "rest" (default) or "http" (HTTP API, v2: about
# 70% cheaper per request; the functions check API keys themselves, docs/cost.md).
ApiType = Literal["rest", "http"]
API_TYPES: tuple[ApiType, ...] = ("rest", "http")
# Stages whose data may be thrown away: no deletion protection, resources destroyed with the stack.
DISPOSABLE_STAGES = frozenset({"dev"})
_STAGE_RE = re.compile(r"^[a-z][a-z0-9-]{0,15}$")
_KEY_NAME_RE = re.compile(r"^[A-Za-z0-9-]{1,64}$")
# The retention periods CloudWatch Logs accepts, in days.
_LOG_RETENTION = {
    1: logs.RetentionDays.ONE_DAY,
    3: logs.RetentionDays.THREE_DAYS,
    5: logs.RetentionDays.FIVE_DAYS,
    7: logs.RetentionDays.ONE_WEEK,
    14: logs.RetentionDays.TWO_WEEKS,
    30: logs.RetentionDays.ONE_MONTH,
    60: logs.RetentionDays.TWO_MONTHS,
    90: logs.RetentionDays.THREE_MONTHS,
    180: logs.RetentionDays.SIX_MONTHS,
    365: logs.RetentionDays.ONE_YEAR,
    731: logs.RetentionDays.TWO_YEARS,
    1827: logs.RetentionDays.FIVE_YEARS,
    3653: logs.RetentionDays.TEN_YEARS,
}


class ConfigError(ValueError):
    """A context value is missing or malformed."""


class LayerNotBuiltError(RuntimeError):
    """The Lambda layer folder does not exist yet."""

    def __init__(self, layer_dir: Path) -> None:
        super().__init__(
            f"The Lambda layer is not built: {layer_dir / 'python'} does not exist.\n"
            "Run `make layer` (or `.venv/bin/python layers/build.py`) first, then synthesize again."
        )
        self.layer_dir = layer_dir


def load_cdk_json_context(path: Path = CDK_JSON) -> dict[str, Any]:
    """The ``context`` block of cdk.json: the defaults every synthesis starts from."""
    data = json.loads(path.read_text())
    return dict(data.get("context", {}))


# EventBridge invokes every scheduled function once per this interval (its finest rate).
TICK_SECONDS = 60
# What a looping invocation needs beyond its loop: the loop stops early when fewer than 5 s of
# the invocation remain, and the last pass and the metrics flush must still fit.
LOOP_HEADROOM_SECONDS = 10


@dataclass(frozen=True, slots=True)
class FunctionSizing:
    memory_mb: int
    timeout_seconds: int
    # Scheduled functions: how long one invocation keeps doing its duty, once a second
    # (settings.ENV_DUTY_LOOP_SECONDS). 0: one pass per invocation.
    duty_loop_seconds: int = 0

    def __post_init__(self) -> None:
        if not 0 <= self.duty_loop_seconds < TICK_SECONDS:
            raise ConfigError(
                f"duty_loop_seconds {self.duty_loop_seconds}: use 0 to {TICK_SECONDS - 1} "
                f"(a loop of {TICK_SECONDS} s or more overlaps the next tick on every tick)"
            )
        if self.duty_loop_seconds and (
            self.timeout_seconds < self.duty_loop_seconds + LOOP_HEADROOM_SECONDS
        ):
            raise ConfigError(
                f"timeout {self.timeout_seconds} s is too short for a {self.duty_loop_seconds} s "
                f"loop: allow at least {LOOP_HEADROOM_SECONDS} s more"
            )


# API functions run one short transaction per request. Their timeout stays inside API Gateway's
# 29 s integration limit, and RDS Proxy's 10 s borrow timeout fires first, so a database outage
# reaches the client as the engine's 503 + Retry-After rather than a gateway error.
API_DEFAULT = FunctionSizing(memory_mb=512, timeout_seconds=15)
# Scheduled functions tick every minute; a single pass finishes well inside the interval.
SCHEDULED_DEFAULT = FunctionSizing(memory_mb=512, timeout_seconds=55)
# Timeouts and expired leases must be acted on within about 2 s of their due time, and EventBridge
# ticks once a minute: the sweeper and the reaper loop their duty once a second for 59 s, so the
# next tick's first pass comes about a second after this one's last. The timeout leaves room for a
# slow last pass; a tick that arrives while the previous invocation still runs is throttled by
# their reserved concurrency of 1 and retried by Lambda's async queue a second or so later.
SCHEDULED_LOOPING = FunctionSizing(memory_mb=512, timeout_seconds=75, duty_loop_seconds=59)
# Migrations may rewrite indexes on big tables; the custom-resource framework waits up to 15 min.
MIGRATION_SIZING = FunctionSizing(memory_mb=512, timeout_seconds=300)
# Per-function exceptions. More memory is more CPU: the poll/complete path is the hot one, and
# a poll may serialize a 5 MB batch; its longer timeout leaves room for the planned bounded
# long-poll, still under the gateway's 29 s.
# The queue dispatcher stays a single pass a minute: it has no deadline of seconds (a push
# dispatches its queue at once, and a dequeue lapses expired claims itself), and it reports the
# queue-depth gauges on every pass.
FUNCTION_SIZING: Mapping[str, FunctionSizing] = {
    "jobs": FunctionSizing(memory_mb=1024, timeout_seconds=25),
    "instances": FunctionSizing(memory_mb=1024, timeout_seconds=15),
    # Conductor's synchronous execution waits up to 25 s for the workflow it started (then
    # reads it): room for that, still under the gateway's 29 s.
    "conductor": FunctionSizing(memory_mb=512, timeout_seconds=28),
    "sweeper": SCHEDULED_LOOPING,
    "reaper": SCHEDULED_LOOPING,
    # The outbox relay drains once a second for most of each minute, like the sweeper: a job
    # reaches the queue within about a second of becoming due (relay lag).
    "relay": SCHEDULED_LOOPING,
    # HTTP steps: loops like the sweeper (each pass long-polls a second for jobs, and refills
    # the places its calls free for up to 20 s); the timeout leaves room for a pass begun at the
    # loop's end: 20 s of refills and its last calls (connect 30 s + read 60 s, baton.httpcall).
    "system_tasks": FunctionSizing(memory_mb=512, timeout_seconds=180, duty_loop_seconds=59),
}
# Alarm thresholds of the event-driven dispatch mode (outbox relay).
RELAY_LAG_ALARM_SECONDS = 60
OUTBOX_DEPTH_ALARM_ROWS = 10_000


@dataclass(frozen=True, slots=True)
class DeployConfig:
    stage: str
    auth_mode: AuthMode
    db_min_acu: float
    db_max_acu: float
    db_backup_retention_days: int
    payload_expiry_days: int
    payload_orphan_expiry_days: int
    payload_limits: PayloadLimits
    log_retention_days: int
    reserved_concurrency: Mapping[str, int | None]
    api_throttle_rate_limit: float
    api_throttle_burst_limit: int
    api_key_names: tuple[str, ...]
    alarm_email: str | None
    leases_expired_alarm_threshold: int
    task_timed_out_alarm_threshold: int
    vpc_logs_endpoint: bool
    layer_dir: Path
    # "polling" (default) or "outbox": BATON_DISPATCH_MODE of every function (docs/dispatch.md).
    dispatch_mode: str = "polling"
    # BATON_HTTP_ALLOW of the system_tasks function: what HTTP steps may call besides public
    # addresses (CIDRs, addresses, host names; docs/deploy.md).
    http_allow: tuple[str, ...] = ()
    # SQS queues (names, in the stack's account and region) EVENT steps may publish to as
    # sqs:<name>: the system_tasks function may send to these only (docs/deploy.md).
    event_sqs_queues: tuple[str, ...] = ()
    api_type: ApiType = "rest"
    # Days after its end that a terminal instance is archived to S3 and leaves the database
    # (BATON_RETENTION_SECONDS of the sweeper; 0: never; docs/archive.md).
    retention_days: int = 0

    @property
    def retention_seconds(self) -> int:
        return self.retention_days * 86_400

    @property
    def disposable(self) -> bool:
        """Dev stages: no deletion protection, everything is deleted with the stack."""
        return self.stage in DISPOSABLE_STAGES

    @property
    def removal_policy(self) -> RemovalPolicy:
        """What deleting the stack (or replacing a resource) does to stateful resources."""
        return RemovalPolicy.DESTROY if self.disposable else RemovalPolicy.RETAIN

    @property
    def log_retention(self) -> logs.RetentionDays:
        return _LOG_RETENTION[self.log_retention_days]

    @property
    def stack_name(self) -> str:
        return f"Baton-{self.stage}"

    @classmethod
    def from_context(cls, get: Callable[[str], Any]) -> DeployConfig:
        """Build from ``node.try_get_context``. ``-c key=value`` values arrive as strings."""
        stage = _string(get, "stage")
        if not _STAGE_RE.match(stage):
            raise ConfigError(f"stage {stage!r}: use 1-16 of [a-z0-9-], starting with a letter")
        auth_mode = _string(get, "authMode")
        if auth_mode not in AUTH_MODES:
            raise ConfigError(f"authMode {auth_mode!r}: expected one of {', '.join(AUTH_MODES)}")
        db_min_acu = _number(get, "dbMinAcu")
        db_max_acu = _number(get, "dbMaxAcu")
        if not 0 <= db_min_acu <= db_max_acu <= 256:
            raise ConfigError(
                f"need 0 <= dbMinAcu ({db_min_acu}) <= dbMaxAcu ({db_max_acu}) <= 256"
            )
        reserved = {
            str(k): None if v is None else int(v)
            for k, v in _mapping(get, "reservedConcurrency").items()
        }
        if any(v is not None and v < 1 for v in reserved.values()):
            raise ConfigError("reservedConcurrency values must be >= 1, or null for none")
        key_names = tuple(str(k) for k in _list(get, "apiKeys"))
        if auth_mode == "apiKey" and not key_names:
            raise ConfigError("authMode apiKey needs at least one name in apiKeys")
        if bad := [k for k in key_names if not _KEY_NAME_RE.match(k)]:
            raise ConfigError(f"apiKeys: invalid names {bad}")
        log_retention_days = int(_number(get, "logRetentionDays"))
        if log_retention_days not in _LOG_RETENTION:
            raise ConfigError(f"logRetentionDays: use one of {sorted(_LOG_RETENTION)}")
        layer_dir = get("layerDir")
        payload_expiry_days = _count(get, "payloadExpiryDays")
        orphan_days = _count(get, "payloadOrphanExpiryDays")
        if orphan_days <= payload_expiry_days:
            raise ConfigError(
                f"payloadOrphanExpiryDays ({orphan_days}) must be above payloadExpiryDays "
                f"({payload_expiry_days}): it is the backstop for objects no instance references, "
                "and the longest a running instance's payloads are kept"
            )
        retention_days = _count(get, "retentionDays") if get("retentionDays") is not None else 0
        if retention_days and retention_days >= payload_expiry_days:
            raise ConfigError(
                f"retentionDays ({retention_days}) must be below payloadExpiryDays "
                f"({payload_expiry_days}): archiving moves an ended instance's payload objects "
                "into the archive, so they must still be there when its retention passes"
            )
        dispatch_mode = str(get("dispatchMode") or "polling")
        if dispatch_mode not in DISPATCH_MODES:
            raise ConfigError(
                f"dispatchMode {dispatch_mode!r}: expected one of {', '.join(DISPATCH_MODES)}"
            )
        api_type = str(get("apiType") or "rest")
        if api_type not in API_TYPES:
            raise ConfigError(f"apiType {api_type!r}: expected one of {', '.join(API_TYPES)}")
        http_allow = tuple(str(a) for a in _list(get, "httpAllow")) if get("httpAllow") else ()
        try:
            AddressPolicy.of(http_allow, private_allowed=False)
        except ValueError as e:
            raise ConfigError(f"httpAllow: {e}") from None
        event_queues = (
            tuple(str(q) for q in _list(get, "eventSqsQueues")) if get("eventSqsQueues") else ()
        )
        for q in event_queues:
            if not _SQS_QUEUE_NAME.fullmatch(q):
                raise ConfigError(
                    f"eventSqsQueues: {q!r} is no SQS queue name (1-80 letters, digits, - and _, "
                    ".fifo at the end of a FIFO queue's)"
                )
        return cls(
            stage=stage,
            auth_mode=auth_mode,
            db_min_acu=db_min_acu,
            db_max_acu=db_max_acu,
            db_backup_retention_days=int(_number(get, "dbBackupRetentionDays")),
            payload_expiry_days=payload_expiry_days,
            payload_orphan_expiry_days=orphan_days,
            retention_days=retention_days,
            payload_limits=_payload_limits(get),
            log_retention_days=log_retention_days,
            reserved_concurrency=reserved,
            api_throttle_rate_limit=_number(get, "apiThrottleRateLimit"),
            api_throttle_burst_limit=int(_number(get, "apiThrottleBurstLimit")),
            api_key_names=key_names,
            alarm_email=(get("alarmEmail") or None),
            leases_expired_alarm_threshold=_count(get, "leasesExpiredAlarmThreshold"),
            task_timed_out_alarm_threshold=_count(get, "taskTimedOutAlarmThreshold"),
            vpc_logs_endpoint=_flag(get, "vpcLogsEndpoint"),
            # Relative to the repository, so cdk.json never holds a machine-specific path.
            layer_dir=(REPO_ROOT / str(layer_dir)) if layer_dir else DEFAULT_LAYER_DIR,
            dispatch_mode=dispatch_mode,
            http_allow=http_allow,
            event_sqs_queues=event_queues,
            api_type="http" if api_type == "http" else "rest",
        )

    def payload_limit_environment(self) -> dict[str, str]:
        """The functions' environment for the payload limits (every function reads them)."""
        pl = self.payload_limits
        return {
            ENV_WORKFLOW_INPUT_SOFT_LIMIT: str(pl.workflow_input.soft_bytes),
            ENV_WORKFLOW_INPUT_HARD_LIMIT: str(pl.workflow_input.hard_bytes),
            ENV_STEP_INPUT_SOFT_LIMIT: str(pl.step_input.soft_bytes),
            ENV_STEP_INPUT_HARD_LIMIT: str(pl.step_input.hard_bytes),
            ENV_STEP_OUTPUT_SOFT_LIMIT: str(pl.step_output.soft_bytes),
            ENV_STEP_OUTPUT_HARD_LIMIT: str(pl.step_output.hard_bytes),
        }

    def sizing(self, function: str, *, scheduled: bool, migration: bool) -> FunctionSizing:
        if migration:
            return MIGRATION_SIZING
        if function in FUNCTION_SIZING:
            return FUNCTION_SIZING[function]
        return SCHEDULED_DEFAULT if scheduled else API_DEFAULT

    def reserved_concurrency_of(self, function: str, *, scheduled: bool) -> int | None:
        """Context wins; a scheduled function defaults to 1 so a slow tick never overlaps the
        next one (two sweepers would only contend for the same rows)."""
        if function in self.reserved_concurrency:
            return self.reserved_concurrency[function]
        return 1 if scheduled else None

    def require_layer(self) -> Path:
        if not (self.layer_dir / "python").is_dir():
            raise LayerNotBuiltError(self.layer_dir)
        return self.layer_dir


def _required(get: Callable[[str], Any], key: str) -> Any:
    value = get(key)
    if value is None:
        raise ConfigError(f"context {key!r} is not set (cdk.json or -c {key}=...)")
    return value


def _string(get: Callable[[str], Any], key: str) -> str:
    return str(_required(get, key))


def _number(get: Callable[[str], Any], key: str) -> float:
    value = _required(get, key)
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"context {key!r}: expected a number, got {value!r}") from None


def _count(get: Callable[[str], Any], key: str) -> int:
    value = _number(get, key)
    if not value.is_integer() or value < 0:  # also refuses inf and nan
        raise ConfigError(f"context {key!r}: expected a whole number >= 0, got {value!r}")
    return int(value)


def _flag(get: Callable[[str], Any], key: str) -> bool:
    value = _required(get, key)
    if isinstance(value, bool):
        return value
    if str(value).lower() in ("true", "1", "yes"):
        return True
    if str(value).lower() in ("false", "0", "no"):
        return False
    raise ConfigError(f"context {key!r}: expected true or false, got {value!r}")


def _json(get: Callable[[str], Any], key: str) -> Any:
    value = _required(get, key)
    if isinstance(value, str):  # from `-c key='{"jobs": 50}'`
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            raise ConfigError(f"context {key!r}: not valid JSON: {value!r}") from None
    return value


def _mapping(get: Callable[[str], Any], key: str) -> Mapping[str, Any]:
    value = _json(get, key)
    if not isinstance(value, dict):
        raise ConfigError(f"context {key!r}: expected an object, got {value!r}")
    return value


_SQS_QUEUE_NAME = re.compile(r"^[A-Za-z0-9_-]{1,75}(\.fifo)?$")


def _list(get: Callable[[str], Any], key: str) -> list[Any]:
    raw = _required(get, key)
    if isinstance(raw, str) and not raw.lstrip().startswith("["):  # `-c apiKeys=a,b`
        return [part.strip() for part in raw.split(",") if part.strip()]
    value = _json(get, key)
    if not isinstance(value, list):
        raise ConfigError(f"context {key!r}: expected a list, got {value!r}")
    return value


_PAYLOAD_KINDS = ("workflowInput", "stepInput", "stepOutput")


def _payload_limits(get: Callable[[str], Any]) -> PayloadLimits:
    """``payloadLimits``: ``{"stepOutput": {"softBytes": n, "hardBytes": n}, ...}``; a kind or a
    bound left out keeps the default (256 KB soft, 50 MB hard)."""
    raw = get("payloadLimits")
    if raw is None:
        return PayloadLimits()
    value = _mapping(get, "payloadLimits")
    if unknown := set(value) - set(_PAYLOAD_KINDS):
        raise ConfigError(f"payloadLimits: unknown kinds {sorted(unknown)}; use {_PAYLOAD_KINDS}")
    limits: dict[str, PayloadLimit] = {}
    for kind in _PAYLOAD_KINDS:
        bounds = value.get(kind) or {}
        if not isinstance(bounds, dict) or set(bounds) - {"softBytes", "hardBytes"}:
            raise ConfigError(f"payloadLimits.{kind}: expected {{softBytes, hardBytes}}")
        default = PayloadLimit()
        try:
            soft = int(bounds.get("softBytes", default.soft_bytes))
            hard = int(bounds.get("hardBytes", default.hard_bytes))
            limits[kind] = PayloadLimit(soft, hard)
        except (TypeError, ValueError, SettingsError) as e:
            raise ConfigError(f"payloadLimits.{kind}: {e}") from None
    return PayloadLimits(
        workflow_input=limits["workflowInput"],
        step_input=limits["stepInput"],
        step_output=limits["stepOutput"],
    )
