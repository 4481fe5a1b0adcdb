"""What an instance that does not complete keeps as output (Conductor's
``DeciderService.updateWorkflowOutput``: a failed, timed-out or terminated workflow's output is
its outputParameters over what ran), and the output a worker gives failing its job (Conductor's
failed task's ``outputData``), on a real PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest
from baton.engine.service import Engine
from baton.errors import PayloadTooLarge

from tests.integration.test_control_flow import steps_of, task
from tests.support.helpers import wait_until

_OUTPUT = {
    "given": "${workflow.input.x}",
    "a": "${a.output.v}",
    "why": "${b.output.detail}",
    "never": "${c.output}",
}


def _register(engine: Engine, name: str, output: Any = _OUTPUT) -> None:
    engine.register_definition(
        {
            "name": name,
            "steps": [task("a", f"{name}_a"), task("b", f"{name}_b", retryCount=1), task("c")],
            "outputParameters": output,
        }
    )


def _job(engine: Engine, job_type: str) -> dict[str, Any]:
    (job,) = engine.poll("w", [job_type], 1)
    return job


def test_a_failed_instance_keeps_its_output_parameters_over_what_ran(engine: Engine) -> None:
    _register(engine, "fo_failed")
    inst, _ = engine.start_instance(definition_name="fo_failed", input={"x": 5})
    a = _job(engine, "fo_failed_a")
    engine.complete_job(a["id"], "w", {"v": 1}, attempt=a["attempt"])
    for n, detail in enumerate(("first", "second")):
        b = _job(engine, "fo_failed_b")
        said = engine.fail_job(
            b["id"], "w", f"try {n}", attempt=b["attempt"], output={"detail": detail}
        )
        assert said["status"] == ("RETRY_SCHEDULED", "FAILED")[n]
        if n == 0:  # the retried attempt's output is not the step's
            assert steps_of(engine, inst["id"], "b")[0].get("output") is None
            engine.db.autocommit(
                lambda c: c.execute("UPDATE job SET run_at = now() WHERE status = 'UNLOCKED'")
            )
    got = engine.get_instance(inst["id"])
    assert got["status"] == "FAILED"
    assert got["output"] == {"given": 5, "a": 1, "why": "second", "never": None}
    (b_step,) = steps_of(engine, inst["id"], "b")
    assert (b_step["status"], b_step["output"]) == ("FAILED", {"detail": "second"})

    # A retry of the instance runs b again; its completion gives the instance its output.
    engine.retry_instance(inst["id"])
    assert engine.get_instance(inst["id"]).get("output") is None
    b = _job(engine, "fo_failed_b")
    engine.complete_job(b["id"], "w", {"detail": "fine"}, attempt=b["attempt"])
    c = _job(engine, "c")
    engine.complete_job(c["id"], "w", {"z": 0}, attempt=c["attempt"])
    got = engine.get_instance(inst["id"])
    assert got["status"] == "COMPLETED"
    assert got["output"] == {"given": 5, "a": 1, "why": "fine", "never": {"z": 0}}


def test_a_cancelled_instance_keeps_its_output_and_one_without_output_parameters_none(
    engine: Engine,
) -> None:
    _register(engine, "fo_cancelled")
    inst, _ = engine.start_instance(definition_name="fo_cancelled", input={"x": "y"})
    a = _job(engine, "fo_cancelled_a")
    engine.complete_job(a["id"], "w", {"v": [1]}, attempt=a["attempt"])
    engine.cancel_instance(inst["id"], "enough")
    got = engine.get_instance(inst["id"])
    assert (got["status"], got["output"]) == (
        "CANCELLED",
        {"given": "y", "a": [1], "why": None, "never": None},
    )

    engine.register_definition({"name": "fo_plain", "steps": [task("a", "fo_plain_a")]})
    inst, _ = engine.start_instance(definition_name="fo_plain", input={})
    a = _job(engine, "fo_plain_a")
    engine.fail_job(a["id"], "w", "no", retryable=False, attempt=a["attempt"], output={"k": 1})
    got = engine.get_instance(inst["id"])
    assert got["status"] == "FAILED" and got.get("output") is None
    assert steps_of(engine, inst["id"], "a")[0]["output"] == {"k": 1}


def test_a_failure_output_above_the_inline_limit_is_refused_and_the_job_kept(
    engine: Engine,
) -> None:
    _register(engine, "fo_big")
    inst, _ = engine.start_instance(definition_name="fo_big", input={})
    a = _job(engine, "fo_big_a")
    big = {"blob": "x" * (engine.settings.max_payload_bytes + 1)}
    with pytest.raises(PayloadTooLarge):
        engine.fail_job(a["id"], "w", "no", retryable=False, attempt=a["attempt"], output=big)
    engine.complete_job(a["id"], "w", {"v": 2}, attempt=a["attempt"])
    assert steps_of(engine, inst["id"], "a")[0]["status"] == "COMPLETED"


def test_a_failed_sub_workflow_step_keeps_the_child_s_output(engine: Engine) -> None:
    """As Conductor's SUB_WORKFLOW task: the child's output as it ended is the step's, and the
    parent's output reads it."""
    engine.register_definition(
        {
            "name": "fo_kid",
            "steps": [task("k", "fo_kid_k"), task("k2", "fo_kid_k2")],
            "outputParameters": {"got": "${k.output.v}"},
        }
    )
    engine.register_definition(
        {
            "name": "fo_parent",
            "steps": [{"id": "c", "type": "SUB_WORKFLOW", "definitionName": "fo_kid"}],
            "outputParameters": {"child": "${c.output}"},
        }
    )
    parent, _ = engine.start_instance(definition_name="fo_parent", input={})
    k = _job(engine, "fo_kid_k")
    engine.fail_job(k["id"], "w", "no", retryable=False, attempt=k["attempt"], output={"v": 9})
    got = wait_until(
        lambda: (i := engine.get_instance(parent["id"]))["status"] == "FAILED" and i,
        timeout=10,
        what="the parent to fail",
    )
    assert got["output"] == {"child": {"got": 9}}
    (c,) = steps_of(engine, parent["id"], "c")
    assert (c["status"], c["output"]) == ("FAILED", {"got": 9})


def test_a_batch_failure_keeps_its_output_when_it_ends_the_step(engine: Engine) -> None:
    """POST /v1/jobs/complete-batch's failure.output, as /v1/jobs/fail's output: kept by the
    failure that ends the step (an optional step's successors read it), not by one a retry
    follows; refused above the inline limit, item by item."""
    from baton.engine.batch_ops import BatchResult, Failure

    engine.register_definition(
        {
            "name": "batchfail",
            "steps": [
                task("a", "bf_a", retryCount=1, retryDelaySeconds=0, optional=True),
                task("b", "bf_b", input={"saw": "${a.output.code}"}),
            ],
        }
    )
    inst, _ = engine.start_instance(definition_name="batchfail")
    job = _job(engine, "bf_a")
    retried = engine.complete_batch(
        [BatchResult(job["id"], "w", job["attempt"], failure=Failure("first", output={"code": 1}))]
    )
    assert retried[0]["outcome"] == "APPLIED" and retried[0]["status"] == "RETRY_SCHEDULED"
    job = wait_until(lambda: (engine.poll("w", ["bf_a"], 1) or [None])[0], timeout=10)
    big = {"x": "y" * (engine.settings.max_payload_bytes + 10)}
    (refused,) = engine.complete_batch(
        [BatchResult(job["id"], "w", job["attempt"], failure=Failure("big", output=big))]
    )
    assert refused["outcome"] == "INVALID"
    (ended,) = engine.complete_batch(
        [
            BatchResult(
                job["id"], "w", job["attempt"], failure=Failure("last", False, output={"code": 2})
            )
        ]
    )
    assert ended["outcome"] == "APPLIED"
    (a,) = steps_of(engine, inst["id"], "a")
    assert a["output"] == {"code": 2}
    assert _job(engine, "bf_b")["input"] == {"saw": 2}


def test_backoff_scale_factor_and_jitter_set_the_retry_delay(engine: Engine) -> None:
    """A task definition's backoffScaleFactor (LINEAR_BACKOFF) and backoffJitterMs, and a
    step's own, decide when a retry falls due."""
    engine.put_task_def(
        "scaled",
        {
            "retryCount": 2,
            "retryLogic": "LINEAR_BACKOFF",
            "retryDelaySeconds": 1,
            "backoffScaleFactor": 3,
            "backoffJitterMs": 400,
        },
    )
    engine.register_definition({"name": "scaledwf", "steps": [task("a", "scaled")]})
    inst, _ = engine.start_instance(definition_name="scaledwf")
    job = _job(engine, "scaled")
    engine.fail_job(job["id"], "w", "first", attempt=job["attempt"])
    (retry,) = [e for e in engine.audit_trail(inst["id"]) if e["event"] == "JOB_RETRY_SCHEDULED"]
    assert 3 <= retry["detail"]["delaySeconds"] <= 3.4
    assert engine.get_task_def("scaled")["backoffScaleFactor"] == 3


def test_total_timeout_seconds_ends_the_retries(engine: Engine) -> None:
    """Conductor's totalTimeoutSeconds: once that long has passed since a step's first attempt
    began, a failure is not retried, whatever retries are left."""
    import time

    engine.put_task_def(
        "budgeted", {"retryCount": 5, "retryDelaySeconds": 0, "totalTimeoutSeconds": 1}
    )
    engine.register_definition({"name": "budgetwf", "steps": [task("a", "budgeted")]})
    inst, _ = engine.start_instance(definition_name="budgetwf")
    job = _job(engine, "budgeted")
    began = time.monotonic()
    engine.fail_job(job["id"], "w", "first", attempt=job["attempt"])
    job = wait_until(lambda: (engine.poll("w", ["budgeted"], 1) or [None])[0], timeout=10)
    wait_until(lambda: time.monotonic() - began > 1.2, timeout=5, what="the budget to pass")
    engine.fail_job(job["id"], "w", "second", attempt=job["attempt"])
    got = engine.get_instance(inst["id"])
    assert got["status"] == "FAILED"
    assert "totalTimeoutSeconds of 1" in got["reason"] and "second" in got["reason"]
    assert engine.get_task_def("budgeted")["totalTimeoutSeconds"] == 1
