"""Which JavaScript loop conditions are given the loop's whole output so far (every iteration's
step outputs are read for one that may look past ``iteration``, and only for such a one), and
which executions a loop keeping its last iterations leaves in Conductor's read of an instance."""

from __future__ import annotations

from typing import Any

import pytest
from baton.definitions import parse_definition
from baton.engine.operators.do_while import _reads_past_iteration, kept_iterations
from baton.engine.plan import Plan

Row = dict[str, Any]


@pytest.mark.parametrize(
    "script",
    [
        "$.other.done !== true",
        "$.loop.iteration < 5",
        "$.loop['iteration'] < 5",
        "$['loop']['iteration'] < 5 && $[\"loop\"].iteration > 0",
        '$.loop [ "iteration" ] < 5 && $.poll.status != "DONE"',
        "if ($.loop.iteration >= 3) { false; } else { true; }",
    ],
)
def test_a_script_reading_only_the_iteration_is_not_given_the_rest(script: str) -> None:
    assert not _reads_past_iteration(script, "loop")


@pytest.mark.parametrize(
    "script",
    [
        "$.loop['1'].poll.status != 'DONE'",
        "Object.keys($.loop).length < 3",
        "$.loop[String($.loop.iteration)].n.ok",
        "$.loop.iterations === undefined",  # not the iteration: may read anything
        "$['loop']['1'].x",
        "$.loop_status.done",  # another step's id that begins with the loop's
        "var l = $.loop; l.iteration < 3",
    ],
)
def test_a_script_that_may_read_more_is_given_the_whole_output(script: str) -> None:
    assert _reads_past_iteration(script, "loop")


def test_a_loop_id_with_pattern_characters_is_taken_literally() -> None:
    assert not _reads_past_iteration("$['a.b'].iteration < 2 && $.aXb.x", "a.b")
    assert _reads_past_iteration("$['a.b']['1'].x", "a.b")


def _row(rid: str, step_id: str, step_type: str, parent: str | None = None, **extra: Any) -> Row:
    return {
        "id": rid,
        "step_id": step_id,
        "step_type": step_type,
        "parent_step_execution_id": parent,
        "iteration": extra.pop("iteration", None),
        "state": extra.pop("state", None),
    }


def test_the_executions_of_iterations_a_loop_no_longer_keeps_are_left_out() -> None:
    plan = Plan(
        parse_definition(
            {
                "name": "kept",
                "steps": [
                    {
                        "id": "loop",
                        "type": "DO_WHILE",
                        "while": "loop.iteration < 4",
                        "maxIterations": 5,
                        "keepLastIterations": 2,
                        "steps": [
                            {
                                "id": "pick",
                                "type": "SWITCH",
                                "on": "a",
                                "cases": {"a": [{"id": "deep", "type": "NOOP"}]},
                            },
                            {
                                "id": "inner",
                                "type": "DO_WHILE",
                                "while": "inner.iteration < 2",
                                "maxIterations": 2,
                                "steps": [{"id": "innermost", "type": "NOOP"}],
                            },
                        ],
                    },
                    {"id": "after", "type": "NOOP"},
                ],
            }
        )
    )
    rows = [_row("L", "loop", "DO_WHILE", state={"iteration": 4})]
    for k in (1, 2, 3, 4):
        rows += [
            _row(f"p{k}", "pick", "SWITCH", "L", iteration=k),
            _row(f"d{k}", "deep", "NOOP", f"p{k}"),
            _row(f"i{k}", "inner", "DO_WHILE", "L", iteration=k, state={"iteration": 2}),
            _row(f"n{k}.1", "innermost", "NOOP", f"i{k}", iteration=1),
            _row(f"n{k}.2", "innermost", "NOOP", f"i{k}", iteration=2),
        ]
    rows.append(_row("A", "after", "NOOP"))
    kept = [r["id"] for r in kept_iterations(plan, rows)]
    assert kept == ["L", "p3", "d3", "i3", "n3.1", "n3.2", "p4", "d4", "i4", "n4.1", "n4.2", "A"]
    # A loop still within its keep, or without one, leaves every row.
    rows[0]["state"] = {"iteration": 2}
    assert kept_iterations(plan, rows) == rows
