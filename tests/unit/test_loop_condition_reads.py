"""Which JavaScript loop conditions are given the loop's whole output so far: every iteration's
step outputs are read for one that may look past ``iteration``, and only for such a one."""

from __future__ import annotations

import pytest
from baton.engine.operators.do_while import _reads_past_iteration


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
