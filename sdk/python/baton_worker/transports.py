"""Where a :class:`~baton_worker.runner.Runner` gets its jobs from.

- :class:`PollTransport` (the default): ``POST /v1/jobs/poll``, Baton's polling dispatch mode.
- :class:`SqsTransport`: Baton's event-driven mode (``BATON_DISPATCH_MODE=outbox``). The engine's
  relay publishes each claimable job's id to an SQS FIFO queue; this transport receives the
  messages, takes each job's lease with ``POST /v1/jobs/{id}/claim`` and deletes the message once
  the claim answered. A duplicate or stale delivery is refused by the claim (409) and simply
  dropped; a job type at its limit (429) is left on the queue to be delivered again. The job is
  then run and completed through the same REST API as a polled one.

The message is only a wake-up: the lease lives in Baton's database, so deleting the message right
after the claim is safe (a worker that dies later loses its lease, and the engine dispatches the
job's next attempt as a new message), and the FIFO group (one per workflow instance) is held only
for the claim's round trip.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from baton_worker.client import BatonClient
from baton_worker.env import (
    DISPATCH_QUEUE_FILE,
    ENV_DATA_DIR,
    ENV_DISPATCH_QUEUE_URL,
    DispatchQueue,
    dispatch_queue_from_env,
)
from baton_worker.errors import (
    BatonApiError,
    ConflictError,
    NotFoundError,
    TransportError,
    is_transient,
)
from baton_worker.types import Job

log = logging.getLogger("baton_worker.transports")

SQS_MAX_MESSAGES = 10  # ReceiveMessage returns at most 10


class JobTransport(Protocol):
    # True when ``fetch`` waits for work itself (a long poll): the runner then does not sleep
    # after an empty or short fetch.
    waits: bool

    def fetch(self, *, worker_id: str, job_types: Sequence[str], max_jobs: int) -> list[Job]:
        """Up to ``max_jobs`` jobs of ``job_types``, each already leased to ``worker_id``."""


class PollTransport:
    """Short polls of ``POST /v1/jobs/poll`` (Baton's default dispatch mode)."""

    waits = False

    def __init__(self, client: BatonClient) -> None:
        self.client = client

    def fetch(self, *, worker_id: str, job_types: Sequence[str], max_jobs: int) -> list[Job]:
        return self.client.poll_jobs(
            worker_id=worker_id,
            job_types=job_types,
            max_jobs=max_jobs,
            retry=None,  # the runner's loop is the retry loop
        )


class SqsTransport:
    """Jobs delivered through Baton's SQS FIFO dispatch queue, claimed by id.

    ``queue_url``: the queue the engine's relay publishes to (the stack's output). ``wait_seconds``
    is SQS's long poll (kept short so a stop is prompt). ``sqs`` is a boto3 SQS client (default:
    one from ``endpoint_url`` and the usual AWS configuration; needs the ``sqs`` extra).
    A message for a job type this worker does not handle is made visible again after
    ``foreign_delay_seconds`` for a worker that does.
    """

    waits = True

    def __init__(
        self,
        client: BatonClient,
        queue_url: str,
        *,
        sqs: Any = None,
        endpoint_url: str | None = None,
        wait_seconds: int = 1,
        foreign_delay_seconds: int = 2,
    ) -> None:
        if not 0 <= wait_seconds <= 20:
            raise ValueError("wait_seconds must be between 0 and 20 (SQS's long poll)")
        self.client = client
        self.queue_url = queue_url
        self.wait_seconds = wait_seconds
        self.foreign_delay_seconds = foreign_delay_seconds
        self.sqs = _sqs_client(endpoint_url) if sqs is None else sqs
        self.duplicates = 0  # deliveries the claim refused (already claimed, finished, stale)
        # A local baton dev's queue found in its data directory: where to look again when it
        # cannot be reached (its SQS comes back on another port after a restart).
        self._followed: tuple[DispatchQueue, Mapping[str, str] | None] | None = None

    def _receive(self, max_jobs: int) -> list[dict[str, Any]]:
        """One ReceiveMessage; an SQS that cannot be reached is a transient ``TransportError``
        (the runner backs off and logs one line, as for a Baton server that cannot be)."""
        try:
            messages: list[dict[str, Any]] = self.sqs.receive_message(
                QueueUrl=self.queue_url,
                MaxNumberOfMessages=max(1, min(max_jobs, SQS_MAX_MESSAGES)),
                WaitTimeSeconds=self.wait_seconds,
                MessageAttributeNames=["All"],
            ).get("Messages", [])
        except Exception as e:
            if not isinstance(e, _connection_errors()):
                raise
            raise TransportError(
                f"cannot reach the dispatch queue {self.queue_url}: {e}",
                sent=False,
                method="ReceiveMessage",
                url=self.queue_url,
            ) from e
        return messages

    def _follow_restart(self) -> bool:
        """After a failed receive from a local ``baton dev`` queue: True if the server wrote
        another queue since (it restarted), now used; False to report the failure."""
        if self._followed is None:
            return False
        was, env = self._followed
        now = dispatch_queue_from_env(self.client.url, env)
        if now is None or now == was:
            return False
        log.info("the local dispatch queue moved to %s (baton dev restarted)", now.queue_url)
        self.sqs = _sqs_client(now.endpoint, now.region, local=now.local)
        self.queue_url = now.queue_url
        self._followed = (now, env)
        return True

    @classmethod
    def from_env(
        cls, client: BatonClient, env: Mapping[str, str] | None = None, **options: Any
    ) -> SqsTransport:
        """The transport for the queue ``BATON_DISPATCH_QUEUE_URL`` names (with
        ``BATON_SQS_ENDPOINT``), else the one a ``baton dev`` on this machine relays to (it
        writes it into its data directory at every start: see ``baton_worker.env``). A local
        queue is reached with placeholder credentials (the local SQS does not check them);
        another one with boto3's usual configuration, in the region of its URL unless
        ``AWS_REGION`` or ``AWS_DEFAULT_REGION`` says otherwise."""
        found = dispatch_queue_from_env(client.url, env)
        if found is None:
            raise ValueError(
                f"no dispatch queue: set {ENV_DISPATCH_QUEUE_URL} (the stack's DispatchQueueUrl "
                "output), or run `baton dev` on this machine (it writes its queue into "
                f"${ENV_DATA_DIR}/{DISPATCH_QUEUE_FILE}; BATON_DISPATCH_MODE=outbox makes it "
                "publish there)"
            )
        own_client = "sqs" not in options
        if own_client:
            options["sqs"] = _sqs_client(found.endpoint, found.region, local=found.local)
        log.info("receiving jobs from %s (%s)", found.queue_url, found.source)
        transport = cls(client, found.queue_url, **options)
        if own_client and found.local and found.source != ENV_DISPATCH_QUEUE_URL:
            transport._followed = (found, env)
        return transport

    def fetch(self, *, worker_id: str, job_types: Sequence[str], max_jobs: int) -> list[Job]:
        try:
            messages = self._receive(max_jobs)
        except TransportError:  # unreachable: perhaps a local server that restarted
            if not self._follow_restart():
                raise
            messages = self._receive(max_jobs)
        jobs: list[Job] = []
        for message in messages:
            job = self._claim(message, worker_id, job_types)
            if job is not None:
                jobs.append(job)
        return jobs

    def _claim(
        self, message: dict[str, Any], worker_id: str, job_types: Sequence[str]
    ) -> Job | None:
        receipt = message["ReceiptHandle"]
        try:
            delivered = json.loads(message["Body"])
            job_id, attempt, job_type = (
                delivered["jobId"],
                delivered["attempt"],
                delivered["jobType"],
            )
        except (ValueError, KeyError, TypeError):
            log.warning(
                "dropping a message that is not a Baton dispatch",
                extra={"body": message.get("Body", "")[:200]},
            )
            self._delete(receipt)
            return None
        fields = {"job_id": job_id, "attempt": attempt, "worker_id": worker_id}
        if job_type not in job_types:
            log.warning(
                "delivered a job type this worker does not handle",
                extra={**fields, "job_type": job_type},
            )
            self._release(receipt, self.foreign_delay_seconds)
            return None
        try:
            job = self.client.claim_job(job_id, worker_id=worker_id, attempt=attempt, retry=None)
        except (ConflictError, NotFoundError) as e:
            self.duplicates += 1
            log.info("delivery not claimable; dropped", extra={**fields, "reason": str(e)})
            self._delete(receipt)
            return None
        except BatonApiError as e:
            if not is_transient(e):
                raise
            # Throttled (a job type's limit) or unavailable: let SQS deliver it again later.
            self._release(receipt, int(e.retry_after or 1))
            return None
        self._delete(receipt)
        return job

    def _delete(self, receipt: str) -> None:
        self.sqs.delete_message(QueueUrl=self.queue_url, ReceiptHandle=receipt)

    def _release(self, receipt: str, seconds: int) -> None:
        self.sqs.change_message_visibility(
            QueueUrl=self.queue_url, ReceiptHandle=receipt, VisibilityTimeout=max(0, seconds)
        )


__all__ = ["JobTransport", "PollTransport", "SqsTransport"]


# Placeholder credentials for a ``baton dev`` queue: its SQS (moto) accepts any.
LOCAL_CREDENTIALS = {"aws_access_key_id": "baton-local", "aws_secret_access_key": "baton-local"}


def _sqs_client(endpoint: str | None, region: str | None = None, *, local: bool = False) -> Any:
    """A boto3 SQS client (needs the ``sqs`` extra); ``local``: a ``baton dev`` queue, reached
    with placeholder credentials."""
    try:
        import boto3
    except ImportError as e:  # pragma: no cover - depends on the install
        raise ImportError("the sqs transport needs boto3: pip install baton-worker[sqs]") from e
    options: dict[str, Any] = {"endpoint_url": endpoint, "region_name": region}
    if local:
        options.update(LOCAL_CREDENTIALS, region_name=region or "us-east-1")
    return boto3.client("sqs", **options)


def _connection_errors() -> tuple[type[BaseException], ...]:
    """botocore's errors for an endpoint that cannot be reached (none without botocore)."""
    try:
        from botocore.exceptions import ConnectionError, HTTPClientError
    except ImportError:  # pragma: no cover - an injected client of another kind
        return ()
    return (ConnectionError, HTTPClientError)
