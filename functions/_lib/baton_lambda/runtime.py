"""Per-container state: settings, the database connection and the engine, built once.

The connection is opened lazily on the first request and reused by every later invocation of the
container; after a failure it is re-opened on the next one (``SingleConnection``).
"""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING, Any

from baton import lifecycle
from baton.conductor import dialect as conductor_dialect
from baton.engine.service import Engine
from baton.errors import Unavailable

if TYPE_CHECKING:
    from baton.engine.archive_store import ArchiveStore
    from baton.engine.payloads import PayloadStore
    from baton.engine.queue_ops import Queues
    from baton.engine.queue_triggers import QueueTriggers
    from baton.engine.sqs import SqsPublisher
from baton.metrics import MetricsSink
from baton.settings import Settings
from baton.store.db import Database
from baton.store.job_listener import JobWakeups

from baton_lambda.api_keys import KeyRing

# The engine reads Conductor WorkflowDefs met at run time through this (baton.dialects).
conductor_dialect.register()

_lock = threading.Lock()
# One database per process (the local server runs every function in one process); one engine per
# metrics sink, so each function's metrics are reported under its own name.
_databases: dict[str, Database] = {}
_engines: dict[int, Engine] = {}
_readers: dict[str, Callable[[Any], Any]] = {}
_wakeups: dict[str, JobWakeups] = {}
_publishers: dict[str, SqsPublisher] = {}


@cache
def settings() -> Settings:
    return Settings.from_env()


_conductor_key: list[str] = []


def conductor_key() -> str | None:
    """The key ``/api/token`` accepts: BATON_API_KEY (locally), else the Secrets Manager secret
    the CDK app made for the Conductor-compatible surface (read once per container)."""
    s = settings()
    if s.api_key:
        return s.api_key
    if not s.conductor_key_secret_arn:
        return None
    if not _conductor_key:
        import boto3
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            response = boto3.client("secretsmanager").get_secret_value(
                SecretId=s.conductor_key_secret_arn
            )
        except (BotoCoreError, ClientError) as e:
            raise Unavailable(f"cannot read the /api key secret: {e}") from e
        _conductor_key.append(str(response["SecretString"]))
    return _conductor_key[0]


_key_rings: list[KeyRing] = []


def api_key_ring() -> KeyRing | None:
    """The API keys this container checks itself (behind an HTTP API: BATON_API_KEYS_SECRET_ARN),
    or None where API Gateway (or the local server) checks them."""
    arn = settings().api_keys_secret_arn
    if not arn:
        return None
    if _key_rings:
        return _key_rings[0]
    with _lock:
        if not _key_rings:

            def fetch() -> str:
                import boto3
                from botocore.exceptions import BotoCoreError, ClientError

                try:
                    response = boto3.client("secretsmanager").get_secret_value(SecretId=arn)
                except (BotoCoreError, ClientError) as e:
                    raise Unavailable(f"cannot read the API keys secret: {e}") from e
                return str(response["SecretString"])

            _key_rings.append(KeyRing(fetch))
        return _key_rings[0]


def conninfo(s: Settings) -> str:
    """DATABASE_URL when given (local mode); otherwise the cluster secret + the proxy host."""
    if s.database_url:
        return s.database_url
    if not s.db_secret_arn:
        raise RuntimeError("no database configured: set DATABASE_URL or BATON_DB_SECRET_ARN")
    import boto3  # only in AWS: keeps boto3 out of the local and cold-import path
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        response = boto3.client("secretsmanager").get_secret_value(SecretId=s.db_secret_arn)
    except (BotoCoreError, ClientError) as e:
        # Without the secret there is no database: the same answer as a database that is down.
        raise Unavailable(f"cannot read the database secret: {e}") from e
    secret: dict[str, Any] = json.loads(response["SecretString"])
    from psycopg.conninfo import make_conninfo

    return make_conninfo(
        host=s.db_host or secret["host"],
        port=secret.get("port", 5432),
        dbname=s.db_name or secret.get("dbname", "baton"),
        user=secret["username"],
        password=secret["password"],
        sslmode="require",
        application_name="baton",
    )


def engine(metrics: MetricsSink) -> Engine:
    """The engine of the calling function, reporting to ``metrics`` (the connection is shared
    by the process and reused across invocations)."""
    with _lock:
        eng = _engines.get(id(metrics))
        if eng is None:
            s = settings()
            eng = Engine(
                _database(s),
                s.engine,
                metrics,
                payloads=_payload_reader(s),
                offload=_offloader(s, metrics),
                wakeups=_job_wakeups(s),
                payload_objects=_payload_objects(s, metrics),
                archive=_archive_store(s),
            )
            eng.failed_view = functools.partial(_failed_view, eng)
            _engines[id(metrics)] = eng
        return eng


def _failed_view(
    eng: Engine, instance: dict[str, Any], audit: list[dict[str, Any]], source: Any
) -> dict[str, Any]:
    """``baton_lambda.conductor.common.failed_view``, imported when a failure workflow first
    starts (the Conductor surface stays out of the other functions' cold start)."""
    from baton_lambda.conductor.common import failed_view

    return failed_view(eng)(instance, audit, source)


def _job_wakeups(s: Settings) -> JobWakeups | None:
    """The process's one LISTEN connection for long-polls, in notify mode (None: reclaim)."""
    if s.long_poll_mode != "notify":
        return None
    wakeups = _wakeups.get("db")
    if wakeups is None:
        wakeups = JobWakeups(lambda: conninfo(s))
        _wakeups["db"] = wakeups
    return wakeups


def _payload_reader(s: Settings) -> Callable[[Any], Any] | None:
    """The process's reader of offloaded payloads (one cache shared by every engine)."""
    if not s.payload_bucket:
        return None
    reader = _readers.get(s.payload_bucket)
    if reader is None:
        from baton.engine.payloads import PayloadReader

        reader = PayloadReader(s.payload_bucket, endpoint=s.s3_endpoint)
        _readers[s.payload_bucket] = reader
    return reader


def _offloader(s: Settings, metrics: MetricsSink) -> Callable[[str, str], Any] | None:
    """Stores the engine's large values in the payload bucket (None without a bucket)."""
    store = _payload_objects(s, metrics)
    return None if store is None else store.put_json


def _payload_objects(s: Settings, metrics: MetricsSink) -> PayloadStore | None:
    """The payload bucket's objects, for offloading and retention (None without a bucket)."""
    if not s.payload_bucket:
        return None
    from baton.engine.payloads import PayloadStore

    return PayloadStore(
        s.payload_bucket, s.engine.payload_limits, endpoint=s.s3_endpoint, metrics=metrics
    )


def _archive_store(s: Settings) -> ArchiveStore | None:
    """The archive of instances past their retention, under the payload bucket's ``archive/``
    prefix (None without a bucket: nothing is archived, BATON_RETENTION_SECONDS is ignored)."""
    if not s.payload_bucket:
        return None
    from baton.engine.archive_store import ArchiveStore

    return ArchiveStore(s.payload_bucket, endpoint=s.s3_endpoint)


def _database(s: Settings) -> Database:
    db = _databases.get("db")
    if db is None:
        if s.stage == "local":
            # The local server runs every function in one process, on several threads.
            db = Database.pooled(conninfo(s), min_size=1, max_size=8)
        else:  # a Lambda container serves one request at a time: one reused connection
            db = Database.single(lambda: conninfo(s))
        _databases["db"] = db
    return db


def payload_store(engine: Engine) -> PayloadStore:
    """Presigned uploads/downloads on the deployment's payload bucket (boto3 loaded lazily)."""
    from baton.engine.payloads import PayloadStore

    s = settings()
    return PayloadStore(
        s.payload_bucket,
        engine.settings.payload_limits,
        endpoint=s.s3_endpoint,
        metrics=engine.metrics,
    )


def dispatch_publisher() -> SqsPublisher | None:
    """The outbox relay's SQS FIFO publisher (None without BATON_DISPATCH_QUEUE_URL)."""
    s = settings()
    if not s.dispatch_queue_url:
        return None
    with _lock:
        publisher = _publishers.get(s.dispatch_queue_url)
        if publisher is None:
            from baton.engine.sqs import SqsPublisher

            publisher = SqsPublisher(s.dispatch_queue_url, endpoint=s.sqs_endpoint)
            _publishers[s.dispatch_queue_url] = publisher
        return publisher


def queues(engine: Engine) -> Queues:
    """The queue operations over the container's engine."""
    from baton.engine.queue_ops import Queues

    return Queues(engine)


def queue_triggers(engine: Engine) -> QueueTriggers:
    """The queue-trigger dispatcher over the container's engine."""
    from baton.engine.queue_triggers import QueueTriggers

    return QueueTriggers(queues(engine))


def reset() -> None:
    """Forget the container's state (tests switch databases between cases)."""
    with _lock:
        for wakeups in _wakeups.values():
            wakeups.close()
        _wakeups.clear()
        for db in _databases.values():
            db.close()
        _databases.clear()
        _engines.clear()
        _readers.clear()
        _publishers.clear()
        _key_rings.clear()
    settings.cache_clear()


# Locally (``baton dev``) the process outlives the database it ends with: close the connections
# first. In AWS nothing calls this (an execution environment is discarded as it is).
lifecycle.on_shutdown(reset)
