"""EventBridge rules ticking every scheduled function (lease reaper, sweeper, ...) each minute."""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from baton_infra.config import TICK_SECONDS

TICK = Duration.seconds(TICK_SECONDS)


class Schedules(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        functions: Mapping[str, lambda_.IFunction],
        paused: frozenset[str] = frozenset(),
    ) -> None:
        """``paused``: functions whose rule exists but is disabled (the relay in polling mode)."""
        super().__init__(scope, construct_id)
        self.rules: dict[str, events.Rule] = {}
        for name, fn in functions.items():
            self.rules[name] = events.Rule(
                self,
                f"{name}-tick",
                description=f"Invoke baton {name} every minute",
                schedule=events.Schedule.rate(TICK),
                enabled=name not in paused,
                # Delivery retries are pointless: the next tick comes a minute later.
                targets=[targets.LambdaFunction(fn, retry_attempts=0, max_event_age=TICK)],
            )
