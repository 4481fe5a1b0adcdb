"""conductor-python 2.0.0, unmodified, against ``baton dev``: a definition whose ``${…}`` read
a task's output with Jayway's JSONPath (a wildcard, a filter, a recursive descent, a negative
index, a key union) registers, reads back as sent and runs to what Conductor gives."""

from __future__ import annotations

from typing import Any

import pytest
from conductor.client.orkes_clients import OrkesClients

from tests.conductor.test_conductor_client import _wait_terminal
from tests.conductor.test_conductor_system_tasks import _register, _start

pytestmark = [pytest.mark.e2e]

ITEMS = [
    {"id": "a", "price": 5, "status": "OK"},
    {"id": "b", "price": 15, "status": "LATE", "extra": {"status": "DEEP"}},
    {"id": "c", "price": 25, "status": "OK"},
]


def test_a_wildcard_and_a_filter_read_a_task_s_output(clients: OrkesClients, prefix: str) -> None:
    definition: dict[str, Any] = {
        "name": f"{prefix}_jsonpath",
        "version": 1,
        "tasks": [
            {
                "name": "make",
                "taskReferenceName": "make",
                "type": "INLINE",
                "inputParameters": {
                    "evaluatorType": "graaljs",
                    "expression": "(function () { return {items: $.items}; })()",
                    "items": "${workflow.input.items}",
                },
            },
            {
                "name": "read",
                "taskReferenceName": "read",
                "type": "INLINE",
                "inputParameters": {
                    "evaluatorType": "graaljs",
                    "expression": "(function () { return $.ids.length; })()",
                    "ids": "${make.output.result.items[*].id}",
                    "dear": "${make.output.result.items[?(@.price > 10)].id}",
                },
            },
        ],
        "outputParameters": {
            "ids": "${make.output.result.items[*].id}",
            "dear": "${make.output.result.items[?(@.price > 10 && @.status == 'OK')].id}",
            "statuses": "${make.output..status}",
            "last": "${make.output.result.items[-1].id}",
            "firstTwo": "${make.output.result.items[:2].id}",
            "picked": "${make.output.result.items[0]['id','price']}",
            "none": "${make.output.result.items[?(@.price > 100)].id}",
            "text": "ids ${make.output.result.items[*].id}",
            "count": "${read.output.result}",
        },
    }
    _register(clients, definition)
    back = clients.get_metadata_client().get_workflow_def(definition["name"], version=1)
    assert back.output_parameters == definition["outputParameters"]
    assert back.tasks[1].input_parameters == definition["tasks"][1]["inputParameters"]
    wid = _start(clients, definition["name"], items=ITEMS)
    wf = _wait_terminal(clients, [wid])[wid]
    assert wf.status == "COMPLETED", wf.reason_for_incompletion
    assert wf.output == {
        "ids": ["a", "b", "c"],
        "dear": ["c"],
        "statuses": ["OK", "LATE", "DEEP", "OK"],
        "last": "c",
        "firstTwo": ["a", "b"],
        "picked": {"id": "a", "price": 5},
        "none": [],
        "text": 'ids ["a","b","c"]',
        "count": 3,
    }
    read = next(t for t in wf.tasks if t.reference_task_name == "read")
    assert read.input_data["ids"] == ["a", "b", "c"]
    assert read.input_data["dear"] == ["b", "c"]
