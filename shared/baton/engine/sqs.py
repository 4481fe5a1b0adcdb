"""The outbox relay's broker: an SQS FIFO queue (boto3 loaded lazily, only by the relay).

Group = instance id (a workflow's jobs are delivered in order, different workflows in parallel);
deduplication id = job id + attempt, so a republished row within SQS's 5-minute window is dropped
by SQS, and one after it is refused by the claim by id.
"""

from __future__ import annotations

import json
from typing import Any

from baton.engine.dispatch_ops import Dispatch
from baton.errors import Unavailable

SEND_BATCH = 10  # SendMessageBatch takes at most 10 entries


class SqsPublisher:
    def __init__(self, queue_url: str, *, endpoint: str | None = None, client: Any = None) -> None:
        self.queue_url = queue_url
        self.endpoint = endpoint
        self._client = client

    def _sqs(self) -> Any:
        if self._client is None:
            import boto3
            from botocore.config import Config

            config = Config(retries={"max_attempts": 3, "mode": "standard"})
            self._client = boto3.client("sqs", endpoint_url=self.endpoint, config=config)
        return self._client

    def publish(self, dispatches: list[Dispatch]) -> set[int]:
        from botocore.exceptions import BotoCoreError, ClientError

        accepted: set[int] = set()
        for k in range(0, len(dispatches), SEND_BATCH):
            chunk = dispatches[k : k + SEND_BATCH]
            entries = [
                {
                    "Id": str(d.outbox_id),
                    "MessageBody": json.dumps(d.body(), separators=(",", ":")),
                    "MessageGroupId": d.instance_id,
                    "MessageDeduplicationId": d.deduplication_id,
                    "MessageAttributes": {
                        "jobType": {"DataType": "String", "StringValue": d.job_type}
                    },
                }
                for d in chunk
            ]
            try:
                response = self._sqs().send_message_batch(QueueUrl=self.queue_url, Entries=entries)
            except (BotoCoreError, ClientError) as e:
                if accepted:
                    return accepted  # mark what got through; the rest goes next pass
                raise Unavailable(f"dispatch queue: cannot publish: {e}") from e
            accepted.update(int(ok["Id"]) for ok in response.get("Successful", []))
            if response.get("Failed"):
                return accepted  # keep order: nothing after a refused message in this pass
        return accepted
