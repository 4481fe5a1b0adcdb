"""The archive's document encoding and its S3 client: what makes archiving cheaper must not change
what is stored (the same document, byte for byte the same each time) nor how it reads back."""

from __future__ import annotations

import gzip
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from baton.engine import s3_client as s3
from baton.engine.archive_store import FORMAT, ArchiveStore, decode, encode, rewrite_refs
from baton.payload_ref import REF_KEY
from hypothesis import given
from hypothesis import strategies as st

DOCUMENT: dict[str, Any] = {
    "format": FORMAT,
    "id": "0b7e3c52-8f0a-4a55-9d1e-5d7f3c1e2a10",
    "status": "COMPLETED",
    "instance": {"input": {"name": "Zoë ✓ 日本", "big": 2**70, "neg": -(2**64), "x": 1.5}},
    "steps": [{"z": 1, "a": None, "m": [True, False, {"b": 2, "a": 1}]}],
    "history": [],
    "jobs": [{"payload": {"line\nbreak": 'tab\tand "quote" \\ \u0001'}}],
    "payloads": {},
}


def test_a_document_round_trips_identically() -> None:
    assert decode(encode(DOCUMENT)) == DOCUMENT
    assert type(decode(encode(DOCUMENT))["instance"]["input"]["big"]) is int


def test_the_same_document_is_the_same_bytes_one_sorted_line() -> None:
    reordered = json.loads(json.dumps(DOCUMENT))  # equal value, keys in another dict order
    reordered["steps"][0] = dict(reversed(list(reordered["steps"][0].items())))
    assert encode(reordered) == encode(DOCUMENT)
    line = gzip.decompress(encode(DOCUMENT))
    assert line.endswith(b"\n") and line.count(b"\n") == 1  # one JSON record (Athena)
    # The same text the standard library writes with sorted keys (what earlier versions wrote).
    assert (
        line
        == (
            json.dumps(DOCUMENT, separators=(",", ":"), ensure_ascii=False, sort_keys=True) + "\n"
        ).encode()
    )


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=st.characters(blacklist_categories=("Cs",))),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


@given(json_values)
def test_any_value_in_a_document_round_trips(value: object) -> None:
    document = {"format": FORMAT, "instance": {"output": value}}
    assert decode(encode(document)) == json.loads(json.dumps(document))


def test_payload_references_are_rewritten_only_where_moved() -> None:
    moved = {"payloads/step-output/a": "archive/payloads/i/step-output/a"}
    doc = {
        "output": {REF_KEY: "payloads/step-output/a", "$size": 10},
        "steps": [{"input": {REF_KEY: "payloads/step-input/b"}}],
    }
    assert rewrite_refs(doc, moved) == {
        "output": {REF_KEY: "archive/payloads/i/step-output/a", "$size": 10},
        "steps": [{"input": {REF_KEY: "payloads/step-input/b"}}],
    }
    assert rewrite_refs(doc, {}) is doc  # nothing moved: not walked, not copied


@contextmanager
def recording_s3() -> Iterator[tuple[str, list[dict[str, str]]]]:
    """A local endpoint that answers every PUT as S3 does (an ETag) and records its headers;
    ``Expect: 100-continue`` is answered by the standard library's handler."""
    seen: list[dict[str, str]] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_PUT(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            seen.append({k.lower(): v for k, v in self.headers.items()})
            self.send_response(200)
            self.send_header("ETag", '"0123456789abcdef"')
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)


@pytest.mark.usefixtures("credentials")
def test_a_small_put_is_sent_without_waiting_for_100_continue() -> None:
    """botocore sends every PutObject with ``Expect: 100-continue`` (a round trip more, and
    most of the client's CPU per object); the engine's client leaves it out of small bodies
    and keeps it for large ones."""
    with recording_s3() as (endpoint, seen):
        store = ArchiveStore("bucket", endpoint=endpoint)
        store.put("archive/2026/01/02/d/i.json.gz", encode(DOCUMENT))
        store.put("archive/big", b"x" * (s3.EXPECT_CONTINUE_BYTES + 1))
    small, big = seen
    assert "expect" not in small
    assert small["content-encoding"] == "gzip" and "authorization" in small  # still signed
    assert big["expect"] == "100-continue"


@pytest.mark.usefixtures("credentials")
def test_the_hook_is_registered_once_per_client() -> None:
    with recording_s3() as (endpoint, seen):
        client = s3.s3_client(endpoint)
        assert s3.s3_client(endpoint) is client  # one client per endpoint and process
        s3.without_expect_continue(client)  # again: no second handler, same behaviour
        client.put_object(Bucket="bucket", Key="k", Body=b"{}")
    assert len(seen) == 1 and "expect" not in seen[0]
