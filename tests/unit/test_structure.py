"""Validation of nested definitions: limits, unique ids, conditions, and which steps an expression
may read where (examples, then properties over random trees checked against a plain oracle)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from baton.definitions import parse_definition
from baton.errors import ValidationFailed
from hypothesis import given, settings
from hypothesis import strategies as st


def task(step_id: str, **extra: Any) -> dict[str, Any]:
    return {"id": step_id, "type": "SERVICE_TASK", "jobType": "j", **extra}


def problems(definition: dict[str, Any]) -> list[tuple[str, str]]:
    try:
        parse_definition(definition)
    except ValidationFailed as e:
        return [(p.path, p.message) for p in e.problems]
    return []


def reads(step_id: str, target: str) -> dict[str, Any]:
    return task(step_id, input={"v": f"${{{target}.output}}"})


# --- examples -----------------------------------------------------------------------------------


def test_a_step_in_one_branch_is_not_visible_to_a_sibling_branch_but_is_after_the_join() -> None:
    fan = {"id": "fan", "type": "PARALLEL", "branches": [[task("a")], [reads("b", "a")]]}
    (problem,) = problems({"name": "d", "steps": [fan]})
    assert problem[0] == "steps[0].branches[1][0].input.v"
    assert "'a'" in problem[1]
    fan["branches"] = [[task("a")], [task("b")]]
    assert problems({"name": "d", "steps": [fan, reads("after", "a")]}) == []


def test_a_step_inside_a_map_is_visible_within_its_item_but_not_after_the_map() -> None:
    each = {
        "id": "each",
        "type": "MAP",
        "items": "${workflow.input.xs}",
        "steps": [task("one"), reads("two", "one")],
    }
    assert problems({"name": "d", "steps": [each]}) == []
    (problem,) = problems({"name": "d", "steps": [each, reads("after", "one")]})
    assert "MAP" in problem[1]
    assert problems({"name": "d", "steps": [each, reads("after", "each")]}) == []


def test_a_loop_body_step_is_visible_to_its_condition_and_after_the_loop() -> None:
    loop = {
        "id": "loop",
        "type": "DO_WHILE",
        "while": "check.output.more",
        "maxIterations": 3,
        "steps": [task("check")],
    }
    assert problems({"name": "d", "steps": [loop, reads("after", "check")]}) == []


def test_a_step_cannot_read_one_that_comes_later_or_itself() -> None:
    assert problems({"name": "d", "steps": [reads("a", "b"), task("b")]})
    assert problems({"name": "d", "steps": [reads("a", "a")]})


def test_step_ids_are_unique_across_the_whole_definition() -> None:
    fan = {"id": "fan", "type": "PARALLEL", "branches": [[task("x")], [task("x")]]}
    (problem,) = problems({"name": "d", "steps": [fan]})
    assert problem == (
        "steps[0].branches[1][0].id",
        "duplicate step id 'x' (first at steps[0].branches[0][0])",
    )


def test_a_condition_with_bad_jsonata_is_refused_naming_the_step() -> None:
    switch = {
        "id": "route",
        "type": "SWITCH",
        "cases": [{"condition": "workflow.input.x >", "steps": [task("a")]}],
    }
    ((path, message),) = problems({"name": "d", "steps": [switch]})
    assert path == "steps[0].cases[0].condition"
    assert "JSONata" in message or "syntax" in message.lower()


def _nest(depth: int) -> dict[str, Any]:
    steps: list[dict[str, Any]] = [task("leaf")]
    for k in range(depth):
        steps = [{"id": f"op{k}", "type": "PARALLEL", "branches": [steps]}]
    return {"name": "deep", "steps": steps}


def test_nesting_is_allowed_to_32_operators_and_refused_beyond() -> None:
    assert problems(_nest(32)) == []
    assert any("deeper than 32" in m for _, m in problems(_nest(33)))


def test_more_than_a_thousand_steps_are_refused() -> None:
    assert problems({"name": "d", "steps": [task(f"s{i}") for i in range(1000)]}) == []
    found = problems({"name": "d", "steps": [task(f"s{i}") for i in range(1001)]})
    assert ("steps", "1001 steps, more than the 1000 allowed") in found


@pytest.mark.parametrize(
    ("step", "field"),
    [
        ({"id": "t", "type": "TIMER", "duration": "soon"}, "steps[0].duration"),
        ({"id": "t", "type": "TIMER"}, "steps[0]"),
        ({"id": "c", "type": "SUB_WORKFLOW"}, "steps[0]"),
        (
            {"id": "m", "type": "MAP", "items": "not an expression", "steps": [task("x")]},
            "steps[0].items",
        ),
        ({"id": "l", "type": "DO_WHILE", "while": "true", "steps": [task("x")]}, "steps[0]"),
        (
            {
                "id": "l",
                "type": "DO_WHILE",
                "while": "x",
                "maxIterations": 10_001,
                "steps": [task("y")],
            },
            "steps[0].maxIterations",
        ),
        ({"id": "e", "type": "TERMINATE", "status": "RUNNING"}, "steps[0].status"),
        ({"id": "s", "type": "SET_VARIABLE", "variables": {}}, "steps[0].variables"),
    ],
)
def test_operator_settings_are_checked_at_registration(step: dict[str, Any], field: str) -> None:
    found = problems({"name": "d", "steps": [step]})
    assert found and any(path.startswith(field) for path, _ in found), found


# --- properties over random trees --------------------------------------------------------------


@dataclass
class Spot:
    """Where a step sits: per level from the root, (the list it is in, its index there), and
    whether that list is a MAP's steps."""

    chain: tuple[tuple[tuple[str, str], int], ...]
    in_map: tuple[bool, ...]


def _trees() -> st.SearchStrategy[list[dict[str, Any]]]:
    counter = iter(range(10**9))

    def leaf() -> st.SearchStrategy[dict[str, Any]]:
        return st.builds(lambda: task(f"s{next(counter)}"))

    def operator(children: st.SearchStrategy[list[dict[str, Any]]]) -> st.SearchStrategy[Any]:
        lists = st.lists(children, min_size=1, max_size=3)
        return st.one_of(
            st.builds(
                lambda bs: {"id": f"s{next(counter)}", "type": "PARALLEL", "branches": bs}, lists
            ),
            st.builds(
                lambda s: {
                    "id": f"s{next(counter)}",
                    "type": "MAP",
                    "items": "${workflow.input.xs}",
                    "steps": s,
                },
                children,
            ),
            st.builds(
                lambda s: {
                    "id": f"s{next(counter)}",
                    "type": "DO_WHILE",
                    "while": "false",
                    "maxIterations": 2,
                    "steps": s,
                },
                children,
            ),
            st.builds(
                lambda bs: {
                    "id": f"s{next(counter)}",
                    "type": "SWITCH",
                    "on": "${workflow.input.k}",
                    "cases": {f"c{i}": b for i, b in enumerate(bs)},
                },
                lists,
            ),
        )

    step = st.recursive(
        leaf(), lambda inner: operator(st.lists(inner, min_size=1, max_size=3)), max_leaves=12
    )
    return st.lists(step, min_size=1, max_size=4)


def _spots(
    steps: list[dict[str, Any]],
    above: tuple[tuple[tuple[str, str], int], ...] = (),
    list_id: tuple[str, str] = ("", "root"),
    maps: tuple[bool, ...] = (False,),
) -> dict[str, Spot]:
    out: dict[str, Spot] = {}
    for i, s in enumerate(steps):
        chain = (*above, (list_id, i))
        out[s["id"]] = Spot(chain, maps)
        lists: list[tuple[str, list[dict[str, Any]], bool]] = []
        if s["type"] == "PARALLEL":
            lists = [(f"b{b}", x, False) for b, x in enumerate(s["branches"])]
        elif s["type"] == "SWITCH":
            lists = [(k, x, False) for k, x in s["cases"].items()]
        elif s["type"] in ("MAP", "DO_WHILE"):
            lists = [("body", s["steps"], s["type"] == "MAP")]
        for key, sub, is_map in lists:
            out.update(_spots(sub, chain, (s["id"], key), (*maps, is_map)))
    return out


def _visible(x: Spot, y: Spot) -> bool:
    """The oracle: X is readable from Y's input when, in the deepest list both are in, X's
    ancestor there comes strictly before Y's, and X is not inside a MAP below that list."""
    k = 0
    while k < min(len(x.chain), len(y.chain)) and x.chain[k] == y.chain[k]:
        k += 1
    if k == min(len(x.chain), len(y.chain)):
        return False  # one contains the other (or they are the same step)
    (x_list, x_index), (y_list, y_index) = x.chain[k], y.chain[k]
    if x_list != y_list:
        return False  # different lists of one operator: sibling branches, other cases
    return x_index < y_index and not any(x.in_map[k + 1 :])


@settings(max_examples=150, deadline=None)
@given(_trees(), st.data())
def test_a_reference_is_accepted_exactly_when_the_step_is_visible(
    steps: list[dict[str, Any]], data: st.DataObject
) -> None:
    spots = _spots(steps)
    leaves = [sid for sid in spots if sid]
    reader = data.draw(st.sampled_from(leaves))
    target = data.draw(st.sampled_from(leaves))
    _set_input(steps, reader, {"v": f"${{{target}.output}}"})
    found = problems({"name": "p", "steps": steps})
    visible = _visible(spots[target], spots[reader]) or _loop_around(
        steps, target, spots[target], spots[reader]
    )
    assert (found == []) == visible, (reader, target, found)


def _loop_around(steps: list[dict[str, Any]], x_id: str, x: Spot, y: Spot) -> bool:
    """Y is inside DO_WHILE X's steps, at any depth (X's output so far)."""
    nested = len(y.chain) > len(x.chain) and y.chain[: len(x.chain)] == x.chain
    return nested and _type_of(steps, x_id) == "DO_WHILE"


def _type_of(steps: list[dict[str, Any]], sid: str) -> str | None:
    for s in steps:
        if s["id"] == sid:
            return str(s["type"])
        for sub in (
            (s.get("branches") or [])
            + [s.get("steps") or []]
            + list((s.get("cases") or {}).values())
        ):
            found = _type_of(sub, sid)
            if found is not None:
                return found
    return None


def _set_input(steps: list[dict[str, Any]], sid: str, value: dict[str, Any]) -> None:
    for s in steps:
        if s["id"] == sid:
            s["input"] = value
            return
        for sub in (
            (s.get("branches") or [])
            + [s.get("steps") or []]
            + list((s.get("cases") or {}).values())
        ):
            _set_input(sub, sid, value)


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=0, max_value=40))
def test_any_nesting_depth_is_accepted_up_to_the_limit(depth: int) -> None:
    assert (problems(_nest(depth)) == []) == (depth <= 32)


# --- a loop's iteration -------------------------------------------------------------------------


def _loop(loop_id: str, steps: list[dict[str, Any]], condition: str = "false") -> dict[str, Any]:
    return {
        "id": loop_id,
        "type": "DO_WHILE",
        "while": condition,
        "maxIterations": 5,
        "steps": steps,
    }


def _at(step_id: str, text: str) -> dict[str, Any]:
    return task(step_id, input={"v": text})


def test_a_loop_s_steps_and_its_while_read_its_iteration_nested_loops_each_their_own() -> None:
    inner = _loop(
        "inner",
        [_at("deep", "${outer.iteration}.${inner.iteration}")],
        condition="inner.iteration < outer.iteration",
    )
    outer = _loop("outer", [_at("top", "${outer.iteration}"), inner], "${outer.iteration}")
    assert problems({"name": "d", "steps": [outer]}) == []


def test_a_loop_s_steps_read_its_output_so_far() -> None:
    # As Conductor's DO_WHILE task output while it runs: the iteration and each iteration's
    # outputs by step id (the engine builds it, docs/architecture.md says how).
    loop = _loop("loop", [_at("x", "${loop.output}"), _at("y", "${loop.output.1.x.v}")])
    assert problems({"name": "d", "steps": [loop]}) == []


def _switch_on_iteration(switch_id: str) -> dict[str, Any]:
    case = {"condition": "loop.iteration > 1", "steps": [task(f"{switch_id}_later")]}
    return {"id": switch_id, "type": "SWITCH", "cases": [case]}


def test_a_switch_condition_inside_a_loop_reads_its_iteration_and_outside_it_cannot() -> None:
    inside = _loop("loop", [_switch_on_iteration("pick")])
    assert problems({"name": "d", "steps": [inside]}) == []
    after = [_loop("loop", [task("x")]), _switch_on_iteration("pick")]
    ((path, message),) = problems({"name": "d", "steps": after})
    assert path == "steps[1].cases[0].condition"
    assert "reads loop.iteration" in message and "outside DO_WHILE 'loop'" in message


@pytest.mark.parametrize(
    ("steps", "path", "said"),
    [
        (  # after the loop
            [_loop("loop", [task("x")]), _at("after", "${loop.iteration}")],
            "steps[1].input.v",
            "outside DO_WHILE 'loop''s steps and while (after the loop, "
            "loop.output.iterations says how many ran)",
        ),
        (  # an outer loop's steps cannot read an inner loop's counter
            [_loop("outer", [_at("top", "${inner.iteration}"), _loop("inner", [task("x")])])],
            "steps[0].steps[0].input.v",
            "outside DO_WHILE 'inner'",
        ),
        (  # not a loop
            [task("a"), _at("b", "${a.iteration}")],
            "steps[1].input.v",
            "step 'a' is a SERVICE_TASK, and only a DO_WHILE has iterations",
        ),
        ([_at("b", "${nope.iteration}")], "steps[0].input.v", "there is no step 'nope'"),
    ],
)
def test_a_loop_iteration_read_where_there_is_none_is_refused_saying_why(
    steps: list[dict[str, Any]], path: str, said: str
) -> None:
    ((where, message),) = problems({"name": "d", "steps": steps})
    assert where == path
    assert said in message, message
