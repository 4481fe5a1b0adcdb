"""SCRIPT and JQ steps, a SWITCH chosen by a script and a JavaScript DO_WHILE on a real
PostgreSQL: results, and hostile scripts failing their step with the sandbox's reason while
another instance goes on."""

from __future__ import annotations

from typing import Any

from baton.engine.service import Engine
from baton.settings import EngineSettings
from baton.store.db import Database

from tests.integration.test_control_flow import drain, steps_of, task


def _run(engine: Engine, name: str, steps: list[dict[str, Any]], data: Any) -> dict[str, Any]:
    engine.register_definition({"name": name, "steps": steps})
    inst, _ = engine.start_instance(definition_name=name, input=data)
    return engine.get_instance(inst["id"])


def test_script_and_jq_steps_give_conductor_s_shapes(engine: Engine) -> None:
    got = _run(
        engine,
        "shapes",
        [
            {
                "id": "calc",
                "type": "SCRIPT",
                "language": "javascript",
                "script": "(function () { return {sum: $.xs.reduce((a, b) => a + b, 0)}; })()",
                "input": {"xs": "${workflow.input.xs}"},
            },
            {
                "id": "plain",
                "type": "SCRIPT",
                "script": "function twice(n) { return 2 * n; } twice($.sum);",
                "input": {"sum": "${calc.output.result.sum}"},
            },
        ],
        {"xs": [1, 2, 3]},
    )
    assert got["status"] == "COMPLETED", got.get("reason")
    calc = steps_of(engine, got["id"], "calc")[0]
    assert calc["status"] == "COMPLETED"
    assert calc["output"] == {"result": {"sum": 6}}
    assert calc["input"] == {"xs": [1, 2, 3]}
    assert steps_of(engine, got["id"], "plain")[0]["output"] == {"result": 12}
    # an engine-run step's output stays its own: not merged into the variables
    assert "result" not in got["variables"]


def test_jq_results_first_and_all(engine: Engine) -> None:
    got = _run(
        engine,
        "jqall",
        [
            {
                "id": "shape",
                "type": "JQ",
                "query": ".k as $k | .xs[] | . * $k",
                "input": {"xs": "${workflow.input.xs}", "k": 10},
            },
            {"id": "none", "type": "JQ", "query": "empty"},
        ],
        {"xs": [1, 2, 3]},
    )
    assert got["status"] == "COMPLETED", got.get("reason")
    assert steps_of(engine, got["id"], "shape")[0]["output"] == {
        "result": 10,
        "resultList": [10, 20, 30],
    }
    assert steps_of(engine, got["id"], "none")[0]["output"] == {"result": None, "resultList": []}


def test_a_switch_chosen_by_script_and_a_javascript_loop(engine: Engine) -> None:
    engine.register_definition(
        {
            "name": "jsflow",
            "steps": [
                {
                    "id": "route",
                    "type": "SWITCH",
                    "script": "$.amount > 100 ? 'big' : 'small'",
                    "input": {"amount": "${workflow.input.amount}"},
                    "cases": {"big": [task("big")], "small": [task("small")]},
                },
                {
                    "id": "loop",
                    "type": "DO_WHILE",
                    "whileLanguage": "javascript",
                    "while": "function () { return $.loop.iteration < $.max && $.work.n < 10; }",
                    "input": {"max": "${workflow.input.rounds}"},
                    "maxIterations": 10,
                    "steps": [task("work", input={"i": "${loop.iteration}"})],
                },
            ],
        }
    )
    seen: list[str] = []
    handlers = {
        "big": lambda _i: seen.append("big") or {},
        "small": lambda _i: seen.append("small") or {},
        "work": lambda i: {"n": i["i"]},
    }
    inst, _ = engine.start_instance(definition_name="jsflow", input={"amount": 500, "rounds": 3})
    drain(engine, handlers)
    got = engine.get_instance(inst["id"])
    assert got["status"] == "COMPLETED", got.get("reason")
    assert seen == ["big"]
    assert steps_of(engine, inst["id"], "route")[0]["output"]["case"] == "big"
    assert len(steps_of(engine, inst["id"], "work")) == 3
    assert steps_of(engine, inst["id"], "loop")[0]["output"]["iterations"] == 3


HOSTILE = {
    "endless": ("SCRIPT", "while (true) {}", "ran out of time"),
    "allocating": ("SCRIPT", "var a = []; for (;;) a.push(new ArrayBuffer(1 << 24));", "memory"),
    "throwing": ("SCRIPT", "throw new Error('no such customer')", "no such customer"),
    "endless-jq": ("JQ", "until(false; .)", "ran out of time"),
}


def test_hostile_scripts_fail_their_step_and_another_instance_goes_on(db: Database) -> None:
    engine = Engine(db, EngineSettings(script_time_seconds=0.5))
    for name, (kind, code, _) in HOSTILE.items():
        field = "script" if kind == "SCRIPT" else "query"
        engine.register_definition(
            {"name": name, "steps": [{"id": "run", "type": kind, field: code, "input": {}}]}
        )
    engine.register_definition(
        {
            "name": "fine",
            "steps": [
                {"id": "before", "type": "SCRIPT", "script": "$.n * 2", "input": {"n": 21}},
                task("after"),
            ],
        }
    )
    fine, _ = engine.start_instance(definition_name="fine", input={})
    for name, (_, _, said) in HOSTILE.items():
        inst, _ = engine.start_instance(definition_name=name, input={})
        got = engine.get_instance(inst["id"])
        assert got["status"] == "FAILED", name
        step = steps_of(engine, inst["id"], "run")[0]
        assert step["status"] == "FAILED"
        assert said in step["error"], (name, step["error"])
        assert said in got["reason"], (name, got["reason"])
    assert drain(engine, {"after": lambda _i: {"ok": True}}) == 1
    done = engine.get_instance(fine["id"])
    assert done["status"] == "COMPLETED"
    assert steps_of(engine, fine["id"], "before")[0]["output"] == {"result": 42}
    again, _ = engine.start_instance(definition_name="fine", input={})
    assert steps_of(engine, again["id"], "before")[0]["output"] == {"result": 42}


def test_a_failing_switch_script_or_while_script_fails_its_step(engine: Engine) -> None:
    got = _run(
        engine,
        "badswitch",
        [
            {
                "id": "route",
                "type": "SWITCH",
                "script": "$.customer.tier",
                "cases": {"gold": [task("gold")]},
            }
        ],
        {},
    )
    assert got["status"] == "FAILED"
    assert "cannot read property 'tier' of undefined" in got["reason"]
    got = _run(
        engine,
        "badloop",
        [
            {
                "id": "loop",
                "type": "DO_WHILE",
                "whileLanguage": "javascript",
                "while": "$.missing.x > 1",
                "maxIterations": 3,
                "steps": [{"id": "s", "type": "SET_VARIABLE", "variables": {"a": 1}}],
            }
        ],
        {},
    )
    assert got["status"] == "FAILED"
    assert "its while script threw TypeError" in got["reason"], got["reason"]


def test_a_program_given_as_one_expression_is_resolved_when_the_step_runs(engine: Engine) -> None:
    got = _run(
        engine,
        "programs",
        [
            {"id": "js", "type": "SCRIPT", "script": "${workflow.input.js}", "input": {"n": 20}},
            {"id": "q", "type": "JQ", "query": "${workflow.input.jq}", "input": {"n": 2}},
            # a template literal's ${…} inside a script is JavaScript's own, as before
            {"id": "t", "type": "SCRIPT", "script": "`n=${$.n}`", "input": {"n": 3}},
        ],
        {"js": "$.n + 1", "jq": ".n * 10"},
    )
    assert got["status"] == "COMPLETED", got.get("reason")
    assert steps_of(engine, got["id"], "js")[0]["output"] == {"result": 21}
    assert steps_of(engine, got["id"], "q")[0]["output"] == {"result": 20, "resultList": [20]}
    assert steps_of(engine, got["id"], "t")[0]["output"] == {"result": "n=3"}
    bad = _run(
        engine,
        "programs_bad",
        [{"id": "js", "type": "SCRIPT", "script": "${workflow.input.js}"}],
        {"js": {"not": "text"}},
    )
    assert bad["status"] == "FAILED"
    (js,) = steps_of(engine, bad["id"], "js")
    assert js["status"] == "FAILED"
    assert js["error"] == "its script ${workflow.input.js} gave dict, not a program to run"


def test_a_map_over_a_list_written_as_json_text(engine: Engine) -> None:
    got = _run(
        engine,
        "literal_items",
        [
            {
                "id": "m",
                "type": "MAP",
                "items": '[1, "${workflow.input.x}", {"k": "${workflow.input.x}"}]',
                "steps": [
                    {"id": "echo", "type": "SCRIPT", "script": "$.v", "input": {"v": "${map.item}"}}
                ],
            }
        ],
        {"x": "ex"},
    )
    assert got["status"] == "COMPLETED", got.get("reason")
    (m,) = steps_of(engine, got["id"], "m")
    assert m["output"] == [{"result": 1}, {"result": "ex"}, {"result": {"k": "ex"}}]


def test_a_loop_s_steps_read_its_output_so_far(engine: Engine) -> None:
    got = _run(
        engine,
        "so_far",
        [
            {
                "id": "loop",
                "type": "DO_WHILE",
                "while": "loop.iteration < 3",
                "maxIterations": 5,
                "steps": [
                    {
                        "id": "seen",
                        "type": "SCRIPT",
                        "script": "$.so_far",
                        "input": {"so_far": "${loop.output}"},
                    }
                ],
            }
        ],
        {},
    )
    assert got["status"] == "COMPLETED", got.get("reason")
    seen = [s["output"]["result"] for s in steps_of(engine, got["id"], "seen")]
    assert seen[0] == {"iteration": 1}
    assert seen[1] == {"iteration": 2, "1": {"seen": {"result": seen[0]}}}
    assert seen[2] == {
        "iteration": 3,
        "1": {"seen": {"result": seen[0]}},
        "2": {"seen": {"result": seen[1]}},
    }


def test_a_javascript_while_reads_the_loop_s_output_so_far_as_conductor_binds_it(
    engine: Engine,
) -> None:
    got = _run(
        engine,
        "while_so_far",
        [
            {
                "id": "loop",
                "type": "DO_WHILE",
                "whileLanguage": "javascript",
                "while": (
                    "Object.keys($.loop).length <= 3"
                    " && $.loop[String($.loop.iteration)].n.result === $.loop.iteration * 10"
                ),
                "maxIterations": 10,
                "steps": [
                    {
                        "id": "n",
                        "type": "SCRIPT",
                        "script": "$.i * 10",
                        "input": {"i": "${loop.iteration}"},
                    }
                ],
            }
        ],
        {},
    )
    assert got["status"] == "COMPLETED", got.get("reason")
    assert len(steps_of(engine, got["id"], "n")) == 3
