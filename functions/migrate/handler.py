"""Schema migrations as a CloudFormation custom resource (Provider framework on_event handler).

Runs on every deploy before traffic reaches the new code; migrations are backward compatible, so
the previous version keeps working while it runs. Delete is a no-op: data outlives the stack.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from baton.store import migrations
from baton_lambda import runtime

logger = Logger(service="baton-migrate")


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    request = event.get("RequestType", "Create")
    physical_id = event.get("PhysicalResourceId") or "baton-schema"
    if request == "Delete":
        return {"PhysicalResourceId": physical_id}
    applied = migrations.apply(runtime.conninfo(runtime.settings()))
    latest = migrations.available()[-1].version
    logger.info("migrations applied", extra={"applied": applied, "schemaVersion": latest})
    return {
        "PhysicalResourceId": physical_id,
        "Data": {"SchemaVersion": latest, "Applied": ",".join(applied) or "none"},
    }
