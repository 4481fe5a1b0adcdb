"""conductor-python 2.0.0, unmodified, against ``baton dev``: scripts as conductor-oss's own test
resources write them run with JavaScript's semantics, not a translation's. A ``loopCondition``
comparing a string with a number coerces as JavaScript does (do_while_set_variable_fix.json),
and an INLINE task calls java.util.List methods on its input (do_while_with_decision_task.json),
as Conductor's host-access ``$`` allows."""

from __future__ import annotations

from typing import Any

import pytest
from baton.conductor.views import without_iteration
from conductor.client.orkes_clients import OrkesClients

from tests.conductor.test_conductor_operations import _register, _until_status, clients

pytestmark = [pytest.mark.e2e]
__all__ = ["clients"]  # the module's client fixture


def _outputs(wf: Any, ref: str) -> list[Any]:
    """The outputs of the tasks named ``ref``, or ``ref__<iteration>`` inside a loop."""
    return [t.output_data for t in wf.tasks if without_iteration(t.reference_task_name) == ref]


def test_a_loop_condition_coerces_a_string_as_javascript_does(clients: OrkesClients) -> None:
    name = _register(
        clients,
        [
            {
                "name": "loopTask",
                "taskReferenceName": "loopTask",
                "type": "DO_WHILE",
                "inputParameters": {"value": "${workflow.variables.value}"},
                # "0" > 0 is false in JavaScript; JSONata would refuse to compare the two.
                "loopCondition": "if ($.value > 0) { true; } else { false; } ",
                "loopOver": [
                    {
                        "name": "set_variable",
                        "taskReferenceName": "set_variable",
                        "type": "SET_VARIABLE",
                        "inputParameters": {"value": "0"},
                    }
                ],
            }
        ],
    )
    wid = clients.get_workflow_client().start_workflow_by_name(name, {})
    wf = _until_status(clients, wid, "COMPLETED")
    assert wf.variables == {"value": "0"}
    # One iteration: its task named as Conductor names a loop's tasks, with the iteration.
    assert [t.reference_task_name for t in wf.tasks if t.task_type == "SET_VARIABLE"] == [
        "set_variable__1"
    ]


def test_an_inline_task_calls_java_list_methods_on_its_input(clients: OrkesClients) -> None:
    name = _register(
        clients,
        [
            {
                "name": "LoopTask",
                "taskReferenceName": "LoopTask",
                "type": "DO_WHILE",
                "inputParameters": {"list": "${workflow.input.list}"},
                "loopCondition": "$.LoopTask['iteration'] < $.list.length",
                "loopOver": [
                    {
                        "name": "GetNumberAtIndex",
                        "taskReferenceName": "GetNumberAtIndex",
                        "type": "INLINE",
                        "inputParameters": {
                            "evaluatorType": "javascript",
                            "list": "${workflow.input.list}",
                            "iterator": "${LoopTask.output.iteration}",
                            "expression": "function getElement() { "
                            "return $.list.get($.iterator - 1) * $.list.size(); } getElement();",
                        },
                    }
                ],
            }
        ],
    )
    wid = clients.get_workflow_client().start_workflow_by_name(name, {"list": [5, 7, 9]})
    wf = _until_status(clients, wid, "COMPLETED")
    assert [o["result"] for o in _outputs(wf, "GetNumberAtIndex")] == [15, 21, 27]


def test_later_tasks_read_a_loop_s_output_as_conductor_keeps_it(clients: OrkesClients) -> None:
    # As conductor-oss's scheduler/examples/dowhile-workflow.json reads its poll_loop.
    name = _register(
        clients,
        [
            {
                "name": "poll_loop",
                "taskReferenceName": "poll_loop",
                "type": "DO_WHILE",
                "inputParameters": {"iteration": "${poll_loop.output.iteration}", "keepLastN": 2},
                "loopCondition": "if ($.iteration < 3) { true; } else { false; }",
                "loopOver": [
                    {
                        "name": "sample",
                        "taskReferenceName": "sample",
                        "type": "INLINE",
                        "inputParameters": {
                            "evaluatorType": "javascript",
                            "k": "${poll_loop.output.iteration}",
                            "expression": "({at: $.k * 10})",
                        },
                    }
                ],
            },
            {
                "name": "summarize",
                "taskReferenceName": "summarize",
                "type": "INLINE",
                "inputParameters": {
                    "evaluatorType": "javascript",
                    "last": "${poll_loop.output.3.sample.result.at}",
                    "first": "${poll_loop.output.1}",
                    "total": "${poll_loop.output.iteration}",
                    "expression": "({last: $.last, first: $.first, total: $.total})",
                },
            },
        ],
    )
    wid = clients.get_workflow_client().start_workflow_by_name(name, {})
    wf = _until_status(clients, wid, "COMPLETED")
    # keepLastN 2: the first iteration's outputs are gone, as in Conductor.
    assert _outputs(wf, "summarize")[-1]["result"] == {"last": 30, "first": None, "total": 3}
    assert _outputs(wf, "poll_loop")[-1] == {
        "iteration": 3,
        "2": {"sample": {"result": {"at": 20}}},
        "3": {"sample": {"result": {"at": 30}}},
    }
