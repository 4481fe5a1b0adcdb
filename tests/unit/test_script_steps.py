"""SCRIPT and JQ steps, a SWITCH chosen by a script and a JavaScript DO_WHILE: their validation at
registration, and their decisions (``tests.support.decisions``, the sandbox really runs)."""

from __future__ import annotations

from typing import Any

import pytest
from baton.definitions import parse_definition
from baton.errors import ValidationFailed
from baton.status import InstanceStatus, StepStatus
from baton.steps import MAX_SCRIPT_CHARS

from tests.support.decisions import Run, small_limits


def task(step_id: str, **extra: Any) -> dict[str, Any]:
    return {"id": step_id, "type": "SERVICE_TASK", "jobType": step_id, **extra}


def problems(*steps: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(ValidationFailed) as failed:
        parse_definition({"name": "w", "steps": list(steps)})
    return {p.path: p.message for p in failed.value.problems}


# --- validation -------------------------------------------------------------------------------


def test_a_script_must_be_javascript_parse_and_be_bounded() -> None:
    found = problems(
        {"id": "a", "type": "SCRIPT", "language": "graaljs", "script": "1"},
        {"id": "b", "type": "SCRIPT", "script": "$.a +"},
        {"id": "c", "type": "SCRIPT", "script": ""},
        {"id": "d", "type": "SCRIPT", "script": "1;" * (MAX_SCRIPT_CHARS // 2 + 1)},
        {"id": "e", "type": "SCRIPT", "script": "   "},
    )
    assert "javascript" in found["steps[0].language"]
    assert "does not parse" in found["steps[1].script"]
    assert "SyntaxError" in found["steps[1].script"]
    assert "empty" in found["steps[2].script"]
    assert str(MAX_SCRIPT_CHARS) in found["steps[3].script"]
    assert "blank" in found["steps[4].script"]


def test_a_jq_query_must_compile() -> None:
    found = problems(
        {"id": "a", "type": "JQ", "query": ".items | map(.price"},
        {"id": "b", "type": "JQ", "query": ""},
    )
    assert "the jq filter does not parse" in found["steps[0].query"]
    assert "empty" in found["steps[1].query"]


def test_valid_script_steps_register_and_scripts_are_not_run_at_registration() -> None:
    definition = parse_definition(
        {
            "name": "w",
            "steps": [
                {"id": "a", "type": "SCRIPT", "script": "while (true) {}"},
                {"id": "b", "type": "JQ", "query": "def f: f; f"},
                {"id": "c", "type": "SCRIPT", "script": "function () { return 1; }"},
            ],
        }
    )
    assert [s.type for s in definition.steps] == ["SCRIPT", "JQ", "SCRIPT"]


def test_a_switch_selects_by_on_or_by_script_and_its_script_must_parse() -> None:
    cases = {"x": [task("x")]}
    found = problems(
        {"id": "a", "type": "SWITCH", "on": "${workflow.input.k}", "script": "'x'", "cases": cases},
        {"id": "b", "type": "SWITCH", "script": "if (", "cases": cases},
        {
            "id": "c",
            "type": "SWITCH",
            "script": "'x'",
            "cases": [{"condition": "true", "steps": []}],
        },
    )
    assert "not both" in found["steps[0].script"]
    assert "does not parse" in found["steps[1].script"]
    assert "take no script" in found["steps[2].script"]


def test_a_javascript_while_must_parse_and_its_input_may_read_the_loop_s_steps() -> None:
    loop = {
        "id": "loop",
        "type": "DO_WHILE",
        "whileLanguage": "javascript",
        "maxIterations": 3,
        "input": {"n": "${check.output.n}"},
        "steps": [task("check")],
    }
    parse_definition({"name": "w", "steps": [{**loop, "while": "$.n < 3"}]})
    found = problems({**loop, "while": "function ( {"})
    assert "does not parse" in found["steps[0].while"]
    # a JSONata while reads no input: there the loop's input is resolved before its steps ran
    found = problems({**loop, "whileLanguage": "jsonata", "while": "check.output.n < 3"})
    assert "steps[0].input.n" in found
    found = problems({**loop, "whileLanguage": "python", "while": "True"})
    assert "steps[0].whileLanguage" in found


# --- decisions --------------------------------------------------------------------------------


def test_a_script_step_completes_with_its_result_in_the_same_decision() -> None:
    run = Run(
        {
            "name": "s",
            "steps": [
                {
                    "id": "calc",
                    "type": "SCRIPT",
                    "script": "({total: $.price * $.qty})",
                    "input": {"price": "${workflow.input.price}", "qty": 3},
                },
                {"id": "shape", "type": "JQ", "query": ".[]", "input": {"a": 1, "b": 2}},
                task("after", input={"t": "${calc.output.result.total}", "j": "${shape.output}"}),
            ],
        },
        input={"price": 5},
    ).start()
    (calc,) = run.executions("calc")
    assert (calc.status, calc.output) == (StepStatus.COMPLETED, {"result": {"total": 15}})
    assert run.open_jobs("after")[0].payload == {
        "t": 15,
        "j": {"result": 1, "resultList": [1, 2]},
    }


def test_a_throwing_script_fails_its_step_with_the_script_s_error() -> None:
    run = Run(
        {
            "name": "s",
            "steps": [{"id": "calc", "type": "SCRIPT", "script": "throw new RangeError('no')"}],
        }
    ).start()
    assert run.status == InstanceStatus.FAILED
    (calc,) = run.executions("calc")
    assert calc.status == StepStatus.FAILED
    assert calc.error == "the script threw RangeError: no"
    assert run.state.reason == "step 'calc' failed: the script threw RangeError: no"


def test_a_failing_jq_filter_fails_its_step() -> None:
    run = Run(
        {"name": "s", "steps": [{"id": "q", "type": "JQ", "query": 'error("bad row")'}]}
    ).start()
    (q,) = run.executions("q")
    assert q.status == StepStatus.FAILED
    assert q.error is not None and "bad row" in q.error


def test_a_switch_script_s_value_names_the_case() -> None:
    definition = {
        "name": "s",
        "steps": [
            {
                "id": "route",
                "type": "SWITCH",
                "script": "$.n > 10 ? 'big' : $.n > 0",
                "input": {"n": "${workflow.input.n}"},
                "cases": {"big": [task("big")], "true": [task("some")]},
                "default": [task("none")],
            }
        ],
    }
    for n, expected in [(50, "big"), (5, "some"), (0, "none")]:
        run = Run(definition, input={"n": n}).start()
        assert [j.job_type for j in run.open_jobs()] == [expected]


def test_a_javascript_while_reads_the_loop_input_its_steps_and_its_iteration() -> None:
    run = Run(
        {
            "name": "l",
            "steps": [
                {
                    "id": "loop",
                    "type": "DO_WHILE",
                    "whileLanguage": "javascript",
                    "while": "function () { return $.check.more && $.loop.iteration < $.cap; }",
                    "input": {"cap": "${workflow.input.cap}"},
                    "maxIterations": 10,
                    "steps": [task("check")],
                }
            ],
        },
        input={"cap": 3},
    ).start()
    for _ in range(3):
        run.complete("check", {"more": True})
    assert run.status == InstanceStatus.COMPLETED
    assert run.executions("loop")[0].output == {"more": True, "iterations": 3}


def test_a_javascript_while_goes_on_for_true_or_a_number_above_zero_only() -> None:
    for verdict, iterations in [("1", 2), ("'yes'", 1), ("[1]", 1), ("0", 1), ("true", 2)]:
        run = Run(
            {
                "name": "l",
                "steps": [
                    {
                        "id": "loop",
                        "type": "DO_WHILE",
                        "whileLanguage": "javascript",
                        "while": f"$.loop.iteration < 2 ? {verdict} : false",
                        "maxIterations": 10,
                        "steps": [{"id": "s", "type": "SET_VARIABLE", "variables": {"a": 1}}],
                    }
                ],
            }
        ).start()
        assert run.executions("loop")[0].output["iterations"] == iterations, verdict


def test_a_result_above_the_output_hard_limit_fails_the_step_and_a_large_one_is_offloaded() -> None:
    definition = {
        "name": "s",
        "steps": [{"id": "big", "type": "SCRIPT", "script": "'x'.repeat($.n)", "input": {}}],
    }
    definition["steps"][0]["input"] = {"n": "${workflow.input.n}"}
    run = Run(definition, input={"n": 100}, payload_limits=small_limits(soft=50, hard=500))
    run.start()
    (big,) = run.executions("big")
    assert big.status == StepStatus.COMPLETED and run.bucket  # offloaded, as a worker's output
    run = Run(definition, input={"n": 1000}, payload_limits=small_limits(soft=50, hard=500))
    run.start()
    (big,) = run.executions("big")
    assert big.status == StepStatus.FAILED
    assert big.error is not None and "hard limit of 500 bytes" in big.error


def test_an_instance_retry_runs_a_failed_script_again() -> None:
    run = Run(
        {"name": "s", "steps": [{"id": "calc", "type": "SCRIPT", "script": "throw 'no'"}]}
    ).start()
    assert run.status == InstanceStatus.FAILED
    run.retry()
    assert run.statuses("calc") == ["FAILED", "FAILED"]
    assert run.status == InstanceStatus.FAILED


# --- limits -----------------------------------------------------------------------------------


def test_script_limits_come_from_the_environment_and_lambda_s_memory() -> None:
    from baton.settings import Settings, SettingsError

    default = Settings.from_env({}).engine
    assert (default.script_time_seconds, default.script_memory_bytes) == (1.0, 64 << 20)
    assert default.script_process_bytes == 1 << 30
    env = {"BATON_SCRIPT_TIME_SECONDS": "0.25", "BATON_SCRIPT_MEMORY_BYTES": str(32 << 20)}
    engine = Settings.from_env(env).engine
    assert (engine.script_time_seconds, engine.script_memory_bytes) == (0.25, 32 << 20)
    in_lambda = Settings.from_env({"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "512"}).engine
    assert in_lambda.script_process_bytes == 256 << 20
    for bad in ({"BATON_SCRIPT_TIME_SECONDS": "0"}, {"BATON_SCRIPT_TIME_SECONDS": "soon"}):
        with pytest.raises(SettingsError, match="BATON_SCRIPT_TIME_SECONDS"):
            Settings.from_env(bad)
    with pytest.raises(SettingsError, match="BATON_SCRIPT_PROCESS_BYTES"):
        Settings.from_env({"BATON_SCRIPT_PROCESS_BYTES": str(1 << 20)})
