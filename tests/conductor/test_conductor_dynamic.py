"""conductor-python 2.0.0, unmodified, against ``baton dev``: a FORK_JOIN_DYNAMIC over a task
list chosen at run time (five forks: three worker tasks of two types, a sub-workflow by name and
one given inline, each handed its own input, the JOIN's output keyed by their reference names)
and a DYNAMIC task whose type an earlier task names; a sub-workflow whose WorkflowDef the input
gives."""

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
    _status,
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
        {
            # A sub-workflow given inline in the list: its WorkflowDef runs (no such name).
            "name": f"inline_{tag}",
            "taskReferenceName": "s2",
            "type": "SUB_WORKFLOW",
            "subWorkflowParam": {
                "name": f"inline_{tag}",
                "workflowDefinition": {
                    "name": f"inline_{tag}",
                    "tasks": [
                        {
                            "name": "seven",
                            "taskReferenceName": "seven",
                            "type": "INLINE",
                            "inputParameters": {
                                "evaluatorType": "javascript",
                                "expression": "$.w * 7",
                                "w": "${workflow.input.w}",
                            },
                        }
                    ],
                },
            },
        },
    ]
    inputs = {
        "r1": {"w": 1},
        "n1": {"to": "ann"},
        "n2": {"to": "bob"},
        "s1": {"w": 3},
        "s2": {"w": 2},
    }
    _done(
        clients,
        _poll(clients, prep),
        output={"dynamicTasks": forks, "dynamicTasksInput": inputs, "next": last},
    )
    handed: list[dict[str, Any]] = []
    polled_refs: dict[str, str] = {}
    for task_type in (resize, notify, notify):
        task = _poll(clients, task_type)
        handed.append(task.input_data)
        polled_refs[task.reference_task_name] = task.task_def_name
        out = {"w": task.input_data["w"] * 10} if "w" in task.input_data else {"sent": True}
        _done(clients, task, output=out)
    # Each forked task is handed its whole input, as Conductor hands it to the worker.
    assert sorted(handed, key=str) == sorted([inputs[k] for k in ("r1", "n1", "n2")], key=str)
    # The poll names each forked task by its own reference, as the workflow view does.
    assert polled_refs == {"r1": resize, "n1": notify, "n2": notify}
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
            "s2": {"result": 14},
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
    assert refs["s2"].task_type == "SUB_WORKFLOW" and refs["s2"].sub_workflow_id
    assert "SWITCH" not in {t.task_type for t in wf.tasks}  # the choice by type is no task
    # The FORK ended as it started; its JOIN, as Conductor shows it, joined the forked tasks.
    assert (refs["fan"].task_type, refs["fan"].status) == ("FORK_JOIN_DYNAMIC", "COMPLETED")
    join = refs["fan_join"]
    assert (join.task_type, join.task_def_name, join.status) == ("JOIN", "JOIN", "COMPLETED")
    assert join.input_data == {"joinOn": ["r1", "n1", "n2", "s1", "s2"]}
    assert join.output_data == wf.output["joined"]
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


def test_a_sub_workflow_whose_definition_the_input_gives_runs_it_and_a_bad_one_fails_it(
    clients: OrkesClients, conductor_server: LocalServer
) -> None:
    """``subWorkflowParam.workflowDefinition`` as ``${…}``: Conductor resolves it when the task
    starts and runs that WorkflowDef; so does Baton (registered in Conductor's export form, it
    reads back as sent). A document that is no definition fails the task saying why."""
    tag = uuid.uuid4().hex[:6]
    name, work = f"rt_{tag}", f"work_{tag}"
    sub = {
        "name": "sub",
        "taskReferenceName": "sub",
        "type": "SUB_WORKFLOW",
        "inputParameters": {"w": "${workflow.input.w}"},
        "subWorkflowParam": {"name": "ignored", "workflowDefinition": "${workflow.input.def}"},
        "optional": False,
        "startDelay": 0,
        "asyncComplete": False,
        "permissive": False,
        "decisionCases": {},
        "defaultCase": [],
        "forkTasks": [],
        "joinOn": [],
        "loopOver": [],
    }
    sent = {
        "name": name,
        "version": 1,
        "schemaVersion": 2,
        "tasks": [sub],
        "outputParameters": {"child": "${sub.output}"},
        "timeoutSeconds": 0,
    }
    r = conductor_server.request("POST", "/api/metadata/workflow", json=sent)
    assert r.status_code == 200, r.text
    assert conductor_server.request("GET", f"/api/metadata/workflow/{name}").json() == sent
    child = {
        "name": f"child_{tag}",
        "version": 1,
        "tasks": [
            _simple("work", work, inputParameters={"w": "${workflow.input.w}"}),
            {
                "name": "scale",
                "taskReferenceName": "scale",
                "type": "INLINE",
                "inputParameters": {
                    "evaluatorType": "javascript",
                    "expression": "$.v * 100",
                    "v": "${work.output.v}",
                },
            },
        ],
        "outputParameters": {"scaled": "${scale.output.result}"},
    }
    wc = clients.get_workflow_client()
    wid = wc.start_workflow_by_name(name, {"def": child, "w": 3})
    task = _poll(clients, work)
    assert task.input_data == {"w": 3}
    _done(clients, task, output={"v": task.input_data["w"] + 1})
    wf = _until_status(clients, wid, "COMPLETED")
    assert wf.output == {"child": {"scaled": 400}}
    (shown,) = wf.tasks
    assert shown.task_type == "SUB_WORKFLOW" and shown.sub_workflow_id
    assert _until_status(clients, shown.sub_workflow_id, "COMPLETED").workflow_name == child["name"]

    broken = {**child, "tasks": [{"name": "x", "taskReferenceName": "x", "type": "NO_SUCH"}]}
    bad = wc.start_workflow_by_name(name, {"def": broken, "w": 1})
    failed = _until_status(clients, bad, "FAILED")
    assert "${workflow.input.def} gave no conductor definition Baton can run" in (
        failed.reason_for_incompletion
    )
    assert "NO_SUCH" in failed.tasks[0].reason_for_incompletion


def test_an_optional_task_of_a_dynamic_fork_fails_and_the_fork_goes_on(
    clients: OrkesClients,
) -> None:
    """conductor-oss's e2e DynamicForkTests.testTaskDynamicForkOptional: a forked task marked
    optional in the task list fails, and the JOIN and the workflow go on (a required one's
    failure fails the workflow at once, which cancels its JOIN, as Conductor's decider
    terminates it before the JOIN is evaluated)."""
    tag = uuid.uuid4().hex[:6]
    prep, work = f"prep_{tag}", f"work_{tag}"
    name = _register(clients, _definition(prep)[:3], outputParameters={"j": "${fan_join.output}"})
    for optional, ends in ((True, "COMPLETED"), (False, "FAILED")):
        wid = clients.get_workflow_client().start_workflow_by_name(name, {})
        forks = [
            {"name": work, "taskReferenceName": "xdt1", "type": "SIMPLE"},
            {"name": work, "taskReferenceName": "xdt2", "optional": optional},
        ]
        inputs = {"xdt1": {"k1": "v1"}, "xdt2": {"k2": "v2"}}
        _done(
            clients,
            _poll(clients, prep),
            output={"dynamicTasks": forks, "dynamicTasksInput": inputs},
        )
        # Conductor's order (its e2e test reads them by position): the forked tasks, then
        # the JOIN waiting for them.
        shown = [(t.reference_task_name, t.status) for t in _status(clients, wid).tasks]
        assert shown == [
            ("prep", "COMPLETED"),
            ("fan", "COMPLETED"),
            ("xdt1", "SCHEDULED"),
            ("xdt2", "SCHEDULED"),
            ("fan_join", "IN_PROGRESS"),
        ]
        for _ in forks:
            task = _poll(clients, work)
            if task.reference_task_name == "xdt2":
                _done(clients, task, "FAILED_WITH_TERMINAL_ERROR", reason_for_incompletion="no")
            else:
                _done(clients, task, output={"done": 1})
        wf = _until_status(clients, wid, ends)
        refs = {t.reference_task_name: t for t in wf.tasks}
        if optional:
            assert refs["xdt2"].status == "COMPLETED_WITH_ERRORS"
            # Conductor's JOIN over a failed optional task (Join.execute, since 3.9).
            assert refs["fan_join"].status == "COMPLETED_WITH_ERRORS"
            assert refs["fan_join"].reason_for_incompletion == (
                f"{work}/{refs['xdt2'].task_id} completed with errors"
            )
            # Its JOIN holds the output xdt2's worker gave failing it, as Conductor's holds
            # every forked task's output.
            assert wf.output == {"j": {"xdt1": {"done": 1}, "xdt2": {"ok": True}}}
        else:
            assert refs["xdt2"].status == "FAILED_WITH_TERMINAL_ERROR"
            assert refs["fan_join"].status == "CANCELED"
            assert not refs["fan_join"].reason_for_incompletion


def test_a_permissive_task_of_a_dynamic_fork_lets_the_others_finish_then_fails_the_join(
    clients: OrkesClients,
) -> None:
    """A forked task marked permissive in the task list fails first: the other forked task still
    runs to its end (Conductor's JOIN waits for every task before failing on a permissive one),
    then the JOIN and the workflow fail; a required task failing first fails them at once."""
    tag = uuid.uuid4().hex[:6]
    prep, work, slow = f"prep_{tag}", f"work_{tag}", f"slow_{tag}"
    name = _register(clients, _definition(prep)[:3])
    wid = clients.get_workflow_client().start_workflow_by_name(name, {})
    forks = [
        {"name": work, "taskReferenceName": "p1", "type": "SIMPLE", "permissive": True},
        {"name": slow, "taskReferenceName": "s1", "type": "SIMPLE"},
    ]
    _done(clients, _poll(clients, prep), output={"dynamicTasks": forks, "dynamicTasksInput": {}})
    _done(clients, _poll(clients, work), "FAILED_WITH_TERMINAL_ERROR", reason_for_incompletion="no")
    later = _poll(clients, slow)  # still handed out: the permissive failure waits for it
    assert _status(clients, wid).status == "RUNNING"
    _done(clients, later, output={"slow": True})
    wf = _until_status(clients, wid, "FAILED")
    refs = {t.reference_task_name: t for t in wf.tasks}
    assert refs["s1"].status == "COMPLETED"
    assert refs["p1"].status == "FAILED_WITH_TERMINAL_ERROR"
    assert refs["fan_join"].status == "FAILED"
    assert refs["fan_join"].reason_for_incompletion == "no"


@pytest.mark.parametrize(
    ("tasks", "inputs", "said"),
    [
        # conductor-oss's e2e DynamicForkTests.testTaskDynamicForkNullTaskReferenceName
        ([{"type": "SUB_WORKFLOW", "subWorkflowParam": {"name": "http"}}], {}, "gave None"),
        ([{"name": "x", "taskReferenceName": "a"}], "no map", "not an object"),
        ("no list", {}, "not a list"),
        ([{"name": "x", "taskReferenceName": "a"}] * 2, {}, "gave 'a' twice"),
    ],
)
def test_a_dynamic_fork_given_a_bad_task_list_fails_before_forking(
    clients: OrkesClients, tasks: Any, inputs: Any, said: str
) -> None:
    """The workflow fails, and shows no FORK or JOIN task, as Conductor's mapper refuses such a
    fork before scheduling either."""
    prep = f"dyn_{uuid.uuid4().hex[:6]}"
    name = _register(clients, _definition(prep)[:3])
    wid = clients.get_workflow_client().start_workflow_by_name(name, {})
    _done(
        clients, _poll(clients, prep), output={"dynamicTasks": tasks, "dynamicTasksInput": inputs}
    )
    wf = _until_status(clients, wid, "FAILED")
    assert [(t.reference_task_name, t.status) for t in wf.tasks] == [("prep", "COMPLETED")]
    assert not wf.failed_reference_task_names
    assert wf.reason_for_incompletion.startswith("step 'fan' failed: ")
    assert said in wf.reason_for_incompletion
