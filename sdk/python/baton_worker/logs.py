"""Logging set-up for worker processes: one line per record, with the ids the SDK attaches.

The SDK logs through stdlib ``logging`` (loggers ``baton_worker.*``) and puts ids in ``extra``
(``worker_id``, ``job_id``, ``instance_id``, ``job_type``...). Any structured handler picks them
up; :func:`configure_logging` is a small default for scripts and ``baton worker run``.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any, TextIO

# Attributes every LogRecord has; anything else on a record came from ``extra``.
_STANDARD = frozenset(
    vars(logging.LogRecord("", logging.INFO, "", 0, "", None, None)).keys()
    | {"message", "asctime", "taskName"}
)


def record_extras(record: logging.LogRecord) -> dict[str, Any]:
    """The ``extra`` fields of a record."""
    return {k: v for k, v in vars(record).items() if k not in _STANDARD and not k.startswith("_")}


class KeyValueFormatter(logging.Formatter):
    """``2026-01-01 12:00:00,000 INFO baton_worker.runner job completed job_id=... attempt=1``."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s")

    def formatMessage(self, record: logging.LogRecord) -> str:
        line = super().formatMessage(record)
        extras = record_extras(record)
        if extras:
            line += " " + " ".join(f"{k}={_short(v)}" for k, v in extras.items())
        return line


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message and every ``extra`` field."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "time": self.formatTime(record),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            **record_extras(record),
        }
        if record.exc_info:
            doc["exception"] = self.formatException(record.exc_info)
        return json.dumps(doc, default=str)


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    if " " in text or not text:
        text = json.dumps(text)
    return text


def configure_logging(
    level: int | str = logging.INFO, *, json_lines: bool = False, stream: TextIO | None = None
) -> None:
    """Send the SDK's logs (and the root logger's) to ``stream`` (default stderr)."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if json_lines else KeyValueFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # httpx logs every request at INFO: too chatty for a worker polling twice a second.
    logging.getLogger("httpx").setLevel(logging.WARNING)


__all__ = ["JsonFormatter", "KeyValueFormatter", "configure_logging", "record_extras"]
