"""CloudWatch dashboard and alarms over Baton's EMF metrics, Lambda, API Gateway and Aurora, with
alarm notifications on an encrypted SNS topic.

Powertools tags every EMF metric with a ``service`` dimension (``baton-<function>``), and which
function emits a metric is the engine's business (a poll may expire leases, the reaper
certainly does). Engine metrics are therefore read with CloudWatch Metrics Insights, which sums
across every service, in the dashboard and in alarms alike, so adding a function or moving a
metric needs no change here.

A metric the engine records with dimensions (``TaskTimedOut`` by ``Policy``) is emitted twice: the
total under ``service`` alone, and a series of its own under ``service`` plus its dimensions.
``FROM "Baton"`` would add the two up, so every query names its dimension keys exactly
(``FROM SCHEMA("Baton", service)``): totals read the first series, breakdowns the second.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_apigatewayv2 as apigw2
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_rds as rds
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from baton.model import TimeoutPolicy
from constructs import Construct

from baton_infra.config import OUTBOX_DEPTH_ALARM_ROWS, RELAY_LAG_ALARM_SECONDS, DeployConfig
from baton_infra.dispatch import DispatchQueue
from baton_infra.functions import METRICS_NAMESPACE

ONE_MINUTE = Duration.minutes(1)
FIVE_MINUTES = Duration.minutes(5)
JOB_METRICS = ("JobsClaimed", "JobsCompleted", "JobsFailed", "JobsRetried", "JobsTimedOut")
INSTANCE_METRICS = ("InstancesStarted", "InstancesCompleted", "InstancesFailed")
# Task definitions enforced: a step's total timeout, its poll timeout, and the limits that hold
# jobs back from a poll (concurrentExecLimit, rateLimitPerFrequency).
TASK_TIMED_OUT = "TaskTimedOut"  # also by POLICY_DIMENSION, one series per timeoutPolicy
POLICY_DIMENSION = "Policy"
TASK_LIMIT_METRICS = ("ConcurrencyLimited", "RateLimited")
# Powertools' dimension on every EMF metric (the function that emitted it).
SERVICE_DIMENSION = "service"
# Functions whose claims record JobDispatchLatency: polls and claims by id, Conductor's polls.
CLAIMING_FUNCTIONS = ("jobs", "conductor")
# Alarm thresholds that are policy rather than deployment choices.
API_5XX_RATE_PERCENT = 1.0
API_5XX_MIN_REQUESTS = 20  # below this per 5 minutes a single error is not a "rate"
DB_CPU_PERCENT = 80
DB_ACU_SATURATION_PERCENT = 90


# Emitted by the schedules' duty (engine.schedule_firing), each pass that settles slots.
SCHEDULE_METRICS = ("ScheduleFired", "ScheduleSkipped", "ScheduleMissed")


def engine_metric(
    name: str,
    *,
    aggregate: str = "SUM",
    period: Duration = ONE_MINUTE,
    label: str | None = None,
    dimensions: Mapping[str, str] | None = None,
) -> cw.MathExpression:
    """One Baton EMF metric, aggregated over every ``service`` that emits it; with
    ``dimensions``, only its series with those dimension values."""
    # A CloudWatch Metrics Insights query built from constants (not SQL sent to a database).
    # Dimension keys are quoted: Metrics Insights reserves hundreds of SQL words.
    dims = dict(sorted((dimensions or {}).items()))
    keys = ", ".join(f'"{k}"' for k in [METRICS_NAMESPACE, *dims, SERVICE_DIMENSION])
    query = f"SELECT {aggregate}({name}) FROM SCHEMA({keys})"  # noqa: S608
    if dims:
        query += " WHERE " + " AND ".join(f"\"{k}\" = '{v}'" for k, v in dims.items())
    return cw.MathExpression(
        expression=query,
        using_metrics={},
        label=label or name,
        period=period,
    )


class Observability(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: DeployConfig,
        functions: Mapping[str, lambda_.IFunction],
        scheduled: Sequence[str],
        api_stage: apigw.Stage | apigw2.HttpStage,
        cluster: rds.DatabaseCluster,
        proxy: rds.DatabaseProxy,
        dispatch: DispatchQueue | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self._config = config
        self.topic = self._alarm_topic()
        self.alarms: list[cw.Alarm] = []
        self._api_alarms(api_stage)
        self._engine_alarms()
        self._database_alarms(cluster)
        if dispatch is not None:
            self._dispatch_alarms(dispatch)
        for name in scheduled:
            self._alarm(
                f"{name}-failing",
                metric=functions[name].metric_errors(period=FIVE_MINUTES),
                threshold=0,
                evaluation_periods=3,
                description=f"The {name} function has failed in each of the last 15 minutes; "
                "work it owns (leases, timeouts) is not being processed.",
            )
        self.dashboard = cw.Dashboard(
            self,
            "Dashboard",
            dashboard_name=f"baton-{config.stage}",
            default_interval=Duration.hours(3),
        )
        self._dashboard_widgets(functions, scheduled, api_stage, cluster, proxy)

    # --- alarms -------------------------------------------------------------------------

    def _alarm_topic(self) -> sns.Topic:
        # CloudWatch can only publish to an encrypted topic whose customer-managed key lets it.
        key = kms.Key(
            self,
            "AlarmTopicKey",
            description=f"Baton alarm topic ({self._config.stage})",
            enable_key_rotation=True,
            pending_window=Duration.days(7),
            removal_policy=RemovalPolicy.DESTROY,
        )
        key.add_to_resource_policy(
            iam.PolicyStatement(
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["kms:Decrypt", "kms:GenerateDataKey"],
                resources=["*"],  # in a key policy "*" means this key
            )
        )
        topic = sns.Topic(
            self,
            "AlarmTopic",
            display_name=f"Baton alarms ({self._config.stage})",
            master_key=key,
            enforce_ssl=True,
        )
        if self._config.alarm_email:
            topic.add_subscription(subscriptions.EmailSubscription(self._config.alarm_email))
        return topic

    def _alarm(
        self,
        alarm_id: str,
        *,
        metric: cw.IMetric,
        threshold: float,
        description: str,
        evaluation_periods: int = 1,
    ) -> cw.Alarm:
        alarm = cw.Alarm(
            self,
            alarm_id,
            alarm_name=f"baton-{self._config.stage}-{alarm_id}",
            alarm_description=description,
            metric=metric,
            threshold=threshold,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=evaluation_periods,
            datapoints_to_alarm=evaluation_periods,
            # No data means no traffic or nothing emitted: not a failure.
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
        )
        action = cw_actions.SnsAction(self.topic)
        alarm.add_alarm_action(action)
        alarm.add_ok_action(action)
        self.alarms.append(alarm)
        return alarm

    def _api_alarms(self, stage: apigw.Stage | apigw2.HttpStage) -> None:
        rate = cw.MathExpression(
            expression=f"IF(requests >= {API_5XX_MIN_REQUESTS}, 100 * errors / requests, 0)",
            using_metrics={
                "errors": stage.metric_server_error(period=FIVE_MINUTES, statistic="Sum"),
                "requests": stage.metric_count(period=FIVE_MINUTES, statistic="Sum"),
            },
            label="5XX rate (%)",
            period=FIVE_MINUTES,
        )
        self._alarm(
            "api-5xx-rate",
            metric=rate,
            threshold=API_5XX_RATE_PERCENT,
            evaluation_periods=2,
            description=f"More than {API_5XX_RATE_PERCENT}% of API requests answered 5XX for "
            "10 minutes (database unavailable, function errors or throttling).",
        )

    def _engine_alarms(self) -> None:
        self._alarm(
            "queue-dead-lettered",
            metric=engine_metric("QueueDeadLettered", period=FIVE_MINUTES),
            threshold=0,
            description="Queue tasks reached maxRetries and moved to the dead state; inspect "
            "them with the queue stats/peek API.",
        )
        threshold = self._config.leases_expired_alarm_threshold
        self._alarm(
            "leases-expired",
            metric=engine_metric("LeasesExpired", period=FIVE_MINUTES),
            threshold=threshold,
            description=f"More than {threshold} job leases expired in 5 minutes: workers are "
            "crashing, stalling, or their lease is too short for the work.",
        )
        threshold = self._config.task_timed_out_alarm_threshold
        self._alarm(
            "task-timed-out",
            metric=engine_metric(TASK_TIMED_OUT, period=FIVE_MINUTES),
            threshold=threshold,
            description=f"More than {threshold} steps exceeded their task definition's "
            "timeoutSeconds in 5 minutes (retried, failing their workflow, or only alerting, "
            "per timeoutPolicy): see the dashboard's task timeouts by policy.",
        )

    def _dispatch_alarms(self, dispatch: DispatchQueue) -> None:
        """The event-driven mode: the relay falling behind, the outbox piling up, messages
        parked in the DLQ. Silent in polling mode (nothing emits, the DLQ stays empty)."""
        self._alarm(
            "relay-lag",
            metric=engine_metric("RelayLag", aggregate="MAX", label="RelayLag (ms, max)"),
            threshold=RELAY_LAG_ALARM_SECONDS * 1000,
            evaluation_periods=3,
            description=f"The oldest due dispatch_outbox row has waited over "
            f"{RELAY_LAG_ALARM_SECONDS} s for 3 minutes: the relay is failing, not scheduled "
            "or cannot reach SQS (outbox dispatch mode).",
        )
        self._alarm(
            "outbox-depth",
            metric=engine_metric("OutboxDepth", aggregate="MAX", label="OutboxDepth (max)"),
            threshold=OUTBOX_DEPTH_ALARM_ROWS,
            evaluation_periods=3,
            description=f"Over {OUTBOX_DEPTH_ALARM_ROWS} due dispatch_outbox rows wait for the "
            "relay for 3 minutes.",
        )
        self._alarm(
            "dispatch-dead-letters",
            metric=dispatch.dead_letters.metric_approximate_number_of_messages_visible(
                period=FIVE_MINUTES, statistic="Maximum"
            ),
            threshold=0,
            description="Dispatch messages reached the DLQ (received 5 times, never claimed): "
            "a job type no worker handles, or workers failing on the claim. The jobs are not "
            "lost: polls still serve them.",
        )

    def _database_alarms(self, cluster: rds.DatabaseCluster) -> None:
        self._alarm(
            "db-cpu-high",
            metric=cluster.metric_cpu_utilization(period=FIVE_MINUTES, statistic="Average"),
            threshold=DB_CPU_PERCENT,
            evaluation_periods=3,
            description=f"Aurora CPU above {DB_CPU_PERCENT}% for 15 minutes.",
        )
        self._alarm(
            "db-acu-saturated",
            metric=self._acu_saturation(cluster, FIVE_MINUTES),
            threshold=DB_ACU_SATURATION_PERCENT,
            evaluation_periods=3,
            description=f"Aurora has used over {DB_ACU_SATURATION_PERCENT}% of dbMaxAcu for 15 "
            "minutes: raise dbMaxAcu or find the expensive queries.",
        )

    def _acu_saturation(self, cluster: rds.DatabaseCluster, period: Duration) -> cw.IMetric:
        return cw.MathExpression(
            expression=f"100 * acu / {self._config.db_max_acu}",
            using_metrics={
                "acu": cluster.metric(
                    "ServerlessDatabaseCapacity", period=period, statistic="Average"
                )
            },
            label="ACU used (% of dbMaxAcu)",
            period=period,
        )

    # --- dashboard ----------------------------------------------------------------------

    def _dashboard_widgets(
        self,
        functions: Mapping[str, lambda_.IFunction],
        scheduled: Sequence[str],
        stage: apigw.Stage | apigw2.HttpStage,
        cluster: rds.DatabaseCluster,
        proxy: rds.DatabaseProxy,
    ) -> None:
        d = self.dashboard
        d.add_widgets(
            cw.TextWidget(
                markdown=f"# Baton ({self._config.stage})\nEngine metrics are EMF metrics in "
                f"namespace `{METRICS_NAMESPACE}`, summed over every function.",
                width=24,
                height=2,
            )
        )
        d.add_widgets(
            _graph("Jobs per minute", [engine_metric(m) for m in JOB_METRICS]),
            _graph(
                "Polls and leases per minute",
                [engine_metric("JobPollEmpty"), engine_metric("LeasesExpired")],
            ),
            _graph(
                "Job dispatch latency (creation to claim)",
                [
                    engine_metric("JobDispatchLatency", aggregate="AVG", label="average"),
                    engine_metric("JobDispatchLatency", aggregate="MAX", label="max"),
                ],
            ),
        )
        d.add_widgets(
            # Metrics Insights has no percentiles: p50/p99 read each claiming function's series.
            _graph(
                "Job dispatch latency p50 / p99 (ms, by claiming function)",
                [
                    cw.Metric(
                        namespace=METRICS_NAMESPACE,
                        metric_name="JobDispatchLatency",
                        dimensions_map={SERVICE_DIMENSION: f"baton-{name}"},
                        statistic=p,
                        period=ONE_MINUTE,
                        label=f"{name} {p}",
                    )
                    for name in CLAIMING_FUNCTIONS
                    if name in functions
                    for p in ("p50", "p99")
                ],
            ),
            _graph(
                "Outbox relay (outbox dispatch mode)",
                [
                    engine_metric("RelayLag", aggregate="MAX", label="RelayLag (ms, max)"),
                ],
                right=[
                    engine_metric("OutboxDepth", aggregate="MAX", label="OutboxDepth (max)"),
                    engine_metric("OutboxRelayed", label="OutboxRelayed per minute"),
                ],
            ),
        )
        d.add_widgets(
            _graph(
                "Task timeouts per minute (by timeoutPolicy)",
                [engine_metric(TASK_TIMED_OUT, label=f"{TASK_TIMED_OUT} (all)")]
                + [
                    engine_metric(
                        TASK_TIMED_OUT,
                        label=policy.value,
                        dimensions={POLICY_DIMENSION: policy.value},
                    )
                    for policy in TimeoutPolicy
                ],
            ),
            _graph(
                "Poll and response timeouts per minute",
                [
                    engine_metric("TaskPollTimedOut"),
                    engine_metric("LeasesExpired", label="LeasesExpired (response timeout)"),
                ],
            ),
            _graph(
                "Jobs held back by task definition limits per minute",
                [engine_metric(m) for m in TASK_LIMIT_METRICS],
            ),
        )
        d.add_widgets(
            _graph("Instances per minute", [engine_metric(m) for m in INSTANCE_METRICS]),
            _graph(
                "Queues",
                [
                    engine_metric("QueueDepth", aggregate="MAX", label="QueueDepth (max)"),
                    engine_metric("QueueDeadLettered"),
                ],
            ),
            cw.AlarmStatusWidget(title="Alarms", alarms=list(self.alarms), width=8, height=6),
        )
        d.add_widgets(
            _graph(
                "Schedules: slots per minute (fired, skipped, missed) and lateness",
                [engine_metric(m) for m in SCHEDULE_METRICS],
                right=[
                    engine_metric(
                        "ScheduleLateness", aggregate="MAX", label="ScheduleLateness ms (max)"
                    )
                ],
            ),
            _graph(
                "Archive: instances archived per minute and their lag",
                [engine_metric("InstancesArchived")],
                right=[
                    engine_metric(
                        "ArchiveLag", aggregate="MAX", label="ArchiveLag s past retention (max)"
                    )
                ],
            ),
            _graph("Archive: bytes written per minute", [engine_metric("ArchivedBytes")]),
        )
        d.add_widgets(
            _graph(
                "API requests and errors",
                [
                    stage.metric_count(period=ONE_MINUTE, statistic="Sum", label="requests"),
                    stage.metric_client_error(period=ONE_MINUTE, statistic="Sum", label="4XX"),
                    stage.metric_server_error(period=ONE_MINUTE, statistic="Sum", label="5XX"),
                ],
            ),
            _graph(
                "API latency",
                [
                    stage.metric_latency(period=ONE_MINUTE, statistic=p, label=f"latency {p}")
                    for p in ("p50", "p90", "p99")
                ]
                + [
                    stage.metric_integration_latency(
                        period=ONE_MINUTE, statistic="p99", label="integration p99"
                    )
                ],
            ),
            _graph(
                "Database",
                [
                    cluster.metric_cpu_utilization(period=ONE_MINUTE, label="CPU %"),
                    self._acu_saturation(cluster, ONE_MINUTE),
                ],
                right=[
                    cluster.metric(
                        "ServerlessDatabaseCapacity",
                        period=ONE_MINUTE,
                        statistic="Average",
                        label="ACU",
                    ),
                    cluster.metric_database_connections(period=ONE_MINUTE, label="DB connections"),
                    cw.Metric(
                        namespace="AWS/RDS",
                        metric_name="ClientConnections",
                        dimensions_map={"ProxyName": proxy.db_proxy_name},
                        period=ONE_MINUTE,
                        statistic="Average",
                        label="proxy client connections",
                    ),
                ],
            ),
        )
        serving = {n: fn for n, fn in functions.items() if n not in scheduled}
        d.add_widgets(
            # What Lambda bills per request (docs/cost.md): invocations, and their average
            # duration (x the function's memory: GB-seconds). The scheduled loops are the floor.
            _graph(
                "Lambda invocations per minute (API functions)",
                [
                    fn.metric_invocations(period=ONE_MINUTE, statistic="Sum", label=n)
                    for n, fn in serving.items()
                ],
            ),
            _graph(
                "Lambda duration average (ms, API functions)",
                [
                    fn.metric_duration(period=ONE_MINUTE, statistic="Average", label=n)
                    for n, fn in serving.items()
                ],
            ),
        )
        d.add_widgets(
            _graph(
                "Lambda errors",
                [fn.metric_errors(period=ONE_MINUTE, label=n) for n, fn in functions.items()],
            ),
            _graph(
                "Lambda throttles",
                [fn.metric_throttles(period=ONE_MINUTE, label=n) for n, fn in functions.items()],
            ),
            _graph(
                "Lambda duration p99 (ms; scheduled functions on the right)",
                [
                    fn.metric_duration(period=ONE_MINUTE, statistic="p99", label=n)
                    for n, fn in functions.items()
                    if n not in scheduled
                ],
                # A looping scheduled function runs most of a minute: on the left axis its
                # line would flatten every request-serving function's.
                right=[
                    fn.metric_duration(period=ONE_MINUTE, statistic="p99", label=n)
                    for n, fn in functions.items()
                    if n in scheduled
                ],
            ),
        )


def _graph(
    title: str, left: Sequence[cw.IMetric], *, right: Sequence[cw.IMetric] = ()
) -> cw.GraphWidget:
    return cw.GraphWidget(title=title, left=list(left), right=list(right), width=8, height=6)
