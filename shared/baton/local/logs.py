"""Structured logging for the local runtime: one JSON object per line, like the Lambdas in AWS.

Every ``extra`` field passed to a log call (``request_id``, ``instance_id``, ``job_id``...) becomes
a key of its own.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any, TextIO

# Attributes every LogRecord has; anything else on a record came in through ``extra``.
_RECORD_ATTRS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "taskName",
}
# Libraries that narrate their internals at INFO (a line per S3 call, per pg_ctl run...).
_CHATTY = ("werkzeug", "pgserver", "botocore", "boto3", "urllib3", "psycopg.pool", "moto")


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "timestamp": datetime.fromtimestamp(record.created, UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _RECORD_ATTRS and not key.startswith("_") and value is not None:
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, default=str, ensure_ascii=False)


class _BatonHandler(logging.StreamHandler[TextIO]):
    """Marks the handler this module installed, so configuring twice does not double lines."""


def configure_logging(level: int = logging.INFO, stream: TextIO | None = None) -> None:
    """Send the root logger's records (and warnings) to ``stream`` as JSON lines."""
    root = logging.getLogger()
    for handler in [h for h in root.handlers if isinstance(h, _BatonHandler)]:
        root.removeHandler(handler)
    handler = _BatonHandler(stream or sys.stdout)
    handler.setFormatter(JsonFormatter())
    root.addHandler(handler)
    root.setLevel(level)
    for name in _CHATTY:
        logging.getLogger(name).setLevel(max(level, logging.WARNING))
    logging.captureWarnings(True)
