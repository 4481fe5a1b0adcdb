"""External payloads on S3: the limits clients see and the presigned uploads the API issues.

A client asks for an upload (``POST /v1/payloads``) declaring the kind and the size; the server
chooses the key (unguessable, under a per-kind prefix of ``payloads/``), refuses sizes above the
kind's hard limit, and signs a PUT for exactly that key with the declared ``Content-Length``
(and the SHA-256, when given) among the signed headers: S3 refuses a body of another size, or
another content, and the URL lapses after at most 15 minutes.
"""

from __future__ import annotations

import base64
import binascii
import json
import secrets
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, Protocol
from urllib.parse import parse_qs, urlsplit

from baton.engine.s3_client import s3_client
from baton.errors import (
    InvalidValue,
    PayloadMissing,
    PayloadTooLarge,
    Problem,
    Unavailable,
    ValidationFailed,
)
from baton.metrics import MetricsSink, NullMetrics
from baton.payload_ref import REF_KEY, SIZE_KEY, is_payload_ref, payload_ref
from baton.settings import MAX_PRESIGN_SECONDS, PayloadLimit, PayloadLimits

PayloadKind = Literal["WORKFLOW_INPUT", "STEP_INPUT", "STEP_OUTPUT"]
PAYLOAD_KINDS: tuple[PayloadKind, ...] = ("WORKFLOW_INPUT", "STEP_INPUT", "STEP_OUTPUT")
# Every payload object lives under this prefix (the functions' IAM grants are limited to it).
KEY_PREFIX = "payloads/"
_KIND_PREFIX: Mapping[str, str] = {
    "WORKFLOW_INPUT": "workflow-input",
    "STEP_INPUT": "step-input",
    "STEP_OUTPUT": "step-output",
    # Written by the engine only (an instance's large output), never uploaded by a client.
    "WORKFLOW_OUTPUT": "workflow-output",
}
_SHA256_HEX_LEN = 64
# GET /v1/instances/{id}?resolvePayloads=true inlines offloaded fields up to this size.
RESOLVE_INLINE_BYTES = 1_000_000
# Retention: the tag the bucket's lifecycle rule expires (infra/baton_infra/storage.py), and how
# many objects are tagged at once.
RETENTION_TAG = "baton-retention"
RETENTION_ENDED = "ended"
RETENTION_THREADS = 8
RETIRED_AT_METADATA = "baton-retired-at"


class PayloadObjects(Protocol):
    """What retention does to the payload bucket's objects (``engine.payloads.PayloadStore``)."""

    def retire(self, paths: Sequence[str]) -> int:
        """Tag ``paths`` ended, restarting their age; how many objects were there."""
        ...

    def revive(self, paths: Sequence[str]) -> None:
        """Remove the ended tag from ``paths`` (those that are gone are skipped)."""
        ...

    def delete(self, paths: Sequence[str]) -> None:
        """Delete ``paths`` (those that are gone are skipped)."""
        ...


class PayloadStorageUnconfigured(Unavailable):
    """No payload bucket is configured: external payloads are not available (503)."""

    title = "Payload storage not configured"


def limit_of(limits: PayloadLimits, kind: PayloadKind) -> PayloadLimit:
    return {
        "WORKFLOW_INPUT": limits.workflow_input,
        "STEP_INPUT": limits.step_input,
        "STEP_OUTPUT": limits.step_output,
    }[kind]


def limits_view(limits: PayloadLimits) -> dict[str, Any]:
    """The body of ``GET /v1/config``: what a client needs to decide when to offload."""

    def one(limit: PayloadLimit) -> dict[str, int]:
        return {"softLimitBytes": limit.soft_bytes, "hardLimitBytes": limit.hard_bytes}

    return {
        "payloadLimits": {
            "workflowInput": one(limits.workflow_input),
            "stepInput": one(limits.step_input),
            "stepOutput": one(limits.step_output),
        },
        "presignSeconds": limits.presign_seconds,
    }


def new_key(kind: str, token: Callable[[int], str] = secrets.token_urlsafe) -> str:
    """A fresh object key: ``payloads/<kind>/<192 random bits>`` (never guessable)."""
    return f"{KEY_PREFIX}{_KIND_PREFIX[kind]}/{token(24)}"


def kind_of_key(key: str) -> str | None:
    """The kind whose prefix ``key`` lies under, or None for a key Baton would not issue."""
    for kind, prefix in _KIND_PREFIX.items():
        rest = key.removeprefix(f"{KEY_PREFIX}{prefix}/")
        if rest != key and rest and "/" not in rest:
            return kind
    return None


def sha256_b64(hex_digest: str) -> str:
    """The base64 form S3's ``x-amz-checksum-sha256`` wants, from the hex a client declares."""
    return base64.b64encode(binascii.unhexlify(hex_digest)).decode()


def check_upload_request(
    limits: PayloadLimits, kind: str, size_bytes: int, content_sha256: str | None
) -> PayloadKind:
    """Refuse what no upload may be: an unknown kind, a bad digest (422), too big (413)."""
    problems = []
    if kind not in PAYLOAD_KINDS:
        problems.append(Problem("kind", f"expected one of {', '.join(PAYLOAD_KINDS)}"))
    if size_bytes < 0:
        problems.append(Problem("sizeBytes", "must be >= 0"))
    if content_sha256 is not None:
        try:
            ok = len(content_sha256) == _SHA256_HEX_LEN and bool(binascii.unhexlify(content_sha256))
        except (binascii.Error, ValueError):
            ok = False
        if not ok:
            problems.append(Problem("contentSha256", "expected 64 hexadecimal digits"))
    if problems:
        raise ValidationFailed(problems)
    checked: PayloadKind = kind  # type: ignore[assignment]
    hard = limit_of(limits, checked).hard_bytes
    if size_bytes > hard:
        raise PayloadTooLarge(size_bytes, hard, what=f"{checked} payload")
    return checked


@dataclass(frozen=True, slots=True)
class UploadGrant:
    path: str
    upload_url: str
    expires_at: datetime
    upload_headers: dict[str, str]

    def as_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "uploadUrl": self.upload_url,
            "expiresAt": self.expires_at.isoformat().replace("+00:00", "Z"),
            "uploadHeaders": self.upload_headers,
        }


def signed_url_terms(url: str) -> dict[str, Any]:
    """What a SigV4 presigned URL commits to: its signed headers, its lifetime and its key.

    Moto does not check signatures, so the tests (and an operator debugging a refused upload)
    read the terms from the URL itself."""
    parts = urlsplit(url)
    q = {k: v[0] for k, v in parse_qs(parts.query).items()}
    return {
        "path": parts.path,
        "signedHeaders": set(q.get("X-Amz-SignedHeaders", "").split(";")) - {""},
        "expiresSeconds": int(q.get("X-Amz-Expires", "0")),
        "date": q.get("X-Amz-Date"),
        "algorithm": q.get("X-Amz-Algorithm"),
    }


class PayloadStore:
    """Presigned uploads and downloads for one bucket."""

    def __init__(
        self,
        bucket: str | None,
        limits: PayloadLimits,
        *,
        endpoint: str | None = None,
        metrics: MetricsSink | None = None,
        client: Any = None,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.bucket = bucket
        self.limits = limits
        self.endpoint = endpoint
        self.metrics = metrics or NullMetrics()
        self._client = client
        self._now = now

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = s3_client(self.endpoint)
        return self._client

    def grant_upload(
        self, kind: str, size_bytes: int, content_sha256: str | None = None
    ) -> UploadGrant:
        try:
            checked = check_upload_request(self.limits, kind, size_bytes, content_sha256)
        except PayloadTooLarge:
            self.metrics.add("PayloadRefused", 1, dimensions={"Kind": kind})
            raise
        if not self.bucket:
            raise PayloadStorageUnconfigured(
                "no payload bucket is configured (BATON_PAYLOAD_BUCKET)"
            )
        key = new_key(checked)
        expires = min(self.limits.presign_seconds, MAX_PRESIGN_SECONDS)
        params: dict[str, Any] = {"Bucket": self.bucket, "Key": key, "ContentLength": size_bytes}
        headers = {"Content-Length": str(size_bytes)}
        if content_sha256 is not None:
            digest = sha256_b64(content_sha256.lower())
            params["ChecksumSHA256"] = digest
            headers["x-amz-checksum-sha256"] = digest
        issued = self._now()
        url = self.client.generate_presigned_url(
            "put_object", Params=params, ExpiresIn=expires, HttpMethod="PUT"
        )
        return UploadGrant(key, url, issued + timedelta(seconds=expires), headers)

    def verify(self, path: str, kind: PayloadKind, *, field: str) -> dict[str, Any]:
        """The reference the engine stores for an uploaded payload, after checking that ``path``
        is one this server issues for ``kind``, that its object exists and that it is within the
        hard limit; otherwise a 422 naming ``field``.

        Only the API's roles may write under ``payloads/`` and their keys carry 192 random bits,
        so an object found there was uploaded through a URL this server granted (its size was
        signed into that URL)."""
        if kind_of_key(path) != kind:
            raise ValidationFailed(
                [Problem(field, f"not a {kind} payload path issued by POST /v1/payloads")]
            )
        if not self.bucket:
            raise PayloadStorageUnconfigured(
                "no payload bucket is configured (BATON_PAYLOAD_BUCKET)"
            )
        size = self._size_of(path)
        if size is None:
            raise ValidationFailed(
                [Problem(field, "no payload at this path (never uploaded, or expired)")]
            )
        hard = limit_of(self.limits, kind).hard_bytes
        if size > hard:
            self.metrics.add("PayloadRefused", 1, dimensions={"Kind": kind})
            raise ValidationFailed(
                [
                    Problem(
                        field,
                        f"payload of {size} bytes exceeds the {kind} hard limit of {hard} bytes",
                    )
                ]
            )
        self.metrics.add("PayloadsOffloaded", 1, dimensions={"Kind": kind})
        self.metrics.add("PayloadBytes", size, dimensions={"Kind": kind})
        return payload_ref(path, size)

    def put_json(self, payload_json: str, kind: str = "STEP_INPUT") -> dict[str, Any]:
        """Store ``payload_json`` under a fresh key of ``kind``; its reference."""
        from botocore.exceptions import BotoCoreError, ClientError

        body = payload_json.encode()
        key = new_key(kind)
        try:
            self.client.put_object(
                Bucket=self.bucket, Key=key, Body=body, ContentType="application/json"
            )
        except (BotoCoreError, ClientError) as e:
            raise Unavailable(f"payload storage: cannot write {key}: {e}") from e
        self.metrics.add("PayloadsOffloaded", 1, dimensions={"Kind": kind})
        self.metrics.add("PayloadBytes", len(body), dimensions={"Kind": kind})
        return payload_ref(key, len(body))

    def download_url(self, path: str) -> str:
        """A presigned GET of ``path``, valid ``presign_seconds``."""
        url: str = self.client.generate_presigned_url(
            "get_object",
            Params={"Bucket": self.bucket, "Key": path},
            ExpiresIn=min(self.limits.presign_seconds, MAX_PRESIGN_SECONDS),
        )
        return url

    def present(
        self,
        instance: dict[str, Any],
        *,
        resolve: bool = False,
        reader: Callable[[Any], Any] | None = None,
    ) -> dict[str, Any]:
        """An instance view with each offloaded field (its input and output, its steps' inputs
        and outputs) given a presigned GET ``downloadUrl``; never inlined, except with
        ``resolve`` those up to ``RESOLVE_INLINE_BYTES``."""
        holders = [instance, *(instance.get("steps") or [])]
        for holder in holders:
            for field in ("input", "output"):
                value = holder.get(field)
                if not is_payload_ref(value):
                    continue
                if resolve and reader is not None and value[SIZE_KEY] <= RESOLVE_INLINE_BYTES:
                    holder[field] = reader(value)
                else:
                    holder[field] = {**value, "downloadUrl": self.download_url(value[REF_KEY])}
        return instance

    def offload_jobs(self, jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Jobs as a poll hands them out: an offloaded input as its path and a GET URL."""
        for job in jobs:
            if is_payload_ref(job.get("input")):
                path = str(job["input"][REF_KEY])
                job["input"] = None
                job["inputPayloadPath"] = path
                job["inputDownloadUrl"] = self.download_url(path)
        return jobs

    # --- retention (see engine.retention_ops) ----------------------------------------------

    def retire(self, paths: Sequence[str]) -> int:
        """Copy each object onto itself tagged ``baton-retention=ended``: its age restarts, and
        the bucket's tag-filtered lifecycle rule deletes it the retention period later. S3 only
        copies an object onto itself when its metadata changes: the copy keeps the object's
        content type and metadata and adds when it was retired. Objects already gone are
        skipped; how many were retired."""
        retired_at = self._now().isoformat(timespec="seconds")

        def copy(path: str) -> None:
            head = self.client.head_object(Bucket=self.bucket, Key=path)
            self.client.copy_object(
                Bucket=self.bucket,
                Key=path,
                CopySource={"Bucket": self.bucket, "Key": path},
                MetadataDirective="REPLACE",
                ContentType=head.get("ContentType") or "application/json",
                Metadata={**head.get("Metadata", {}), RETIRED_AT_METADATA: retired_at},
                TaggingDirective="REPLACE",
                Tagging=f"{RETENTION_TAG}={RETENTION_ENDED}",
            )

        return sum(self._parallel(lambda path: self._each(path, lambda: copy(path)), paths))

    def revive(self, paths: Sequence[str]) -> None:
        """Remove the ended tag: the objects of an instance that runs again are kept."""
        self._parallel(
            lambda path: self._each(
                path,
                lambda: self.client.delete_object_tagging(Bucket=self.bucket, Key=path),
            ),
            paths,
        )

    def delete(self, paths: Sequence[str]) -> None:
        """Delete the objects (1,000 per request)."""
        from botocore.exceptions import BotoCoreError, ClientError

        for start in range(0, len(paths), 1000):
            chunk = paths[start : start + 1000]
            try:
                answer = self.client.delete_objects(
                    Bucket=self.bucket,
                    Delete={"Objects": [{"Key": p} for p in chunk], "Quiet": True},
                )
            except (BotoCoreError, ClientError) as e:
                raise Unavailable(f"payload storage: cannot delete objects: {e}") from e
            errors = [e for e in answer.get("Errors", []) if e.get("Code") != "NoSuchKey"]
            if errors:
                raise Unavailable(f"payload storage: cannot delete {errors[0].get('Key')}")

    def _each(self, path: str, call: Callable[[], Any]) -> bool:
        """One object call: True if done, False if the object is gone; Unavailable otherwise."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            call()
        except ClientError as e:
            if _missing(e):
                return False
            raise Unavailable(f"payload storage: {path}: {e}") from e
        except BotoCoreError as e:
            raise Unavailable(f"payload storage: {path}: {e}") from e
        return True

    @staticmethod
    def _parallel(call: Callable[[str], bool], paths: Sequence[str]) -> list[bool]:
        """``call`` on every path, a few at a time (each is one S3 round trip)."""
        if len(paths) <= 1:
            return [call(p) for p in paths]
        with ThreadPoolExecutor(max_workers=min(RETENTION_THREADS, len(paths))) as pool:
            return list(pool.map(call, paths))

    def _size_of(self, path: str) -> int | None:
        from botocore.exceptions import ClientError

        try:
            head = self.client.head_object(Bucket=self.bucket, Key=path)
        except ClientError as e:
            if _missing(e):
                return None
            raise Unavailable(f"payload storage: {e}") from e
        return int(head["ContentLength"])


class PayloadReader:
    """Reads offloaded payloads' JSON, cached per process by path (objects are immutable),
    up to ``cache_bytes``; anything that is not a reference is returned as it is."""

    def __init__(
        self,
        bucket: str,
        *,
        endpoint: str | None = None,
        client: Any = None,
        cache_bytes: int = 128 * 1024 * 1024,
    ) -> None:
        self.bucket = bucket
        self.endpoint = endpoint
        self._client = client
        self.cache_bytes = cache_bytes
        self._cache: OrderedDict[str, tuple[int, Any]] = OrderedDict()
        self._cached = 0
        self._lock = threading.Lock()
        self.fetches = 0

    def __call__(self, value: Any) -> Any:
        if not is_payload_ref(value):
            return value
        path = str(value[REF_KEY])
        with self._lock:
            hit = self._cache.get(path)
            if hit is not None:
                self._cache.move_to_end(path)
                return hit[1]
        content = self._fetch(path)
        size = int(value[SIZE_KEY])
        with self._lock:
            if path not in self._cache and size <= self.cache_bytes:
                self._cache[path] = (size, content)
                self._cached += size
                while self._cached > self.cache_bytes:
                    _, (old, _content) = self._cache.popitem(last=False)
                    self._cached -= old
        return content

    def _fetch(self, path: str) -> Any:
        from botocore.exceptions import BotoCoreError, ClientError

        if self._client is None:
            self._client = s3_client(self.endpoint)
        try:
            body = self._client.get_object(Bucket=self.bucket, Key=path)["Body"].read()
        except ClientError as e:
            if _missing(e):  # a fact about the bucket, not an outage: no retry can help
                raise PayloadMissing(path, self.bucket) from e
            raise Unavailable(f"payload storage: cannot read {path}: {e}") from e
        except BotoCoreError as e:
            raise Unavailable(f"payload storage: cannot read {path}: {e}") from e
        self.fetches += 1
        try:
            return json.loads(body)
        except ValueError as e:  # not JSON, or not UTF-8: the uploader's mistake, not ours
            raise InvalidValue(
                f"the payload at {path} is not a JSON document ({len(body)} bytes: {e}); "
                "upload the JSON value itself"
            ) from e


def _missing(e: Any) -> bool:
    """Whether an S3 ClientError says the object is not there."""
    return str(e.response.get("Error", {}).get("Code", "")) in ("404", "NoSuchKey", "NotFound")
