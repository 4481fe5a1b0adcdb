"""The script sandbox: JavaScript (QuickJS) and jq run in child processes, bounded in time,
memory, stack and results; a runaway program fails alone and the pool goes on serving."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from baton.scripting import Sandbox, SandboxLimits, ScriptFailed


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    box = Sandbox(SandboxLimits(time_seconds=0.3, grace_seconds=0.3), size=2)
    yield box
    box.close()


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        ("$.a + $.b", 3),
        ("(function () { return {sum: $.a + $.b, list: [$.a, null, 's']}; })();", None),
        ("function e() { if ($.a > 0) { return true; } return false; } e();", True),
        ("undefined", None),
        ("$.nested.x.length", 3),
    ],
)
def test_a_script_gives_its_completion_value_with_dollar_bound_to_the_input(
    sandbox: Sandbox, script: str, expected: object
) -> None:
    value = sandbox.javascript(script, {"a": 1, "b": 2, "nested": {"x": "abc"}})
    if script.startswith("(function"):
        assert value == {"sum": 3, "list": [1, None, "s"]}
    else:
        assert value == expected


def test_integers_come_back_as_integers(sandbox: Sandbox) -> None:
    assert sandbox.javascript("$.n * 2", {"n": 21}) == 42
    assert isinstance(sandbox.javascript("$.n * 2", {"n": 21}), int)


@pytest.mark.parametrize(
    ("script", "kind", "says"),
    [
        ("while (true) {}", "timeout", "out of time"),
        ("var a = []; while (true) { a.push('xxxxxxxxxxxxxxxx' + a.length); }", None, ""),
        ("function f() { return f() + 1; } f();", "stack", "call stack"),
        ("throw new Error('no such order')", "script", "no such order"),
        ("return (", "syntax", "SyntaxError"),
        ("Java.type('java.lang.System')", "script", "Java"),
    ],
)
def test_a_hostile_script_fails_with_a_reason_and_the_sandbox_serves_on(
    sandbox: Sandbox, script: str, kind: str | None, says: str
) -> None:
    with pytest.raises(ScriptFailed) as failed:
        sandbox.javascript(script, {})
    if kind is None:  # memory: QuickJS's heap limit, or the time limit, whichever comes first
        assert failed.value.kind in ("memory", "timeout")
    else:
        assert failed.value.kind == kind
        assert says in failed.value.detail
    assert sandbox.javascript("$.ok", {"ok": "still serving"}) == "still serving"


def test_jq_gives_every_result(sandbox: Sandbox) -> None:
    assert sandbox.jq(
        ".items | map(.price * .qty) | add",
        {"items": [{"price": 2, "qty": 3}, {"price": 1, "qty": 4}]},
    ) == [10]
    assert sandbox.jq(".[]", [1, "a", None]) == [1, "a", None]
    assert sandbox.jq("empty", {}) == []


@pytest.mark.parametrize(
    ("program", "kind"),
    [
        ("def f: f; f", "timeout"),
        ("[range(1e12)]", None),
        ("range(1e12)", "results"),
        ('error("bad row")', "script"),
        (".[", "syntax"),
        (".a.b", "script"),
    ],
)
def test_a_hostile_jq_program_fails_with_a_reason(
    sandbox: Sandbox, program: str, kind: str | None
) -> None:
    with pytest.raises(ScriptFailed) as failed:
        sandbox.jq(program, {"a": 1})
    if kind is None:
        assert failed.value.kind in ("memory", "timeout", "crashed")
    else:
        assert failed.value.kind == kind
    assert sandbox.jq(".a", {"a": 5}) == [5]


def test_a_result_past_the_output_cap_is_refused() -> None:
    box = Sandbox(SandboxLimits(max_output_bytes=1000), size=1)
    try:
        with pytest.raises(ScriptFailed) as failed:
            box.javascript("'x'.repeat(5000)", {})
        assert failed.value.kind == "output"
    finally:
        box.close()


def test_a_child_is_ready_with_both_interpreters_loaded_before_its_first_program() -> None:
    """A program's time limit is the program's alone: a cold child's imports of QuickJS and jq
    (slow on a loaded machine, or in a Lambda's cold start) happen before its ready frame,
    under the start deadline, not inside the first script's second."""
    box = Sandbox(size=1)
    try:
        child = box._take()
        try:
            maps = Path(f"/proc/{child.process.pid}/maps").read_text()
        finally:
            box._give_back(child)
        assert "_quickjs" in maps
        assert "jq.cpython" in maps
    finally:
        box.close()


def test_concurrent_calls_share_the_pool_and_a_runaway_stays_alone(sandbox: Sandbox) -> None:
    def call(i: int) -> object:
        if i == 3:
            try:
                return sandbox.javascript("while (true) {}", {})
            except ScriptFailed as e:
                return e.kind
        return sandbox.javascript("$.i * 10", {"i": i})

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(call, range(16)))
    assert results == [("timeout" if i == 3 else i * 10) for i in range(16)]


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        # Conductor binds $ to a Java Map: scripts written for it call List and Map methods.
        ("$.list.get($.list.size() - 1)", 3),
        ("function getElement() { return $.list.get($.i - 1); } getElement();", 2),
        ("$.map.get('a') + $.map.getOrDefault('zz', 10)", 11),
        ("$.map.get('zz')", None),
        (
            "[$.map.containsKey('a'), $.map.containsKey('zz'), $.list.contains(2)]",
            [True, False, True],
        ),
        (
            "[$.map.keySet(), $.map.values(), $.map.isEmpty(), $.list.isEmpty()]",
            [["a", "size"], [1, 7], False, False],
        ),
        (
            "$.map.entrySet().map(function (e) { return e.getKey() + '=' + e.getValue(); })",
            ["a=1", "size=7"],
        ),
        ("$.list.add(4); $.list.size()", 4),
        # A key with a method's name is still that key; JSON and enumeration see no methods.
        ("$.map.size", 7),
        ("[JSON.stringify($.map), Object.keys($.list).length]", ['{"a":1,"size":7}', 3]),
        (
            "(function () { var k = []; for (var n in $.map) k.push(n); return k; })()",
            ["a", "size"],
        ),
        # The script's own objects stay plain: a descriptor does not inherit a `get`.
        ("Object.defineProperty({}, 'x', {value: 1}).x + [].length", 1),
    ],
)
def test_the_input_has_the_java_collection_methods_conductor_scripts_call(
    sandbox: Sandbox, script: str, expected: object
) -> None:
    assert (
        sandbox.javascript(script, {"list": [1, 2, 3], "map": {"a": 1, "size": 7}, "i": 2})
        == expected
    )


def test_a_java_style_index_past_the_end_fails_the_script_as_in_conductor(sandbox: Sandbox) -> None:
    with pytest.raises(ScriptFailed, match="out of bounds for length 3"):
        sandbox.javascript("$.list.get(3)", {"list": [1, 2, 3]})
