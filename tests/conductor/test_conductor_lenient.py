"""Conductor definitions in the forms its own test resources and examples use, registered and run
over ``/api`` (plain HTTP, as any client): a ``$workflow.input.x`` failure workflow, a value-param
on a literal or plain text, INLINE and JSON_JQ_TRANSFORM programs given by ``${…}``, JSONPath
functions (``.length()``…), a reference to no task (null), a DO_WHILE's output read inside it and
a blank ``loopCondition``, numbers given as text, and a dynamic fork over a literal list."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from baton.conductor.views import without_iteration

from tests.support.helpers import wait_until
from tests.support.http_target import Target, http_target
from tests.support.servers import LocalServer

pytestmark = [pytest.mark.e2e]

TERMINAL = ("COMPLETED", "FAILED", "TERMINATED", "TIMED_OUT")
CORPUS = Path(__file__).parent / "corpus"


def _inline(ref: str, expression: str, **params: Any) -> dict[str, Any]:
    return {
        "name": ref,
        "taskReferenceName": ref,
        "type": "INLINE",
        "inputParameters": {"evaluatorType": "graaljs", "expression": expression, **params},
    }


def _do_while(
    ref: str, condition: str, loop_over: list[dict[str, Any]], **params: Any
) -> dict[str, Any]:
    return {
        "name": ref,
        "taskReferenceName": ref,
        "type": "DO_WHILE",
        "inputParameters": params,
        "loopCondition": condition,
        "loopOver": loop_over,
    }


def _register(server: LocalServer, *definitions: dict[str, Any]) -> None:
    r = server.request("PUT", "/api/metadata/workflow", json=list(definitions))
    assert r.status_code == 200, r.text


def _start(server: LocalServer, name: str, data: dict[str, Any] | None = None) -> str:
    r = server.request("POST", "/api/workflow", json={"name": name, "input": data or {}})
    assert r.status_code == 200, r.text
    return r.text.strip('"')


def _ended(server: LocalServer, wid: str) -> dict[str, Any]:
    got: dict[str, Any] = {}

    def done() -> bool:
        r = server.request("GET", f"/api/workflow/{wid}?includeTasks=true")
        assert r.status_code == 200, r.text
        got.update(r.json())
        return got["status"] in TERMINAL

    wait_until(done, timeout=60, interval=0.2, what=f"workflow {wid} to end")
    return got


def _outputs(wf: dict[str, Any], ref: str) -> list[Any]:
    """The outputs of the tasks named ``ref``, or ``ref__<iteration>`` inside a loop."""
    return [
        t["outputData"] for t in wf["tasks"] if without_iteration(t["referenceTaskName"]) == ref
    ]


@pytest.fixture
def p() -> str:
    return f"l{uuid.uuid4().hex[:8]}"


def test_a_legacy_dollar_failure_workflow_name_is_read_from_the_input(
    conductor_server: LocalServer, p: str
) -> None:
    cleanup = {"name": f"{p}_cleanup", "version": 1, "tasks": [_inline("noted", "1")]}
    failing = {
        "name": f"{p}_failing",
        "version": 1,
        "failureWorkflow": "$workflow.input.failureWfName",
        "tasks": [_inline("boom", "(function () { throw new Error('boom'); })()")],
    }
    _register(conductor_server, cleanup, failing)
    wid = _start(conductor_server, f"{p}_failing", {"failureWfName": f"{p}_cleanup"})
    assert _ended(conductor_server, wid)["status"] == "FAILED"
    history = conductor_server.request("GET", f"/v1/instances/{wid}/history").json()
    started = [e for e in history["events"] if e["type"] == "FAILURE_WORKFLOW_STARTED"]
    assert [e["detail"]["name"] for e in started] == [f"{p}_cleanup"]
    child = _ended(conductor_server, started[0]["detail"]["instanceId"])
    assert child["status"] == "COMPLETED" and child["workflowName"] == f"{p}_cleanup"


def test_value_param_cases_on_a_literal_plain_text_and_a_number(
    conductor_server: LocalServer, p: str
) -> None:
    def switch(ref: str, value: Any, cases: list[str]) -> dict[str, Any]:
        return {
            "name": ref,
            "taskReferenceName": ref,
            "type": "SWITCH",
            "evaluatorType": "value-param",
            "expression": "choice",
            "inputParameters": {"choice": value},
            "decisionCases": {c: [_inline(f"{ref}_{i}", f"'{c}'")] for i, c in enumerate(cases)},
            "defaultCase": [_inline(f"{ref}_default", "'default'")],
        }

    decision = {
        "name": "by_number",
        "taskReferenceName": "by_number",
        "type": "DECISION",
        "caseValueParam": "n",
        "inputParameters": {"n": 5},
        "decisionCases": {"5": [_inline("five", "5")]},
    }
    definition = {
        "name": f"{p}_cases",
        "version": 1,
        "tasks": [
            switch("literal", "gold", ["gold", "basic"]),
            # Without ${…} the text is the value, as in Conductor (a typo there is the default).
            switch("plain", "{workflow.input.finalCase}", ["x", "{workflow.input.finalCase}"]),
            switch("missing_brace", "task_3.output.oddEven", ["0", "1"]),
            decision,
        ],
    }
    _register(conductor_server, definition)
    wf = _ended(conductor_server, _start(conductor_server, f"{p}_cases", {"finalCase": "x"}))
    assert wf["status"] == "COMPLETED", wf.get("reasonForIncompletion")
    ran = {t["referenceTaskName"] for t in wf["tasks"]}
    assert {"literal_0", "plain_1", "missing_brace_default", "five"} <= ran
    assert not ran & {"literal_1", "plain_0", "literal_default", "missing_brace_0"}


def _programs(p: str) -> dict[str, Any]:
    return {
        "name": f"{p}_programs",
        "version": 1,
        "tasks": [
            _inline("numbers", "[1, 2, 3.5]"),
            _inline("program", "'$.a * 2'"),
            _inline("filter", "'.x + 1'"),
            # ${…} inside the text: resolved with the input (a list as JSON), then run.
            {
                **_inline(
                    "inside",
                    "(function () { return ${numbers.output.result}.length + $.n; })()",
                    n="${workflow.input.n}",
                ),
                "optional": "false",
                "startDelay": "0",
            },
            # One ${…}: the program itself comes from data.
            _inline("whole", "${program.output.result}", a=21),
            {
                "name": "jq",
                "taskReferenceName": "jq",
                "type": "JSON_JQ_TRANSFORM",
                "inputParameters": {"queryExpression": "${filter.output.result}", "x": 41},
            },
            _inline("shape", "({a: 1, b: [1, 2]})"),
        ],
        "outputParameters": {
            "inside": "${inside.output.result}",
            "whole": "${whole.output.result}",
            "jq": "${jq.output.result}",
            "count": "${numbers.output.result.length()}",
            "sum": "${numbers.output.result.sum()}",
            "max": "${numbers.output.result.max()}",
            "keys": "${shape.output.result.keys()}",
            "size": "${shape.output.result.b.size()}",
            "text": "n=${numbers.output.result.length()}",
            # No such task: null, as Conductor's JSONPath finds nothing there.
            "ghost": "${get_random_fact.output.response.body.fact}",
            "ghost_text": "fact: ${get_random_fact.output.fact}",
        },
    }


def test_programs_given_by_data_and_jsonpath_functions_and_references_to_no_task(
    conductor_server: LocalServer, p: str
) -> None:
    _register(conductor_server, _programs(p))
    wf = _ended(conductor_server, _start(conductor_server, f"{p}_programs", {"n": 10}))
    assert wf["status"] == "COMPLETED", wf.get("reasonForIncompletion")
    assert wf["output"] == {
        "inside": 3 + 10,
        "whole": 42,
        "jq": 42,
        "count": 3,
        "sum": 6.5,
        "max": 3.5,
        "keys": ["a", "b"],
        "size": 2,
        "text": "n=3",
        "ghost": None,
        "ghost_text": "fact: null",
    }


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ("'((('", "does not parse"),
        ("null", "gave null, not a program to run"),
        ("''", "gave blank text, not a program to run"),
    ],
)
def test_a_bad_program_given_by_data_fails_its_task_with_the_reason(
    conductor_server: LocalServer, p: str, given: str, said: str
) -> None:
    definition = {
        "name": f"{p}_bad",
        "version": 1,
        "tasks": [_inline("source", given), _inline("run", "${source.output.result}")],
    }
    jq = {
        "name": f"{p}_badjq",
        "version": 1,
        "tasks": [
            _inline("source", given.replace("(((", "[[[")),
            {
                "name": "q",
                "taskReferenceName": "q",
                "type": "JSON_JQ_TRANSFORM",
                "inputParameters": {"queryExpression": "${source.output.result}"},
            },
        ],
    }
    _register(conductor_server, definition, jq)
    for name, ref in ((f"{p}_bad", "run"), (f"{p}_badjq", "q")):
        wf = _ended(conductor_server, _start(conductor_server, name))
        assert wf["status"] == "FAILED"
        (task,) = [t for t in wf["tasks"] if t["referenceTaskName"] == ref]
        assert task["status"] == "FAILED"
        assert said in task["reasonForIncompletion"], task["reasonForIncompletion"]
    assert conductor_server.request("GET", "/api/metadata/workflow").status_code == 200


def test_a_loop_reads_its_output_so_far_and_a_blank_loop_condition_runs_once(
    conductor_server: LocalServer, p: str
) -> None:
    definition = {
        "name": f"{p}_loops",
        "version": 1,
        "tasks": [
            _do_while(
                "loop",
                "if ($.loop['iteration'] < 3) { true; } else { false; }",
                [_inline("seen", "$.so_far", so_far="${loop.output}")],
            ),
            _do_while(
                "once",
                "",
                [_inline("body", "$.i", i="${once.output.iteration}")],
                items="${workflow.input.batch}",
                keepLastN=2,
            ),
        ],
    }
    _register(conductor_server, definition)
    wf = _ended(conductor_server, _start(conductor_server, f"{p}_loops", {"batch": [1, 2]}))
    assert wf["status"] == "COMPLETED", wf.get("reasonForIncompletion")
    first, second, third = (o["result"] for o in _outputs(wf, "seen"))
    assert first == {"iteration": 1}
    assert second == {"iteration": 2, "1": {"seen": {"result": first}}}
    assert third == {
        "iteration": 3,
        "1": {"seen": {"result": first}},
        "2": {"seen": {"result": second}},
    }
    assert _outputs(wf, "body") == [{"result": 1}]
    # A DO_WHILE task's inputData: its inputParameters as they stood when it started.
    loops = {t["referenceTaskName"]: t for t in wf["tasks"] if t["taskType"] == "DO_WHILE"}
    assert loops["loop"]["inputData"] == {}
    assert loops["once"]["inputData"] == {"items": [1, 2], "keepLastN": 2}


def test_a_join_in_a_loop_names_its_outputs_by_the_iteration(
    conductor_server: LocalServer, p: str
) -> None:
    """Conductor's JOIN inside a DO_WHILE waits on its joinOn in its own iteration
    (``TaskUtils.appendIteration``) and keys its output by those names; its inputData keeps the
    joinOn as written."""
    definition = {
        "name": f"{p}_loop_fork",
        "version": 1,
        "tasks": [
            _do_while(
                "loop",
                "if ($.loop['iteration'] < 2) { true; } else { false; }",
                [
                    {
                        "name": "fork",
                        "taskReferenceName": "fork",
                        "type": "FORK_JOIN",
                        "forkTasks": [
                            [_inline("a", "$.k", k="${loop.output.iteration}")],
                            [_inline("b", "$.k * 10", k="${loop.output.iteration}")],
                        ],
                    },
                    {
                        "name": "join",
                        "taskReferenceName": "join",
                        "type": "JOIN",
                        "joinOn": ["a", "b"],
                    },
                ],
            )
        ],
    }
    _register(conductor_server, definition)
    wf = _ended(conductor_server, _start(conductor_server, f"{p}_loop_fork"))
    assert wf["status"] == "COMPLETED", wf.get("reasonForIncompletion")
    joins = {t["referenceTaskName"]: t for t in wf["tasks"] if t["taskType"] == "JOIN"}
    assert sorted(joins) == ["join__1", "join__2"]
    for k in (1, 2):
        join = joins[f"join__{k}"]
        assert (join["status"], join["iteration"]) == ("COMPLETED", k)
        assert join["inputData"] == {"joinOn": ["a", "b"]}
        assert join["outputData"] == {f"a__{k}": {"result": k}, f"b__{k}": {"result": k * 10}}


def test_a_dynamic_fork_over_a_literal_list(conductor_server: LocalServer, p: str) -> None:
    child = {
        "name": f"{p}_double",
        "version": 1,
        "tasks": [_inline("twice", "$.n * 2", n="${workflow.input.input}")],
        "outputParameters": {"twice": "${twice.output.result}"},
    }
    parent = {
        "name": f"{p}_fan",
        "version": 1,
        "tasks": [
            {
                "name": "fan",
                "taskReferenceName": "fan",
                "type": "FORK_JOIN_DYNAMIC",
                "inputParameters": {
                    "forkTaskWorkflow": f"{p}_double",
                    "forkTaskWorkflowVersion": "1",
                    "forkTaskInputs": [1, 2, 3],
                },
                "dynamicForkTasksParam": "forkedTasks",
                "dynamicForkTasksInputParamName": "forkedTasksInputs",
            },
            {"name": "fan_join", "taskReferenceName": "fan_join", "type": "JOIN"},
        ],
        "outputParameters": {"all": "${fan_join.output}"},
    }
    _register(conductor_server, child, parent)
    wf = _ended(conductor_server, _start(conductor_server, f"{p}_fan"))
    assert wf["status"] == "COMPLETED", wf.get("reasonForIncompletion")
    assert sorted(v["twice"] for v in wf["output"]["all"].values()) == [2, 4, 6]


@pytest.fixture
def target() -> Iterator[Target]:
    with http_target() as t:
        yield t


def test_numbers_given_as_text_are_read_as_conductors_jackson_reads_them(
    conductor_server: LocalServer, p: str, target: Target
) -> None:
    definition = {
        "name": f"{p}_texts",
        "version": 1,
        "schemaVersion": "2",
        "tasks": [
            {
                "name": "call",
                "taskReferenceName": "call",
                "type": "HTTP",
                "retryCount": "0",
                "optional": "false",
                "inputParameters": {
                    "http_request": {
                        "uri": target.url("/json"),
                        "method": "POST",
                        "body": {"order": 7},
                        "connectionTimeOut": "3000",
                        "readTimeOut": "3000",
                    }
                },
            }
        ],
        "outputParameters": {"status": "${call.output.response.statusCode}"},
    }
    _register(conductor_server, definition)
    got = conductor_server.request("GET", f"/api/metadata/workflow/{p}_texts?version=1").json()
    assert got == definition
    wf = _ended(conductor_server, _start(conductor_server, f"{p}_texts"))
    assert wf["status"] == "COMPLETED", wf.get("reasonForIncompletion")
    assert wf["output"] == {"status": 200}
    assert target.hits["/json"] == 1


def test_conductor_s_keep_last_n_example_keeps_18_tasks(conductor_server: LocalServer) -> None:
    """conductor-oss's e2e DoWhileTests.testKeepLstN3, on its own definition: two loops in a
    fork, keepLastN 4 and 2, five iterations each; Conductor deletes the older iterations'
    tasks and reads back 18. A loop's tasks are named ``<ref>__<iteration>``."""
    path = CORPUS / "e2e__metadata__do_while_keep_last_n_fix__keep_last_n_example_3.json"
    definition = json.loads(path.read_text())
    definition["name"] = f"keep_last_n_{uuid.uuid4().hex[:8]}"
    _register(conductor_server, definition)
    wid = _start(conductor_server, definition["name"])
    seen: list[dict[str, Any]] = []
    polled: list[dict[str, Any]] = []

    def work_done() -> bool:
        for kind in ("simple", "simple_1", "simple_2"):
            r = conductor_server.request(
                "GET", f"/api/tasks/poll/batch/{kind}?count=5&timeout=10&workerid=w"
            )
            assert r.status_code == 200, r.text
            for task in r.json():
                if task["workflowInstanceId"] != wid:
                    continue
                polled.append(task)
                update = {
                    "workflowInstanceId": wid,
                    "taskId": task["taskId"],
                    "status": "COMPLETED",
                    "outputData": {},
                }
                r = conductor_server.request("POST", "/api/tasks", json=update)
                assert r.status_code == 200, r.text
        wf = conductor_server.request("GET", f"/api/workflow/{wid}?includeTasks=true").json()
        seen.append(wf)
        return bool(wf["status"] in TERMINAL)

    wait_until(work_done, timeout=60, interval=0.05, what=f"workflow {wid} to end")
    wf = seen[-1]
    assert wf["status"] == "COMPLETED", wf.get("reasonForIncompletion")
    refs = [t["referenceTaskName"] for t in wf["tasks"]]
    assert len(refs) == 18, " ".join(refs)
    (fork,) = [t for t in wf["tasks"] if t["referenceTaskName"] == "fork_ref"]
    (join,) = [t for t in wf["tasks"] if t["referenceTaskName"] == "join_ref"]
    assert (fork["taskType"], fork["status"]) == ("FORK", "COMPLETED")
    assert (join["taskType"], join["status"]) == ("JOIN", "COMPLETED")
    assert join["inputData"] == {"joinOn": ["do_while_ref_1", "do_while_ref"]}
    assert set(join["outputData"]) == {"do_while_ref_1", "do_while_ref"}
    # Scheduled with the FORK, after the first task of each branch, as Conductor orders them.
    assert refs[:4] == ["fork_ref", "inline_ref", "set_variable_ref", "join_ref"]
    loops = {
        t["referenceTaskName"]: t["iteration"] for t in wf["tasks"] if t["taskType"] == "DO_WHILE"
    }
    assert loops == {"do_while_ref_1": 5, "do_while_ref": 5}
    kept = {r for r in refs if "__" in r}
    assert kept == {
        *(f"{r}__{k}" for r in ("set_variable_ref_1", "simple_ref") for k in (2, 3, 4, 5)),
        *(f"{r}__{k}" for r in ("simple_ref_1", "simple_ref_2") for k in (4, 5)),
    }
    assert all(
        t["iteration"] == int(t["referenceTaskName"].rsplit("__")[1])
        for t in wf["tasks"]
        if "__" in t["referenceTaskName"]
    )
    # A worker polls a loop's task by the same name and iteration.
    named = sorted((t["referenceTaskName"], t["iteration"]) for t in polled)
    assert named == sorted(
        (f"{r}__{k}", k)
        for r in ("simple_ref", "simple_ref_1", "simple_ref_2")
        for k in range(1, 6)
    ), named
    # While the loops ran, no read showed more than the kept iterations of either.
    for read in seen:
        for loop, keep in (("simple_ref", 4), ("simple_ref_2", 2)):
            its = sorted(
                t["iteration"]
                for t in read["tasks"]
                if t["referenceTaskName"].startswith(f"{loop}__")
            )
            assert len(its) <= keep, (loop, its)
