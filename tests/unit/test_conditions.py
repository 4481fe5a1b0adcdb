"""Bounds on a JSONata condition's evaluation: depth, and the CPU time it spends (not the wall
clock, which a busy machine or a stepped clock moves without the expression doing anything)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from baton import conditions
from baton.conditions import ConditionError, compile_condition


def test_a_condition_reads_the_context() -> None:
    cond = compile_condition("check.output.more = true and workflow.input.n > 2")
    assert cond.evaluate({"check": {"output": {"more": True}}, "workflow": {"input": {"n": 3}}})


def test_runaway_recursion_fails_on_depth() -> None:
    cond = compile_condition("($f := function($n) { 1 + $f($n + 1) }; $f(0))")
    with pytest.raises(ConditionError, match="Stack overflow"):
        cond.evaluate({})


def test_a_long_loop_fails_on_cpu_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(conditions, "EVAL_TIMEOUT_MS", 100)
    cond = compile_condition("($f := function($n) { $n > 0 ? $f($n - 1) : 0 }; $f(100000000))")
    started = time.monotonic()
    with pytest.raises(ConditionError, match="timeout after 100 milliseconds"):
        cond.evaluate({})
    assert time.monotonic() - started < 10


def test_wall_clock_that_jumps_does_not_fail_a_cheap_condition(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = time.time
    calls = {"n": 0}

    def stepped() -> float:  # the clock jumps an hour ahead once evaluation has begun
        calls["n"] += 1
        return real() + (3600 if calls["n"] > 1 else 0)

    cond = compile_condition("$count(items[v > 1]) = 2")
    monkeypatch.setattr(time, "time", stepped)
    context: dict[str, Any] = {"items": [{"v": 1}, {"v": 2}, {"v": 3}]}
    assert cond.evaluate(context) is True
