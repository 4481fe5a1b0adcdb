"""Liveness: can this deployment reach its database and its payload bucket?

``GET /v1/health`` answers 200 while the database answers (``status`` ``ok``, or ``degraded``
when the bucket does not) and 503 when it does not, so a load balancer or an uptime check needs
nothing but the status code. Each check reports how long it took and, when it failed, why.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from baton import __version__
from baton.errors import BatonError
from baton.store.db import Database

log = logging.getLogger("baton.health")

OK = "ok"
DEGRADED = "degraded"
UNREACHABLE = "unreachable"
UNCONFIGURED = "unconfigured"
# A health check answers quickly or says the dependency is unreachable.
PROBE_TIMEOUT_SECONDS = 2.0

Check = dict[str, Any]


def _elapsed_ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 2)


def check_database(db: Database) -> Check:
    """One trivial statement; a failure to connect or to answer is ``unreachable``."""
    started = time.perf_counter()
    try:
        db.autocommit(lambda c: c.execute("SELECT 1").fetchone(), retry=False)
    except BatonError as e:  # Unavailable, for the usual causes; any other refusal too
        log.warning("health: database unreachable", extra={"error": e.detail})
        return {"status": UNREACHABLE, "latencyMs": _elapsed_ms(started), "error": e.detail}
    return {"status": OK, "latencyMs": _elapsed_ms(started)}


@dataclass(frozen=True, slots=True)
class BucketProbe:
    """HeadBucket on the payload bucket (``s3:ListBucket``), with short timeouts, no retries."""

    bucket: str
    endpoint: str | None = None

    def __call__(self) -> Check:
        try:
            from botocore.exceptions import BotoCoreError, ClientError
        except ImportError:
            return {"status": UNREACHABLE, "bucket": self.bucket, "error": "boto3 is not installed"}
        started = time.perf_counter()
        try:
            _client(self.endpoint).head_bucket(Bucket=self.bucket)
        except (BotoCoreError, ClientError) as e:
            log.warning("health: bucket unreachable", extra={"error": str(e)})
            return {
                "status": UNREACHABLE,
                "bucket": self.bucket,
                "latencyMs": _elapsed_ms(started),
                "error": _one_line(e),
            }
        return {"status": OK, "bucket": self.bucket, "latencyMs": _elapsed_ms(started)}


def _one_line(e: BaseException) -> str:
    text = (str(e).strip().splitlines() or [type(e).__name__])[0]
    return text if len(text) <= 300 else text[:297] + "..."


@functools.cache
def _client(endpoint: str | None) -> Any:
    """One S3 client per endpoint and process (building one costs tens of milliseconds)."""
    import boto3
    from botocore.config import Config

    config = Config(
        connect_timeout=PROBE_TIMEOUT_SECONDS,
        read_timeout=PROBE_TIMEOUT_SECONDS,
        retries={"max_attempts": 1, "mode": "standard"},
    )
    return boto3.client("s3", endpoint_url=endpoint, config=config)


def health(db: Database, bucket: Callable[[], Check] | None) -> tuple[int, dict[str, Any]]:
    """The HTTP status and body of ``GET /v1/health``; ``bucket`` None: none is configured."""
    database = check_database(db)
    s3 = bucket() if bucket is not None else {"status": UNCONFIGURED}
    healthy = database["status"] == OK and s3["status"] in (OK, UNCONFIGURED)
    body = {
        "status": OK if healthy else DEGRADED,
        "version": __version__,
        "database": database,
        "s3": s3,
    }
    return (200 if database["status"] == OK else 503), body
