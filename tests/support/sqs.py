"""SQS for tests: moto's server on 127.0.0.1 (the same server the local runtime starts for S3),
and a fresh FIFO queue per test."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

REGION = "us-east-1"
CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}


def sqs_client(endpoint: str) -> Any:
    import boto3

    return boto3.client("sqs", endpoint_url=endpoint, region_name=REGION, **CREDENTIALS)


def fifo_queue(endpoint: str, name: str | None = None) -> str:
    """Create a FIFO queue (explicit deduplication ids, as the relay sends) and return its URL."""
    client = sqs_client(endpoint)
    name = name or f"baton-dispatch-{uuid.uuid4().hex[:10]}.fifo"
    created = client.create_queue(
        QueueName=name,
        Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "false"},
    )
    return str(created["QueueUrl"])


def receive_all(endpoint: str, queue_url: str, *, empty_rounds: int = 2) -> list[dict[str, Any]]:
    """Every message deliverable now, each received once and deleted."""
    client = sqs_client(endpoint)
    got: list[dict[str, Any]] = []
    empty = 0
    while empty < empty_rounds:
        batch = client.receive_message(
            QueueUrl=queue_url,
            MaxNumberOfMessages=10,
            MessageAttributeNames=["All"],
            AttributeNames=["All"],
        ).get("Messages", [])
        if not batch:
            empty += 1
            continue
        empty = 0
        got.extend(batch)
        client.delete_message_batch(
            QueueUrl=queue_url,
            Entries=[
                {"Id": str(k), "ReceiptHandle": m["ReceiptHandle"]} for k, m in enumerate(batch)
            ],
        )
    return got


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()
