"""The local bucket of ``baton dev`` writes every object through to its data directory before it
answers the write: an acknowledged object is on disk (a crash loses nothing acknowledged), a
write that cannot be kept is not acknowledged, deletes remove the file, and the next server on
the directory serves what the files hold."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from baton.local.s3 import LOCAL_ACCESS_KEY, LOCAL_SECRET_KEY, LocalS3
from boto3.s3.transfer import TransferConfig
from botocore.config import Config
from botocore.exceptions import ClientError

KEY = "payloads/workflow-input/abc.def"


class Bucket:
    """One bucket name per test (moto's objects live in the process, shared by its servers), its
    data directory, and the servers started on it."""

    def __init__(self, data_dir: Path) -> None:
        self.name = f"kept-{uuid.uuid4().hex[:12]}"
        self.data_dir = data_dir
        self.folder = data_dir / self.name
        self.servers: list[LocalS3] = []

    def start(self) -> Any:
        """A server on the directory; its client."""
        s3 = LocalS3(self.name, data_dir=self.data_dir)
        s3.start()
        self.servers.append(s3)
        return boto3.client(
            "s3",
            endpoint_url=s3.endpoint,
            region_name="us-east-1",
            aws_access_key_id=LOCAL_ACCESS_KEY,
            aws_secret_access_key=LOCAL_SECRET_KEY,
            config=Config(signature_version="s3v4", retries={"max_attempts": 1}),
        )

    def kept(self) -> dict[str, bytes]:
        """The files on disk."""
        if not self.folder.is_dir():
            return {}
        return {p.name: p.read_bytes() for p in self.folder.iterdir()}

    def forget(self, key: str) -> None:
        """Drop ``key`` from moto's memory only, around the server (as a crash loses memory)."""
        from moto.backends import get_backend
        from moto.core import DEFAULT_ACCOUNT_ID

        get_backend("s3")[DEFAULT_ACCOUNT_ID]["global"].delete_object(self.name, key)


@pytest.fixture
def bucket(tmp_path: Path) -> Iterator[Bucket]:
    kept = Bucket(tmp_path)
    yield kept
    for s3 in kept.servers:
        s3.stop()


def test_a_put_answered_200_is_on_disk_and_served_by_the_next_server(bucket: Bucket) -> None:
    first = bucket.start()
    body = b'{"blob": "' + b"x" * 600_000 + b'"}'
    url = first.generate_presigned_url(
        "put_object", Params={"Bucket": bucket.name, "Key": KEY, "ContentLength": len(body)}
    )
    put = httpx.put(url, content=body, headers={"Content-Length": str(len(body))})
    assert put.status_code == 200, put.text
    # On disk when answered: no stop, no snapshot.
    assert bucket.kept() == {"payloads%2Fworkflow-input%2Fabc%2Edef": body}
    # The first server's memory is lost, as at a kill -9: a second server has the object.
    bucket.forget(KEY)
    with pytest.raises(ClientError):
        first.head_object(Bucket=bucket.name, Key=KEY)
    second = bucket.start()
    assert second.get_object(Bucket=bucket.name, Key=KEY)["Body"].read() == body


def test_copies_multipart_uploads_and_deletes_are_kept_too(bucket: Bucket) -> None:
    client = bucket.start()
    name = bucket.name
    client.put_object(Bucket=name, Key="a", Body=b"one")
    client.copy_object(Bucket=name, Key="b", CopySource={"Bucket": name, "Key": "a"})
    # Onto itself with new metadata and a tag (what retention does): the content is kept.
    client.copy_object(
        Bucket=name,
        Key="a",
        CopySource={"Bucket": name, "Key": "a"},
        MetadataDirective="REPLACE",
        Metadata={"retired": "yes"},
        TaggingDirective="REPLACE",
        Tagging="baton-retention=ended",
    )
    big = bytes(range(256)) * (6 * 1024 * 1024 // 256 + 1)  # two parts of a multipart upload
    part = 5 * 1024 * 1024
    config = TransferConfig(multipart_threshold=part, multipart_chunksize=part)
    client.upload_fileobj(_Reader(big), name, "big", Config=config)
    assert bucket.kept() == {"a": b"one", "b": b"one", "big": big}

    client.delete_object(Bucket=name, Key="b")
    assert set(bucket.kept()) == {"a", "big"}
    client.delete_objects(Bucket=name, Delete={"Objects": [{"Key": "a"}, {"Key": "big"}]})
    assert bucket.kept() == {}


def test_a_write_that_cannot_be_kept_is_not_acknowledged(bucket: Bucket) -> None:
    client = bucket.start()
    if bucket.folder.exists():
        bucket.folder.rmdir()
    bucket.folder.write_text("a file where the folder should be")
    with pytest.raises(ClientError) as refused:
        client.put_object(Bucket=bucket.name, Key="lost", Body=b"x")
    assert refused.value.response["Error"]["Code"] == "InternalError"
    assert "could not keep the object on disk" in refused.value.response["Error"]["Message"]


def test_a_write_cut_short_is_discarded_at_the_next_start(bucket: Bucket) -> None:
    bucket.folder.mkdir()
    (bucket.folder / "kept").write_bytes(b"whole")
    (bucket.folder / ".0123abcd").write_bytes(b"half of a write never answered")
    client = bucket.start()
    listed = client.list_objects_v2(Bucket=bucket.name).get("Contents", [])
    assert [o["Key"] for o in listed] == ["kept"]
    assert sorted(p.name for p in bucket.folder.iterdir()) == ["kept"]


class _Reader:
    """A file-like object over bytes (upload_fileobj reads in chunks)."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._at = 0

    def read(self, size: int = -1) -> bytes:
        end = len(self._data) if size < 0 else self._at + size
        chunk = self._data[self._at : end]
        self._at += len(chunk)
        return chunk
