"""conductor-python 2.0.0, unmodified, against ``baton dev``: a FORK_JOIN_DYNAMIC over a task
list chosen at run time (four forks: three worker tasks of two types and a sub-workflow, each
handed its own input, the JOIN's output keyed by their reference names) and a DYNAMIC task
whose type an earlier task names."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
from conductor.client.http.api_client import ApiClient
from conductor.client.orkes_clients import OrkesClients

from tests.conductor.test_conductor_operations import (
    _done,
    _poll,
    _register,
    _simple,
    _until_status,
    clients,
)
from tests.support.servers import LocalServer

pytestmark = [pytest.mark.e2e]
__all__ = ["clients"]  # the module's client fixture


def _register_named(clients: OrkesClients, name: str, tasks: list[dict[str, Any]]) -> None:
    wd = ApiClient().deserialize_class({"name": name, "version": 1, "tasks": tasks}, "WorkflowDef")
    clients.get_metadata_client().register_workflow_def(wd, overwrite=True)


def _definition(prep: str) -> list[dict[str, Any]]:
    return [
        _simple("prep", prep),
        {
            "name": "fan",
            "taskReferenceName": "fan",
            "type": "FORK_JOIN_DYNAMIC",
            "inputParameters": {
                "dynamicTasks": "${prep.output.dynamicTasks}",
                "dynamicTasksInput": "${prep.output.dynamicTasksInput}",
            },
            "dynamicForkTasksParam": "dynamicTasks",
            "dynamicForkTasksInputParamName": "dynamicTasksInput",
        },
        {"name": "fan_join", "taskReferenceName": "fan_join", "type": "JOIN"},
        {
            "name": "dynamic_step",
            "taskReferenceName": "pick",
            "type": "DYNAMIC",
            "dynamicTaskNameParam": "taskToExecute",
            "inputParameters": {
                "taskToExecute": "${prep.output.next}",
                "resized": "${fan_join.output.r1.w}",
            },
        },
    ]


def test_a_dynamic_fork_of_four_tasks_and_a_dynamic_task(
    clients: OrkesClients, conductor_server: LocalServer
) -> None:
    tag = uuid.uuid4().hex[:6]
    prep, resize, notify, last = (f"{k}_{tag}" for k in ("prep", "resize", "notify", "last"))
    child = f"child_{tag}"
    # A sub-workflow among the forks: it scales its input in an INLINE task.
    _register_named(
        clients,
        child,
        [
            {
                "name": "scale",
                "taskReferenceName": "scale",
                "type": "INLINE",
                "inputParameters": {
                    "evaluatorType": "javascript",
                    "expression": "$.w * 100",
                    "w": "${workflow.input.w}",
                },
            }
        ],
    )
    tasks = _definition(prep)
    name = _register(
        clients,
        tasks,
        outputParameters={"joined": "${fan_join.output}", "picked": "${pick.output}"},
    )
    wid = clients.get_workflow_client().start_workflow_by_name(name, {})
    forks = [
        {"name": resize, "taskReferenceName": "r1", "type": "SIMPLE"},
        {"name": notify, "taskReferenceName": "n1", "type": "SIMPLE"},
        {"name": notify, "taskReferenceName": "n2"},  # no type: SIMPLE, as in Conductor
        {
            "name": child,
            "taskReferenceName": "s1",
            "type": "SUB_WORKFLOW",
            "subWorkflowParam": {"name": child, "version": 1},
        },
    ]
    inputs = {"r1": {"w": 1}, "n1": {"to": "ann"}, "n2": {"to": "bob"}, "s1": {"w": 3}}
    _done(
        clients,
        _poll(clients, prep),
        output={"dynamicTasks": forks, "dynamicTasksInput": inputs, "next": last},
    )
    handed: list[dict[str, Any]] = []
    for task_type in (resize, notify, notify):
        task = _poll(clients, task_type)
        handed.append(task.input_data)
        out = {"w": task.input_data["w"] * 10} if "w" in task.input_data else {"sent": True}
        _done(clients, task, output=out)
    # Each forked task is handed its whole input, as Conductor hands it to the worker.
    assert sorted(handed, key=str) == sorted([inputs[k] for k in ("r1", "n1", "n2")], key=str)
    task = _poll(clients, last)
    assert task.input_data == {"taskToExecute": last, "resized": 10}
    assert task.task_def_name == last
    _done(clients, task, output={"picked": last})
    wf = _until_status(clients, wid, "COMPLETED")
    assert wf.output == {
        "joined": {
            "r1": {"w": 10},
            "n1": {"sent": True},
            "n2": {"sent": True},
            "s1": {"result": 300},
        },
        "picked": {"picked": last},
    }
    # The workflow shows each forked task by its reference name, the DYNAMIC by its resolved type.
    refs = {t.reference_task_name: t for t in wf.tasks}
    assert {k: refs[k].task_def_name for k in ("r1", "n1", "n2", "pick")} == {
        "r1": resize,
        "n1": notify,
        "n2": notify,
        "pick": last,
    }
    assert refs["s1"].task_type == "SUB_WORKFLOW" and refs["s1"].sub_workflow_id
    assert "SWITCH" not in {t.task_type for t in wf.tasks}  # the choice by type is no task
    # The definition reads back exactly as registered.
    shown = httpx.get(
        f"{conductor_server.base_url}/api/metadata/workflow/{name}",
        headers={"x-api-key": conductor_server.api_key or ""},
        timeout=10,
    ).json()
    assert shown["tasks"] == tasks


def test_a_dynamic_fork_over_no_tasks_joins_with_an_empty_object(clients: OrkesClients) -> None:
    prep = f"prep_{uuid.uuid4().hex[:6]}"
    name = _register(clients, _definition(prep)[:3], outputParameters={"j": "${fan_join.output}"})
    wid = clients.get_workflow_client().start_workflow_by_name(name, {})
    _done(clients, _poll(clients, prep), output={"dynamicTasks": [], "dynamicTasksInput": {}})
    assert _until_status(clients, wid, "COMPLETED").output == {"j": {}}
