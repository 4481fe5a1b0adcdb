"""Registration refuses system steps it could not run, naming the field (422 problems)."""

from __future__ import annotations

from typing import Any

import pytest
from baton.definitions import parse_definition
from baton.errors import ValidationFailed


@pytest.mark.parametrize(
    ("step", "path", "says"),
    [
        (
            {"type": "HTTP_POLL", "request": {"uri": "http://x"}, "terminationCondition": "((("},
            "steps[0].terminationCondition",
            "does not parse",
        ),
        (
            {
                "type": "HTTP_POLL",
                "request": {"uri": "http://x"},
                "terminationCondition": "true",
                "pollingIntervalSeconds": 0,
            },
            "steps[0].pollingIntervalSeconds",
            "at least 1",
        ),
        (
            {"type": "START_WORKFLOW", "request": {"input": {}}},
            "steps[0].request",
            "names the definition to start",
        ),
        (
            {"type": "START_WORKFLOW", "request": {"name": "a", "definitionName": "a"}},
            "steps[0].request",
            "name or definitionName",
        ),
        (
            {"type": "START_WORKFLOW", "request": "workflow.input.x"},
            "steps[0].request",
            "request is an object, or one ${…} expression giving one",
        ),
        ({"type": "EXCLUSIVE_JOIN", "joinOn": []}, "steps[0].joinOn", ""),
        ({"type": "EXCLUSIVE_JOIN", "joinOn": ["later"]}, "steps[0].joinOn[0]", "later"),
        ({"type": "TERMINATE", "status": "TERMINATED"}, "steps[0].status", ""),
    ],
)
def test_a_system_step_it_could_not_run_is_refused_naming_the_field(
    step: dict[str, Any], path: str, says: str
) -> None:
    steps = [{"id": "s", **step}, {"id": "later", "type": "NOOP"}]
    with pytest.raises(ValidationFailed) as e:
        parse_definition({"name": "x", "steps": steps})
    assert [p.path for p in e.value.problems] == [path], e.value.problems
    assert says in e.value.problems[0].message
