"""The environment variables the SDK reads, the defaults they fall back to, and where the key of
a local ``baton dev`` server is found.

Configuration precedence everywhere in the SDK: an explicit argument, then these variables, then
the defaults. This module imports only light standard modules, so the ``baton`` command can
read it cheaply.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from typing import Final, NamedTuple
from urllib.parse import urlsplit

ENV_URL: Final = "BATON_URL"
"""The API's base URL (``baton dev``: ``http://127.0.0.1:8080``; an API Gateway stage URL)."""
ENV_API_KEY: Final = "BATON_API_KEY"
# The client's wire: "rest" (JSON, the default) or "connect" (each call as its RPC, binary
# protobuf over the Connect protocol; needs the rpc extra).
ENV_PROTOCOL: Final = "BATON_PROTOCOL"
"""Sent as ``x-api-key`` (the same variable ``baton dev`` reads for the key it accepts)."""
ENV_DATA_DIR: Final = "BATON_DATA_DIR"
"""The data directory of ``baton dev`` (the same variable it reads), where it keeps its key."""
DEFAULT_URL: Final = "http://127.0.0.1:8080"
DEFAULT_DATA_DIR: Final = ".baton/data"
"""Relative to the working directory, as ``baton dev``'s own default is."""
API_KEY_FILE: Final = "api-key"
"""The file of the data directory holding the key ``baton dev`` generated (0600)."""
ENV_DISPATCH_QUEUE_URL: Final = "BATON_DISPATCH_QUEUE_URL"
"""The SQS FIFO queue of the event-driven mode (the stack's ``DispatchQueueUrl`` output); the
same variable the engine reads for the queue its relay publishes to."""
ENV_SQS_ENDPOINT: Final = "BATON_SQS_ENDPOINT"
"""Another SQS endpoint than AWS's (a local one)."""
DISPATCH_QUEUE_FILE: Final = "dispatch-queue.json"
"""The file of the data directory where ``baton dev`` says which queue its relay publishes to
(``{"queueUrl", "endpoint", "region", "mode"}``), rewritten at every start: its local SQS
endpoint's port changes from start to start."""

_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


def local_api_key_path(env: Mapping[str, str] | None = None) -> str:
    """Where ``baton dev`` keeps its key: ``$BATON_DATA_DIR/api-key``, else
    ``.baton/data/api-key`` in the working directory."""
    e = os.environ if env is None else env
    return os.path.join(e.get(ENV_DATA_DIR) or DEFAULT_DATA_DIR, API_KEY_FILE)


def local_api_key(url: str, env: Mapping[str, str] | None = None) -> str | None:
    """The key a local ``baton dev`` generated, for a ``url`` on this machine (127.0.0.1,
    localhost, ::1); None for any other host, or when there is no readable key file.

    The key is looked for only when ``BATON_API_KEY`` is unset (callers check that first), and
    never sent to another host: it is a local server's credential.
    """
    if not _is_loopback(url):
        return None
    return read_key_file(local_api_key_path(env))


def read_key_file(path: str) -> str | None:
    """The key a key file holds (surrounding whitespace dropped); None if there is none."""
    try:
        with open(path, encoding="ascii") as f:
            key = f.read().strip()
    except (OSError, UnicodeDecodeError):
        return None
    return key or None


class DispatchQueue(NamedTuple):
    """Where the event-driven mode's jobs arrive: the queue, and the SQS endpoint and region to
    reach it with (None: boto3's usual configuration)."""

    queue_url: str
    endpoint: str | None
    region: str | None
    local: bool  # a ``baton dev`` queue (its endpoint on this machine, credentials unchecked)
    source: str  # where it was found, for messages


# sqs.<region>.amazonaws.com (and .com.cn), or the legacy <region>.queue.amazonaws.com.
_QUEUE_REGION = re.compile(
    r"^(?:sqs\.([a-z0-9-]+)\.amazonaws\.com(?:\.cn)?|([a-z0-9-]+)\.queue\.amazonaws\.com)$"
)


def dispatch_queue_from_env(url: str, env: Mapping[str, str] | None = None) -> DispatchQueue | None:
    """``BATON_DISPATCH_QUEUE_URL`` (with ``BATON_SQS_ENDPOINT``), else, for a ``url`` on this
    machine, the queue a local ``baton dev`` wrote into its data directory; None if neither."""
    e = os.environ if env is None else env
    queue_url = e.get(ENV_DISPATCH_QUEUE_URL)
    if queue_url:
        endpoint = e.get(ENV_SQS_ENDPOINT) or None
        region = e.get("AWS_REGION") or e.get("AWS_DEFAULT_REGION") or _queue_region(queue_url)
        local = endpoint is not None and _is_loopback(endpoint)
        return DispatchQueue(queue_url, endpoint, region, local, ENV_DISPATCH_QUEUE_URL)
    if not _is_loopback(url):
        return None
    path = os.path.join(e.get(ENV_DATA_DIR) or DEFAULT_DATA_DIR, DISPATCH_QUEUE_FILE)
    try:
        with open(path, encoding="utf-8") as f:
            kept = json.load(f)
        queue_url, endpoint, region = kept["queueUrl"], kept.get("endpoint"), kept.get("region")
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(queue_url, str) or not queue_url:
        return None
    local = isinstance(endpoint, str) and _is_loopback(endpoint)
    return DispatchQueue(queue_url, endpoint or None, region or None, local, path)


def _queue_region(queue_url: str) -> str | None:
    """The region in an AWS queue URL (``https://sqs.eu-west-1.amazonaws.com/...``)."""
    match = _QUEUE_REGION.match(_host(queue_url) or "")
    return (match.group(1) or match.group(2)) if match else None


def _host(url: str) -> str | None:
    try:
        return urlsplit(url).hostname
    except ValueError:
        return None


def _is_loopback(url: str) -> bool:
    return _host(url) in _LOOPBACK


def is_local_url(url: str) -> bool:
    """Whether ``url`` is on this machine (127.0.0.1, localhost, ::1), where a local ``baton
    dev`` and its key file may be."""
    return _is_loopback(url)


def api_key_from_env(url: str, env: Mapping[str, str] | None = None) -> str | None:
    """``BATON_API_KEY``, else the key of a local ``baton dev`` (see :func:`local_api_key`)."""
    e = os.environ if env is None else env
    return e.get(ENV_API_KEY) or local_api_key(url, e)


__all__ = [
    "API_KEY_FILE",
    "DEFAULT_DATA_DIR",
    "DEFAULT_URL",
    "DISPATCH_QUEUE_FILE",
    "ENV_API_KEY",
    "ENV_DATA_DIR",
    "ENV_DISPATCH_QUEUE_URL",
    "ENV_SQS_ENDPOINT",
    "ENV_URL",
    "DispatchQueue",
    "api_key_from_env",
    "dispatch_queue_from_env",
    "is_local_url",
    "local_api_key",
    "local_api_key_path",
    "read_key_file",
]
