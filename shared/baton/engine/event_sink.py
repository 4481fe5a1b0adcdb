"""EVENT steps' sinks, and publishing a message to one (run by the system-tasks function, outside
any decision). ``queue:<name>`` is Baton's own named queue (the message a task whose body is its
JSON: a definition with a queue trigger on it starts an instance per message, as a Conductor event
handler with a start_workflow action would); ``sqs:<name or URL>`` an SQS queue (a FIFO queue's
messages are grouped by instance and deduplicated by job attempt)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from baton.errors import BatonError
from baton.sinks import parse_sink

if TYPE_CHECKING:
    from baton.engine.service import Engine


class PublishFailed(Exception):
    def __init__(self, reason: str, *, retryable: bool) -> None:
        super().__init__(reason)
        self.retryable = retryable


def publish(
    engine: Engine, sink: str, message: dict[str, Any], *, group: str, dedup: str, title: str
) -> str:
    """Publish ``message`` to ``sink``; the message's id there. PublishFailed if it cannot be."""
    try:
        kind, target = parse_sink(sink)
    except ValueError as e:
        raise PublishFailed(str(e), retryable=False) from None
    body = json.dumps(message, separators=(",", ":"), default=str)
    if kind == "queue":
        from baton.engine.queue_ops import Queues

        try:
            pushed = Queues(engine).push(target, title, body)
        except BatonError as e:
            raise PublishFailed(f"queue {target!r}: {e}", retryable=False) from None
        return str(pushed["id"])
    return _send_sqs(engine, target, body, group=group, dedup=dedup)


def _send_sqs(engine: Engine, target: str, body: str, *, group: str, dedup: str) -> str:
    from botocore.exceptions import BotoCoreError, ClientError

    client = engine.event_sqs_client
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
