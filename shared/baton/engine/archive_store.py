"""The S3 side of the archive: where an archived instance's document and payloads live, the
document's format, and the object calls (``engine.archive_ops`` decides when).

One gzip JSON document per instance, one line (so Athena's JSON SerDe reads it as one record),
at ``archive/<yyyy>/<mm>/<dd>/<definition>/<id>.json.gz`` (the date is the instance's end, UTC).
Its payload objects are moved to ``archive/payloads/<id>/<kind>/<name>``, and the document's
references point there, so the archive holds everything the run referenced. The document is
written whole by one PUT and the same instance always gets the same key: writing it again (an
archiver that crashed before deleting the rows, then a second try) replaces it with the same
content.
"""

from __future__ import annotations

import gzip
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

from baton import jsontext
from baton.engine.payloads import KEY_PREFIX, _missing
from baton.engine.s3_client import s3_client
from baton.errors import Unavailable
from baton.payload_ref import REF_KEY

PREFIX = "archive/"
PAYLOAD_PREFIX = f"{PREFIX}payloads/"
# The document's format: readers check it, a later format gets a new number.
FORMAT = "baton.archive/1"
THREADS = 16  # S3 calls at once (each is one round trip of tens of ms)
# gzip's level for the documents. Measured on a document of 40 steps (77 KB of JSON): level 9
# (``gzip.compress``'s default) took 2.2 ms for 15.3 KB, level 6 0.93 ms for 15.5 KB, level 3
# 0.38 ms for 17.2 KB, level 1 0.33 ms for 17.7 KB; on a one-step document (2.6 KB) 18 us for
# 777 bytes at 9, 13 us for 824 at 3. Level 3 is the best of zlib's fast levels (no lazy
# matching): a sixth of level 9's CPU for 6-12% more bytes.
GZIP_LEVEL = 3


def document_key(definition_name: str, completed_at: datetime, instance_id: uuid.UUID) -> str:
    """``archive/<yyyy>/<mm>/<dd>/<definition>/<id>.json.gz`` (definition names are key-safe:
    letters, digits, ``_``, ``.`` and ``-``)."""
    day = completed_at.astimezone(UTC)
    return f"{PREFIX}{day:%Y/%m/%d}/{definition_name}/{instance_id}.json.gz"


def payload_key(instance_id: uuid.UUID, path: str) -> str:
    """Where an instance's payload object goes: ``archive/payloads/<id>/<kind>/<name>``."""
    return f"{PAYLOAD_PREFIX}{instance_id}/{path.removeprefix(KEY_PREFIX)}"


def rewrite_refs(value: Any, moved: Mapping[str, str]) -> Any:
    """``value`` with every payload reference whose path was moved pointing to its new key
    (``value`` itself when nothing was moved: most runs have no payload objects)."""
    if not moved:
        return value
    if isinstance(value, dict):
        ref = value.get(REF_KEY)
        if isinstance(ref, str) and ref in moved:
            return {**value, REF_KEY: moved[ref]}
        return {k: rewrite_refs(v, moved) for k, v in value.items()}
    if isinstance(value, list):
        return [rewrite_refs(v, moved) for v in value]
    return value


def encode(document: dict[str, Any]) -> bytes:
    """The document as stored: one line of JSON (keys sorted, UTF-8), gzip at ``GZIP_LEVEL``
    with no timestamp in the header, so the same document is the same bytes. orjson writes it
    (``baton.jsontext``: a tenth of ``json.dumps``'s CPU, the same value)."""
    return gzip.compress(jsontext.dumps_sorted_line(document), compresslevel=GZIP_LEVEL, mtime=0)


def decode(body: bytes) -> dict[str, Any]:
    document: dict[str, Any] = jsontext.loads(gzip.decompress(body))
    if document.get("format") != FORMAT:
        raise Unavailable(f"archive: document format {document.get('format')!r} is not {FORMAT}")
    return document


class ArchiveStore:
    """The archive's objects in one bucket (the payload bucket, under ``archive/``)."""

    def __init__(self, bucket: str, *, endpoint: str | None = None, client: Any = None) -> None:
        self.bucket = bucket
        self.endpoint = endpoint
        self._client = client

    @property
    def client(self) -> Any:
        """One client for the store's life (``engine.s3_client``: small PUTs sent at once)."""
        if self._client is None:
            self._client = s3_client(self.endpoint)
        return self._client

    def put(self, key: str, body: bytes) -> None:
        """Write one document; returns once S3 answered that it is stored (its ETag)."""
        answer = self._call(
            key,
            lambda: self.client.put_object(
                Bucket=self.bucket,
                Key=key,
                Body=body,
                ContentType="application/json",
                ContentEncoding="gzip",
            ),
        )
        if not answer or not answer.get("ETag"):
            raise Unavailable(f"archive: no confirmation for {key}")

    def get(self, key: str) -> dict[str, Any] | None:
        """The document at ``key`` (None when it is not there)."""
        answer = self._call(key, lambda: self.client.get_object(Bucket=self.bucket, Key=key))
        return None if answer is None else decode(answer["Body"].read())

    def copy(self, source: str, target: str) -> bool:
        """Copy one payload object (server-side); False when the source is gone. Tags are not
        copied: the payload prefix's expiry tag must not follow it into the archive."""
        answer = self._call(
            source,
            lambda: self.client.copy_object(
                Bucket=self.bucket,
                Key=target,
                CopySource={"Bucket": self.bucket, "Key": source},
                TaggingDirective="REPLACE",
                Tagging="",
            ),
        )
        return answer is not None

    def delete(self, keys: Sequence[str]) -> None:
        """Delete ``keys`` (those already gone are skipped), 1,000 per request."""
        from botocore.exceptions import BotoCoreError, ClientError

        for start in range(0, len(keys), 1000):
            chunk = keys[start : start + 1000]
            try:
                answer = self.client.delete_objects(
                    Bucket=self.bucket,
                    Delete={"Objects": [{"Key": k} for k in chunk], "Quiet": True},
                )
            except (BotoCoreError, ClientError) as e:
                raise Unavailable(f"archive: cannot delete objects: {e}") from e
            errors = [e for e in answer.get("Errors", []) if e.get("Code") != "NoSuchKey"]
            if errors:
                raise Unavailable(f"archive: cannot delete {errors[0].get('Key')}")

    def _call(self, key: str, call: Callable[[], Any]) -> Any:
        """One object call's answer; None when the object is not there."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return call()
        except ClientError as e:
            if _missing(e):
                return None
            raise Unavailable(f"archive: {key}: {e}") from e
        except BotoCoreError as e:
            raise Unavailable(f"archive: {key}: {e}") from e

    @staticmethod
    def parallel(call: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
        """``call`` on every item, a few at a time (each is one S3 round trip)."""
        if len(items) <= 1:
            return [call(i) for i in items]
        with ThreadPoolExecutor(max_workers=min(THREADS, len(items))) as pool:
            return list(pool.map(call, items))
