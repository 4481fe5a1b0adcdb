"""The engine's S3 client: one per endpoint and process, and what it does differently from boto3's
defaults.

**No ``Expect: 100-continue`` on small PUTs.** botocore turns every ``PutObject`` body into a
file and sends any file with ``Expect: 100-continue``: the headers go first, the client waits
for S3's ``100 Continue``, and only then sends the body. That protects a large upload S3 would
refuse anyway (a wrong key, an expired credential) from being sent for nothing; for the
documents and payloads Baton writes (kilobytes, already in memory) it is one more round trip
per object, and it was most of the client's CPU per PUT: measured against a local S3 that keeps
connections alive, 1.72 ms of CPU per ``put_object`` with the header, 0.77 ms without (the
archiver writes one object per archived instance, see ``engine.archive_store``). Bodies above
``EXPECT_CONTINUE_BYTES`` keep it.
"""

from __future__ import annotations

import functools
from typing import Any

# Bodies up to this size are sent without waiting for ``100 Continue`` (larger ones keep it).
EXPECT_CONTINUE_BYTES = 1024 * 1024
_HANDLER_ID = "baton-small-put-without-expect"


@functools.cache
def s3_client(endpoint: str | None) -> Any:
    """The S3 client of ``endpoint`` (one per endpoint and process; SigV4: presigned URLs
    carry signed headers; standard retries), small PUTs sent at once
    (``without_expect_continue``)."""
    import boto3
    from botocore.config import Config

    config = Config(signature_version="s3v4", retries={"max_attempts": 3, "mode": "standard"})
    return without_expect_continue(boto3.client("s3", endpoint_url=endpoint, config=config))


def without_expect_continue(client: Any) -> Any:
    """``client``, sending ``PutObject`` bodies up to ``EXPECT_CONTINUE_BYTES`` without
    ``Expect: 100-continue`` (registered once per client; the header is not signed, so it is
    dropped just before the request is sent)."""
    client.meta.events.register(
        "before-send.s3.PutObject", _drop_expect_on_small_body, unique_id=_HANDLER_ID
    )
    return client


def _drop_expect_on_small_body(request: Any, **_: Any) -> None:
    """botocore's ``before-send`` hook: a returned value would stand for the response, so this
    returns None and only edits the request's headers."""
    length = request.headers.get("Content-Length")
    if length is not None and int(length) <= EXPECT_CONTINUE_BYTES:
        request.headers.pop("Expect", None)
