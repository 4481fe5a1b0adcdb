"""Conductor workers for the end-to-end tests, written exactly as conductor-python's docs show
them (module-level functions, real annotations: no ``from __future__ import annotations``, which
would break the SDK's parameter conversion)."""

import os
from pathlib import Path

from conductor.client.worker.exception import NonRetryableException
from conductor.client.worker.worker_task import worker_task

PREFIX = os.environ.get("E2E_TASK_PREFIX", "e2e")
MARKERS = os.environ.get("E2E_MARKER_DIR", ".")


@worker_task(task_definition_name=f"{PREFIX}_greet")
def greet(name: str) -> dict:
    return {"greeting": f"hello {name}"}


@worker_task(task_definition_name=f"{PREFIX}_flaky")
def flaky(wid: str) -> dict:
    """Fails the first attempt of each workflow, succeeds on the retry."""
    marker = Path(MARKERS) / f"{wid}.flaky"
    if not marker.exists():
        marker.write_text("failed once")
        raise RuntimeError("transient failure, please retry")
    return {"attempts": 2}


@worker_task(task_definition_name=f"{PREFIX}_doomed")
def doomed(name: str) -> dict:
    raise NonRetryableException(f"{name} cannot be processed")


@worker_task(task_definition_name=f"{PREFIX}_hello")
def hello(name: str) -> str:
    """conductor-python's hello-world worker: a str result is the task output's ``result``."""
    return f"Hello {name}"
