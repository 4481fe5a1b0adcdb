"""What AWS would bill, counted by ``baton dev`` at the seams it has (``bench/cost.py`` reads it).

Off unless ``BATON_USAGE_FILE`` names a file; then the local runtime counts:

- API Gateway requests: every request the HTTP server routes to a function, by function;
- Lambda invocations and billed milliseconds, by function: each handler call timed, rounded up to
  the next millisecond as Lambda bills (API functions and the ticked scheduled ones alike);
- S3 and SQS requests, by operation: every call of a boto3 client the process creates (the
  payload store, the outbox relay), through botocore's ``before-call`` event;

and writes them as one JSON document to that file every ``FLUSH_SECONDS`` (and at stop), with a
``seq`` that grows with each write so a reader can wait for a write newer than its last look.
Counting is a dict update under a lock per event; with the variable unset nothing is installed.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

FLUSH_SECONDS = 0.2


class UsageMeter:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._requests: Counter[str] = Counter()
        self._invocations: Counter[str] = Counter()
        self._billed_ms: Counter[str] = Counter()
        self._aws: Counter[str] = Counter()
        self._seq = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # --- the seams ---------------------------------------------------------------------------

    def api_request(self, function: str | None) -> None:
        with self._lock:
            self._requests[function or "-"] += 1

    def invocation(self, function: str, seconds: float) -> None:
        billed = max(1, math.ceil(seconds * 1000))
        with self._lock:
            self._invocations[function] += 1
            self._billed_ms[function] += billed

    def aws_call(self, service: str, operation: str) -> None:
        with self._lock:
            self._aws[f"{service}.{operation}"] += 1

    def install_boto3(self) -> None:
        """Count every call of the boto3 clients created from now on (the default session)."""
        import boto3

        session = boto3.DEFAULT_SESSION or boto3.setup_default_session() or boto3.DEFAULT_SESSION
        assert session is not None

        def before_call(model: Any, **_: Any) -> None:
            self.aws_call(model.service_model.service_name, model.name)

        session.events.register("before-call.s3", before_call)
        session.events.register("before-call.sqs", before_call)

    # --- the file ----------------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            self._seq += 1
            return {
                "seq": self._seq,
                "at": time.time(),
                "apiRequests": dict(self._requests),
                "invocations": dict(self._invocations),
                "billedMs": dict(self._billed_ms),
                "awsRequests": dict(self._aws),
            }

    def flush(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.snapshot()))
        os.replace(tmp, self.path)  # a reader never sees half a document

    def start(self) -> None:
        def loop() -> None:
            while not self._stop.wait(FLUSH_SECONDS):
                self.flush()

        self._thread = threading.Thread(target=loop, name="baton-usage", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        self.flush()


_meter: list[UsageMeter] = []


def meter() -> UsageMeter | None:
    """The process's meter, if ``BATON_USAGE_FILE`` turned it on (see :func:`start_metering`)."""
    return _meter[0] if _meter else None


def start_metering(path: str | None) -> UsageMeter | None:
    """Turn counting on for this process, writing to ``path`` (None or empty: stay off)."""
    if not path or _meter:
        return meter()
    m = UsageMeter(Path(path))
    m.install_boto3()
    m.start()
    _meter.append(m)
    return m
