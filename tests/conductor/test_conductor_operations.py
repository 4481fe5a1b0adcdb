"""The rest of the surface through the client's public API: leases as Conductor workers expect
them, IN_PROGRESS callbacks, logs, HUMAN and WAIT tasks completed by id, pause and resume,
retry and restart, search, sub-workflows, timers."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from conductor.client.configuration.configuration import Configuration
from conductor.client.configuration.settings.authentication_settings import (
    AuthenticationSettings,
)
from conductor.client.http.api_client import ApiClient
from conductor.client.http.models.task_exec_log import TaskExecLog
from conductor.client.http.models.task_result import TaskResult
from conductor.client.orkes_clients import OrkesClients

from tests.support.helpers import wait_until
from tests.support.servers import LocalServer

pytestmark = [pytest.mark.e2e]


@pytest.fixture(scope="module")
def clients(conductor_server: LocalServer) -> OrkesClients:
    return OrkesClients(
        Configuration(
            server_api_url=f"{conductor_server.base_url}/api",
            authentication_settings=AuthenticationSettings(
                key_id="ops", key_secret=conductor_server.api_key or ""
            ),
        )
    )


def _register(clients: OrkesClients, tasks: list[dict[str, Any]], **extra: Any) -> str:
    name = f"ops_{uuid.uuid4().hex[:8]}"
    wd = ApiClient().deserialize_class(
        {"name": name, "version": 1, "tasks": tasks, **extra}, "WorkflowDef"
    )
    clients.get_metadata_client().register_workflow_def(wd, overwrite=True)
    return name


def _simple(ref: str, task_type: str, **extra: Any) -> dict[str, Any]:
    return {"name": task_type, "taskReferenceName": ref, "type": "SIMPLE", **extra}


def _poll(clients: OrkesClients, task_type: str, timeout: float = 15.0) -> Any:
    tc = clients.get_task_client()
    return wait_until(
        lambda: (tc.batch_poll_tasks(task_type, "ops-worker", 1, 100) or [None])[0],
        timeout=timeout,
        interval=0.05,
        what=f"a {task_type} task",
    )


def _done(clients: OrkesClients, task: Any, status: str = "COMPLETED", **extra: Any) -> None:
    clients.get_task_client().update_task(
        TaskResult(
            workflow_instance_id=task.workflow_instance_id,
            task_id=task.task_id,
            worker_id="ops-worker",
            status=status,
            output_data=extra.pop("output", {"ok": True}),
            **extra,
        )
    )


def _status(clients: OrkesClients, wid: str) -> Any:
    return clients.get_workflow_client().get_workflow(wid, include_tasks=True)


def _until_status(clients: OrkesClients, wid: str, status: str) -> Any:
    return wait_until(
        lambda: (wf := _status(clients, wid)).status == status and wf,
        timeout=30,
        interval=0.1,
        what=f"workflow {wid} {status}",
    )


def test_a_poll_leases_for_response_timeout_and_callbacks_hand_the_task_back(
    clients: OrkesClients,
) -> None:
    task_type = f"slow_{uuid.uuid4().hex[:6]}"
    name = _register(clients, [_simple("slow", task_type)])
    wid = clients.get_workflow_client().start_workflow_by_name(name, {})
    task = _poll(clients, task_type)
    # No task definition: Conductor's default responseTimeoutSeconds, not Baton's 30 s lease.
    assert task.response_timeout_seconds >= 3590
    assert task.status == "IN_PROGRESS" and task.retry_count == 0
    log = TaskExecLog(log="halfway", task_id=task.task_id, created_time=int(time.time() * 1000))
    _done(clients, task, "IN_PROGRESS", callback_after_seconds=1, logs=[log])
    assert _status(clients, wid).tasks[0].status == "SCHEDULED"
    again = _poll(clients, task_type, timeout=10)
    assert again.task_id == task.task_id  # the same task, handed out again
    _done(clients, again, output={"n": 1})
    wf = _until_status(clients, wid, "COMPLETED")
    assert wf.tasks[0].output_data == {"n": 1}
    logs = clients.get_task_client().get_task_logs(task.task_id)
    assert [entry.log for entry in logs] == ["halfway"]


def test_human_and_wait_tasks_are_completed_by_their_task_id(clients: OrkesClients) -> None:
    name = _register(
        clients,
        [
            {"name": "approve", "taskReferenceName": "approve", "type": "HUMAN"},
            {"name": "hold", "taskReferenceName": "hold", "type": "WAIT"},
            {
                "name": "nap",
                "taskReferenceName": "nap",
                "type": "WAIT",
                "inputParameters": {"duration": "1 seconds"},
            },
        ],
        outputParameters={"by": "${approve.output.by}", "note": "${hold.output.note}"},
    )
    wid = clients.get_workflow_client().start_workflow_by_name(name, {})

    def waiting(ref: str) -> Any:
        wf = _status(clients, wid)
        return next(
            (t for t in wf.tasks if t.reference_task_name == ref and t.status == "IN_PROGRESS"),
            None,
        )

    human = wait_until(lambda: waiting("approve"), timeout=15, what="the HUMAN task")
    assert human.task_type == "HUMAN"
    _done(clients, human, output={"by": "ada"})
    hold = wait_until(lambda: waiting("hold"), timeout=15, what="the WAIT task")
    assert hold.task_type == "WAIT"
    _done(clients, hold, output={"note": "go"})
    wf = _until_status(clients, wid, "COMPLETED")
    assert wf.output == {"by": "ada", "note": "go"}


def test_pause_resume_retry_restart_and_search(clients: OrkesClients) -> None:
    task_type = f"ops_{uuid.uuid4().hex[:6]}"
    name = _register(clients, [_simple("one", task_type, retryCount=0)])
    wc = clients.get_workflow_client()
    wid = wc.start_workflow_by_name(name, {"k": 1}, correlationId="corr-1")
    wc.pause_workflow(wid)
    assert _status(clients, wid).status == "PAUSED"
    wc.resume_workflow(wid)
    assert _status(clients, wid).status == "RUNNING"

    task = _poll(clients, task_type)
    _done(clients, task, "FAILED", reason_for_incompletion="first try")
    failed = _until_status(clients, wid, "FAILED")
    assert set(failed.failed_reference_task_names) == {"one"}
    assert "first try" in (failed.reason_for_incompletion or "")

    wc.retry_workflow(wid)
    task = _poll(clients, task_type)
    _done(clients, task)
    _until_status(clients, wid, "COMPLETED")

    wc.restart_workflow(wid)
    task = _poll(clients, task_type)
    _done(clients, task)
    _until_status(clients, wid, "COMPLETED")

    found = wc.search(query=f"workflowType={name} AND status=COMPLETED")
    assert [r.workflow_id for r in found.results] == [wid]
    assert found.results[0].status == "COMPLETED"


def test_sub_workflows_run_and_report_their_output(clients: OrkesClients) -> None:
    task_type = f"child_{uuid.uuid4().hex[:6]}"
    child = _register(
        clients,
        [_simple("inner", task_type, inputParameters={"v": "${workflow.input.v}"})],
        outputParameters={"got": "${inner.output.got}"},
    )
    parent = _register(
        clients,
        [
            {
                "name": "call_child",
                "taskReferenceName": "call_child",
                "type": "SUB_WORKFLOW",
                "subWorkflowParam": {"name": child, "version": 1},
                "inputParameters": {"v": "${workflow.input.v}"},
            }
        ],
        outputParameters={"child": "${call_child.output.got}"},
    )
    wid = clients.get_workflow_client().start_workflow_by_name(parent, {"v": 7})
    task = _poll(clients, task_type)
    assert task.input_data == {"v": 7}
    _done(clients, task, output={"got": 14})
    wf = _until_status(clients, wid, "COMPLETED")
    assert wf.output == {"child": 14}
    sub = wf.tasks[0]
    assert sub.task_type == "SUB_WORKFLOW" and sub.sub_workflow_id

    # A SUB_WORKFLOW task completed by its id (conductor-oss's e2e SubWorkflowInlineTests):
    # the parent goes on with that output; the child runs on by itself.
    wid = clients.get_workflow_client().start_workflow_by_name(parent, {"v": 1})
    sub = wait_until(
        lambda: (t := _status(clients, wid).tasks) and t[0].sub_workflow_id and t[0],
        timeout=15,
        what="the child to start",
    )
    clients.get_task_client().update_task(
        TaskResult(
            workflow_instance_id=wid,
            task_id=sub.task_id,
            status="COMPLETED",
            output_data={"got": "by hand"},
        )
    )
    wf = _until_status(clients, wid, "COMPLETED")
    assert wf.output == {"child": "by hand"}
    assert _status(clients, sub.sub_workflow_id).status == "RUNNING"
    _done(clients, _poll(clients, task_type), output={"got": 2})
    _until_status(clients, sub.sub_workflow_id, "COMPLETED")
    assert _status(clients, wid).output == {"child": "by hand"}


def test_every_task_and_workflow_definition_is_listed(clients: OrkesClients) -> None:
    from conductor.client.http.models.task_def import TaskDef

    metadata = clients.get_metadata_client()
    task_type = f"listed_{uuid.uuid4().hex[:8]}"
    metadata.register_task_def(
        TaskDef(name=task_type, retry_count=1, timeout_seconds=60, response_timeout_seconds=30)
    )
    name = _register(clients, [_simple("a", task_type)])
    assert task_type in {t.name for t in metadata.get_all_task_defs()}
    assert name in {w.name for w in metadata.get_all_workflow_defs()}


def test_an_offloaded_task_input_reaches_a_conductor_worker_inline(clients: OrkesClients) -> None:
    task_type = f"big_{uuid.uuid4().hex[:6]}"
    name = _register(
        clients, [_simple("big", task_type, inputParameters={"blob": "${workflow.input.blob}"})]
    )
    blob = "b" * 400_000  # above the 256 KB soft limit: the step input lives in S3
    wid = clients.get_workflow_client().start_workflow_by_name(name, {"blob": blob})
    task = _poll(clients, task_type)
    # conductor-python does not fetch external payloads: the server inlined it.
    assert task.input_data == {"blob": blob}
    # A workflow read inlines it too (within its budget), as Conductor keeps it inline.
    view = _status(clients, wid).tasks[0]
    assert view.input_data == {"blob": blob}
    assert not view.external_input_payload_storage_path
    _done(clients, task, output={"n": len(task.input_data["blob"])})
    assert _until_status(clients, wid, "COMPLETED").tasks[0].output_data == {"n": 400_000}


def test_a_dynamic_fork_runs_one_task_per_input_and_its_join_collects_them(
    clients: OrkesClients,
) -> None:
    prep, work = f"prep_{uuid.uuid4().hex[:6]}", f"work_{uuid.uuid4().hex[:6]}"
    name = _register(
        clients,
        [
            _simple("prep", prep),
            {
                "name": "fan",
                "taskReferenceName": "fan",
                "type": "FORK_JOIN_DYNAMIC",
                "inputParameters": {
                    "forkTaskName": work,
                    "forkTaskInputs": "${prep.output.inputs}",
                },
                "dynamicForkTasksParam": "dynamicTasks",
                "dynamicForkTasksInputParamName": "dynamicTasksInput",
            },
            {"name": "fan_join", "taskReferenceName": "fan_join", "type": "JOIN"},
        ],
        outputParameters={"results": "${fan_join.output}"},
    )
    wid = clients.get_workflow_client().start_workflow_by_name(name, {})
    # Objects and one plain value (Conductor hands that one as {input, __index}).
    items: list[Any] = [{"n": 0}, {"n": 1}, {"n": 2}, 3]
    _done(clients, _poll(clients, prep), output={"inputs": items})
    seen = {}
    for _ in range(4):
        task = _poll(clients, work)
        # Each forked task's input is its item with its index as __index, and the poll names
        # it by its own reference (_<forkTaskName>_<index>), not the fork's.
        seen[task.reference_task_name] = task.input_data
        n = task.input_data.get("n", task.input_data.get("input"))
        _done(clients, task, output={"double": n * 2})
    assert seen == {
        f"_{work}_0": {"n": 0, "__index": 0},
        f"_{work}_1": {"n": 1, "__index": 1},
        f"_{work}_2": {"n": 2, "__index": 2},
        f"_{work}_3": {"input": 3, "__index": 3},
    }
    wf = _until_status(clients, wid, "COMPLETED")
    # Keyed as Conductor names the forked tasks: _<forkTaskName>_<index>.
    assert wf.output["results"] == {f"_{work}_{n}": {"double": n * 2} for n in range(4)}
    shown_tasks = {t.reference_task_name: t for t in wf.tasks}
    assert shown_tasks[f"_{work}_3"].input_data == {"input": 3, "__index": 3}
    # The definition reads back in Conductor's JSON as it was registered.
    shown = clients.get_metadata_client().get_workflow_def(name)
    assert [t.type for t in shown.tasks] == ["SIMPLE", "FORK_JOIN_DYNAMIC", "JOIN"]
    assert shown.tasks[1].input_parameters["forkTaskName"] == work


def test_search_pages_by_start_and_size_and_counts_every_hit(
    clients: OrkesClients, conductor_server: LocalServer
) -> None:
    name = _register(clients, [_simple("one", f"idle_{uuid.uuid4().hex[:6]}")])
    wc = clients.get_workflow_client()
    ids = [wc.start_workflow_by_name(name, {}, correlationId=f"c{k}") for k in range(3)]
    first = wc.search(start=0, size=2, query=f"workflowType={name}")
    rest = wc.search(start=2, size=2, query=f"workflowType={name}")
    newest_first = list(reversed(ids))
    assert [r.workflow_id for r in first.results + rest.results] == newest_first
    by_id = wc.search(query=f"workflowType={name}", free_text=ids[1])
    assert [r.workflow_id for r in by_id.results] == [ids[1]]
    # conductor-python's model drops totalHits; Conductor's server sends it, so does Baton.
    raw = httpx.get(
        f"{conductor_server.base_url}/api/workflow/search",
        params={"query": f"workflowType={name}", "size": 1},
        headers={"x-api-key": conductor_server.api_key or ""},
        timeout=10,
    ).json()
    assert raw["totalHits"] == 3 and len(raw["results"]) == 1


def test_a_late_task_update_counts_and_the_next_attempt_s_is_ignored(
    clients: OrkesClients, conductor_server: LocalServer
) -> None:
    """A worker's lease (responseTimeoutSeconds) lapses, another worker polls the task again
    (the next attempt); the first worker's COMPLETED update arrives then: its work counts, and
    the second worker's update is the repeat, answered 200 as Conductor answers a late update."""
    from conductor.client.http.models.task_def import TaskDef

    task_type = f"late_{uuid.uuid4().hex[:6]}"
    clients.get_metadata_client().register_task_def(
        TaskDef(name=task_type, retry_count=3, timeout_seconds=0, response_timeout_seconds=1)
    )
    name = _register(clients, [_simple("late", task_type)])
    wid = clients.get_workflow_client().start_workflow_by_name(name, {})
    tc = clients.get_task_client()
    first = wait_until(
        lambda: (tc.batch_poll_tasks(task_type, "slow-worker", 1, 100) or [None])[0],
        timeout=15,
        what="the first attempt",
    )
    again = wait_until(
        lambda: (tc.batch_poll_tasks(task_type, "fast-worker", 1, 100) or [None])[0],
        timeout=15,
        what="the task again once the lease lapsed",
    )
    assert (first.task_id.rsplit(".", 1)[1], again.task_id.rsplit(".", 1)[1]) == ("1", "2")
    for task, worker in ((first, "slow-worker"), (again, "fast-worker")):
        tc.update_task(
            TaskResult(
                workflow_instance_id=wid,
                task_id=task.task_id,
                worker_id=worker,
                status="COMPLETED",
                output_data={"by": worker},
            )
        )
    wf = _until_status(clients, wid, "COMPLETED")
    assert wf.output == {"by": "slow-worker"}
    history = conductor_server.request("GET", f"/v1/instances/{wid}/history").json()["events"]
    (completed,) = [e for e in history if e["type"] == "JOB_COMPLETED"]
    assert (completed["attempt"], completed["workerId"]) == (1, "slow-worker")
    assert completed["detail"]["late"] is True


def _reads(clients: OrkesClients, wid: str) -> list[str | None]:
    """The workflow's reasonForIncompletion as each read answers it: with its tasks, without."""
    wc = clients.get_workflow_client()
    return [wc.get_workflow(wid, include_tasks=b).reason_for_incompletion for b in (True, False)]


def test_a_failed_or_terminated_workflow_gives_conductors_reason(clients: OrkesClients) -> None:
    """The reasons Conductor's harness asserts (``SimpleWorkflowSpec``: a task failed with a
    terminal error; ``LambdaAndTerminateTaskSpec``: a TERMINATE without a reason), whether the
    workflow is read with its tasks or without."""
    said = (
        "NON TRANSIENT ERROR OCCURRED: An integration point required to complete the task is down"
    )
    task_type = f"ops_{uuid.uuid4().hex[:6]}"
    name = _register(clients, [_simple("t1", task_type, retryCount=2), _simple("t2", task_type)])
    wid = clients.get_workflow_client().start_workflow_by_name(name, {})
    task = _poll(clients, task_type)
    _done(clients, task, "FAILED_WITH_TERMINAL_ERROR", reason_for_incompletion=said)
    failed = _until_status(clients, wid, "FAILED")
    t1 = next(t for t in failed.tasks if t.reference_task_name == "t1")
    want = f"Task {t1.task_id} failed with status: FAILED and reason: '{said}'"
    assert _reads(clients, wid) == [want, want]

    # Retries exhausted: the last attempt's task and what its worker said, not Baton's count.
    wid = clients.get_workflow_client().start_workflow_by_name(name, {})
    for n in range(3):
        _done(clients, _poll(clients, task_type), "FAILED", reason_for_incompletion=f"try {n}")
    failed = _until_status(clients, wid, "FAILED")
    last = [t for t in failed.tasks if t.reference_task_name == "t1"][-1]
    assert last.retry_count == 2
    want = f"Task {last.task_id} failed with status: FAILED and reason: 'try 2'"
    assert _reads(clients, wid) == [want, want]

    for status in ("COMPLETED", "FAILED", "TERMINATED"):
        terminate = {
            "name": "terminate",
            "taskReferenceName": "stop",
            "type": "TERMINATE",
            "inputParameters": {"terminationStatus": status},
        }
        wid = clients.get_workflow_client().start_workflow_by_name(
            _register(clients, [terminate]), {}
        )
        ended = _until_status(clients, wid, status)
        want = f"Workflow is {status} by TERMINATE task: {ended.tasks[0].task_id}"
        assert _reads(clients, wid) == [want, want]


def test_a_failed_task_keeps_its_output_and_the_failed_workflow_gets_its_output(
    clients: OrkesClients,
) -> None:
    """Conductor's ``SimpleWorkflowSpec`` "terminal error condition", on its own definition: the
    output a worker gives failing its task is the task's, and the failed workflow's output is
    its outputParameters over what ran (``DeciderService.updateWorkflowOutput``)."""
    corpus = Path(__file__).parent / "corpus"
    source = corpus / "test-harness__simple_workflow_1_integration_test__integration_test_wf.json"
    definition = json.loads(source.read_text())
    task_type = f"ops_{uuid.uuid4().hex[:6]}"
    for t in definition["tasks"]:
        t["name"] = task_type
    definition["outputParameters"]["validationErrors"] = "${t1.output.ErrorMessage}"
    name = _register(
        clients, definition.pop("tasks"), outputParameters=definition["outputParameters"]
    )
    wid = clients.get_workflow_client().start_workflow_by_name(
        name, {"param1": "p1 value", "param2": "p2 value"}
    )
    said = (
        "NON TRANSIENT ERROR OCCURRED: An integration point required to complete the task is down"
    )
    output = {
        "TERMINAL_ERROR": "Integration endpoint down: FOOBAR",
        "ErrorMessage": "There was a terminal error",
    }
    task = _poll(clients, task_type)
    _done(clients, task, "FAILED_WITH_TERMINAL_ERROR", reason_for_incompletion=said, output=output)
    wf = _until_status(clients, wid, "FAILED")
    (t1,) = wf.tasks
    assert (t1.reference_task_name, t1.retry_count, t1.output_data) == ("t1", 0, output)
    assert (
        wf.reason_for_incompletion
        == f"Task {t1.task_id} failed with status: FAILED and reason: '{said}'"
    )
    assert wf.output == {
        "o1": "p1 value",
        "o2": None,
        "o3": None,
        "validationErrors": "There was a terminal error",
    }
    assert set(wf.failed_reference_task_names) == {"t1"}

    # An optional task's failure output is read by the task after it.
    name = _register(
        clients,
        [
            _simple("t1", task_type, optional=True, retryCount=0),
            _simple("t2", task_type, inputParameters={"code": "${t1.output.code}"}),
        ],
    )
    wid = clients.get_workflow_client().start_workflow_by_name(name, {})
    _done(
        clients,
        _poll(clients, task_type),
        "FAILED",
        reason_for_incompletion="no",
        output={"code": 7},
    )
    t2 = _poll(clients, task_type)
    assert t2.reference_task_name == "t2" and t2.input_data == {"code": 7}
    _done(clients, t2)
    wf = _until_status(clients, wid, "COMPLETED")
    assert [(t.status, t.output_data) for t in wf.tasks] == [
        ("COMPLETED_WITH_ERRORS", {"code": 7}),
        ("COMPLETED", {"ok": True}),
    ]


def test_a_task_update_by_its_id_applies_whoever_sends_it(clients: OrkesClients) -> None:
    """As Conductor's (its e2e tests update tasks nobody polled): an update to a task no
    worker polled, to one another worker holds, or to one waiting out its retry delay is that
    task's result; a stale attempt's is ignored."""
    task_type = f"ops_{uuid.uuid4().hex[:6]}"
    name = _register(
        clients,
        [
            _simple("one", task_type, retryCount=1, retryDelaySeconds=600),
            _simple("two", task_type),
            _simple("three", task_type),
        ],
    )
    wid = clients.get_workflow_client().start_workflow_by_name(name, {})
    tc = clients.get_task_client()

    def current(ref: str) -> Any:
        return [t for t in _status(clients, wid).tasks if t.reference_task_name == ref][-1]

    def update(task: Any, status: str, worker: str, **extra: Any) -> None:
        tc.update_task(
            TaskResult(
                workflow_instance_id=wid,
                task_id=task.task_id,
                worker_id=worker,
                status=status,
                output_data=extra.pop("output", {}),
                **extra,
            )
        )

    # Never polled: its failure schedules the retry, 600 s away.
    first = current("one")
    assert first.status == "SCHEDULED"
    update(first, "FAILED", "someone", reason_for_incompletion="boom")
    retry = wait_until(
        lambda: (t := current("one")).retry_count == 1 and t, timeout=15, what="the retry"
    )
    assert retry.status == "SCHEDULED"
    # The retry, waiting out its delay, completed by its id; the failed attempt's is stale.
    update(retry, "COMPLETED", "someone", output={"n": 1})
    update(first, "COMPLETED", "someone", output={"n": 0})
    assert wait_until(lambda: current("two").status == "SCHEDULED", timeout=15, what="two")
    assert [t.output_data for t in _status(clients, wid).tasks][:2] == [{}, {"n": 1}]

    # Held by worker A, completed by B.
    held = _poll(clients, task_type)
    assert held.reference_task_name == "two"
    update(held, "COMPLETED", "worker-b", output={"by": "b"})
    assert wait_until(lambda: current("three").status == "SCHEDULED", timeout=15, what="three")
    assert current("two").output_data == {"by": "b"}
    update(current("three"), "COMPLETED", "someone")
    assert _until_status(clients, wid, "COMPLETED").output == {}


def test_a_task_past_its_response_timeout_times_out_and_so_does_its_workflow(
    clients: OrkesClients,
) -> None:
    """conductor-oss's e2e TaskTimeoutTests.testTaskResponseTimeout: a polled task nobody
    answers within responseTimeoutSeconds is TIMED_OUT, and with no retry left its workflow."""
    task_type = f"ops_{uuid.uuid4().hex[:6]}"
    definition = {
        "name": task_type,
        "retryCount": 0,
        "timeoutSeconds": 60,
        "responseTimeoutSeconds": 1,
        "timeoutPolicy": "TIME_OUT_WF",
    }
    name = _register(clients, [_simple("t1", task_type, taskDefinition=definition)])
    wid = clients.get_workflow_client().start_workflow_by_name(name, {})
    polled = _poll(clients, task_type)
    wf = _until_status(clients, wid, "TIMED_OUT")
    (t1,) = wf.tasks
    assert (t1.task_id, t1.status) == (polled.task_id, "TIMED_OUT")
    assert wf.reason_for_incompletion == (
        f"Task {t1.task_id} failed with status: TIMED_OUT and reason: "
        f"'{t1.reason_for_incompletion}'"
    )
    assert "responseTimeoutSeconds" in t1.reason_for_incompletion


def test_tasks_update_by_reference_name_and_workflows_in_bulk(clients: OrkesClients) -> None:
    """The client's updateTask by reference name (plain and sync), the bulk operations (each
    id its own result) and runDecider (a no-op: Baton decides at once)."""
    from conductor.client.http.api.workflow_bulk_resource_api import WorkflowBulkResourceApi
    from conductor.client.http.rest import ApiException

    task_type = f"ops_{uuid.uuid4().hex[:6]}"
    name = _register(clients, [_simple("t1", task_type), _simple("t2", task_type)])
    wc, tc = clients.get_workflow_client(), clients.get_task_client()
    wid = wc.start_workflow_by_name(name, {})
    t1 = _status(clients, wid).tasks[0]
    assert tc.update_task_by_ref_name(wid, "t1", "COMPLETED", {"a": 1}) == t1.task_id
    wait_until(lambda: len(_status(clients, wid).tasks) == 2, timeout=15, what="t2")
    wf = tc.update_task_sync(wid, "t2", "COMPLETED", {"b": 2})
    assert wf.status == "COMPLETED"
    assert [t.output_data for t in wf.tasks] == [{"result": {"a": 1}}, {"b": 2}]
    with pytest.raises(ApiException) as refused:
        tc.update_task_by_ref_name(wid, "t1", "COMPLETED", {})
    assert refused.value.status == 404

    ids = [wc.start_workflow_by_name(name, {}) for _ in range(3)]
    bulk = WorkflowBulkResourceApi(wc.api_client)
    wc.api_client.call_api(f"/workflow/decide/{ids[0]}", "PUT", auth_settings=[])
    answer = bulk.terminate([*ids, "not-a-workflow"], reason="enough")
    assert answer.bulk_successful_results == ids
    assert list(answer.bulk_error_results) == ["not-a-workflow"]
    assert {_status(clients, i).status for i in ids} == {"TERMINATED"}
    assert bulk.restart(ids).bulk_successful_results == ids
    assert {_status(clients, i).status for i in ids} == {"RUNNING"}
    assert bulk.pause_workflow(ids).bulk_successful_results == ids
    assert bulk.resume_workflow(ids[:2]).bulk_successful_results == ids[:2]
    assert [_status(clients, i).status for i in ids] == ["RUNNING", "RUNNING", "PAUSED"]
    failed = bulk.retry(ids[:1])  # a running workflow cannot be retried
    assert failed.bulk_successful_results == [] and "RUNNING" in failed.bulk_error_results[ids[0]]


def test_each_attempt_of_a_retried_task_has_its_own_times(clients: OrkesClients) -> None:
    """As Conductor's retried tasks (its e2e RetryPolicyTests read them): each attempt is
    scheduled when its retry is decided, with the delay as ``callbackAfterSeconds``, starts
    when polled, and a retry not yet polled has no start time and no reason of its own."""
    task_type = f"ops_{uuid.uuid4().hex[:6]}"
    task = _simple("t1", task_type, retryCount=1, retryDelaySeconds=1, retryLogic="FIXED")
    wid = clients.get_workflow_client().start_workflow_by_name(_register(clients, [task]), {})
    _done(clients, _poll(clients, task_type), "FAILED", reason_for_incompletion="first")
    first, retry = wait_until(
        lambda: len(ts := _status(clients, wid).tasks) == 2 and ts, timeout=15, what="the retry"
    )
    assert (retry.status, retry.callback_after_seconds) == ("SCHEDULED", 1)
    assert not retry.start_time and not retry.reason_for_incompletion
    assert first.end_time <= retry.scheduled_time
    polled = _poll(clients, task_type)
    assert polled.task_id == retry.task_id
    _done(clients, polled)
    first, second = _until_status(clients, wid, "COMPLETED").tasks
    assert first.scheduled_time <= first.start_time <= first.end_time <= second.scheduled_time
    assert second.start_time - second.scheduled_time >= 900  # polled once its delay was over
    assert (first.reason_for_incompletion, second.reason_for_incompletion) == ("first", None)


def test_max_retry_delay_seconds_caps_a_retry_even_below_its_delay(clients: OrkesClients) -> None:
    """conductor-oss's e2e RetryPolicyTests: ``maxRetryDelaySeconds`` caps every retry's delay,
    even one below ``retryDelaySeconds`` (its 0 is no cap), and reads back (conductor-python
    2.0.0's TaskDef predates the field: the definition goes as JSON)."""
    task_type = f"ops_{uuid.uuid4().hex[:6]}"
    api = clients.get_metadata_client().api_client

    def put(cap: int) -> Any:
        body = {"name": task_type, "retryCount": 1, "retryDelaySeconds": 5, "retryLogic": "FIXED"}
        api.call_api("/metadata/taskdefs", "PUT", body={**body, "maxRetryDelaySeconds": cap})
        read = api.call_api(
            f"/metadata/taskdefs/{task_type}",
            "GET",
            response_type="object",
            _return_http_data_only=True,
        )
        return read.get("maxRetryDelaySeconds")

    api.call_api("/metadata/taskdefs", "POST", body=[{"name": task_type}])
    assert put(0) is None
    assert put(2) == 2
    wid = clients.get_workflow_client().start_workflow_by_name(
        _register(clients, [_simple("t1", task_type)]), {}
    )
    _done(clients, _poll(clients, task_type), "FAILED", reason_for_incompletion="again")
    _, retry = wait_until(
        lambda: len(ts := _status(clients, wid).tasks) == 2 and ts, timeout=15, what="the retry"
    )
    assert retry.callback_after_seconds == 2


def test_a_reference_name_may_begin_with_a_digit(clients: OrkesClients) -> None:
    """Conductor takes any reference name (its e2e tests use random alphanumeric ones, such as
    ``93YWU``): one beginning with a digit registers, runs and is read by ``${…}``."""
    task_type = f"ops_{uuid.uuid4().hex[:6]}"
    second = _simple("2ND", task_type, inputParameters={"v": "${1ST.output.v}"})
    name = _register(clients, [_simple("1ST", task_type), second])
    clients.get_workflow_client().start_workflow_by_name(name, {})
    _done(clients, _poll(clients, task_type), output={"v": 42})
    polled = _poll(clients, task_type)
    assert (polled.reference_task_name, polled.input_data) == ("2ND", {"v": 42})


def test_an_output_baton_offloads_reads_back_inline_within_the_read_budget(
    clients: OrkesClients, conductor_server: LocalServer
) -> None:
    """Baton stores an operator's or a workflow's output above 256 KB in its payload bucket,
    where Conductor keeps it inline up to megabytes and its clients fetch no external payload:
    a workflow read inlines it (conductor-oss's e2e DoWhileEdgeCasesTests reads a 650 KB loop
    output), up to its budget; beyond it only its externalOutputPayloadStoragePath is shown."""
    task_type = f"ops_{uuid.uuid4().hex[:6]}"

    def run(branches: int, size: int) -> tuple[Any, dict[str, Any]]:
        fork = {
            "name": "fork",
            "taskReferenceName": "fork",
            "type": "FORK_JOIN",
            "forkTasks": [[_simple(f"b{n}", task_type)] for n in range(branches)],
        }
        join = {"name": "join", "taskReferenceName": "join", "type": "JOIN"}
        wid = clients.get_workflow_client().start_workflow_by_name(
            _register(clients, [fork, join]), {}
        )
        for _ in range(branches):
            task = _poll(clients, task_type)
            _done(clients, task, output={"blob": task.reference_task_name * size})
        wf = _until_status(clients, wid, "COMPLETED")
        return wf, conductor_server.request("GET", f"/v1/instances/{wid}").json()

    wf, raw = run(2, 100_000)  # two 200 KB outputs: the fork's and the workflow's 400 KB
    assert "$payload" in raw["output"]
    # The JOIN's output, by the forked tasks' reference names, as Conductor's.
    assert wf.output == {f"b{n}": {"blob": f"b{n}" * 100_000} for n in range(2)}
    assert not wf.external_output_payload_storage_path

    wf, raw = run(4, 225_000)  # 1.8 MB, beyond what a read inlines
    assert "$payload" in raw["output"]
    assert not wf.output and wf.external_output_payload_storage_path


def test_each_task_carries_its_workflow_task_and_definition_name(clients: OrkesClients) -> None:
    """As Conductor's task (its e2e WaitTaskTest and SubWorkflowTests read
    ``getWorkflowTask()``): the WorkflowTask as registered, and a system task's definition
    name is that WorkflowTask's name (a SWITCH's is SWITCH, as its mapper gives it)."""
    task_type = f"ops_{uuid.uuid4().hex[:6]}"
    switch = {
        "name": "route",
        "taskReferenceName": "route",
        "type": "SWITCH",
        "evaluatorType": "value-param",
        "expression": "k",
        "inputParameters": {"k": "${workflow.input.k}"},
        "decisionCases": {"a": [_simple("work", task_type)]},
    }
    wait = {"name": "hold_on", "taskReferenceName": "hold", "type": "WAIT"}
    name = _register(clients, [switch, wait])
    wid = clients.get_workflow_client().start_workflow_by_name(name, {"k": "a"})
    _done(clients, _poll(clients, task_type))
    tasks = wait_until(
        lambda: len(ts := _status(clients, wid).tasks) == 3 and ts, timeout=15, what="the WAIT"
    )
    shown = [(t.reference_task_name, t.task_def_name, t.workflow_task.name) for t in tasks]
    assert shown == [
        ("route", "SWITCH", "route"),
        ("work", task_type, task_type),
        ("hold", "hold_on", "hold_on"),
    ]
    assert tasks[0].workflow_task.decision_cases["a"][0].task_reference_name == "work"
    clients.get_workflow_client().terminate_workflow(wid, "done")


def test_backoff_scale_factor_and_jitter_are_kept_and_honoured(clients: OrkesClients) -> None:
    """conductor-oss's e2e RetryPolicyTests: LINEAR_BACKOFF waits retryDelaySeconds x
    backoffScaleFactor x the retry number; both backoff fields read back (the factor's default
    1 as Conductor shows it)."""
    task_type = f"ops_{uuid.uuid4().hex[:6]}"
    api = clients.get_metadata_client().api_client

    def read() -> Any:
        return api.call_api(
            f"/metadata/taskdefs/{task_type}",
            "GET",
            response_type="object",
            _return_http_data_only=True,
        )

    api.call_api("/metadata/taskdefs", "POST", body=[{"name": task_type}])
    assert read()["backoffScaleFactor"] == 1
    body = {
        "name": task_type,
        "retryCount": 2,
        "retryDelaySeconds": 1,
        "retryLogic": "LINEAR_BACKOFF",
        "backoffScaleFactor": 2,
        "backoffJitterMs": 0,
    }
    api.call_api("/metadata/taskdefs", "PUT", body=body)
    assert (read()["backoffScaleFactor"], read().get("backoffJitterMs")) == (2, 0)
    wid = clients.get_workflow_client().start_workflow_by_name(
        _register(clients, [_simple("t1", task_type)]), {}
    )
    _done(clients, _poll(clients, task_type), "FAILED", reason_for_incompletion="again")
    _, retry = wait_until(
        lambda: len(ts := _status(clients, wid).tasks) == 2 and ts, timeout=15, what="the retry"
    )
    assert retry.callback_after_seconds == 2
