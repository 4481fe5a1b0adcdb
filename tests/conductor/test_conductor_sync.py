"""Conductor's synchronous execution (``POST /api/workflow/execute/{name}/{version}``) with the
unmodified conductor-python client: its hello-world flow (``WorkflowExecutor.execute``), an
inline definition (``ConductorWorkflow.execute``), ``waitUntilTaskRef`` answering as soon as
the workflow reaches that task, ``waitForSeconds`` answering a running workflow as it is, and
bad input refused in Conductor's error shape."""

from __future__ import annotations

import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from conductor.client.configuration.configuration import Configuration
from conductor.client.http.models.workflow_run import WorkflowRun
from conductor.client.orkes_clients import OrkesClients
from conductor.client.workflow.conductor_workflow import ConductorWorkflow
from conductor.client.workflow.executor.workflow_executor import WorkflowExecutor
from conductor.client.workflow.task.javascript_task import JavascriptTask
from conductor.client.workflow.task.simple_task import SimpleTask
from conductor.client.workflow.task.wait_task import WaitTask

from tests.support.helpers import wait_until
from tests.support.servers import LocalServer

pytestmark = [pytest.mark.e2e]


@pytest.fixture(scope="module")
def executor(config: Configuration) -> WorkflowExecutor:
    return WorkflowExecutor(configuration=config)


def test_the_hello_world_flow_runs_to_its_result(
    executor: WorkflowExecutor, prefix: str, workers: Any
) -> None:
    # conductor-python's examples/helloworld, step for step: a workflow of one worker task
    # (what ``greet(task_ref_name=..., name=...)`` builds), registered, then executed.
    workflow = ConductorWorkflow(name=f"{prefix}_greetings", executor=executor)
    workflow.version = 1
    greet = SimpleTask(task_def_name=f"{prefix}_hello", task_reference_name="greet_ref")
    greet.input_parameters.update({"name": workflow.input("name")})
    workflow >> greet
    workflow.register(True)
    request_id = str(uuid.uuid4())
    run = executor.execute(
        name=workflow.name,
        version=workflow.version,
        workflow_input={"name": "Orkes"},
        request_id=request_id,
        wait_for_seconds=25,  # the worker processes may still be starting
    )
    assert isinstance(run, WorkflowRun)
    assert run.status == "COMPLETED", run
    assert run.output["result"] == "Hello Orkes"
    assert run.request_id == request_id
    assert run.input == {"name": "Orkes"}
    assert [(t.reference_task_name, t.status) for t in run.tasks] == [("greet_ref", "COMPLETED")]
    wf = executor.get_workflow(run.workflow_id, include_tasks=False)
    assert wf.status == "COMPLETED"


def test_an_inline_definition_executes_without_registration(
    executor: WorkflowExecutor, prefix: str
) -> None:
    workflow = ConductorWorkflow(name=f"{prefix}_inline_sync", executor=executor)
    workflow >> JavascriptTask(
        task_ref_name="sum",
        script="$.a + $.b",
        bindings={"a": workflow.input("a"), "b": workflow.input("b")},
    )
    run = workflow.execute(workflow_input={"a": 2, "b": 3}, wait_for_seconds=20)
    assert run.status == "COMPLETED", run
    assert run.output == {"result": 5}


def test_wait_until_task_ref_answers_when_the_workflow_reaches_the_task(
    clients: OrkesClients, executor: WorkflowExecutor, prefix: str
) -> None:
    workflow = ConductorWorkflow(name=f"{prefix}_until_ref", executor=executor)
    workflow.version = 1
    workflow >> JavascriptTask(task_ref_name="prepare", script="1") >> WaitTask("hold")
    workflow >> SimpleTask(task_def_name=f"{prefix}_nobody", task_reference_name="after")
    workflow.register(True)
    with ThreadPoolExecutor(1) as pool:
        call: Future[WorkflowRun] = pool.submit(
            executor.execute,
            name=workflow.name,
            version=1,
            workflow_input={},
            wait_until_task_ref="HOLD",  # matched case-insensitively, as Conductor does
            wait_for_seconds=25,
        )
        # Answered as soon as the WAIT task is there, long before the 25 s are over.
        wait_until(call.done, timeout=15, what="the execute call to answer")
        run = call.result()
    assert run.status == "RUNNING"
    assert [(t.reference_task_name, t.status) for t in run.tasks] == [
        ("prepare", "COMPLETED"),
        ("hold", "IN_PROGRESS"),
    ]
    clients.get_workflow_client().terminate_workflow(run.workflow_id, reason="test over")


def test_wait_for_seconds_answers_a_running_workflow_as_it_is(
    clients: OrkesClients, executor: WorkflowExecutor, prefix: str
) -> None:
    workflow = ConductorWorkflow(name=f"{prefix}_no_worker", executor=executor)
    workflow.version = 1
    workflow >> SimpleTask(task_def_name=f"{prefix}_nobody", task_reference_name="idle")
    workflow.register(True)
    run = executor.execute(
        name=workflow.name, version=1, workflow_input={"x": 1}, wait_for_seconds=1
    )
    assert run.status == "RUNNING"
    assert run.output == {}
    assert [(t.reference_task_name, t.status) for t in run.tasks] == [("idle", "SCHEDULED")]
    clients.get_workflow_client().terminate_workflow(run.workflow_id, reason="test over")


@pytest.mark.parametrize(
    ("path", "query", "status", "says"),
    [
        ("/workflow/execute/{name}/1", "?waitForSeconds=-1", 400, "waitForSeconds"),
        ("/workflow/execute/{name}/1", "?waitForSeconds=soon", 400, "waitForSeconds"),
        ("/workflow/execute/{name}/one", "", 400, "version"),
        ("/workflow/execute/nope_{name}/1", "", 404, "nope_"),
    ],
)
def test_bad_execute_requests_are_4xx_in_conductors_shape(
    conductor_server: LocalServer,
    executor: WorkflowExecutor,
    prefix: str,
    path: str,
    query: str,
    status: int,
    says: str,
) -> None:
    name = f"{prefix}_no_worker"
    url = f"{conductor_server.base_url}/api{path.format(name=name)}{query}"
    answer = httpx.post(
        url, json={"input": {}}, headers={"x-api-key": conductor_server.api_key or ""}, timeout=30
    )
    assert answer.status_code == status, answer.text
    body = answer.json()
    assert body["status"] == status
    assert says in body["message"]
