"""Local S3 for payloads: moto's S3-compatible server on 127.0.0.1, in this process.

moto keeps objects in memory; this server also writes every object of the payload bucket through
to ``<data dir>/s3/<bucket>/``, one file per key, before it answers the write: a PUT (or a copy,
or a completed multipart upload) that was answered 200 is on disk, fsynced and renamed into
place, as durable as S3 would make it, so a crash of ``baton dev`` (``kill -9``) loses no
acknowledged payload. A write that cannot be kept is answered 500, never acknowledged. Deletes
remove the file. The next start loads the files back. moto and boto3 are imported only when this
server is started.
"""

from __future__ import annotations

import logging
import os
import threading
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, unquote

from baton.local.events import REGION

log = logging.getLogger("baton.local.s3")

# Credentials for talking to the local server only: moto does not check signatures.
LOCAL_ACCESS_KEY = "baton-local"
LOCAL_SECRET_KEY = "baton-local-secret"
# Sub-resources of an object whose writes leave its content as it is: nothing to write to disk.
_CONTENT_UNCHANGED = ("tagging", "acl", "legal-hold", "retention", "partNumber")
_RESTORE_THREADS = 8

# What the WSGI layer reports after a successful write: the key written, or None when the
# request may have deleted any number of keys (DeleteObjects).
OnWrite = Callable[[str | None], None]


class LocalS3:
    def __init__(self, bucket: str, *, data_dir: Path | None = None) -> None:
        self.bucket = bucket
        # One file per object (None: in memory only).
        self.folder = None if data_dir is None else data_dir / bucket
        self.endpoint: str | None = None
        self._server: Any = None
        self._loopback: Any = None  # this server's own client (reads back what it keeps)
        self._keeping = False  # set once the kept objects are loaded back
        self._lock = threading.Lock()

    def start(self) -> str:
        """Start the server, create the bucket, load the kept objects; return the endpoint."""
        server = _moto_server(self.bucket, self._written)
        server.start()
        self._server = server
        host, port = server.get_host_and_port()
        self.endpoint = f"http://{host}:{port}"
        self._loopback = self._client()
        self._loopback.create_bucket(Bucket=self.bucket)
        restored = self._restore()
        self._keeping = self.folder is not None
        log.info(
            "local s3 ready",
            extra={"endpoint": self.endpoint, "bucket": self.bucket, "restored": restored},
        )
        return self.endpoint

    def _client(self) -> Any:
        """A client of this server."""
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name=REGION,
            aws_access_key_id=LOCAL_ACCESS_KEY,
            aws_secret_access_key=LOCAL_SECRET_KEY,
        )

    def stop(self) -> None:
        """Stop serving (every acknowledged write is already on disk)."""
        if self._server is not None:
            self._server.stop()
            self._server = None

    # --- write-through -------------------------------------------------------------------------

    def _written(self, key: str | None) -> None:
        """After moto applied a write, before it is answered: make the disk say the same.
        Raises OSError when it cannot (the write is then answered 500)."""
        if not self._keeping or self.folder is None:
            return
        with self._lock:  # one write at a time: a reconcile never races a new object's file
            if key is None:
                self._reconcile()
            else:
                self._keep(key)

    def _keep(self, key: str) -> None:
        from botocore.exceptions import ClientError

        assert self.folder is not None
        try:
            body = self._loopback.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        except ClientError as e:
            if str(e.response.get("Error", {}).get("Code")) not in ("NoSuchKey", "404"):
                raise OSError(f"cannot read back {key}: {e}") from e
            (self.folder / _file_name(key)).unlink(missing_ok=True)
            return
        _write_durably(self.folder, _file_name(key), body)

    def _reconcile(self) -> None:
        """Remove the files of objects that are no longer in the bucket."""
        assert self.folder is not None
        present = {
            _file_name(obj["Key"])
            for page in self._loopback.get_paginator("list_objects_v2").paginate(Bucket=self.bucket)
            for obj in page.get("Contents", [])
        }
        for path in _kept_files(self.folder):
            if path.name not in present:
                path.unlink(missing_ok=True)

    def _restore(self) -> int:
        folder = self.folder
        if folder is None or not folder.is_dir():
            return 0
        for leftover in folder.glob(".*"):  # a write cut short: never acknowledged
            leftover.unlink(missing_ok=True)
        files = list(_kept_files(folder))

        def put(path: Path) -> None:
            self._loopback.put_object(
                Bucket=self.bucket, Key=unquote(path.name), Body=path.read_bytes()
            )

        with ThreadPoolExecutor(max_workers=_RESTORE_THREADS) as pool:
            list(pool.map(put, files))
        return len(files)


def _kept_files(folder: Path) -> Iterable[Path]:
    return (p for p in folder.iterdir() if p.is_file() and not p.name.startswith("."))


def _write_durably(folder: Path, name: str, body: bytes) -> None:
    """``folder/name`` holds ``body`` or what it held before, whatever happens: written to a
    temporary file, fsynced, renamed into place, and the rename fsynced."""
    folder.mkdir(parents=True, exist_ok=True)
    staging = folder / f".{uuid.uuid4().hex}"
    fd = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        view = memoryview(body)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.replace(staging, folder / name)
    except OSError:
        staging.unlink(missing_ok=True)
        raise
    directory = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def _moto_server(bucket: str, on_write: OnWrite) -> Any:
    """moto's threaded server, with two differences from moto that S3 does not have: a PUT's
    body is the object whatever its Content-Type (``curl --data-binary @file`` sends
    ``application/x-www-form-urlencoded``, which the WSGI layer under moto parses as a form,
    storing an empty object; S3 stores the bytes), and writes to ``bucket`` are reported to
    ``on_write`` before they are answered."""
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from moto.server import ThreadedMotoServer
    from werkzeug.serving import make_server

    class Server(ThreadedMotoServer):
        def _server_entry(self) -> None:
            moto_app = DomainDispatcherApplication(create_backend_app)
            app = _kept_writes(_raw_puts(moto_app), bucket, on_write)
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


def _kept_writes(app: Callable[..., Any], bucket: str, on_write: OnWrite) -> Callable[..., Any]:
    """Call ``on_write`` after each successful write to ``bucket``, before its answer leaves;
    if it raises, the client gets a 500 instead of the success."""

    def wsgi(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        method = environ.get("REQUEST_METHOD", "GET")
        target = _write_target(environ, bucket) if method in ("PUT", "POST", "DELETE") else None
        if target is None:
            return app(environ, start_response)
        answer: list[Any] = []
        written: list[bytes] = []

        def capture(status: str, headers: list[Any], exc_info: Any = None) -> Any:
            answer[:] = [status, headers, exc_info]
            return written.append

        result = app(environ, capture)
        try:
            body = list(result)
        finally:
            close = getattr(result, "close", None)
            if close is not None:
                close()
        status, headers, exc_info = answer
        if status.startswith("2"):
            try:
                on_write(target[1])
            except Exception as e:
                log.exception("local s3: cannot keep a write on disk", extra={"key": target[1]})
                message = f"baton dev could not keep the object on disk: {e}"
                error = (
                    "<?xml version='1.0' encoding='UTF-8'?><Error><Code>InternalError</Code>"
                    f"<Message>{_xml_escape(message)}</Message></Error>"
                ).encode()
                start_response("500 Internal Server Error", [("Content-Type", "application/xml")])
                return [error]
        start_response(status, headers, exc_info)
        return [*written, *body]

    return wsgi


def _write_target(environ: dict[str, Any], bucket: str) -> tuple[str, str | None] | None:
    """What a write request may change in ``bucket``: ("object", key), ("objects", None) for a
    DeleteObjects, None for anything else (another bucket, a bucket setting, the SQS API)."""
    raw = str(environ.get("PATH_INFO", ""))
    try:
        path = raw.encode("latin-1").decode("utf-8")  # PEP 3333: bytes as latin-1
    except UnicodeError:
        path = raw
    host = str(environ.get("HTTP_HOST", ""))
    if host.startswith(f"{bucket}."):  # virtual-hosted style
        key = path.lstrip("/")
    elif path == f"/{bucket}" or path.startswith(f"/{bucket}/"):
        key = path[len(bucket) + 2 :]
    else:
        return None
    query = parse_qs(str(environ.get("QUERY_STRING", "")), keep_blank_values=True)
    if not key:
        return ("objects", None) if "delete" in query else None
    if any(name in query for name in _CONTENT_UNCHANGED):
        return None
    return ("object", key)


def _xml_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


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
