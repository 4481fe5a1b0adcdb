"""Typed settings, built once at the edge (a Lambda's cold start, the CLI) and passed in.

Precedence: explicit argument > environment variable > default. Every environment variable the
project reads is named here and nowhere else.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

ENV_DATABASE_URL = "DATABASE_URL"
ENV_DB_SECRET_ARN = "BATON_DB_SECRET_ARN"  # Secrets Manager secret of the Aurora cluster
ENV_DB_HOST = "BATON_DB_HOST"  # RDS Proxy endpoint; overrides the secret's host
ENV_DB_NAME = "BATON_DB_NAME"
ENV_PAYLOAD_BUCKET = "BATON_PAYLOAD_BUCKET"
ENV_S3_ENDPOINT = "BATON_S3_ENDPOINT"
ENV_API_KEY = "BATON_API_KEY"
# In AWS: the Secrets Manager secret holding the key that /api/token accepts as keySecret (the
# Conductor-compatible surface checks its tokens itself; locally it accepts BATON_API_KEY).
ENV_CONDUCTOR_KEY_SECRET_ARN = "BATON_CONDUCTOR_KEY_SECRET_ARN"
# In AWS behind an HTTP API (context apiType http, which has no usage-plan keys): the Secrets
# Manager secret of the API keys' SHA-256 hashes; the functions check x-api-key against it.
ENV_API_KEYS_SECRET_ARN = "BATON_API_KEYS_SECRET_ARN"
ENV_PORT = "BATON_PORT"
# baton dev's native gRPC port (the WorkflowEngine service over HTTP/2; 0: off; default 9090).
ENV_GRPC_PORT = "BATON_GRPC_PORT"
# `baton dev` only: count what AWS would bill (API requests, Lambda invocations and billed ms,
# S3 and SQS calls) into this JSON file (baton.local.usage; read by bench/cost.py). Off if unset.
ENV_USAGE_FILE = "BATON_USAGE_FILE"
ENV_DATA_DIR = "BATON_DATA_DIR"
ENV_TICK_SECONDS = "BATON_TICK_SECONDS"
ENV_STAGE = "BATON_STAGE"
ENV_DEFAULT_LEASE_SECONDS = "BATON_DEFAULT_LEASE_SECONDS"
# How long one invocation of a scheduled function (sweeper, reaper) keeps doing its duty, once a
# second: EventBridge fires at most once a minute, and timeouts must fire within 2 s of due.
ENV_DUTY_LOOP_SECONDS = "BATON_DUTY_LOOP_SECONDS"
# How a long-poll (POST /v1/jobs/poll with waitSeconds) waits: "notify" (one LISTEN connection
# per process; needs a direct connection to PostgreSQL) or "reclaim" (re-claims with backoff; the
# only choice behind RDS Proxy, where LISTEN pins a connection). Default: notify locally, else
# reclaim.
ENV_LONG_POLL = "BATON_LONG_POLL"
LONG_POLL_MODES = ("notify", "reclaim")
# The local runtime (`baton dev`)
ENV_FUNCTIONS_DIR = "BATON_FUNCTIONS_DIR"  # folder holding functions/<name>/handler.py
ENV_HOST = "BATON_HOST"  # interface the local server binds (default 127.0.0.1)
# Concurrent invocations per function (Lambda's per-function concurrency; default 100).
ENV_LOCAL_CONCURRENCY = "BATON_LOCAL_CONCURRENCY"
# The system user the embedded PostgreSQL runs as when baton dev is started by root (PostgreSQL
# refuses root; default "pgserver", created at the first start).
ENV_PG_SYSTEM_USER = "BATON_PG_SYSTEM_USER"
# External payloads: per kind, a soft limit (above it the payload lives in S3) and a hard limit
# (refused; a step or instance fails naming the limit and the size).
ENV_WORKFLOW_INPUT_SOFT_LIMIT = "BATON_WORKFLOW_INPUT_SOFT_LIMIT_BYTES"
ENV_WORKFLOW_INPUT_HARD_LIMIT = "BATON_WORKFLOW_INPUT_HARD_LIMIT_BYTES"
ENV_STEP_INPUT_SOFT_LIMIT = "BATON_STEP_INPUT_SOFT_LIMIT_BYTES"
ENV_STEP_INPUT_HARD_LIMIT = "BATON_STEP_INPUT_HARD_LIMIT_BYTES"
ENV_STEP_OUTPUT_SOFT_LIMIT = "BATON_STEP_OUTPUT_SOFT_LIMIT_BYTES"
ENV_STEP_OUTPUT_HARD_LIMIT = "BATON_STEP_OUTPUT_HARD_LIMIT_BYTES"
# Dispatch (docs/dispatch.md): "polling" (the default) or "outbox" (jobs reach workers through the
# outbox relay and an SQS FIFO queue). Switching is this variable and a restart, no SQL.
ENV_DISPATCH_MODE = "BATON_DISPATCH_MODE"
# Jobs whose claim-time state each process keeps for their completions (0: off; engine.claimed).
ENV_CLAIMED_STATES = "BATON_CLAIMED_STATES"
ENV_DISPATCH_QUEUE_URL = "BATON_DISPATCH_QUEUE_URL"  # the SQS FIFO queue the relay publishes to
ENV_SQS_ENDPOINT = "BATON_SQS_ENDPOINT"  # locally: the moto server
# Scripts the engine runs (SCRIPT and JQ steps, JavaScript SWITCH and DO_WHILE conditions): the
# wall time one run may take, and the JavaScript heap it may use (docs/scripting.md).
ENV_SCRIPT_TIME_SECONDS = "BATON_SCRIPT_TIME_SECONDS"
ENV_SCRIPT_MEMORY_BYTES = "BATON_SCRIPT_MEMORY_BYTES"
# The address space of each sandbox process (a jq filter's memory too); by default 1 GiB, and in
# Lambda half the function's memory, so a runaway filter ends its sandbox, never the function.
ENV_SCRIPT_PROCESS_BYTES = "BATON_SCRIPT_PROCESS_BYTES"
ENV_LAMBDA_MEMORY_MB = "AWS_LAMBDA_FUNCTION_MEMORY_SIZE"  # set by Lambda
# HTTP steps: what the address guard lets through besides its defaults (CIDRs, addresses, host
# names, comma-separated), the largest answer body kept, and calls one system-tasks pass makes
# at once (baton.httpcall).
ENV_HTTP_ALLOW = "BATON_HTTP_ALLOW"
ENV_HTTP_MAX_RESPONSE_BYTES = "BATON_HTTP_MAX_RESPONSE_BYTES"
ENV_HTTP_CONCURRENCY = "BATON_HTTP_CONCURRENCY"
# Retention (docs/archive.md): seconds after its end that a terminal instance is archived to S3
# and deleted from the database (unset or 0: never, unless its definition sets retentionSeconds).
ENV_RETENTION_SECONDS = "BATON_RETENTION_SECONDS"

ALL_ENV_VARS = (
    ENV_DATABASE_URL,
    ENV_DB_SECRET_ARN,
    ENV_DB_HOST,
    ENV_DB_NAME,
    ENV_PAYLOAD_BUCKET,
    ENV_S3_ENDPOINT,
    ENV_API_KEY,
    ENV_API_KEYS_SECRET_ARN,
    ENV_CONDUCTOR_KEY_SECRET_ARN,
    ENV_PORT,
    ENV_GRPC_PORT,
    ENV_USAGE_FILE,
    ENV_DATA_DIR,
    ENV_TICK_SECONDS,
    ENV_STAGE,
    ENV_DEFAULT_LEASE_SECONDS,
    ENV_DUTY_LOOP_SECONDS,
    ENV_LONG_POLL,
    ENV_FUNCTIONS_DIR,
    ENV_HOST,
    ENV_LOCAL_CONCURRENCY,
    ENV_PG_SYSTEM_USER,
    ENV_WORKFLOW_INPUT_SOFT_LIMIT,
    ENV_WORKFLOW_INPUT_HARD_LIMIT,
    ENV_STEP_INPUT_SOFT_LIMIT,
    ENV_STEP_INPUT_HARD_LIMIT,
    ENV_STEP_OUTPUT_SOFT_LIMIT,
    ENV_STEP_OUTPUT_HARD_LIMIT,
    ENV_DISPATCH_MODE,
    ENV_DISPATCH_QUEUE_URL,
    ENV_SQS_ENDPOINT,
    ENV_SCRIPT_TIME_SECONDS,
    ENV_SCRIPT_MEMORY_BYTES,
    ENV_SCRIPT_PROCESS_BYTES,
    ENV_HTTP_ALLOW,
    ENV_HTTP_MAX_RESPONSE_BYTES,
    ENV_HTTP_CONCURRENCY,
    ENV_RETENTION_SECONDS,
)

DISPATCH_MODES = ("polling", "outbox")

# Defaults that fit Lambda: 256 KB keeps polls and decisions small; 50 MB is what a worker or a
# decision may still hold in memory.
DEFAULT_SOFT_LIMIT_BYTES = 256 * 1024
DEFAULT_HARD_LIMIT_BYTES = 50 * 1024 * 1024
# A presigned URL is valid this long at most.
MAX_PRESIGN_SECONDS = 15 * 60


class SettingsError(ValueError):
    """An environment variable holds a value Baton cannot use."""


@dataclass(frozen=True, slots=True)
class PayloadLimit:
    """Above ``soft_bytes`` a payload is offloaded to S3; above ``hard_bytes`` it is refused."""

    soft_bytes: int = DEFAULT_SOFT_LIMIT_BYTES
    hard_bytes: int = DEFAULT_HARD_LIMIT_BYTES

    def __post_init__(self) -> None:
        if not 0 < self.soft_bytes <= self.hard_bytes:
            raise SettingsError(
                f"payload limits: need 0 < soft ({self.soft_bytes}) <= hard ({self.hard_bytes})"
            )


@dataclass(frozen=True, slots=True)
class PayloadLimits:
    workflow_input: PayloadLimit = field(default_factory=PayloadLimit)
    step_input: PayloadLimit = field(default_factory=PayloadLimit)
    step_output: PayloadLimit = field(default_factory=PayloadLimit)
    presign_seconds: int = MAX_PRESIGN_SECONDS

    def __post_init__(self) -> None:
        if not 0 < self.presign_seconds <= MAX_PRESIGN_SECONDS:
            raise SettingsError(f"presign_seconds: use 1 to {MAX_PRESIGN_SECONDS}")

    @classmethod
    def from_env(cls, e: Mapping[str, str]) -> PayloadLimits:
        def limit(soft_var: str, hard_var: str) -> PayloadLimit:
            return PayloadLimit(
                _int_env(e, soft_var, DEFAULT_SOFT_LIMIT_BYTES),
                _int_env(e, hard_var, DEFAULT_HARD_LIMIT_BYTES),
            )

        return cls(
            workflow_input=limit(ENV_WORKFLOW_INPUT_SOFT_LIMIT, ENV_WORKFLOW_INPUT_HARD_LIMIT),
            step_input=limit(ENV_STEP_INPUT_SOFT_LIMIT, ENV_STEP_INPUT_HARD_LIMIT),
            step_output=limit(ENV_STEP_OUTPUT_SOFT_LIMIT, ENV_STEP_OUTPUT_HARD_LIMIT),
        )


def _int_env(
    e: Mapping[str, str], name: str, default: int, what: str = "a whole number of bytes"
) -> int:
    raw = (e.get(name) or "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0:
        raise SettingsError(f"{name}: expected {what}, got {raw!r}")
    return value


def _float_env(e: Mapping[str, str], name: str, default: float) -> float:
    raw = (e.get(name) or "").strip()
    if not raw:
        return default
    try:
        return float(raw)
    except ValueError:
        raise SettingsError(f"{name}: expected a number of seconds, got {raw!r}") from None


def _process_bytes_default(e: Mapping[str, str], default: int) -> int:
    """In Lambda, half the function's memory (at least 192 MiB): the function and its sandbox
    processes share that memory, and exceeding it would end the whole invocation."""
    raw = (e.get(ENV_LAMBDA_MEMORY_MB) or "").strip()
    if not raw.isdigit():
        return default
    return min(default, max(192, int(raw) // 2) * 1024 * 1024)


@dataclass(frozen=True, slots=True)
class EngineSettings:
    """Knobs of the engine itself (no I/O configuration)."""

    default_lease_seconds: int = 30
    max_jobs_per_poll: int = 100
    # A poll response stays well under Lambda's 6 MB response limit.
    max_poll_response_bytes: int = 5_000_000
    max_search_limit: int = 100
    # Largest page of an instance's steps or history (pages are byte-budgeted as well).
    max_page_limit: int = 1000
    # Hard limit for an inline JSON payload (instance input, job output, signal payload).
    max_payload_bytes: int = 2_000_000
    # Step executions one instance may create; past it, the step being scheduled fails.
    max_step_executions: int = 100_000
    # Soft and hard limits of external payloads (S3), per kind.
    payload_limits: PayloadLimits = field(default_factory=PayloadLimits)
    # "polling" or "outbox": the mode new jobs are created under (a job keeps its mode).
    dispatch_mode: str = "polling"
    # Jobs whose claim-time state is kept for their completion in this process (engine.claimed;
    # 0: off, every completion reads its job and instance first).
    claimed_states: int = 4096
    # One script's wall time and JavaScript heap (a decision waits for its scripts: keep it short).
    script_time_seconds: float = 1.0
    script_memory_bytes: int = 64 * 1024 * 1024
    script_process_bytes: int = 1024 * 1024 * 1024
    # HTTP steps: the guard's allow list, whether loopback and private ranges are allowed
    # (locally yes; from_env says no when the stage is not local), the answer size cap, and the
    # calls one system-tasks pass makes at once.
    http_allow: tuple[str, ...] = ()
    http_private_allowed: bool = True
    http_max_response_bytes: int = 1024 * 1024
    # Where EVENT steps' sqs: sinks are sent (None: AWS's own endpoint; locally the moto server).
    sqs_endpoint: str | None = None
    http_concurrency: int = 8
    # Seconds after its end that a terminal instance is archived (0: off; a definition's
    # retentionSeconds overrides).
    retention_seconds: int = 0

    def __post_init__(self) -> None:
        if not 1024 <= self.http_max_response_bytes <= 5 * 1024 * 1024:
            raise SettingsError(
                f"{ENV_HTTP_MAX_RESPONSE_BYTES}: use 1 KiB to 5 MiB, "
                f"not {self.http_max_response_bytes}"
            )
        if not 1 <= self.http_concurrency <= 64:
            raise SettingsError(f"{ENV_HTTP_CONCURRENCY}: use 1 to 64, not {self.http_concurrency}")
        if not 0 < self.script_time_seconds <= 60:
            raise SettingsError(
                f"{ENV_SCRIPT_TIME_SECONDS}: use more than 0 and at most 60 seconds, "
                f"not {self.script_time_seconds}"
            )
        if not 1024 * 1024 <= self.script_memory_bytes <= 1024 * 1024 * 1024:
            raise SettingsError(
                f"{ENV_SCRIPT_MEMORY_BYTES}: use 1 MiB to 1 GiB, not {self.script_memory_bytes}"
            )
        if self.script_process_bytes < 128 * 1024 * 1024:
            raise SettingsError(
                f"{ENV_SCRIPT_PROCESS_BYTES}: use at least 128 MiB (a sandbox process starts "
                f"at about 100 MiB of address space), not {self.script_process_bytes}"
            )
        if self.dispatch_mode not in DISPATCH_MODES:
            raise SettingsError(
                f"{ENV_DISPATCH_MODE}: use one of {', '.join(DISPATCH_MODES)},"
                f" not {self.dispatch_mode!r}"
            )

    @property
    def outbox(self) -> bool:
        """Are new jobs dispatched through the outbox (and not only by polls)?"""
        return self.dispatch_mode == "outbox"


@dataclass(frozen=True, slots=True)
class Settings:
    database_url: str | None = None
    db_secret_arn: str | None = None
    db_host: str | None = None
    db_name: str | None = None
    payload_bucket: str | None = None
    s3_endpoint: str | None = None
    api_key: str | None = None
    conductor_key_secret_arn: str | None = None
    api_keys_secret_arn: str | None = None
    stage: str = "local"
    # 0: one pass per invocation (locally the timer invokes every second).
    duty_loop_seconds: float = 0.0
    # None: notify when stage is local, reclaim otherwise (see ENV_LONG_POLL)
    long_poll: str | None = None
    dispatch_queue_url: str | None = None
    sqs_endpoint: str | None = None
    engine: EngineSettings = field(default_factory=EngineSettings)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: object) -> Settings:
        """Build settings from ``env`` (default ``os.environ``); keyword overrides win."""
        e = os.environ if env is None else env
        engine = EngineSettings()
        if lease := e.get(ENV_DEFAULT_LEASE_SECONDS):
            engine = replace(engine, default_lease_seconds=int(lease))
        engine = replace(
            engine,
            payload_limits=PayloadLimits.from_env(e),
            dispatch_mode=(e.get(ENV_DISPATCH_MODE) or "polling").strip().lower(),
            claimed_states=_int_env(
                e, ENV_CLAIMED_STATES, engine.claimed_states, "a whole number (0 or more)"
            ),
            script_time_seconds=_float_env(e, ENV_SCRIPT_TIME_SECONDS, engine.script_time_seconds),
            script_memory_bytes=_int_env(e, ENV_SCRIPT_MEMORY_BYTES, engine.script_memory_bytes),
            script_process_bytes=_int_env(
                e, ENV_SCRIPT_PROCESS_BYTES, _process_bytes_default(e, engine.script_process_bytes)
            ),
            http_allow=tuple(
                a.strip() for a in (e.get(ENV_HTTP_ALLOW) or "").split(",") if a.strip()
            ),
            http_private_allowed=(e.get(ENV_STAGE) or "local") == "local",
            sqs_endpoint=e.get(ENV_SQS_ENDPOINT) or None,
            http_max_response_bytes=_int_env(
                e, ENV_HTTP_MAX_RESPONSE_BYTES, engine.http_max_response_bytes
            ),
            http_concurrency=_int_env(e, ENV_HTTP_CONCURRENCY, engine.http_concurrency),
            retention_seconds=_int_env(
                e, ENV_RETENTION_SECONDS, 0, "a whole number of seconds (0: off)"
            ),
        )
        base = cls(
            database_url=e.get(ENV_DATABASE_URL) or None,
            db_secret_arn=e.get(ENV_DB_SECRET_ARN) or None,
            db_host=e.get(ENV_DB_HOST) or None,
            db_name=e.get(ENV_DB_NAME) or None,
            payload_bucket=e.get(ENV_PAYLOAD_BUCKET) or None,
            s3_endpoint=e.get(ENV_S3_ENDPOINT) or None,
            api_key=e.get(ENV_API_KEY) or None,
            conductor_key_secret_arn=e.get(ENV_CONDUCTOR_KEY_SECRET_ARN) or None,
            api_keys_secret_arn=e.get(ENV_API_KEYS_SECRET_ARN) or None,
            stage=e.get(ENV_STAGE) or "local",
            duty_loop_seconds=float(e.get(ENV_DUTY_LOOP_SECONDS) or 0),
            long_poll=e.get(ENV_LONG_POLL) or None,
            dispatch_queue_url=e.get(ENV_DISPATCH_QUEUE_URL) or None,
            sqs_endpoint=e.get(ENV_SQS_ENDPOINT) or None,
            engine=engine,
        )
        built = replace(base, **overrides)  # type: ignore[arg-type]
        if built.long_poll is not None and built.long_poll not in LONG_POLL_MODES:
            raise SettingsError(
                f"{ENV_LONG_POLL}: expected one of {', '.join(LONG_POLL_MODES)}, "
                f"got {built.long_poll!r}"
            )
        return built

    @property
    def long_poll_mode(self) -> str:
        """How long-polls wait: the configured mode, else notify locally and reclaim in AWS."""
        return self.long_poll or ("notify" if self.stage == "local" else "reclaim")


# Read by boto3, not by Baton: the local runtime sets placeholders when it runs its own S3.
ENV_AWS_ACCESS_KEY_ID = "AWS_ACCESS_KEY_ID"
ENV_AWS_SECRET_ACCESS_KEY = "AWS_SECRET_ACCESS_KEY"
ENV_AWS_DEFAULT_REGION = "AWS_DEFAULT_REGION"
# Read by Powertools: in AWS the function factory sets them, locally the runtime does.
ENV_POWERTOOLS_METRICS_NAMESPACE = "POWERTOOLS_METRICS_NAMESPACE"
# Locally, EMF lines would interleave with the logs every tick; set it to "false" to see them.
ENV_POWERTOOLS_METRICS_DISABLED = "POWERTOOLS_METRICS_DISABLED"
# The CloudWatch namespace of every metric (the CDK app and the dashboard use this one too).
METRICS_NAMESPACE = "Baton"
