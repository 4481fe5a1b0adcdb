"""EVENT steps' sinks, and publishing a message to one (run by the system-tasks function, outside
any decision). ``queue:<name>`` is Baton's own named queue (the message a task whose body is its
JSON: a definition with a queue trigger on it starts an instance per message, as a Conductor event
handler with a start_workflow action would); ``sqs:<name or URL>`` an SQS queue (a FIFO queue's
messages are grouped by instance and deduplicated by job attempt)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from baton.sinks import parse_sink
from baton.store import queue_sql

if TYPE_CHECKING:
    from baton.store.db import Database


# A pushed task's retries, as a push through the queue API gives it (queue_ops).
QUEUE_MAX_RETRIES = 3


class PublishFailed(Exception):
    def __init__(self, reason: str, *, retryable: bool) -> None:
        super().__init__(reason)
        self.retryable = retryable


def publish(
    db: Database,
    sqs: Callable[[], Any],
    sink: str,
    message: dict[str, Any],
    *,
    group: str,
    dedup: str,
    title: str,
) -> str:
    """Publish ``message`` to ``sink``; the message's id there. PublishFailed if it cannot be."""
    try:
        kind, target = parse_sink(sink)
    except ValueError as e:
        raise PublishFailed(str(e), retryable=False) from None
    body = json.dumps(message, separators=(",", ":"), default=str)
    if kind == "queue":
        row = db.autocommit(
            lambda c: c.execute(
                queue_sql.PUSH,
                {
                    "id": uuid.uuid4(),
                    "queue": target,
                    "title": title,
                    "body": body,
                    "priority": 0,
                    "max_retries": QUEUE_MAX_RETRIES,
                },
            ).fetchone()
        )
        assert row is not None
        return str(row["id"])
    return _send_sqs(sqs(), target, body, group=group, dedup=dedup)


def _send_sqs(client: Any, target: str, body: str, *, group: str, dedup: str) -> str:
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        if target.startswith(("https://", "http://")):
            url = target
        else:
            url = client.get_queue_url(QueueName=target)["QueueUrl"]
        params: dict[str, Any] = {"QueueUrl": url, "MessageBody": body}
        if url.endswith(".fifo"):
            params.update(MessageGroupId=group, MessageDeduplicationId=dedup)
        sent = client.send_message(**params)
    except ClientError as e:
        code = e.response.get("Error", {}).get("Code", "")
        missing = "NonExistentQueue" in code or "QueueDoesNotExist" in code
        raise PublishFailed(
            f"sqs queue {target!r}: {'no such queue' if missing else e}", retryable=not missing
        ) from None
    except BotoCoreError as e:
        raise PublishFailed(f"sqs queue {target!r}: cannot publish: {e}", retryable=True) from None
    return str(sent["MessageId"])
