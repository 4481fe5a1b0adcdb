"""``permissive`` steps on a real PostgreSQL (Conductor's ``permissive``): a failure the list goes
past, the instance failing once nothing is left with Conductor's reason for each, a PARALLEL or
MAP that lets its other branches finish before failing, a DO_WHILE that fails at once, nesting,
``optional`` winning, TERMINATE, the batched completion path, and instance retries rerunning the
permissive failures (and only them)."""

from __future__ import annotations

from typing import Any

from baton.engine.batch_ops import BatchResult, Failure
from baton.engine.service import Engine

from tests.integration.test_control_flow import drain, steps_of, task


def _fail(_: Any) -> Any:
    raise RuntimeError("out of stock")


def _ok(name: str) -> Any:
    return lambda _i: {name: True}


def _perm(step_id: str, job_type: str | None = None, **extra: Any) -> dict[str, Any]:
    return task(step_id, job_type, permissive=True, retryCount=0, **extra)


def _reason(engine: Engine, instance_id: str, step_id: str, error: str = "out of stock") -> str:
    """Conductor's reason for a permissive task whose worker failed it (``drain`` says not to
    retry: Conductor's FAILED_WITH_TERMINAL_ERROR)."""
    step = steps_of(engine, instance_id, step_id)[-1]
    task_id = f"{step['jobId']}.{step['attempt']}" if step.get("jobId") else step["id"]
    return f"Task {task_id} failed with status: FAILED_WITH_TERMINAL_ERROR and reason: '{error}'"


def _statuses(engine: Engine, instance_id: str, step_id: str) -> list[str]:
    return [s["status"] for s in steps_of(engine, instance_id, step_id)]


def test_a_permissive_failure_is_kept_the_list_goes_on_and_the_instance_fails_at_its_end(
    engine: Engine,
) -> None:
    engine.register_definition(
        {
            "name": "perm_list",
            "steps": [_perm("a", "pl_a"), task("b", "pl_b"), task("c", "pl_c")],
        }
    )
    inst, _ = engine.start_instance(definition_name="perm_list", input={})
    drain(engine, {"pl_a": _fail, "pl_b": _ok("b"), "pl_c": _ok("c")})
    got = engine.get_instance(inst["id"])
    a = steps_of(engine, inst["id"], "a")[0]
    assert a["status"] == "FAILED" and a["error"] == "out of stock"
    assert _statuses(engine, inst["id"], "b") == ["COMPLETED"]
    assert _statuses(engine, inst["id"], "c") == ["COMPLETED"]
    assert got["status"] == "FAILED"
    assert got["reason"] == _reason(engine, inst["id"], "a")
    said = [
        e for e in engine.history(inst["id"])["events"] if e["type"] == "PERMISSIVE_STEP_FAILED"
    ]
    assert said and "permissive step a failed: out of stock" in said[0]["message"]


def test_every_failed_permissive_step_is_named_and_a_last_one_ends_the_list(
    engine: Engine,
) -> None:
    engine.register_definition(
        {"name": "perm_two", "steps": [_perm("a", "pt_a"), task("b", "pt_b"), _perm("z", "pt_z")]}
    )
    inst, _ = engine.start_instance(definition_name="perm_two", input={})
    drain(engine, {"pt_a": _fail, "pt_b": _ok("b"), "pt_z": _fail})
    got = engine.get_instance(inst["id"])
    assert got["status"] == "FAILED"
    want = f"{_reason(engine, inst['id'], 'a')}. {_reason(engine, inst['id'], 'z')}"
    assert got["reason"] == want


def test_a_permissive_step_that_succeeds_changes_nothing(engine: Engine) -> None:
    engine.register_definition(
        {
            "name": "perm_ok",
            "steps": [_perm("a", "po_a"), task("b", "po_b", input={"saw": "${a.output.a}"})],
        }
    )
    inst, _ = engine.start_instance(definition_name="perm_ok", input={})
    drain(engine, {"po_a": _ok("a"), "po_b": lambda i: {"saw": i["saw"]}})
    got = engine.get_instance(inst["id"])
    assert got["status"] == "COMPLETED" and got["output"]["saw"] is True


def test_optional_wins_over_permissive(engine: Engine) -> None:
    engine.register_definition(
        {"name": "perm_opt", "steps": [_perm("a", "pp_a", optional=True), task("b", "pp_b")]}
    )
    inst, _ = engine.start_instance(definition_name="perm_opt", input={})
    drain(engine, {"pp_a": _fail, "pp_b": _ok("b")})
    assert engine.get_instance(inst["id"])["status"] == "COMPLETED"
    a = steps_of(engine, inst["id"], "a")[0]
    assert a["status"] == "COMPLETED" and "out of stock" in a["error"]


def test_a_failed_permissive_step_is_retried_first(engine: Engine) -> None:
    engine.register_definition(
        {
            "name": "perm_retries",
            "steps": [
                task("a", "pr_a", permissive=True, retryCount=1, retryDelaySeconds=0),
                task("b", "pr_b"),
            ],
        }
    )
    inst, _ = engine.start_instance(definition_name="perm_retries", input={})
    (job,) = engine.poll("w", ["pr_a"], 1)
    engine.fail_job(job["id"], "w", "once", retryable=True, attempt=1)
    drain(engine, {"pr_a": _ok("a"), "pr_b": _ok("b")})
    got = engine.get_instance(inst["id"])
    assert got["status"] == "COMPLETED", got.get("reason")
    assert steps_of(engine, inst["id"], "a")[0]["attempt"] == 2


def test_a_terminate_after_a_permissive_failure_fails_the_instance(engine: Engine) -> None:
    engine.register_definition(
        {
            "name": "perm_term",
            "steps": [
                _perm("a", "ptm_a"),
                {"id": "stop", "type": "TERMINATE", "status": "COMPLETED"},
                task("never", "ptm_never"),
            ],
        }
    )
    inst, _ = engine.start_instance(definition_name="perm_term", input={})
    drain(engine, {"ptm_a": _fail})
    got = engine.get_instance(inst["id"])
    assert got["status"] == "FAILED" and got["reason"] == _reason(engine, inst["id"], "a")


# --- PARALLEL, MAP, DO_WHILE, nesting ----------------------------------------------------------


def test_a_branch_ending_on_a_permissive_failure_fails_the_parallel_once_all_branches_end(
    engine: Engine,
) -> None:
    engine.register_definition(
        {
            "name": "perm_par",
            "steps": [
                {
                    "id": "fan",
                    "type": "PARALLEL",
                    "branches": [[_perm("a", "pp2_a")], [task("slow", "pp2_slow")]],
                },
                task("after", "pp2_after"),
            ],
        }
    )
    inst, _ = engine.start_instance(definition_name="perm_par", input={})
    drain(engine, {"pp2_a": _fail})
    # The failed branch waits for the other: the PARALLEL is open, the slow job still claimable.
    assert engine.get_instance(inst["id"])["status"] == "RUNNING"
    assert _statuses(engine, inst["id"], "fan") == ["IN_PROGRESS"]
    assert _statuses(engine, inst["id"], "slow") == ["SCHEDULED"]
    drain(engine, {"pp2_slow": _ok("slow"), "pp2_after": _ok("after")})
    got = engine.get_instance(inst["id"])
    assert _statuses(engine, inst["id"], "slow") == ["COMPLETED"]
    assert _statuses(engine, inst["id"], "fan") == ["FAILED"]
    assert steps_of(engine, inst["id"], "after") == []
    assert got["status"] == "FAILED" and got["reason"] == "step 'a' failed: out of stock"


def test_a_branch_s_permissive_failure_while_paused_still_fails_the_parallel(
    engine: Engine,
) -> None:
    engine.register_definition(
        {
            "name": "perm_paused",
            "steps": [
                {
                    "id": "fan",
                    "type": "PARALLEL",
                    "branches": [[_perm("a", "ppz_a")], [task("slow", "ppz_slow")]],
                },
                task("after", "ppz_after"),
            ],
        }
    )
    inst, _ = engine.start_instance(definition_name="perm_paused", input={})
    engine.pause_instance(inst["id"])
    drain(engine, {"ppz_a": _fail, "ppz_slow": _ok("slow")})  # both continuations wait
    engine.resume_instance(inst["id"])
    drain(engine, {"ppz_after": _ok("after")})
    got = engine.get_instance(inst["id"])
    assert _statuses(engine, inst["id"], "fan") == ["FAILED"]
    assert steps_of(engine, inst["id"], "after") == []
    assert got["status"] == "FAILED" and got["reason"] == "step 'a' failed: out of stock"


def test_a_non_permissive_failure_in_a_branch_still_fails_the_parallel_at_once(
    engine: Engine,
) -> None:
    engine.register_definition(
        {
            "name": "perm_par_strict",
            "steps": [
                {
                    "id": "fan",
                    "type": "PARALLEL",
                    "branches": [[task("a", "pps_a", retryCount=0)], [task("slow", "pps_slow")]],
                }
            ],
        }
    )
    inst, _ = engine.start_instance(definition_name="perm_par_strict", input={})
    drain(engine, {"pps_a": _fail})
    assert engine.get_instance(inst["id"])["status"] == "FAILED"
    assert _statuses(engine, inst["id"], "slow") == ["CANCELLED"]


def test_a_permissive_failure_inside_a_branch_lets_the_parallel_complete(
    engine: Engine,
) -> None:
    engine.register_definition(
        {
            "name": "perm_par_mid",
            "steps": [
                {
                    "id": "fan",
                    "type": "PARALLEL",
                    "branches": [[_perm("a", "ppm_a"), task("b", "ppm_b")], [task("c", "ppm_c")]],
                },
                task("after", "ppm_after"),
            ],
        }
    )
    inst, _ = engine.start_instance(definition_name="perm_par_mid", input={})
    drain(engine, {"ppm_a": _fail, "ppm_b": _ok("b"), "ppm_c": _ok("c"), "ppm_after": _ok("after")})
    assert _statuses(engine, inst["id"], "fan") == ["COMPLETED"]
    assert _statuses(engine, inst["id"], "after") == ["COMPLETED"]
    got = engine.get_instance(inst["id"])
    assert got["status"] == "FAILED" and got["reason"] == _reason(engine, inst["id"], "a")


def test_an_item_ending_on_a_permissive_failure_fails_the_map_once_every_item_ended(
    engine: Engine,
) -> None:
    engine.register_definition(
        {
            "name": "perm_map",
            "steps": [
                {
                    "id": "each",
                    "type": "MAP",
                    "items": "${workflow.input.items}",
                    "maxConcurrency": 1,
                    "steps": [_perm("a", "pm_a", input={"n": "${map.item}"})],
                }
            ],
        }
    )
    inst, _ = engine.start_instance(definition_name="perm_map", input={"items": [1, 2, 3]})

    def maybe(i: dict[str, Any]) -> Any:
        if i["n"] == 2:
            raise RuntimeError("out of stock")
        return {"n": i["n"]}

    drain(engine, {"pm_a": maybe})
    # Items 1 and 3 ran after item 2 failed; then the MAP failed.
    assert _statuses(engine, inst["id"], "a") == ["COMPLETED", "FAILED", "COMPLETED"]
    assert _statuses(engine, inst["id"], "each") == ["FAILED"]
    got = engine.get_instance(inst["id"])
    assert got["status"] == "FAILED" and got["reason"] == "step 'a' failed: out of stock"


def test_a_permissive_failure_inside_a_do_while_fails_the_loop_at_once(engine: Engine) -> None:
    engine.register_definition(
        {
            "name": "perm_loop",
            "steps": [
                {
                    "id": "loop",
                    "type": "DO_WHILE",
                    "while": "loop.iteration < 3",
                    "maxIterations": 5,
                    "steps": [_perm("a", "plp_a"), task("b", "plp_b")],
                },
                task("after", "plp_after"),
            ],
        }
    )
    inst, _ = engine.start_instance(definition_name="perm_loop", input={})
    drain(engine, {"plp_a": _fail, "plp_b": _ok("b"), "plp_after": _ok("after")})
    got = engine.get_instance(inst["id"])
    assert got["status"] == "FAILED" and got["reason"] == "step 'a' failed: out of stock"
    assert _statuses(engine, inst["id"], "loop") == ["FAILED"]
    assert steps_of(engine, inst["id"], "b") == []
    assert steps_of(engine, inst["id"], "after") == []


def test_a_permissive_failure_ending_a_switch_case_nested_in_a_branch(engine: Engine) -> None:
    engine.register_definition(
        {
            "name": "perm_nested",
            "steps": [
                {
                    "id": "fan",
                    "type": "PARALLEL",
                    "branches": [
                        [
                            {
                                "id": "pick",
                                "type": "SWITCH",
                                "on": "${workflow.input.kind}",
                                "cases": {"x": [_perm("a", "pn_a")]},
                            }
                        ],
                        [task("c", "pn_c")],
                    ],
                },
                task("after", "pn_after"),
            ],
        }
    )
    inst, _ = engine.start_instance(definition_name="perm_nested", input={"kind": "x"})
    drain(engine, {"pn_a": _fail, "pn_c": _ok("c"), "pn_after": _ok("after")})
    # The SWITCH completes (its case ended), so its branch ends well and the PARALLEL completes;
    # the instance fails at its end, as Conductor's decider would.
    assert _statuses(engine, inst["id"], "pick") == ["COMPLETED"]
    assert _statuses(engine, inst["id"], "fan") == ["COMPLETED"]
    assert _statuses(engine, inst["id"], "after") == ["COMPLETED"]
    got = engine.get_instance(inst["id"])
    assert got["status"] == "FAILED" and got["reason"] == _reason(engine, inst["id"], "a")


def test_the_batched_completion_of_the_last_step_still_fails_the_instance(engine: Engine) -> None:
    engine.register_definition(
        {"name": "perm_batch", "steps": [_perm("a", "pb_a"), task("b", "pb_b")]}
    )
    inst, _ = engine.start_instance(definition_name="perm_batch", input={})
    drain(engine, {"pb_a": _fail})
    (job,) = engine.poll("w", ["pb_b"], 1)
    (answer,) = engine.complete_batch([BatchResult(job["id"], "w", job["attempt"], {"b": 1})])
    assert answer["outcome"] == "APPLIED"
    got = engine.get_instance(inst["id"])
    assert got["status"] == "FAILED" and got["reason"] == _reason(engine, inst["id"], "a")


# --- instance retries ---------------------------------------------------------------------------


def test_a_retry_reruns_the_permissive_failure_and_not_the_steps_after_it(engine: Engine) -> None:
    engine.register_definition(
        {"name": "perm_retry", "steps": [_perm("a", "prt_a"), task("b", "prt_b")]}
    )
    inst, _ = engine.start_instance(definition_name="perm_retry", input={})
    drain(engine, {"prt_a": _fail, "prt_b": _ok("b")})
    assert engine.get_instance(inst["id"])["status"] == "FAILED"

    # The rerun fails again: the instance fails again, naming the new attempt.
    assert engine.retry_instance(inst["id"])["status"] == "RUNNING"
    drain(engine, {"prt_a": lambda _i: (_ for _ in ()).throw(RuntimeError("still out"))})
    got = engine.get_instance(inst["id"])
    assert got["status"] == "FAILED"
    assert got["reason"] == _reason(engine, inst["id"], "a", "still out")
    assert _statuses(engine, inst["id"], "a") == ["FAILED", "FAILED"]

    # Retried again, it completes: the instance completes, b having run once.
    engine.retry_instance(inst["id"])
    drain(engine, {"prt_a": _ok("a"), "prt_b": _ok("b")})
    got = engine.get_instance(inst["id"])
    assert got["status"] == "COMPLETED", got.get("reason")
    assert _statuses(engine, inst["id"], "a") == ["FAILED", "FAILED", "COMPLETED"]
    assert _statuses(engine, inst["id"], "b") == ["COMPLETED"]


def test_a_retry_reruns_a_permissive_failure_inside_a_completed_parallel(engine: Engine) -> None:
    engine.register_definition(
        {
            "name": "perm_retry_par",
            "steps": [
                {
                    "id": "fan",
                    "type": "PARALLEL",
                    "branches": [[_perm("a", "prp_a"), task("b", "prp_b")], [task("c", "prp_c")]],
                },
                task("after", "prp_after"),
            ],
        }
    )
    inst, _ = engine.start_instance(definition_name="perm_retry_par", input={})
    handlers = {"prp_b": _ok("b"), "prp_c": _ok("c"), "prp_after": _ok("after")}
    drain(engine, {"prp_a": _fail, **handlers})
    assert engine.get_instance(inst["id"])["status"] == "FAILED"
    engine.retry_instance(inst["id"])
    # Only a runs again; the instance waits for it.
    assert [j["jobType"] for j in engine.poll("w", list(handlers), 10)] == []
    drain(engine, {"prp_a": _ok("a"), **handlers})
    got = engine.get_instance(inst["id"])
    assert got["status"] == "COMPLETED", got.get("reason")
    for step_id in ("b", "c", "fan", "after"):
        assert _statuses(engine, inst["id"], step_id) == ["COMPLETED"], step_id


def test_a_retry_after_a_later_failure_reruns_both_and_waits_for_both(engine: Engine) -> None:
    engine.register_definition(
        {
            "name": "perm_retry_two",
            "steps": [_perm("a", "prw_a"), task("b", "prw_b", retryCount=0), task("c", "prw_c")],
        }
    )
    inst, _ = engine.start_instance(definition_name="perm_retry_two", input={})
    drain(engine, {"prw_a": _fail, "prw_b": _fail})
    got = engine.get_instance(inst["id"])
    assert got["status"] == "FAILED" and got["reason"] == "step 'b' failed: out of stock"
    engine.retry_instance(inst["id"])
    # b's rerun and c complete first: the instance waits for a's rerun.
    drain(engine, {"prw_b": _ok("b"), "prw_c": _ok("c")})
    assert engine.get_instance(inst["id"])["status"] == "RUNNING"
    drain(engine, {"prw_a": _ok("a")})
    got = engine.get_instance(inst["id"])
    assert got["status"] == "COMPLETED", got.get("reason")
    assert _statuses(engine, inst["id"], "c") == ["COMPLETED"]


def test_a_retry_of_a_parallel_failed_on_a_permissive_branch_end_reruns_it(
    engine: Engine,
) -> None:
    engine.register_definition(
        {
            "name": "perm_retry_join",
            "steps": [
                {
                    "id": "fan",
                    "type": "PARALLEL",
                    "branches": [[_perm("a", "prj_a")], [task("c", "prj_c")]],
                },
                task("after", "prj_after"),
            ],
        }
    )
    inst, _ = engine.start_instance(definition_name="perm_retry_join", input={})
    drain(engine, {"prj_a": _fail, "prj_c": _ok("c")})
    assert engine.get_instance(inst["id"])["status"] == "FAILED"
    engine.retry_instance(inst["id"])
    drain(engine, {"prj_a": _ok("a"), "prj_c": _ok("c"), "prj_after": _ok("after")})
    got = engine.get_instance(inst["id"])
    assert got["status"] == "COMPLETED", got.get("reason")
    assert _statuses(engine, inst["id"], "c") == ["COMPLETED"]
    assert _statuses(engine, inst["id"], "fan") == ["COMPLETED"]


def test_the_reason_names_the_last_attempt_and_what_its_worker_said(engine: Engine) -> None:
    engine.register_definition(
        {
            "name": "perm_said",
            "steps": [
                task("a", "ps_a", permissive=True, retryCount=1, retryDelaySeconds=0),
                task("b", "ps_b"),
            ],
        }
    )
    inst, _ = engine.start_instance(definition_name="perm_said", input={})
    for attempt in (1, 2):
        (job,) = engine.poll("w", ["ps_a"], 1)
        engine.fail_job(job["id"], "w", "NETWORK ERROR", retryable=True, attempt=attempt)
    drain(engine, {"ps_b": _ok("b")})
    got = engine.get_instance(inst["id"])
    a = steps_of(engine, inst["id"], "a")[0]
    assert a["attempt"] == 2 and "retries exhausted" in a["error"]  # the native error says more
    want = f"Task {a['jobId']}.2 failed with status: FAILED and reason: 'NETWORK ERROR'"
    assert got["status"] == "FAILED" and got["reason"] == want


def test_a_batch_with_a_permissive_failure_and_its_sibling_s_completion(engine: Engine) -> None:
    engine.register_definition(
        {
            "name": "perm_batch_par",
            "steps": [
                {
                    "id": "fan",
                    "type": "PARALLEL",
                    "branches": [[_perm("a", "pbp_a")], [task("c", "pbp_c")]],
                },
                task("after", "pbp_after"),
            ],
        }
    )
    inst, _ = engine.start_instance(definition_name="perm_batch_par", input={})
    jobs = {j["jobType"]: j for j in engine.poll("w", ["pbp_a", "pbp_c"], 10)}
    a, c = jobs["pbp_a"], jobs["pbp_c"]
    answers = engine.complete_batch(
        [
            BatchResult(a["id"], "w", a["attempt"], failure=Failure("out of stock", False)),
            BatchResult(c["id"], "w", c["attempt"], {"c": 1}),
        ]
    )
    assert [x["outcome"] for x in answers] == ["APPLIED", "APPLIED"]
    got = engine.get_instance(inst["id"])
    assert _statuses(engine, inst["id"], "a") == ["FAILED"]
    assert _statuses(engine, inst["id"], "c") == ["COMPLETED"]
    assert _statuses(engine, inst["id"], "fan") == ["FAILED"]
    assert steps_of(engine, inst["id"], "after") == []
    assert got["status"] == "FAILED" and got["reason"] == "step 'a' failed: out of stock"
