"""Local S3 for payloads: moto's S3-compatible server on 127.0.0.1, in this process.

moto keeps objects in memory, so on a clean stop they are written to ``snapshot_dir`` and put
back at the next start: like the database, payloads survive a restart. moto and boto3 are
imported only when this server is started.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from baton.local.events import REGION

log = logging.getLogger("baton.local.s3")

# Credentials for talking to the local server only: moto does not check signatures.
LOCAL_ACCESS_KEY = "baton-local"
LOCAL_SECRET_KEY = "baton-local-secret"


class LocalS3:
    def __init__(self, bucket: str, *, snapshot_dir: Path | None = None) -> None:
        self.bucket = bucket
        self.snapshot_dir = snapshot_dir
        self.endpoint: str | None = None
        self._server: Any = None

    def start(self) -> str:
        """Start the server, create the bucket, restore the snapshot; return the endpoint URL."""
        server = _moto_server()
        server.start()
        self._server = server
        host, port = server.get_host_and_port()
        self.endpoint = f"http://{host}:{port}"
        client = self._client()
        client.create_bucket(Bucket=self.bucket)
        restored = self._restore(client)
        log.info(
            "local s3 ready",
            extra={"endpoint": self.endpoint, "bucket": self.bucket, "restored": restored},
        )
        return self.endpoint

    def stop(self) -> None:
        if self._server is None:
            return
        try:
            self._snapshot()
        finally:
            self._server.stop()
            self._server = None

    def _client(self) -> Any:
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name=REGION,
            aws_access_key_id=LOCAL_ACCESS_KEY,
            aws_secret_access_key=LOCAL_SECRET_KEY,
        )

    def _objects_dir(self) -> Path | None:
        return None if self.snapshot_dir is None else self.snapshot_dir / self.bucket

    def _restore(self, client: Any) -> int:
        folder = self._objects_dir()
        if folder is None or not folder.is_dir():
            return 0
        count = 0
        for path in sorted(folder.iterdir()):
            if path.is_file():
                client.put_object(
                    Bucket=self.bucket, Key=unquote(path.name), Body=path.read_bytes()
                )
                count += 1
        return count

    def _snapshot(self) -> None:
        """Write every object to ``snapshot_dir/<bucket>/``, one file per key."""
        folder = self._objects_dir()
        if folder is None:
            return
        client = self._client()
        staging = folder.with_name(folder.name + ".saving")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        count = 0
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket):
            for obj in page.get("Contents", []):
                body = client.get_object(Bucket=self.bucket, Key=obj["Key"])["Body"].read()
                (staging / _file_name(obj["Key"])).write_bytes(body)
                count += 1
        # Swap in the new snapshot only once it is complete.
        shutil.rmtree(folder, ignore_errors=True)
        staging.rename(folder)
        log.info("local s3 saved", extra={"objects": count, "path": str(folder)})


def _moto_server() -> Any:
    """moto's threaded server, with one difference from moto that S3 does not have: a PUT's
    body is the object whatever its Content-Type. ``curl --data-binary @file`` sends
    ``application/x-www-form-urlencoded``, which the WSGI layer under moto parses as a form,
    storing an empty object; S3 stores the bytes."""
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from moto.server import ThreadedMotoServer
    from werkzeug.serving import make_server

    class Server(ThreadedMotoServer):
        def _server_entry(self) -> None:
            app = _raw_puts(DomainDispatcherApplication(create_backend_app))
            self._server = make_server(
                self._ip_address, self._port, app, True, request_handler=MotoRequestHandler
            )
            self._server_ready_event.set()
            self._server.serve_forever()

    return Server(ip_address="127.0.0.1", port=0, verbose=False)


def _raw_puts(app: Callable[..., Any]) -> Callable[..., Any]:
    def wsgi(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        if environ.get("REQUEST_METHOD") == "PUT" and str(
            environ.get("CONTENT_TYPE", "")
        ).startswith(("application/x-www-form-urlencoded", "multipart/form-data")):
            environ["CONTENT_TYPE"] = "application/octet-stream"
        return app(environ, start_response)

    return wsgi


def _file_name(key: str) -> str:
    # Percent-encoded, dots included, so no key can name a directory or ".."; unquote reverses it.
    return quote(key, safe="").replace(".", "%2E")


# The event-driven dispatch mode's queue on the same moto server (docs/dispatch.md).
DISPATCH_QUEUE_NAME = "baton-dispatch.fifo"


def local_dispatch_queue(endpoint: str, database_url: str) -> str:
    """Create the local SQS FIFO queue and return its URL. moto's queue starts empty at every
    start, so outbox rows relayed before a restart whose job still waits for that attempt are
    made pending again: the relay publishes them anew (a claim by id makes any repeat harmless)."""
    import boto3

    from baton.store.db import connect
    from baton.store.outbox_sql import REPUBLISH_WAITING

    client = boto3.client(
        "sqs",
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id=LOCAL_ACCESS_KEY,
        aws_secret_access_key=LOCAL_SECRET_KEY,
    )
    url = client.create_queue(
        QueueName=DISPATCH_QUEUE_NAME,
        Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "false"},
    )["QueueUrl"]
    with connect(database_url, autocommit=True) as conn:
        again = conn.execute(REPUBLISH_WAITING).rowcount
    log.info("local dispatch queue ready", extra={"queueUrl": url, "republishing": again})
    return str(url)
