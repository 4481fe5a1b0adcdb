"""Golden tests of the Conductor ⇄ Baton translations (pure, no server): every supported task
type both ways, a 400-class ``Untranslatable`` naming the task for every unsupported one, and the
views' status vocabulary."""

from __future__ import annotations

from typing import Any

import pytest
from baton.conductor import definitions as cd
from baton.conductor import views as cv
from baton.conductor.errors import Untranslatable, from_error
from baton.definitions import parse_definition
from baton.errors import ValidationFailed
from baton.status import InstanceStatus, JobStatus, StepStatus


def simple(ref: str, name: str = "work", **extra: Any) -> dict[str, Any]:
    return {"name": name, "taskReferenceName": ref, "type": "SIMPLE", **extra}


def step(ref: str, job: str = "work", **extra: Any) -> dict[str, Any]:
    return {"id": ref, "name": job, "type": "SERVICE_TASK", "jobType": job, "input": {}, **extra}


# (Conductor task(s), Baton step) — one per supported type.
GOLDEN: list[tuple[str, list[dict[str, Any]], dict[str, Any]]] = [
    (
        "SUB_WORKFLOW workflowDefinition ${…}",
        [
            {
                "name": "child",
                "taskReferenceName": "sub",
                "type": "SUB_WORKFLOW",
                "inputParameters": {"w": "${prev.output.w}"},
                "subWorkflowParam": {"name": "child", "workflowDefinition": "${prev.output.def}"},
            }
        ],
        {
            "id": "sub",
            "name": "child",
            "type": "SUB_WORKFLOW",
            "input": {"w": "${prev.output.w}"},
            "definition": "${prev.output.def}",
            "definitionDialect": "conductor",
            "definitionName": "child",
        },
    ),
    (
        "FORK_JOIN_DYNAMIC dynamicForkTasksParam",
        [
            {
                "name": "fan",
                "taskReferenceName": "fan",
                "type": "FORK_JOIN_DYNAMIC",
                "inputParameters": {
                    "tasks": "${prev.output.dynamicTasks}",
                    "inputs": "${prev.output.dynamicTasksInput}",
                },
                "dynamicForkTasksParam": "tasks",
                "dynamicForkTasksInputParamName": "inputs",
            },
            {"name": "fan_join", "taskReferenceName": "fan_join", "type": "JOIN"},
        ],
        {
            "id": "fan",
            "type": "MAP",
            "items": "${prev.output.dynamicTasks}",
            "key": "${map.item.taskReferenceName}",
            "inputs": "${prev.output.dynamicTasksInput}",
            "maxConcurrency": 1000,
            "steps": [
                {
                    "id": "fan_forked",
                    "type": "SWITCH",
                    "on": "${map.item.type}",
                    "cases": {
                        "SUB_WORKFLOW": [
                            {
                                "id": "fan_flow",
                                "type": "SUB_WORKFLOW",
                                "definitionName": "${map.item.subWorkflowParam.name}",
                                "definitionVersion": "${map.item.subWorkflowParam.version}",
                                "definition": "${map.item.subWorkflowParam.workflowDefinition}",
                                "definitionDialect": "conductor",
                                "input": "${map.input}",
                                "optional": "${map.item.optional}",
                                "permissive": "${map.item.permissive}",
                            }
                        ],
                        "HTTP": [
                            {
                                "id": "fan_http",
                                "type": "HTTP",
                                "request": "${map.input.http_request}",
                                "input": "${map.input}",
                                "optional": "${map.item.optional}",
                                "permissive": "${map.item.permissive}",
                            }
                        ],
                    },
                    "default": [
                        {
                            "id": "fan_task",
                            "type": "SERVICE_TASK",
                            "jobType": "${map.item.name}",
                            "input": "${map.input}",
                            "optional": "${map.item.optional}",
                            "permissive": "${map.item.permissive}",
                        }
                    ],
                }
            ],
            "description": "[join:fan_join]",
        },
    ),
    (
        "FORK_JOIN_DYNAMIC forkTaskWorkflow",
        [
            {
                "name": "fan",
                "taskReferenceName": "fan",
                "type": "FORK_JOIN_DYNAMIC",
                "inputParameters": {
                    "forkTaskWorkflow": "child",
                    "forkTaskWorkflowVersion": 2,
                    "forkTaskInputs": "${prev.output.list}",
                },
            },
            {"name": "fan_join", "taskReferenceName": "fan_join", "type": "JOIN"},
        ],
        {
            "id": "fan",
            "type": "MAP",
            "items": "${prev.output.list}",
            "key": "_fan_${map.index}",
            "indexAs": "__index",
            "maxConcurrency": 1000,
            "steps": [
                {
                    "id": "fan_forked",
                    "type": "SUB_WORKFLOW",
                    "definitionName": "child",
                    "definitionVersion": 2,
                    "input": "${map.input}",
                }
            ],
            "description": "[join:fan_join]",
        },
    ),
    (
        "DYNAMIC",
        [
            {
                "name": "dyn",
                "taskReferenceName": "pick",
                "type": "DYNAMIC",
                "dynamicTaskNameParam": "taskToExecute",
                "inputParameters": {"taskToExecute": "${workflow.input.task}", "n": 1},
                "retryCount": 2,
            }
        ],
        {
            "id": "pick",
            "name": "dyn",
            "type": "SERVICE_TASK",
            "jobType": "${workflow.input.task}",
            "input": {"taskToExecute": "${workflow.input.task}", "n": 1},
            "retryCount": 2,
        },
    ),
    (
        "FORK_JOIN_DYNAMIC",
        [
            {
                "name": "fan",
                "taskReferenceName": "fan",
                "type": "FORK_JOIN_DYNAMIC",
                "inputParameters": {
                    "forkTaskName": "resize",
                    "forkTaskInputs": "${workflow.input.images}",
                },
                "dynamicForkTasksParam": "dynamicTasks",
                "dynamicForkTasksInputParamName": "dynamicTasksInput",
            },
            {"name": "fan_join", "taskReferenceName": "fan_join", "type": "JOIN"},
        ],
        {
            "id": "fan",
            "type": "MAP",
            "items": "${workflow.input.images}",
            "key": "_resize_${map.index}",
            "indexAs": "__index",
            "maxConcurrency": 1000,
            "steps": [
                {
                    "id": "fan_forked",
                    "name": "resize",
                    "type": "SERVICE_TASK",
                    "jobType": "resize",
                    "input": "${map.input}",
                }
            ],
            "description": "[join:fan_join]",
        },
    ),
    (
        "SIMPLE",
        [
            simple(
                "a",
                inputParameters={"x": "${workflow.input.x}", "id": "${workflow.workflowId}"},
                retryCount=2,
            )
        ],
        step(
            "a",
            input={"x": "${workflow.input.x}", "id": "${workflow.instanceId}"},
            retryCount=2,
        ),
    ),
    (
        "SWITCH value-param",
        [
            {
                "name": "route",
                "taskReferenceName": "route",
                "type": "SWITCH",
                "evaluatorType": "value-param",
                "expression": "k",
                "inputParameters": {"k": "${workflow.input.kind}"},
                "decisionCases": {"a": [simple("in_a")]},
                "defaultCase": [simple("other")],
            }
        ],
        {
            "id": "route",
            "type": "SWITCH",
            "input": {"k": "${workflow.input.kind}"},
            "on": "${workflow.input.kind}",
            "cases": {"a": [step("in_a")]},
            "default": [step("other")],
        },
    ),
    (
        "SWITCH javascript",
        [
            {
                "name": "js",
                "taskReferenceName": "js",
                "type": "SWITCH",
                "evaluatorType": "graaljs",
                "expression": "$.n >= 3 && $.who == 'ada'",
                "inputParameters": {"n": "${workflow.input.n}", "who": "${prev.output.name}"},
                "decisionCases": {"true": [simple("yes")], "false": [simple("no")]},
            }
        ],
        {
            "id": "js",
            "type": "SWITCH",
            "input": {"n": "${workflow.input.n}", "who": "${prev.output.name}"},
            "script": "$.n >= 3 && $.who == 'ada'",
            "cases": {"true": [step("yes")], "false": [step("no")]},
        },
    ),
    (
        "SWITCH javascript naming its cases",
        [
            {
                "name": "tier",
                "taskReferenceName": "tier",
                "type": "SWITCH",
                "evaluatorType": "javascript",
                "expression": "(function () { return $.total > 100 ? 'gold' : 'basic'; })()",
                "inputParameters": {"total": "${workflow.input.total}"},
                "decisionCases": {"gold": [simple("g")], "basic": [simple("b")]},
                "defaultCase": [simple("d")],
            }
        ],
        {
            "id": "tier",
            "type": "SWITCH",
            "input": {"total": "${workflow.input.total}"},
            "script": "(function () { return $.total > 100 ? 'gold' : 'basic'; })()",
            "cases": {"gold": [step("g")], "basic": [step("b")]},
            "default": [step("d")],
        },
    ),
    (
        "DECISION caseExpression",
        [
            {
                "name": "dec",
                "taskReferenceName": "dec",
                "type": "DECISION",
                "caseExpression": "$.n > 1 ? 'many' : 'one'",
                "inputParameters": {"n": "${workflow.input.n}"},
                "decisionCases": {"many": [simple("m")], "one": [simple("o")]},
            }
        ],
        {
            "id": "dec",
            "type": "SWITCH",
            "input": {"n": "${workflow.input.n}"},
            "script": "$.n > 1 ? 'many' : 'one'",
            "cases": {"many": [step("m")], "one": [step("o")]},
        },
    ),
    (
        "DECISION caseValueParam",
        [
            {
                "name": "dec",
                "taskReferenceName": "dec",
                "type": "DECISION",
                "caseValueParam": "kind",
                "inputParameters": {"kind": "${workflow.input.kind}"},
                "decisionCases": {"a": [simple("a")]},
                "defaultCase": [simple("z")],
            }
        ],
        {
            "id": "dec",
            "type": "SWITCH",
            "input": {"kind": "${workflow.input.kind}"},
            "on": "${workflow.input.kind}",
            "cases": {"a": [step("a")]},
            "default": [step("z")],
        },
    ),
    (
        "INLINE",
        [
            {
                "name": "calc",
                "taskReferenceName": "calc",
                "type": "INLINE",
                "inputParameters": {
                    "evaluatorType": "graaljs",
                    "expression": "(function () { return $.a + $.b; })()",
                    "a": "${workflow.input.a}",
                    "b": 2,
                },
            }
        ],
        {
            "id": "calc",
            "type": "SCRIPT",
            "language": "javascript",
            "script": "(function () { return $.a + $.b; })()",
            "input": {"a": "${workflow.input.a}", "b": 2},
        },
    ),
    (
        "INLINE value-param",
        [
            {
                "name": "pick",
                "taskReferenceName": "pick",
                "type": "INLINE",
                "inputParameters": {
                    "evaluatorType": "value-param",
                    "expression": "chosen",
                    "chosen": "${workflow.input.x}",
                },
            }
        ],
        {
            "id": "pick",
            "type": "SCRIPT",
            "language": "javascript",
            "script": '$["chosen"]',
            "input": {"chosen": "${workflow.input.x}"},
        },
    ),
    (
        "LAMBDA",
        [
            {
                "name": "lam",
                "taskReferenceName": "lam",
                "type": "LAMBDA",
                "inputParameters": {
                    "scriptExpression": "return {twice: $.n * 2};",
                    "n": "${workflow.input.n}",
                },
            }
        ],
        {
            "id": "lam",
            "type": "SCRIPT",
            "language": "javascript",
            "script": "function scriptFun() { return {twice: $.n * 2};\n} scriptFun();",
            "input": {"n": "${workflow.input.n}"},
        },
    ),
    (
        "JSON_JQ_TRANSFORM",
        [
            {
                "name": "shape",
                "taskReferenceName": "shape",
                "type": "JSON_JQ_TRANSFORM",
                "inputParameters": {
                    "queryExpression": ".items | map(.price) | add",
                    "items": "${workflow.input.items}",
                },
            }
        ],
        {
            "id": "shape",
            "type": "JQ",
            "query": ".items | map(.price) | add",
            "input": {"items": "${workflow.input.items}"},
        },
    ),
    (
        "DO_WHILE function loopCondition",
        [
            {
                "name": "poll",
                "taskReferenceName": "poll",
                "type": "DO_WHILE",
                "inputParameters": {"max": "${workflow.input.max}", "seen": "${check.output.n}"},
                "loopCondition": "function () { return $.poll.iteration < $.max && $.check.more; }",
                "loopOver": [simple("check")],
            }
        ],
        {
            "id": "poll",
            "type": "DO_WHILE",
            "input": {"max": "${workflow.input.max}", "seen": "${check.output.n}"},
            "while": "function () { return $.poll.iteration < $.max && $.check.more; }",
            "whileLanguage": "javascript",
            "maxIterations": cd.DO_WHILE_MAX_ITERATIONS,
            "iterationOutputs": True,
            "steps": [step("check")],
        },
    ),
    (
        "FORK_JOIN + JOIN",
        [
            {
                "name": "fork",
                "taskReferenceName": "fork",
                "type": "FORK_JOIN",
                "forkTasks": [[simple("l")], [simple("r")]],
            },
            {"name": "join", "taskReferenceName": "join", "type": "JOIN", "joinOn": ["l", "r"]},
        ],
        {
            "id": "fork",
            "type": "PARALLEL",
            "branches": [[step("l")], [step("r")]],
            "description": "[join:join]",
        },
    ),
    (
        "DO_WHILE",
        [
            {
                "name": "loop",
                "taskReferenceName": "loop",
                "type": "DO_WHILE",
                "loopCondition": "if ($.done != true) { true; } else { false; }",
                "inputParameters": {"done": "${body.output.done}"},
                "loopOver": [simple("body")],
            }
        ],
        {
            "id": "loop",
            "type": "DO_WHILE",
            "steps": [step("body")],
            "maxIterations": cd.DO_WHILE_MAX_ITERATIONS,
            "iterationOutputs": True,
            "while": "if ($.done != true) { true; } else { false; }",
            "whileLanguage": "javascript",
            "input": {"done": "${body.output.done}"},
        },
    ),
    (
        "SUB_WORKFLOW",
        [
            {
                "name": "child",
                "taskReferenceName": "child",
                "type": "SUB_WORKFLOW",
                "subWorkflowParam": {"name": "kid", "version": 2},
                "inputParameters": {"a": 1},
            }
        ],
        {
            "id": "child",
            "type": "SUB_WORKFLOW",
            "input": {"a": 1},
            "definitionName": "kid",
            "definitionVersion": 2,
        },
    ),
    (
        "WAIT duration",
        [
            {
                "name": "pause",
                "taskReferenceName": "pause",
                "type": "WAIT",
                "inputParameters": {"duration": "1 minutes 30 seconds"},
            }
        ],
        {"id": "pause", "type": "TIMER", "input": {}, "duration": 90},
    ),
    (
        "WAIT until",
        [
            {
                "name": "at",
                "taskReferenceName": "at",
                "type": "WAIT",
                "inputParameters": {"until": "2030-01-02 03:04 UTC"},
            }
        ],
        {"id": "at", "type": "TIMER", "input": {}, "until": "2030-01-02T03:04:00+00:00"},
    ),
    (
        "WAIT signal",
        [{"name": "sig", "taskReferenceName": "sig", "type": "WAIT"}],
        {"id": "sig", "type": "SIGNAL", "input": {}},
    ),
    (
        "HUMAN",
        [{"name": "approve", "taskReferenceName": "approve", "type": "HUMAN"}],
        {"id": "approve", "type": "USER_TASK", "input": {}},
    ),
    (
        "TERMINATE",
        [
            {
                "name": "stop",
                "taskReferenceName": "stop",
                "type": "TERMINATE",
                "inputParameters": {
                    "terminationStatus": "FAILED",
                    "terminationReason": "bad ${workflow.input.x}",
                    "workflowOutput": {"why": "${workflow.input.x}"},
                },
            }
        ],
        {
            "id": "stop",
            "type": "TERMINATE",
            "status": "FAILED",
            "reason": "bad ${workflow.input.x}",
            "output": {"why": "${workflow.input.x}"},
        },
    ),
    (
        "SET_VARIABLE",
        [
            {
                "name": "setv",
                "taskReferenceName": "setv",
                "type": "SET_VARIABLE",
                "inputParameters": {"seen": "${workflow.input.x}"},
            }
        ],
        {"id": "setv", "type": "SET_VARIABLE", "variables": {"seen": "${workflow.input.x}"}},
    ),
]


def _wf(tasks: list[dict[str, Any]]) -> dict[str, Any]:
    # A first task named "prev" so references to it validate.
    return {
        "name": "golden",
        "version": 1,
        "tasks": [simple("prev"), *tasks],
        "outputParameters": {"out": "${prev.output.name}"},
        "failureWorkflow": "cleanup",
        "timeoutSeconds": 60,
    }


@pytest.mark.parametrize(
    ("conductor", "baton"), [(c, b) for _, c, b in GOLDEN], ids=[g[0] for g in GOLDEN]
)
def test_conductor_to_baton(conductor: list[dict[str, Any]], baton: dict[str, Any]) -> None:
    out = cd.to_baton_workflow(_wf(conductor))
    assert (
        out["steps"][1] == {**{"name": conductor[0]["name"]}, **baton} or out["steps"][1] == baton
    )
    assert out["outputParameters"] == {"out": "${prev.output.name}"}
    assert out["failureWorkflow"] == "cleanup"
    parse_definition(out)  # Baton accepts what the translation gives


@pytest.mark.parametrize(
    ("conductor", "baton"), [(c, b) for _, c, b in GOLDEN], ids=[g[0] for g in GOLDEN]
)
def test_baton_to_conductor_and_back_is_a_fixed_point(
    conductor: list[dict[str, Any]], baton: dict[str, Any]
) -> None:
    first = cd.to_baton_workflow(_wf(conductor))
    shown = cd.to_conductor_workflow(parse_definition(first).wire() | {"version": 1})
    assert shown["name"] == "golden" and shown["schemaVersion"] == 2
    assert shown["failureWorkflow"] == "cleanup"
    kinds = [t["type"] for t in shown["tasks"][1:]]
    # a LAMBDA reads back as the INLINE it runs as, a DECISION as a SWITCH (for now)
    read_as = {"LAMBDA": "INLINE", "DECISION": "SWITCH"}
    expected = [read_as.get(t.get("type", "SIMPLE"), t.get("type", "SIMPLE")) for t in conductor]
    if expected == ["SWITCH"]:
        assert kinds == ["SWITCH"]
    else:
        assert kinds == expected
    again = cd.to_baton_workflow(shown)
    assert parse_definition(again).wire() == parse_definition(first).wire()


def test_a_fork_shows_its_join_as_registered() -> None:
    _, conductor, _ = next(g for g in GOLDEN if g[0].startswith("FORK_JOIN +"))
    shown = cd.to_conductor_workflow(cd.to_baton_workflow(_wf(conductor)))
    fork, join = shown["tasks"][1], shown["tasks"][2]
    assert fork["type"] == "FORK_JOIN" and "description" not in fork
    assert join == {
        "name": "join",
        "taskReferenceName": "join",
        "type": "JOIN",
        "inputParameters": {},
        "joinOn": ["l", "r"],
    }


def test_task_defs_both_ways() -> None:
    conductor = {
        "name": "charge",
        "retryCount": 2,
        "retryLogic": "EXPONENTIAL_BACKOFF",
        "retryDelaySeconds": 5,
        "timeoutSeconds": 0,
        "responseTimeoutSeconds": 600,
        "timeoutPolicy": "TIME_OUT_WF",
        "concurrentExecLimit": 0,
        "rateLimitPerFrequency": 0,
        "ownerEmail": "a@b.c",
        "enforceSchema": False,
        "inputSchema": None,
        "createdBy": "someone",
    }
    baton = cd.to_baton_task_def(conductor)
    assert baton == {
        "name": "charge",
        "retryCount": 2,
        "retryLogic": "EXPONENTIAL_BACKOFF",
        "retryDelaySeconds": 5,
        "timeoutSeconds": 0,
        "responseTimeoutSeconds": 600,
        "timeoutPolicy": "TIME_OUT_WF",
        "ownerEmail": "a@b.c",
    }
    back = cd.to_conductor_task_def({**baton, "createdAt": "2026-01-01T00:00:00Z"})
    assert back["createTime"] == 1767225600000
    assert {k: back[k] for k in baton} == baton


UNSUPPORTED = [
    "HTTP",
    "KAFKA_PUBLISH",
    "DYNAMIC",
]


def test_a_loop_condition_reads_its_iteration_and_its_tasks_outputs() -> None:
    loop = {
        "name": "l",
        "taskReferenceName": "l",
        "type": "DO_WHILE",
        "loopCondition": "if ($.l['iteration'] < 3 && $.b['more'] == true) { true; } "
        "else { false; }",
        "loopOver": [simple("b")],
    }
    baton = cd.to_baton_workflow(_wf([loop]))
    (step,) = [s for s in baton["steps"] if s["id"] == "l"]
    assert step["while"] == loop["loopCondition"] and step["whileLanguage"] == "javascript"
    parse_definition(baton)  # the loop's own iteration is readable in its condition
    again = cd.to_baton_workflow(cd.to_conductor_workflow({**baton, "version": 1}))
    assert again["steps"] == baton["steps"]


def test_a_loop_task_reading_the_loop_s_iteration_gets_it_and_reads_back_as_written() -> None:
    body = simple("b")
    body["inputParameters"] = {"page": "${l.output.iteration}", "n": "p${l.output.iteration}"}
    loop = {
        "name": "l",
        "taskReferenceName": "l",
        "type": "DO_WHILE",
        "loopCondition": "$.l['iteration'] < 3",
        "loopOver": [body],
    }
    baton = cd.to_baton_workflow(_wf([loop]))
    (step,) = [s for s in baton["steps"] if s["id"] == "l"]
    assert step["steps"][0]["input"] == {"page": "${l.iteration}", "n": "p${l.iteration}"}
    parse_definition(baton)  # Conductor's spelling would be refused: the loop has not ended
    back = cd.to_conductor_workflow({**baton, "version": 1})
    (task,) = [t for t in back["tasks"] if t["taskReferenceName"] == "l"]
    assert task["loopOver"][0]["inputParameters"] == body["inputParameters"]


@pytest.mark.parametrize("kind", UNSUPPORTED)
def test_unsupported_task_types_are_refused_naming_the_task(kind: str) -> None:
    with pytest.raises(Untranslatable) as e:
        cd.to_baton_workflow(_wf([{"name": "x", "taskReferenceName": "the_task", "type": kind}]))
    status, body = from_error(e.value)
    assert status == 400
    assert "the_task" in body["message"] and kind in body["message"]
    assert body["validationErrors"][0]["path"].startswith("tasks[1]")


def test_a_switch_expression_and_a_loop_condition_run_as_written_template_literals_too() -> None:
    switch = {
        "name": "s",
        "taskReferenceName": "s",
        "type": "SWITCH",
        "evaluatorType": "javascript",
        "expression": "`${$.kind}-case`",
        "inputParameters": {"kind": "${workflow.input.kind}"},
        "decisionCases": {"a-case": [simple("a")]},
    }
    loop = {
        "name": "l",
        "taskReferenceName": "l",
        "type": "DO_WHILE",
        "loopCondition": "`${$.l.iteration}` !== '3'",
        "loopOver": [simple("b")],
    }
    out = cd.to_baton_workflow(_wf([switch, loop]))
    assert out["steps"][1]["script"] == "`${$.kind}-case`"
    assert out["steps"][2]["while"] == "`${$.l.iteration}` !== '3'"
    parse_definition(out)


@pytest.mark.parametrize(
    ("task", "words"),
    [
        (simple("bad ref!"), "taskReferenceName"),
        (
            {
                "name": "s",
                "taskReferenceName": "s",
                "type": "JSON_JQ_TRANSFORM",
                "inputParameters": {"queryExpression": '.a == "${workflow.input.a}"'},
            },
            "inside its text",
        ),
        (
            {
                "name": "s",
                "taskReferenceName": "s",
                "type": "INLINE",
                "inputParameters": {"evaluatorType": "python", "expression": "1"},
            },
            "evaluatorType 'python'",
        ),
        (
            {"name": "j", "taskReferenceName": "j", "type": "JSON_JQ_TRANSFORM"},
            "queryExpression must be a non-empty script",
        ),
        (
            {
                "name": "f",
                "taskReferenceName": "f",
                "type": "FORK_JOIN",
                "forkTasks": [[simple("q")]],
            },
            "JOIN",
        ),
        (
            {
                "name": "w",
                "taskReferenceName": "w",
                "type": "WAIT",
                "inputParameters": {"duration": "soon"},
            },
            "duration",
        ),
        (
            {
                "name": "t",
                "taskReferenceName": "t",
                "type": "TERMINATE",
                "inputParameters": {"terminationStatus": "PAUSED"},
            },
            "terminationStatus",
        ),
    ],
)
def test_untranslatable_options_are_refused(task: dict[str, Any], words: str) -> None:
    with pytest.raises(Untranslatable) as e:
        cd.to_baton_workflow(_wf([task]))
    assert words in str(e.value)


def test_only_conductor_status_values_leave_the_views() -> None:
    for s in InstanceStatus:
        assert cv.workflow_status(s) in cv.CONDUCTOR_WORKFLOW_STATUSES
    for s in (*StepStatus, *JobStatus):
        assert cv.task_status(s) in cv.CONDUCTOR_TASK_STATUSES
    assert cv.workflow_status("CANCELLED") == "TERMINATED"
    assert cv.task_status("CANCELLED") == "CANCELED"
    assert cv.task_status("LOCKED") == "IN_PROGRESS"
    assert cv.task_status("UNLOCKED") == "SCHEDULED"


def test_a_retried_job_shows_one_task_per_attempt() -> None:
    instance = {
        "id": "i1",
        "definitionName": "d",
        "definitionVersion": 1,
        "status": "RUNNING",
        "input": {},
        "createdAt": "2026-01-01T00:00:00Z",
        "steps": [
            {
                "id": "s1",
                "stepId": "a",
                "type": "SERVICE_TASK",
                "status": "IN_PROGRESS",
                "attempt": 3,
                "input": {"x": 1},
                "jobId": "j1",
                "jobType": "work",
                "createdAt": "2026-01-01T00:00:00Z",
            }
        ],
    }
    audit = [
        {"event": "JOB_FAILED", "jobId": "j1", "detail": {"attempt": 1, "error": "boom"}},
        {"event": "JOB_LEASE_EXPIRED", "jobId": "j1", "detail": {"attempt": 2}},
    ]
    wf = cv.workflow(instance, audit)
    assert [(t["taskId"], t["status"], t["retryCount"]) for t in wf["tasks"]] == [
        ("j1.1", "FAILED", 0),
        ("j1.2", "TIMED_OUT", 1),
        ("j1.3", "IN_PROGRESS", 2),
    ]
    assert wf["tasks"][0]["reasonForIncompletion"] == "boom"
    assert [t["seq"] for t in wf["tasks"]] == [1, 2, 3]
    assert cv.parse_task_id("j1.3") == ("j1", 3)


def test_a_join_is_read_through_its_fork_and_the_forked_tasks() -> None:
    fork = {
        "name": "fork",
        "taskReferenceName": "fork",
        "type": "FORK_JOIN",
        "forkTasks": [[simple("a")], [simple("b")]],
    }
    dynamic = {
        "name": "fan",
        "taskReferenceName": "fan",
        "type": "FORK_JOIN_DYNAMIC",
        "inputParameters": {"forkTaskName": "work", "forkTaskInputs": "${prev.output.list}"},
    }
    after = simple("after", inputParameters={"a": "${j1.output.a.x}", "all": "${j2.output}"})
    wf = _wf(
        [
            fork,
            {"name": "j1", "taskReferenceName": "j1", "type": "JOIN", "joinOn": ["a", "b"]},
            dynamic,
            {"name": "j2", "taskReferenceName": "j2", "type": "JOIN"},
            after,
        ]
    )
    out = cd.to_baton_workflow(wf)
    assert out["steps"][-1]["input"] == {"a": "${a.output.x}", "all": "${fan.output}"}
    parse_definition(out)


def test_a_dynamic_fork_of_fork_task_inputs_names_its_tasks_as_conductor_does() -> None:
    def forked(params: dict[str, Any]) -> dict[str, Any]:
        fork = {
            "name": "dyn",
            "taskReferenceName": "dyn",
            "type": "FORK_JOIN_DYNAMIC",
            "inputParameters": {"forkTaskInputs": "${workflow.input.calls}", **params},
        }
        out = cd.to_baton_workflow(
            _wf([fork, {"name": "j", "taskReferenceName": "j", "type": "JOIN"}])
        )
        parse_definition(out)
        step: dict[str, Any] = out["steps"][1]  # (after _wf's "prev")
        return step

    # HTTP: each forked task an HTTP call of its input's http_request, named HTTP.
    http = forked({"forkTaskType": "HTTP"})
    assert http["key"] == "_HTTP_${map.index}"
    (inner,) = http["steps"]
    assert (inner["type"], inner["request"]) == ("HTTP", "${map.input.http_request}")
    # No name nor type: SIMPLE tasks named after the fork's reference.
    plain = forked({})
    assert plain["key"] == "_dyn_${map.index}"
    assert (plain["steps"][0]["type"], plain["steps"][0]["jobType"]) == ("SERVICE_TASK", "dyn")


@pytest.mark.parametrize(
    ("task", "says"),
    [
        (
            {
                "inputParameters": {"dynamicTasks": "${prev.output.tasks}"},
                "dynamicForkTasksParam": "dynamicTasks",
            },
            "dynamicForkTasksInputParamName None names no input parameter",
        ),
        (
            {
                "inputParameters": {"dynamicTasks": "tasks", "dynamicTasksInput": {}},
                "dynamicForkTasksParam": "dynamicTasks",
                "dynamicForkTasksInputParamName": "dynamicTasksInput",
            },
            "inputParameters.dynamicTasks must be one ${…} expression",
        ),
        ({"inputParameters": {"forkTaskType": "INLINE", "forkTaskInputs": []}}, "'INLINE'"),
        (
            {"inputParameters": {"forkTaskName": "w", "forkTaskInputs": {"n": 1}}},
            "forkTaskInputs must be a list, or one ${…} expression giving one",
        ),
    ],
)
def test_a_dynamic_fork_it_cannot_run_is_refused_naming_it(task: dict[str, Any], says: str) -> None:
    fork = {"name": "dyn", "taskReferenceName": "dyn", "type": "FORK_JOIN_DYNAMIC", **task}
    with pytest.raises(Untranslatable) as e:
        cd.to_baton_workflow(_wf([fork, {"name": "j", "taskReferenceName": "j", "type": "JOIN"}]))
    status, body = from_error(e.value)
    assert status == 400 and "(dyn)" in body["message"] and says in body["message"]


@pytest.mark.parametrize(
    ("task", "says"),
    [
        ({"inputParameters": {"t": "x"}}, "needs dynamicTaskNameParam"),
        ({"dynamicTaskNameParam": "t"}, "'t' names no input parameter"),
        (
            {"dynamicTaskNameParam": "t", "inputParameters": {"t": "a ${workflow.input.x}"}},
            "must be a task name or one ${…} expression",
        ),
    ],
)
def test_a_dynamic_task_without_a_name_to_run_is_refused(task: dict[str, Any], says: str) -> None:
    dyn = {"name": "dyn", "taskReferenceName": "dyn", "type": "DYNAMIC", **task}
    with pytest.raises(Untranslatable) as e:
        cd.to_baton_workflow(_wf([dyn]))
    status, body = from_error(e.value)
    assert status == 400 and "(dyn)" in body["message"] and says in body["message"]


def test_a_dynamic_fork_keys_its_join_by_reference_and_a_v1_map_reads_back_as_one() -> None:
    """A keyed MAP registered on /v1 reads back as the Conductor form it runs, and a task list's
    JOIN output is read as Conductor reads it (``${join.output.<ref>}``)."""
    _, conductor, _ = next(g for g in GOLDEN if g[0] == "FORK_JOIN_DYNAMIC dynamicForkTasksParam")
    after = simple("after", inputParameters={"one": "${fan_join.output.t1.x}"})
    out = cd.to_baton_workflow(_wf([*conductor, after]))
    assert out["steps"][-1]["input"] == {"one": "${fan.output.t1.x}"}
    shown = cd.to_conductor_workflow(parse_definition(out).wire() | {"version": 1})
    fork = shown["tasks"][1]
    assert fork["inputParameters"] == {
        "dynamicTasks": "${prev.output.dynamicTasks}",
        "dynamicTasksInput": "${prev.output.dynamicTasksInput}",
    }
    assert fork["dynamicForkTasksParam"] == "dynamicTasks"
    assert shown["tasks"][2]["type"] == "JOIN"


def test_fields_teams_use_translate_to_native_settings() -> None:
    tasks = [
        simple(
            "a",
            optional=True,
            startDelay=30,
            asyncComplete=True,
            permissive=True,
            rateLimited=True,
            taskDefinition={"name": "work", "timeoutPolicy": "RETRY", "timeoutSeconds": 30},
        ),
        simple("b", inputParameters={"at": "${workflow.createTime}", "id": "${a.taskId}"}),
    ]
    out = cd.to_baton_workflow({"name": "fields", "tasks": tasks})
    a, b = out["steps"]
    assert a["optional"] is True and a["startDelaySeconds"] == 30
    assert a["permissive"] is True
    assert a["timeoutPolicy"] == "RETRY" and a["timeoutSeconds"] == 30
    assert b["input"] == {"at": "${workflow.createTime}", "id": "${a.jobId}.${a.attempt}"}
    # No outputParameters: the workflow's output is its last task's.
    assert out["outputParameters"] == "${b.output}"
    parse_definition(out)
    assert cd.to_baton_task_def({"name": "t", "timeoutPolicy": "RETRY"})["timeoutPolicy"] == "RETRY"


def test_task_id_of_a_task_no_worker_runs_is_its_execution_id() -> None:
    tasks = [
        {
            "name": "calc",
            "taskReferenceName": "calc",
            "type": "INLINE",
            "inputParameters": {"expression": "1"},
        },
        simple("b", inputParameters={"id": "${calc.taskId}", "s": "${calc.status}"}),
    ]
    out = cd.to_baton_workflow({"name": "ids", "tasks": tasks})
    assert out["steps"][1]["input"] == {"id": "${calc.executionId}", "s": "${calc.status}"}
    parse_definition(out)


def test_dynamic_sub_workflow_and_failure_workflow_names_are_resolved_at_run_time() -> None:
    sub = {
        "name": "child",
        "taskReferenceName": "child",
        "type": "SUB_WORKFLOW",
        "subWorkflowParam": {
            "name": "${workflow.input.flow}",
            "version": "${workflow.input.flowVersion}",
        },
    }
    out = cd.to_baton_workflow(
        {"name": "dyn", "tasks": [sub], "failureWorkflow": "${workflow.input.onFailure}"}
    )
    step = out["steps"][0]
    assert step["definitionName"] == "${workflow.input.flow}"
    assert step["definitionVersion"] == "${workflow.input.flowVersion}"
    assert out["failureWorkflow"] == "${workflow.input.onFailure}"
    parse_definition(out)


def test_a_do_while_over_items_is_a_map_of_one_at_a_time() -> None:
    loop = {
        "name": "each",
        "taskReferenceName": "each",
        "type": "DO_WHILE",
        "items": "${workflow.input.orders}",
        "loopOver": [
            simple(
                "ship",
                inputParameters={
                    "order": "${each.output.loopItem}",
                    "sku": "${each.output.loopItem.sku}",
                    "n": "${each.output.loopIndex}",
                },
            )
        ],
    }
    out = cd.to_baton_workflow({"name": "items", "tasks": [loop]})
    step = out["steps"][0]
    assert step["type"] == "MAP" and step["maxConcurrency"] == 1
    assert step["items"] == "${workflow.input.orders}"
    assert step["steps"][0]["input"] == {
        "order": "${map.item}",
        "sku": "${map.item.sku}",
        "n": "${map.index}",
    }
    parse_definition(out)
    with pytest.raises(Untranslatable, match="without a loopCondition"):
        cd.to_baton_workflow({"name": "i", "tasks": [{**loop, "loopCondition": "true"}]})


def test_a_join_in_sync_mode_is_accepted() -> None:
    fork = {
        "name": "f",
        "taskReferenceName": "f",
        "type": "FORK_JOIN",
        "forkTasks": [[simple("x")], [simple("y")]],
    }
    join = {
        "name": "j",
        "taskReferenceName": "j",
        "type": "JOIN",
        "joinOn": ["y", "x"],
        "joinMode": "SYNC",
    }
    out = cd.to_baton_workflow({"name": "sync", "tasks": [fork, join]})
    assert out["steps"][0]["type"] == "PARALLEL"
    parse_definition(out)


@pytest.mark.parametrize(
    ("definition", "words"),
    [
        ({"failureWorkflow": "${prev.output.flow}"}, "reads workflow.* only"),
        ({"failureWorkflow": "bad name!"}, "failureWorkflow"),
    ],
)
def test_a_failure_workflow_expression_reads_the_instance_only(
    definition: dict[str, Any], words: str
) -> None:
    out = cd.to_baton_workflow({**_wf([simple("b")]), **definition})
    with pytest.raises(ValidationFailed) as e:
        parse_definition(out)
    assert words in str(e.value.problems)


def test_cpewf_task_id_is_the_simple_task_s_own_id() -> None:
    task = simple("me", inputParameters={"self": "${CPEWF_TASK_ID}", "t": "id ${CPEWF_TASK_ID}"})
    out = cd.to_baton_workflow({"name": "own", "tasks": [task]})
    own = "${me.jobId}.${me.attempt}"
    assert out["steps"][0]["input"] == {"self": own, "t": f"id {own}"}
    parse_definition(out)
    inline = {
        "name": "i",
        "taskReferenceName": "i",
        "type": "INLINE",
        "inputParameters": {"expression": "$.x", "x": "${CPEWF_TASK_ID}"},
    }
    with pytest.raises(Untranslatable, match="SIMPLE task's inputParameters only"):
        cd.to_baton_workflow({"name": "own", "tasks": [inline]})


@pytest.mark.parametrize("named", [{}, {"name": "child"}])
def test_a_workflow_definition_given_as_an_expression_is_read_as_conductor_s_at_run_time(
    named: dict[str, Any],
) -> None:
    sub = {
        "name": "sub",
        "taskReferenceName": "sub",
        "type": "SUB_WORKFLOW",
        "inputParameters": {"x": "${workflow.input.x}"},
        "subWorkflowParam": {**named, "workflowDefinition": "${prep.output.definition}"},
    }
    out = cd.to_baton_workflow(_wf([simple("prep"), sub]))
    # With a name, the named definition runs when the expression gives none (Conductor's).
    assert out["steps"][2] == {
        "id": "sub",
        "type": "SUB_WORKFLOW",
        "input": {"x": "${workflow.input.x}"},
        "definition": "${prep.output.definition}",
        "definitionDialect": "conductor",
        **({"definitionName": "child"} if named else {}),
    }
    parse_definition(out)
    # Baton → Conductor: the same expression, with the name (the step's own without one:
    # Conductor's model wants one).
    back = cd.to_conductor_workflow(out)["tasks"][2]
    assert back["subWorkflowParam"] == {
        "name": "child" if named else "sub",
        "workflowDefinition": "${prep.output.definition}",
    }


@pytest.mark.parametrize("given", ["child", 3, ["x"], "${a} and ${b}"])
def test_a_workflow_definition_neither_an_object_nor_one_expression_is_refused(
    given: Any,
) -> None:
    sub = {
        "name": "sub",
        "taskReferenceName": "sub",
        "type": "SUB_WORKFLOW",
        "subWorkflowParam": {"name": "child", "workflowDefinition": given},
    }
    with pytest.raises(Untranslatable) as e:
        cd.to_baton_workflow(_wf([sub]))
    status, body = from_error(e.value)
    assert status == 400 and "(sub)" in body["message"]
    assert "workflowDefinition is the definition itself" in body["message"]


@pytest.mark.parametrize(
    ("given", "kept"),
    [
        # conductor-client's (Java) default TaskDef: no limit.
        ({"rateLimitPerFrequency": 0, "rateLimitFrequencyInSeconds": 1}, {}),
        ({"rateLimitPerFrequency": 5, "rateLimitFrequencyInSeconds": 0}, {}),
        ({"rateLimitFrequencyInSeconds": 60}, {}),
        (
            {"rateLimitPerFrequency": 5, "rateLimitFrequencyInSeconds": 60},
            {"rateLimitPerFrequency": 5, "rateLimitFrequencyInSeconds": 60},
        ),
        ({"concurrentExecLimit": 0}, {}),
    ],
)
def test_a_rate_limit_is_the_pair_and_zero_means_none(
    given: dict[str, Any], kept: dict[str, Any]
) -> None:
    assert cd.to_baton_task_def({"name": "t", **given}) == {"name": "t", **kept}


def test_permissive_is_the_step_s_own_flag_both_ways() -> None:
    tasks = [
        simple("a", permissive=True),
        simple("b", permissive=True, optional=True),
        {
            "name": "fork",
            "taskReferenceName": "fork",
            "type": "FORK_JOIN",
            "forkTasks": [[simple("c", permissive=True)], [simple("d")]],
        },
        {"name": "join", "taskReferenceName": "join", "type": "JOIN", "joinOn": ["c", "d"]},
    ]
    out = cd.to_baton_workflow({"name": "perm", "tasks": tasks})
    a, b, fork = out["steps"]
    assert a["permissive"] is True and "optional" not in a
    assert b["permissive"] is True and b["optional"] is True
    assert fork["branches"][0][0]["permissive"] is True
    assert "permissive" not in fork["branches"][1][0]
    # A /v1 definition's permissive steps read back as Conductor's flag.
    back = cd.to_conductor_workflow(parse_definition(out).wire() | {"version": 1})["tasks"]
    assert [t.get("permissive") for t in back] == [True, True, None, None]
    assert back[2]["forkTasks"][0][0]["permissive"] is True
    assert "permissive" not in back[2]["forkTasks"][1][0]


def test_an_inline_task_definition_s_response_timeout_above_its_timeout_is_the_timeout() -> None:
    # As in Conductor's own test harness definitions (it does not validate inline definitions).
    task = simple(
        "a", taskDefinition={"name": "work", "timeoutSeconds": 120, "responseTimeoutSeconds": 3600}
    )
    (a,) = cd.to_baton_workflow({"name": "lease", "tasks": [task]})["steps"]
    assert a["timeoutSeconds"] == 120 and a["responseTimeoutSeconds"] == 120
    parse_definition(cd.to_baton_workflow({"name": "lease", "tasks": [task]}))
