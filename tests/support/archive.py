"""Archive tests' shared pieces: an engine with a bucket on moto's S3 server (the local
runtime's S3) and a retention, and ways to make instances past it without waiting."""

from __future__ import annotations

import gzip
import json
import uuid
from typing import Any

import boto3
from baton.engine.archive_store import ArchiveStore
from baton.engine.payloads import PayloadReader, PayloadStore
from baton.engine.service import Engine
from baton.settings import EngineSettings, PayloadLimits
from baton.store.db import Database

RETENTION = 3600  # an hour: nothing a test just ended is past it until it is aged


def s3_client(endpoint: str) -> Any:
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )


def new_bucket(s3: Any) -> str:
    bucket = f"archive-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=bucket)
    return bucket


def archiving_engine(
    db: Database, s3: Any, bucket: str, retention_seconds: int = RETENTION
) -> Engine:
    store = PayloadStore(bucket, PayloadLimits(), client=s3)
    return Engine(
        db,
        EngineSettings(retention_seconds=retention_seconds),
        payloads=PayloadReader(bucket, client=s3),
        offload=store.put_json,
        payload_objects=store,
        archive=ArchiveStore(bucket, client=s3),
    )


def age(db: Database, seconds: float, ids: list[str] | None = None) -> None:
    """Move the end of ended instances (``ids``, or all) ``seconds`` into the past (the
    fencing trigger wants the version bumped, as any write)."""
    db.autocommit(
        lambda c: c.execute(
            "UPDATE instance SET completed_at = completed_at - make_interval(secs => %(s)s),"
            " version = version + 1"
            " WHERE completed_at IS NOT NULL AND (%(ids)s::uuid[] IS NULL OR id = ANY(%(ids)s))",
            {"s": seconds, "ids": ids},
        )
    )


def keys(s3: Any, bucket: str, prefix: str = "") -> list[str]:
    found: list[str] = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        found.extend(o["Key"] for o in page.get("Contents", []))
    return sorted(found)


def document(s3: Any, bucket: str, key: str) -> dict[str, Any]:
    body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    return json.loads(gzip.decompress(body))  # type: ignore[no-any-return]


def count(db: Database, sql: str, params: dict[str, Any] | None = None) -> int:
    row = db.autocommit(lambda c: c.execute(sql, params).fetchone())
    assert row is not None
    return int(next(iter(row.values())))
