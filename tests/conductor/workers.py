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


@worker_task(task_definition_name=f"{PREFIX}_network")
def network(wid: str) -> dict:
    """Fails the first two attempts of each workflow with a retryable NETWORK ERROR (as the
    permissive task of Conductor's own test harness does), succeeds from the third on."""
    marker = Path(MARKERS) / f"{wid}.network"
    failed = int(marker.read_text()) if marker.exists() else 0
    if failed < 2:
        marker.write_text(str(failed + 1))
        raise RuntimeError("NETWORK ERROR")
    return {"op": "task completed", "attempts": failed + 1}


@worker_task(task_definition_name=f"{PREFIX}_after_t1")
def after_t1(wid: str) -> dict:
    """Completes only once the workflow's task t1 has ended (read through the API, as a worker
    may), so that a JOIN over both sees t1's failure first."""
    import time

    from conductor.client.configuration.configuration import Configuration
    from conductor.client.orkes_clients import OrkesClients

    workflows = OrkesClients(Configuration()).get_workflow_client()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        wf = workflows.get_workflow(wid, include_tasks=True)
        ended = [t for t in wf.tasks if t.reference_task_name == "t1" and t.status != "SCHEDULED"]
        if ended and ended[-1].status not in ("IN_PROGRESS", "SCHEDULED"):
            return {"sawT1": ended[-1].status}
        time.sleep(0.1)
    raise RuntimeError("t1 did not end within 60 s")
