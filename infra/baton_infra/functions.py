"""The Lambda functions, from one factory: every function is the same shape (Python 3.12 on arm64,
the shared layer, in the VPC, active tracing, its own log group and least-privilege role) and
differs only by its name, its sizing and whether it touches the payload bucket.

Which functions exist comes from ``baton.routes``: API functions, scheduled functions and the
migration function. A new route or function there needs no change here.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import StrEnum

from aws_cdk import Duration, FileSystem, SecretValue, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_sqs as sqs
from baton import settings
from baton.engine.archive_store import PREFIX as ARCHIVE_KEY_PREFIX
from baton.engine.payloads import KEY_PREFIX as PAYLOAD_KEY_PREFIX
from baton.routes import (
    MIGRATION_FUNCTION,
    ROUTES,
    RPC_FUNCTION,
    SCHEDULED_FUNCTIONS,
    UI_ROUTES,
    api_functions,
)
from constructs import Construct

from baton_infra.config import FUNCTIONS_DIR, TICK_SECONDS, DeployConfig
from baton_infra.database import DB_NAME, Database
from baton_infra.nag import acknowledge, logical_id
from baton_infra.network import Network

RUNTIME = lambda_.Runtime.PYTHON_3_12  # the layer's wheels and .pyc files are built for cp312
ARCHITECTURE = lambda_.Architecture.ARM_64  # Graviton: ~20% cheaper per GB-second
HANDLER = "handler.handler"
METRICS_NAMESPACE = settings.METRICS_NAMESPACE
# Functions that read or write payload objects (presigned URLs are signed with their role).
# Each must be a function of the route table: a grant to any other name would silently go nowhere,
# so function_specs() refuses one and the synth fails.
# Every function that decides reads offloaded payloads (expressions) and may offload a large step
# input: the API functions that decide (queues start triggered instances, Conductor's /api
# completes tasks), and the scheduled ones.
PAYLOAD_FUNCTIONS = frozenset(
    {
        RPC_FUNCTION,  # runs the REST functions' code for each RPC (docs/rpc.md)
        "instances",
        "jobs",
        "queues",
        "conductor",
        "sweeper",
        "reaper",
        "queue_dispatcher",
        "system_tasks",
    }
)
CONDUCTOR_FUNCTION = "conductor"
# Functions that retire, revive or delete payload objects (engine.retention_ops): the sweeper
# tags ended instances' objects; retry, restart and delete (Baton's API and Conductor's) revive
# or delete them.
RETENTION_FUNCTIONS = frozenset({"sweeper", "instances", CONDUCTOR_FUNCTION, RPC_FUNCTION})
# The archive (engine.archive_ops, docs/archive.md): the sweeper writes archived instances'
# documents and moves their payloads under the archive prefix; the API functions that read and
# delete instances (Baton's, Conductor's and the Connect RPC one) read and delete archived ones.
ARCHIVE_WRITER = "sweeper"
ARCHIVE_READERS = frozenset({"instances", CONDUCTOR_FUNCTION, RPC_FUNCTION})
# The function answering GET /v1/health checks that the payload bucket answers (HeadBucket,
# which needs s3:ListBucket on the bucket itself); taken from the route table.
BUCKET_PROBE_FUNCTIONS = frozenset(
    {*(r.function for r in ROUTES if r.path == "/v1/health"), RPC_FUNCTION}
)
# The Connect function answers each RPC with the REST function of its route, loaded from the
# folder next to its own: its asset is the functions folder with those folders (and its own), its
# handler module ``rpc.handler``. Every other function's asset is its own folder.
RPC_TWIN_FUNCTIONS = frozenset(r.function for r in ROUTES)
RPC_HANDLER = f"{RPC_FUNCTION}.{HANDLER}"
# The outbox relay: the one function that publishes to the dispatch queue (SendMessage only).
RELAY_FUNCTION = "relay"
# HTTP steps' calls: the one function given the address guard's allow list (httpAllow).
SYSTEM_TASKS_FUNCTION = "system_tasks"
# Functions that never touch the database (the viewer's static assets): no read of its secret.
DATABASE_FREE_FUNCTIONS = frozenset(r.function for r in UI_ROUTES)
# What a function folder may contain that must not reach the asset (or change its hash).
ASSET_EXCLUDES = ["__pycache__", "*.pyc", "tests"]
# Lambda validates these on create/update of a VPC function; EC2 offers no resource scoping.
ENI_ACTIONS = [
    "ec2:CreateNetworkInterface",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeSubnets",
    "ec2:DeleteNetworkInterface",
    "ec2:AssignPrivateIpAddresses",
    "ec2:UnassignPrivateIpAddresses",
]


def rpc_asset_excludes() -> list[str]:
    """What the Connect function's asset (the functions folder) leaves out: every folder but its
    own and the REST functions' (and the build debris every asset drops)."""
    kept = {*RPC_TWIN_FUNCTIONS, RPC_FUNCTION}
    others = sorted(p.name for p in FUNCTIONS_DIR.iterdir() if p.name not in kept)
    return [*ASSET_EXCLUDES, *others]


def _code(name: str) -> lambda_.Code:
    if name != RPC_FUNCTION:
        return lambda_.Code.from_asset(str(FUNCTIONS_DIR / name), exclude=ASSET_EXCLUDES)
    return lambda_.Code.from_asset(str(FUNCTIONS_DIR), exclude=rpc_asset_excludes())


class UnknownFunctionError(ValueError):
    """The infra names a function that the route table does not define."""

    def __init__(self, names: Iterable[str], *, listed_in: str, known: Iterable[str]) -> None:
        self.names = sorted(names)
        super().__init__(
            f"{listed_in} names {', '.join(self.names)}: not a function of the route table "
            f"(baton.routes defines: {', '.join(sorted(known))})"
        )


class Kind(StrEnum):
    """What a function is for; decides its default sizing."""

    API = "api"
    SCHEDULED = "scheduled"
    MIGRATION = "migration"


@dataclass(frozen=True, slots=True)
class FunctionSpec:
    name: str
    kind: Kind
    payloads: bool = False  # reads or writes payload objects: its role may Get/Put them

    @property
    def construct_id(self) -> str:
        return "".join(part.capitalize() for part in self.name.split("_"))

    @property
    def scheduled(self) -> bool:
        """Ticked by EventBridge (an API function may be ticked as well)."""
        return self.name in SCHEDULED_FUNCTIONS


def function_specs(payload_functions: frozenset[str] | None = None) -> tuple[FunctionSpec, ...]:
    """Every function the route table implies, each once, marked if it is one of the
    ``payload_functions`` (default ``PAYLOAD_FUNCTIONS``); raises UnknownFunctionError if any of
    those is not a function of the route table."""
    kinds: dict[str, Kind] = {}
    for name in api_functions():
        kinds[name] = Kind.API
    for name in SCHEDULED_FUNCTIONS:
        kinds.setdefault(name, Kind.SCHEDULED)
    kinds[MIGRATION_FUNCTION] = Kind.MIGRATION
    payloads = PAYLOAD_FUNCTIONS if payload_functions is None else payload_functions
    if unknown := payloads - kinds.keys():
        raise UnknownFunctionError(unknown, listed_in="PAYLOAD_FUNCTIONS", known=kinds)
    return tuple(
        FunctionSpec(name, kind, payloads=name in payloads) for name, kind in kinds.items()
    )


class BatonFunctions(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: DeployConfig,
        network: Network,
        database: Database,
        payload_bucket: s3.IBucket,
        dispatch_queue: sqs.IQueue,
    ) -> None:
        super().__init__(scope, construct_id)
        # First: a payload list at odds with the route table fails the synth before any resource.
        self.specs = function_specs()
        self._config = config
        self._network = network
        self._database = database
        self._payload_bucket = payload_bucket
        self._dispatch_queue = dispatch_queue
        self.layer = lambda_.LayerVersion(
            self,
            "CoreLayer",
            code=lambda_.Code.from_asset(str(config.require_layer())),
            compatible_runtimes=[RUNTIME],
            compatible_architectures=[ARCHITECTURE],
            description="baton core package and its dependencies (layers/build.py)",
        )
        # One group for all functions: a single ingress rule on the proxy and the endpoints.
        self.security_group = ec2.SecurityGroup(
            self,
            "SecurityGroup",
            vpc=network.vpc,
            description="Baton Lambda functions (isolated subnets: no route out of the VPC)",
        )
        network.allow_endpoints_from(self.security_group)
        self.conductor_key = self._conductor_key()
        self.api_keys = self._api_keys()
        self.by_name: dict[str, lambda_.Function] = {
            spec.name: self._create(spec) for spec in self.specs
        }

    @property
    def migration(self) -> lambda_.Function:
        return self.by_name[MIGRATION_FUNCTION]

    def serving(self) -> Iterator[lambda_.Function]:
        """Functions that serve traffic or ticks: they must start after the schema is current."""
        for spec in self.specs:
            if spec.kind != Kind.MIGRATION:
                yield self.by_name[spec.name]

    def scheduled(self) -> dict[str, lambda_.Function]:
        return {s.name: self.by_name[s.name] for s in self.specs if s.scheduled}

    def code_fingerprint(self, name: str) -> str:
        return FileSystem.fingerprint(str(FUNCTIONS_DIR / name), exclude=ASSET_EXCLUDES)

    def _create(self, spec: FunctionSpec) -> lambda_.Function:
        config = self._config
        sizing = config.sizing(
            spec.name,
            scheduled=spec.kind == Kind.SCHEDULED,
            migration=spec.kind == Kind.MIGRATION,
        )
        function_name = f"baton-{config.stage}-{spec.name}"
        log_group = logs.LogGroup(
            self,
            f"{spec.construct_id}Logs",
            log_group_name=f"/aws/lambda/{function_name}",
            retention=config.log_retention,
            removal_policy=config.removal_policy,
        )
        role = self._role(spec, log_group)
        fn = lambda_.Function(
            self,
            spec.construct_id,
            function_name=function_name,
            description=f"baton {spec.name} ({spec.kind})",
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
            handler=RPC_HANDLER if spec.name == RPC_FUNCTION else HANDLER,
            code=_code(spec.name),
            layers=[self.layer],
            memory_size=sizing.memory_mb,
            timeout=Duration.seconds(sizing.timeout_seconds),
            reserved_concurrent_executions=config.reserved_concurrency_of(
                spec.name, scheduled=spec.scheduled
            ),
            role=role,
            log_group=log_group,
            tracing=lambda_.Tracing.ACTIVE,
            vpc=self._network.vpc,
            vpc_subnets=self._network.app_subnets,
            security_groups=[self.security_group],
            environment=self._environment(spec, duty_loop_seconds=sizing.duty_loop_seconds),
        )
        if spec.scheduled:
            # A tick that could not run is worthless a minute later (the next tick does the same
            # work), and retries would pile up behind a reserved concurrency of 1. A tick
            # throttled because the previous invocation still loops is not an error: Lambda's
            # async queue tries it again within the event age, once that invocation ends.
            fn.configure_async_invoke(
                retry_attempts=0, max_event_age=Duration.seconds(TICK_SECONDS)
            )
        self._database.allow_from(fn)
        acknowledge(
            fn,
            "AwsSolutions-L1",
            "Pinned to Python 3.12 on purpose: the shared layer's compiled wheels and .pyc "
            "files are built for CPython 3.12.",
        )
        return fn

    def _conductor_key(self) -> secretsmanager.Secret | None:
        """The key ``POST /api/token`` accepts as ``keySecret`` (Conductor's SDKs send neither API
        Gateway keys nor SigV4, so the conductor function issues and checks tokens itself)."""
        if CONDUCTOR_FUNCTION not in {s.name for s in self.specs}:
            return None
        secret = secretsmanager.Secret(
            self,
            "ConductorKey",
            description=f"Baton /api key: keySecret of POST /api/token ({self._config.stage})",
            generate_secret_string=secretsmanager.SecretStringGenerator(
                exclude_punctuation=True, password_length=40
            ),
            removal_policy=self._config.removal_policy,
        )
        acknowledge(
            secret,
            "AwsSolutions-SMG4",
            "Rotated by a deploy (replace the secret); warm conductor functions cache it, and "
            "the tokens it signed stay valid for at most a day.",
        )
        return secret

    def _api_keys(self) -> secretsmanager.Secret | None:
        """Behind an HTTP API with authMode apiKey: the hashed API keys the functions check
        (HTTP APIs have no usage-plan keys). Starts empty; ``make api-key NAME=...`` prints a key
        and the entry to add (docs/deploy.md)."""
        if self._config.api_type != "http" or self._config.auth_mode != "apiKey":
            return None
        secret = secretsmanager.Secret(
            self,
            "ApiKeys",
            description=f"Baton API keys: SHA-256 hashes, checked by the functions "
            f"({self._config.stage})",
            secret_string_value=SecretValue.unsafe_plain_text('{"keys": []}'),
            removal_policy=self._config.removal_policy,
        )
        acknowledge(
            secret,
            "AwsSolutions-SMG4",
            "Holds only hashes of API keys; a key is rotated by adding its successor's entry "
            "and removing its own, which warm functions see at once (they re-read on a miss).",
        )
        return secret

    def _environment(self, spec: FunctionSpec, *, duty_loop_seconds: int) -> dict[str, str]:
        environment = {
            settings.ENV_DB_SECRET_ARN: self._database.secret.secret_arn,
            settings.ENV_DB_HOST: self._database.proxy.endpoint,
            settings.ENV_DB_NAME: DB_NAME,
            settings.ENV_PAYLOAD_BUCKET: self._payload_bucket.bucket_name,
            settings.ENV_STAGE: self._config.stage,
            # The mode new jobs are created under; a job keeps its mode (docs/dispatch.md).
            settings.ENV_DISPATCH_MODE: self._config.dispatch_mode,
            "POWERTOOLS_SERVICE_NAME": f"baton-{spec.name}",
            "POWERTOOLS_METRICS_NAMESPACE": METRICS_NAMESPACE,
            "POWERTOOLS_LOG_LEVEL": "INFO",
        }
        environment.update(self._config.payload_limit_environment())
        if duty_loop_seconds:
            environment[settings.ENV_DUTY_LOOP_SECONDS] = str(duty_loop_seconds)
        if spec.name == ARCHIVE_WRITER and self._config.retention_days:
            environment[settings.ENV_RETENTION_SECONDS] = str(self._config.retention_seconds)
        if spec.name == SYSTEM_TASKS_FUNCTION and self._config.http_allow:
            environment[settings.ENV_HTTP_ALLOW] = ",".join(self._config.http_allow)
        if spec.name == RELAY_FUNCTION:
            environment[settings.ENV_DISPATCH_QUEUE_URL] = self._dispatch_queue.queue_url
        if spec.name == CONDUCTOR_FUNCTION and self.conductor_key is not None:
            environment[settings.ENV_CONDUCTOR_KEY_SECRET_ARN] = self.conductor_key.secret_arn
        if spec.kind == Kind.API and self.api_keys is not None:
            environment[settings.ENV_API_KEYS_SECRET_ARN] = self.api_keys.secret_arn
        return environment

    def _role(self, spec: FunctionSpec, log_group: logs.ILogGroup) -> iam.Role:
        """A role per function with exactly what it uses (no AWS managed policies)."""
        role = iam.Role(
            self,
            f"{spec.construct_id}Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"baton {spec.name} function ({self._config.stage})",
        )
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[log_group.log_group_arn],
            )
        )
        role.add_to_policy(iam.PolicyStatement(actions=ENI_ACTIONS, resources=["*"]))
        if spec.name not in DATABASE_FREE_FUNCTIONS:
            self._database.secret.grant_read(role)
        if spec.name == CONDUCTOR_FUNCTION and self.conductor_key is not None:
            self.conductor_key.grant_read(role)
        if spec.kind == Kind.API and self.api_keys is not None:
            self.api_keys.grant_read(role)
        if spec.name == RELAY_FUNCTION:
            # SQS-managed encryption: no KMS grant needed.
            role.add_to_policy(
                iam.PolicyStatement(
                    actions=["sqs:SendMessage"], resources=[self._dispatch_queue.queue_arn]
                )
            )
        if spec.name == SYSTEM_TASKS_FUNCTION and self._config.event_sqs_queues:
            # EVENT steps' sqs: sinks: the queues the deployment names, nothing else.
            stack = Stack.of(self)
            role.add_to_policy(
                iam.PolicyStatement(
                    actions=["sqs:GetQueueUrl", "sqs:SendMessage"],
                    resources=[
                        stack.format_arn(service="sqs", resource=name)
                        for name in self._config.event_sqs_queues
                    ],
                )
            )
        if spec.name in BUCKET_PROBE_FUNCTIONS:
            role.add_to_policy(
                iam.PolicyStatement(
                    actions=["s3:ListBucket"], resources=[self._payload_bucket.bucket_arn]
                )
            )
        if spec.payloads:
            role.add_to_policy(
                iam.PolicyStatement(
                    actions=["s3:GetObject", "s3:PutObject"],
                    resources=[self._payload_bucket.arn_for_objects(f"{PAYLOAD_KEY_PREFIX}*")],
                )
            )
            acknowledge(
                role,
                f"AwsSolutions-IAM5[Resource::<{logical_id(self._payload_bucket)}.Arn>/"
                f"{PAYLOAD_KEY_PREFIX}*]",
                "Payload object keys are generated per payload at run time; access is limited "
                "to Get/Put (and, for retention, tagging and delete) under the payload prefix "
                "of this one bucket.",
            )
        if spec.payloads and spec.name in RETENTION_FUNCTIONS:
            role.add_to_policy(
                iam.PolicyStatement(
                    actions=[
                        "s3:PutObjectTagging",
                        "s3:DeleteObjectTagging",
                        "s3:DeleteObject",
                    ],
                    resources=[self._payload_bucket.arn_for_objects(f"{PAYLOAD_KEY_PREFIX}*")],
                )
            )
        if spec.name == ARCHIVE_WRITER or spec.name in ARCHIVE_READERS:
            self._grant_archive(role, writer=spec.name == ARCHIVE_WRITER)
        acknowledge(
            role,
            "AwsSolutions-IAM5[Resource::*]",
            "Lambda's VPC network-interface actions and X-Ray's PutTraceSegments/"
            "PutTelemetryRecords support no resource-level scoping.",
        )
        return role

    def _grant_archive(self, role: iam.Role, *, writer: bool) -> None:
        """The archive prefix only: the writer puts documents and copies payloads there (a copy
        sets the copy's tags: none), readers get and delete archived runs."""
        actions = ["s3:GetObject", "s3:DeleteObject"]
        if writer:
            actions += ["s3:PutObject", "s3:PutObjectTagging"]
        role.add_to_policy(
            iam.PolicyStatement(
                actions=sorted(actions),
                resources=[self._payload_bucket.arn_for_objects(f"{ARCHIVE_KEY_PREFIX}*")],
            )
        )
        acknowledge(
            role,
            f"AwsSolutions-IAM5[Resource::<{logical_id(self._payload_bucket)}.Arn>/"
            f"{ARCHIVE_KEY_PREFIX}*]",
            "Archived instances' keys are derived per instance at run time (date, definition, "
            "id); access is limited to the archive prefix of this one bucket.",
        )
