"""conductor-python 2.0.0, unmodified, against ``baton dev``: Conductor definitions that run
JavaScript and jq (INLINE, JSON_JQ_TRANSFORM, a javascript SWITCH, a DO_WHILE with a function
``loopCondition``), and hostile scripts (an endless loop, unbounded allocation, a throw, a jq
filter that never ends) each failing its task with a reason while the server serves on."""

from __future__ import annotations

import subprocess
from typing import Any

import httpx
import pytest
from conductor.client.http.models.start_workflow_request import StartWorkflowRequest
from conductor.client.orkes_clients import OrkesClients

from tests.conductor.test_conductor_client import _model, _wait_terminal
from tests.support.servers import LocalServer

pytestmark = [pytest.mark.e2e]


def _scripted(prefix: str) -> dict[str, Any]:
    def greet(ref: str, who: str) -> dict[str, Any]:
        return {
            "name": f"{prefix}_greet",
            "taskReferenceName": ref,
            "type": "SIMPLE",
            "inputParameters": {"name": who},
        }

    return {
        "name": f"{prefix}_scripted",
        "version": 1,
        "tasks": [
            {
                "name": "total",
                "taskReferenceName": "total",
                "type": "INLINE",
                "inputParameters": {
                    "evaluatorType": "graaljs",
                    "expression": (
                        "(function () { var t = 0; for (var i of $.items) t += i.price * i.qty;"
                        " return {total: t, count: $.items.length}; })()"
                    ),
                    "items": "${workflow.input.items}",
                },
            },
            {
                "name": "names",
                "taskReferenceName": "names",
                "type": "JSON_JQ_TRANSFORM",
                "inputParameters": {
                    "queryExpression": ".items[] | .name | ascii_upcase",
                    "items": "${workflow.input.items}",
                },
            },
            {
                "name": "tier",
                "taskReferenceName": "tier",
                "type": "SWITCH",
                "evaluatorType": "javascript",
                "expression": "$.total >= 100 ? 'gold' : 'basic'",
                "inputParameters": {"total": "${total.output.result.total}"},
                "decisionCases": {
                    "gold": [greet("gold", "gold customer")],
                    "basic": [greet("basic", "basic customer")],
                },
            },
            {
                "name": "rounds",
                "taskReferenceName": "rounds",
                "type": "DO_WHILE",
                "inputParameters": {"max": "${workflow.input.rounds}"},
                "loopCondition": (
                    "function () { return $.rounds.iteration < $.max"
                    " && $.round.greeting.indexOf('hello') === 0; }"
                ),
                "loopOver": [greet("round", "${rounds.output.iteration}")],
            },
        ],
        "outputParameters": {
            "total": "${total.output.result.total}",
            "first": "${names.output.result}",
            "names": "${names.output.resultList}",
            "iterations": "${rounds.output.iteration}",  # Conductor's spelling
        },
    }


HOSTILE: dict[str, tuple[dict[str, Any], str]] = {
    "endless": (
        {
            "type": "INLINE",
            "inputParameters": {"evaluatorType": "javascript", "expression": "while (true) {}"},
        },
        "ran out of time",
    ),
    "allocating": (
        {
            "type": "INLINE",
            "inputParameters": {
                "evaluatorType": "graaljs",
                # 16 MiB a turn: the memory limit is reached within milliseconds, long before
                # the time limit even on a machine so loaded that a slower loop ran out of time
                "expression": "var a = []; for (;;) a.push(new ArrayBuffer(1 << 24));",
            },
        },
        "out of memory",
    ),
    "throwing": (
        {
            "type": "LAMBDA",
            "inputParameters": {"scriptExpression": "throw new Error('no such customer');"},
        },
        "no such customer",
    ),
    "endless_jq": (
        {
            "type": "JSON_JQ_TRANSFORM",
            "inputParameters": {"queryExpression": "until(false; .)", "x": 1},
        },
        "ran out of time",
    ),
}


def test_inline_jq_a_javascript_switch_and_a_function_loop_condition(
    clients: OrkesClients, prefix: str, workers: subprocess.Popen[bytes]
) -> None:
    meta = clients.get_metadata_client()
    meta.register_workflow_def(_model(_scripted(prefix), "WorkflowDef"), overwrite=True)
    stored = meta.get_workflow_def(f"{prefix}_scripted", version=1)
    kinds = [t.type for t in stored.tasks]
    assert kinds == ["INLINE", "JSON_JQ_TRANSFORM", "SWITCH", "DO_WHILE"]
    wf_client = clients.get_workflow_client()
    items = [{"name": "pen", "price": 30, "qty": 2}, {"name": "ink", "price": 10, "qty": 5}]
    big = wf_client.start_workflow(
        StartWorkflowRequest(name=f"{prefix}_scripted", input={"items": items, "rounds": 3})
    )
    small = wf_client.start_workflow(
        StartWorkflowRequest(name=f"{prefix}_scripted", input={"items": items[:1], "rounds": 1})
    )
    done = _wait_terminal(clients, [big, small])
    wf = done[big]
    assert wf.status == "COMPLETED", wf.reason_for_incompletion
    assert wf.output == {"total": 110, "first": "PEN", "names": ["PEN", "INK"], "iterations": 3}
    refs = {t.reference_task_name: t for t in wf.tasks}
    assert refs["total"].task_type == "INLINE"
    assert refs["total"].output_data == {"result": {"total": 110, "count": 2}}
    assert refs["names"].task_type == "JSON_JQ_TRANSFORM"
    assert refs["names"].output_data == {"result": "PEN", "resultList": ["PEN", "INK"]}
    assert "gold" in refs and "basic" not in refs
    rounds = [t for t in wf.tasks if t.reference_task_name.startswith("round__")]
    assert [(t.reference_task_name, t.iteration, t.input_data["name"]) for t in rounds] == [
        ("round__1", 1, 1),
        ("round__2", 2, 2),
        ("round__3", 3, 3),
    ]
    wf = done[small]
    assert wf.status == "COMPLETED", wf.reason_for_incompletion
    assert wf.output["iterations"] == 1
    refs = {t.reference_task_name: t for t in wf.tasks}
    assert "basic" in refs and "gold" not in refs


def test_hostile_scripts_fail_their_task_with_a_reason_and_the_server_serves_on(
    clients: OrkesClients,
    prefix: str,
    workers: subprocess.Popen[bytes],
    conductor_server: LocalServer,
) -> None:
    meta = clients.get_metadata_client()
    wf_client = clients.get_workflow_client()
    meta.register_workflow_def(_model(_scripted(prefix), "WorkflowDef"), overwrite=True)
    for name, (task, _) in HOSTILE.items():
        definition = {
            "name": f"{prefix}_{name}",
            "version": 1,
            "tasks": [{"name": name, "taskReferenceName": name, **task}],
        }
        meta.register_workflow_def(_model(definition, "WorkflowDef"), overwrite=True)
    items = [{"name": "pen", "price": 1, "qty": 1}]
    fine = wf_client.start_workflow(
        StartWorkflowRequest(name=f"{prefix}_scripted", input={"items": items, "rounds": 2})
    )
    ids = {
        name: wf_client.start_workflow(StartWorkflowRequest(name=f"{prefix}_{name}", input={}))
        for name in HOSTILE
    }
    done = _wait_terminal(clients, [fine, *ids.values()])
    for name, wid in ids.items():
        wf = done[wid]
        said = HOSTILE[name][1]
        assert wf.status == "FAILED", name
        assert said in (wf.reason_for_incompletion or ""), (name, wf.reason_for_incompletion)
        (task,) = wf.tasks
        assert task.status == "FAILED"
        assert said in (task.reason_for_incompletion or ""), (name, task.reason_for_incompletion)
    wf = done[fine]
    assert wf.status == "COMPLETED", wf.reason_for_incompletion
    assert wf.output == {"total": 1, "first": "PEN", "names": ["PEN"], "iterations": 2}
    r = httpx.get(
        f"{conductor_server.base_url}/api/metadata/workflow/{prefix}_scripted",
        headers={"x-api-key": conductor_server.api_key or ""},
    )
    assert r.status_code == 200
