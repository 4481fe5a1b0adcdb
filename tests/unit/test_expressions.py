from __future__ import annotations

from typing import Any

import pytest
from baton import expressions as ex
from hypothesis import given
from hypothesis import strategies as st

json_leaf = st.none() | st.booleans() | st.integers() | st.text(max_size=8)
json_value = st.recursive(
    json_leaf,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=10,
)
keys = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True)


def scope(
    inp: Any = None, variables: Any = None, outputs: dict[str, Any] | None = None
) -> ex.Scope:
    outs = outputs or {}
    return ex.Scope(
        workflow={"input": inp or {}, "variables": variables or {}, "instanceId": "i-1"},
        step_output=outs.get,
    )


@given(key=keys, value=json_value)
def test_a_whole_string_expression_returns_the_value_itself(key: str, value: Any) -> None:
    s = scope(inp={key: value})
    assert ex.resolve(f"${{workflow.input.{key}}}", s) == value


@given(path=st.lists(keys, min_size=1, max_size=4), value=json_value)
def test_nested_paths_walk_objects(path: list[str], value: Any) -> None:
    nested: Any = value
    for k in reversed(path):
        nested = {k: nested}
    s = scope(outputs={"step1": nested})
    assert ex.resolve("${step1.output." + ".".join(path) + "}", s) == value


@given(template=json_value)
def test_templates_without_expressions_are_unchanged(template: Any) -> None:
    if ex.has_expressions(template):
        return
    assert ex.resolve(template, scope()) == template


def test_interpolation_indexes_and_missing_values() -> None:
    s = scope(inp={"n": 3, "items": [{"sku": "a"}, {"sku": "b"}]}, variables={"v": {"x": 1}})
    assert ex.resolve("n=${workflow.input.n}", s) == "n=3"
    assert ex.resolve("${workflow.input.items[1].sku}", s) == "b"
    assert ex.resolve("v=${workflow.variables.v}", s) == 'v={"x":1}'
    assert ex.resolve("${workflow.input.items[9].sku}", s) is None
    assert ex.resolve("${workflow.input.nope}", s) is None
    assert ex.resolve("$${literal}", s) == "${literal}"
    assert ex.resolve({"a": ["${workflow.instanceId}"]}, s) == {"a": ["i-1"]}


@pytest.mark.parametrize(
    "text", ["", "workflow", "workflow.secret", "step1", "step1.input", "a..b", "-abc.output"]
)
def test_malformed_expressions_are_refused(text: str) -> None:
    with pytest.raises(ex.ExpressionError):
        ex.parse(text)


def test_references_are_listed_with_their_json_paths() -> None:
    refs = list(ex.references({"a": ["x ${s.output.y}", {"b": "${workflow.input}"}]}))
    assert refs == [(".a[0]", "s.output.y"), (".a[1].b", "workflow.input")]


def test_only_the_template_text_is_unescaped_never_a_substituted_value() -> None:
    scope = ex.Scope(
        workflow={"input": {"code": "keep $${this} and ${that}"}}, step_output=lambda _s: None
    )
    template = "literal $${x}: ${workflow.input.code}"
    assert ex.resolve(template, scope) == "literal ${x}: keep $${this} and ${that}"
    assert ex.resolve({"k": "$${alone}"}, scope) == {"k": "${alone}"}


def test_a_loop_iteration_reference_parses_and_reads_the_scope_s_loops() -> None:
    ref = ex.parse("loop.iteration")
    assert (ref.loop_id, ref.step_id) == ("loop", None)
    assert (ex.parse("loop.output.iteration").step_id, ex.parse("loop.output").loop_id) == (
        "loop",
        None,
    )
    s = ex.Scope(workflow={}, step_output=lambda _sid: None, loops={"outer": 2, "inner": 5})
    assert ex.resolve({"o": "${outer.iteration}", "i": "${inner.iteration}"}, s) == {
        "o": 2,
        "i": 5,
    }
    assert ex.resolve("round ${outer.iteration}.${inner.iteration}", s) == "round 2.5"
    assert ex.resolve("${elsewhere.iteration}", s) is None


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("loop.iteration.n", "a loop's iteration is a number"),
        ("loop.iteration[0]", "a loop's iteration is a number"),
        ("loop.iterations", "'<loopId>.iteration'"),
        ("loop", "'<loopId>.iteration'"),
    ],
)
def test_a_malformed_loop_iteration_reference_is_refused(text: str, said: str) -> None:
    with pytest.raises(ex.ExpressionError, match=said):
        ex.parse(text)


def test_jsonpath_functions_at_a_paths_end_as_conductors_jayway() -> None:
    scope = ex.Scope(
        workflow={"input": {"l": [1, 2, 3.5, "x", True], "o": {"a": 1, "b": 2}, "s": "abc"}},
        step_output=lambda _sid: {"body": [4, 6]},
    )
    cases = {
        "${workflow.input.l.length()}": 5,
        "${workflow.input.o.size()}": 2,
        "${workflow.input.o.keys()}": ["a", "b"],
        "${workflow.input.l.sum()}": 6.5,
        "${workflow.input.l.min()}": 1.0,
        "${workflow.input.l.max()}": 3.5,
        "${workflow.input.l.avg()}": 6.5 / 3,
        "${workflow.input.s.length()}": None,
        "${workflow.input.o.sum()}": None,
        "${workflow.input.missing.max()}": None,
        "${step.output.body.stddev()}": 1.0,
        "${step.output.body.sum()}": 10.0,
        "n=${workflow.input.l.length()}": "n=5",
    }
    for template, value in cases.items():
        assert ex.resolve(template, scope) == value, template
    assert ex.parse("workflow.input.l.length()").function == "length"
    for bad in ("workflow.input.l.length(1)", "workflow.input.l.nope()", "x.iteration.length()"):
        with pytest.raises(ex.ExpressionError):
            ex.parse(bad)
