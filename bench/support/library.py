"""The one module that imports the core library (``baton``): the engine, its connection sources
and driver settings, the queues, migrations, the embedded server and the SQL modules whose
constants name the statements counted on the wire. Benchmarks measure the library only through
these entry points, so when its internal module paths change this is the file to update. Each
import happens inside the function that needs it, as it did in the benchmarks: a spawned worker
pays for importing the engine where it always has, and importing this module stays cheap."""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from baton.engine.queue_ops import Queues
    from baton.engine.service import Engine
    from baton.store.db import Conn, Database
    from baton.store.embedded import EmbeddedPostgres


def open_database(url: str, *, pooled: bool = False, prepare: bool | None = None) -> Database:
    """A connection source on ``url``: one reused connection (as in a Lambda container), or a
    pool of one. ``prepare=None`` keeps the library's default for that source, which differs
    (see ``baton.store.db``)."""
    from baton.store.db import Database

    options: dict[str, Any] = {} if prepare is None else {"prepare": prepare}
    if pooled:
        return Database.pooled(url, min_size=1, max_size=1, **options)
    return Database.single(url, **options)


def open_engine(
    url: str,
    *,
    pooled: bool = False,
    prepare: bool | None = True,
    dispatch_mode: str = "polling",
    claimed_states: int | None = None,
) -> Engine:
    """An engine on its own connection source (``engine.db``; close it when done); its jobs are
    created for ``dispatch_mode`` (polling, or outbox: relayed to SQS). Prepared statements by
    default, as the local server's pool and every raw baseline use them (``Database.single``
    alone would not prepare: behind RDS Proxy they pin connections); ``prepare=False`` measures
    that setting, ``None`` keeps the source's own default. ``claimed_states``: the size of the
    claimed-state cache (0: off; None: the engine's default)."""
    from dataclasses import replace

    from baton.engine.service import Engine
    from baton.settings import EngineSettings

    settings = EngineSettings(dispatch_mode=dispatch_mode)
    if claimed_states is not None:
        settings = replace(settings, claimed_states=claimed_states)
    return Engine(open_database(url, pooled=pooled, prepare=prepare), settings)


def open_archiving_engine(
    url: str, s3_endpoint: str, bucket: str, retention_seconds: int
) -> Engine:
    """An engine that archives terminal instances past ``retention_seconds`` to ``bucket`` on
    the S3 at ``s3_endpoint`` (``engine.archive_ops``), on one reused connection."""
    from baton.engine.archive_store import ArchiveStore
    from baton.engine.payloads import PayloadStore
    from baton.engine.service import Engine
    from baton.settings import EngineSettings, PayloadLimits

    store = PayloadStore(bucket, PayloadLimits(), endpoint=s3_endpoint)
    return Engine(
        open_database(url, prepare=True),
        EngineSettings(retention_seconds=retention_seconds),
        payload_objects=store,
        archive=ArchiveStore(bucket, endpoint=s3_endpoint),
    )


def open_queues(url: str) -> Queues:
    """Queues over an engine on one reused connection."""
    from baton.engine.queue_ops import Queues

    return Queues(open_engine(url))


def connect(url: str, **kwargs: Any) -> Conn:
    """A plain connection with the engine's driver settings, for a fair raw baseline."""
    from baton.store.db import connect

    return connect(url, **kwargs)


def apply_migrations(url: str) -> None:
    from baton.store import migrations

    migrations.apply(url)


def embedded_postgres(data_dir: Path) -> EmbeddedPostgres:
    """An embedded PostgreSQL whose data directory is deleted when it stops."""
    from baton.store.embedded import EmbeddedPostgres

    return EmbeddedPostgres(data_dir, keep_data=False)


def sql_modules() -> dict[str, ModuleType]:
    """The store's SQL modules by aggregate: their upper-case constants are statement texts."""
    from baton.store import batch_sql, definition_sql, instance_sql, job_sql, queue_sql

    return {
        "jobs": job_sql,
        "instances": instance_sql,
        "definitions": definition_sql,
        "queues": queue_sql,
        "batches": batch_sql,
    }


def raw_sql_text(sql: str) -> str:
    """The text the store sends for ``sql`` when it sends it in ``$n`` form
    (``baton.store.raw_sql``: the claim and the batch write), to name it on the wire."""
    from baton.store.raw_sql import RawStatement

    return RawStatement(sql).query.decode()


def dev_server_command(port: int, data_dir: str) -> list[str]:
    """The command line serving the whole API locally (``baton dev``) with this interpreter."""
    return [sys.executable, "-m", "baton.cli", "dev", "--port", str(port), "--data-dir", data_dir]
