"""Scheduled functions (EventBridge): one duty per invocation, logged and measured."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from aws_lambda_powertools import Logger
from aws_lambda_powertools.metrics import EphemeralMetrics
from baton.engine.service import Engine

from baton_lambda import runtime
from baton_lambda.emf import EmfMetrics


def scheduled(
    function: str, duty: Callable[[Engine], dict[str, int]]
) -> Callable[[dict[str, Any], Any], dict[str, int]]:
    logger = Logger(service=f"baton-{function}")
    metrics = EphemeralMetrics(service=f"baton-{function}")
    sink = EmfMetrics(metrics)

    @logger.inject_lambda_context(clear_state=True)
    def handle(event: dict[str, Any], context: Any) -> dict[str, int]:
        result = duty(runtime.engine(sink))
        if any(result.values()):
            logger.info(f"{function} tick", extra=result)
        return result

    return cast(Callable[[dict[str, Any], Any], dict[str, int]], metrics.log_metrics(handle))
