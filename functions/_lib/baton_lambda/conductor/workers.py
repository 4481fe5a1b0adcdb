"""Conductor's worker routes: ``POST /api/token``, the task polls, task updates (v1 and v2) and
task logs. A polled task is leased for its task definition's ``responseTimeoutSeconds``
(Conductor workers never heartbeat); an offloaded input is inlined while the poll's answer stays
within its budget."""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from typing import Any

from baton.conductor import auth
from baton.conductor import sync as csync
from baton.conductor import views as cviews
from baton.conductor.errors import Unauthorized
from baton.engine.long_poll import MAX_INSTANCE_WAIT_SECONDS, MAX_WAIT_SECONDS, wait_for_instance
from baton.errors import (
    AttemptNotCurrent,
    Conflict,
    JobNotFound,
    LeaseNotHeld,
    NotFound,
    Problem,
    ValidationFailed,
)
from baton.payload_ref import SIZE_KEY, is_payload_ref

from baton_lambda.conductor.common import (
    MAX_TIMEOUT_MS,
    Routes,
    api_key,
    empty_answer,
    for_conductor,
    json_answer,
    text_answer,
)
from baton_lambda.http import Api, _dumps

RESULT_STATUSES = ("COMPLETED", "FAILED", "FAILED_WITH_TERMINAL_ERROR", "IN_PROGRESS")
MAX_POLL = 100


class WorkerRoutes(Routes):
    def __init__(self, api: Api) -> None:
        super().__init__(api)
        self.route("POST", "/api/token", self.token)
        self.route("GET", "/api/tasks/poll/batch/{taskType}", self.poll_batch)
        self.route("GET", "/api/tasks/poll/{taskType}", self.poll_one)
        self.route("POST", "/api/tasks", self.update_task)
        self.route("POST", "/api/tasks/update-v2", self.update_task_v2)
        self.route("GET", "/api/tasks/{taskId}", self.get_task)
        # ({taskId} is the workflow's id, {taskRefName} the status: API Gateway names a path
        # segment once per level.) Registered before the update by reference name, whose
        # {status} the resolver would otherwise match "signal" with.
        self.route("POST", "/api/tasks/{taskId}/{taskRefName}/signal", self.signal)
        self.route("POST", "/api/tasks/{taskId}/{taskRefName}/signal/sync", self.signal_sync)
        self.route("POST", "/api/tasks/{taskId}/{taskRefName}/{status}", self.update_by_ref)
        self.route(
            "POST", "/api/tasks/{taskId}/{taskRefName}/{status}/sync", self.update_by_ref_sync
        )
        self.route("GET", "/api/tasks/{taskId}/log", self.get_logs)
        self.route("POST", "/api/tasks/{taskId}/log", self.add_log)

    # --- auth --------------------------------------------------------------------------------

    def token(self) -> Any:
        body = self.object_body()
        secret = body.get("keySecret")
        if not isinstance(secret, str) or not secret:
            raise Unauthorized("keySecret (a Baton API key) is required")
        if not auth.key_matches(secret, api_key()):
            raise Unauthorized("keySecret is not a valid API key", status=403)
        return json_answer({"token": auth.issue(secret, time.time())})

    # --- polls -------------------------------------------------------------------------------

    def _poll(self, task_type: str, count: int, wait_seconds: float = 0.0) -> list[dict[str, Any]]:
        api = self.api
        worker = api.query("workerid") or "conductor-worker"
        engine = api.engine()
        jobs = engine.poll(
            worker, [api.path(task_type)], count, wait_seconds=wait_seconds, gone=api.client_gone()
        )
        if not jobs:
            return []
        return self._tasks(engine, jobs, worker)

    def _tasks(self, engine: Any, jobs: list[dict[str, Any]], worker: str) -> list[dict[str, Any]]:
        """Claimed jobs as Conductor tasks, leased as Conductor workers expect (no heartbeats)."""
        extended = engine.lease_for_conductor([j["id"] for j in jobs], worker)
        # A dynamic fork's task's own reference; a loop's task's iteration.
        refs = engine.task_references([j["id"] for j in jobs])
        out = []
        for j in _inline_offloaded(engine, jobs):
            expires = extended.get(j["id"])
            until = expires.timestamp() if expires else cviews.ms(j.get("lockExpiresAt")) / 1000
            left = max(1, round(until - time.time()))
            reference, iteration = refs.get(j["id"], (None, None))
            out.append(cviews.polled_task(j, worker, left, reference, iteration))
        return out

    def poll_batch(self, taskType: str) -> Any:
        # Conductor's batch poll waits up to ``timeout`` ms for a task (default 100;
        # conductor-python always sends 100): a long-poll here too, woken as soon as a task is
        # claimable, at most the long-poll's 20 s (API Gateway gives up at 29 s).
        count = self.query_int("count", 1, 1, MAX_POLL)
        timeout_ms = self.query_int("timeout", 100, 0, MAX_TIMEOUT_MS)
        return json_answer(self._poll(taskType, count, min(timeout_ms / 1000, MAX_WAIT_SECONDS)))

    def poll_one(self, taskType: str) -> Any:
        tasks = self._poll(taskType, 1)
        return json_answer(tasks[0]) if tasks else empty_answer(204)

    # --- updates -----------------------------------------------------------------------------

    def _apply_result(self, result: dict[str, Any]) -> tuple[str, str, str]:
        """Apply a TaskResult; returns (task id, job type, worker id)."""
        tid = result.get("taskId")
        if not isinstance(tid, str) or not tid:
            raise ValidationFailed([Problem("taskId", "required")])
        status = result.get("status")
        if status not in RESULT_STATUSES:
            raise ValidationFailed([Problem("status", f"one of {', '.join(RESULT_STATUSES)}")])
        worker = result.get("workerId") if isinstance(result.get("workerId"), str) else None
        job_id, attempt = cviews.parse_task_id(tid)
        engine = self.api.engine()
        try:
            state = engine.job_state(job_id)
        except JobNotFound:
            # Not a worker's task: a HUMAN (USER_TASK) or WAIT (SIGNAL) step completed by its id.
            self._complete_waiting(result, tid, status)
            return tid, "", worker or ""
        worker = worker or state.get("worker_id") or "conductor-worker"
        self.api.log_keys(job_id=job_id)
        logs = result.get("logs")
        if isinstance(logs, list) and logs:
            engine.add_task_logs(
                job_id, attempt or state["attempt"], [x for x in logs if isinstance(x, dict)]
            )
        output = result.get("outputData")
        output = output if isinstance(output, dict) else {}
        job_type = str(state.get("job_type") or "")
        for _ in range(3):
            if state["status"] not in ("LOCKED", "UNLOCKED") or state["instance_status"] not in (
                "RUNNING",
                "PAUSED",
            ):
                return tid, job_type, worker  # a late update for a finished task: ignored
            if attempt is not None and attempt != state["attempt"]:
                # An earlier attempt's, from the worker that held it: a late completion still
                # counts while the job is not settled (the engine's rule); anything else is
                # stale, and Conductor ignores it with 200.
                with contextlib.suppress(AttemptNotCurrent, LeaseNotHeld):
                    self._result(engine, result, status, tid, worker=worker, output=output)
                return tid, job_type, worker
            # Conductor applies an update to a task by its id whoever sends it: one nobody
            # polled (or whose lease lapsed) is leased to the sender first; one another worker
            # holds is that attempt's result all the same (the attempt, not the worker, fences
            # it: a retried task has another id).
            holder = state.get("worker_id") if state["status"] == "LOCKED" else worker
            if state["status"] == "UNLOCKED" and not engine.take_job(
                job_id, worker, attempt=state["attempt"]
            ):
                state = engine.job_state(job_id)
                continue
            try:
                self._result(engine, result, status, tid, worker=str(holder), output=output)
            except AttemptNotCurrent:
                return tid, job_type, worker  # a stale attempt's: Conductor ignores it with 200
            except LeaseNotHeld:
                state = engine.job_state(job_id)  # it changed hands meanwhile: again
                continue
            return tid, job_type, worker
        raise Conflict(
            f"task {tid} could not be taken for this update: its type's concurrency or rate "
            "limit holds it back, or it kept changing hands; poll it, then update it"
        )

    @staticmethod
    def _result(
        engine: Any,
        result: dict[str, Any],
        status: str,
        tid: str,
        *,
        worker: str,
        output: dict[str, Any],
    ) -> None:
        """Apply ``result`` to the job of task ``tid`` as ``worker``, its lease holder."""
        job_id, attempt = cviews.parse_task_id(tid)
        if status == "COMPLETED":
            engine.complete_job(job_id, worker, output, attempt=attempt)
        elif status in ("FAILED", "FAILED_WITH_TERMINAL_ERROR"):
            reason = result.get("reasonForIncompletion")
            engine.fail_job(
                job_id,
                worker,
                str(reason) if reason else f"task {tid} failed",
                retryable=status == "FAILED",
                attempt=attempt,
                output=output,
            )
        elif result.get("extendLease"):
            engine.extend_lease(job_id, worker)
        else:
            seconds = result.get("callbackAfterSeconds")
            seconds = seconds if isinstance(seconds, int) and seconds >= 0 else 0
            engine.postpone_job(job_id, worker, seconds, attempt=attempt)

    def _complete_waiting(self, result: dict[str, Any], tid: str, status: str) -> None:
        engine = self.api.engine()
        # Conductor finds a task by its id alone: the workflowInstanceId sent may be another's
        # (a client that sends the child's id with its parent's SUB_WORKFLOW task), or none.
        wid = engine.instance_of_execution(tid)
        if wid is None:
            raise JobNotFound(tid)
        steps = engine.get_instance(wid).get("steps", [])
        step = next((s for s in steps if s["id"] == tid), None)
        if step is None or step["type"] not in ("USER_TASK", "SIGNAL", "TIMER", "SUB_WORKFLOW"):
            raise JobNotFound(tid)
        if step["status"] not in ("SCHEDULED", "IN_PROGRESS"):
            return  # a late update for a finished task: ignored, as Conductor does
        if status == "IN_PROGRESS":
            raise ValidationFailed(
                [
                    Problem(
                        "status",
                        f"a {cviews.TASK_TYPE[step['type']]} task is updated with COMPLETED, "
                        "FAILED or FAILED_WITH_TERMINAL_ERROR, not IN_PROGRESS",
                    )
                ]
            )
        output = result.get("outputData") if isinstance(result.get("outputData"), dict) else {}
        if status != "COMPLETED":
            reason = result.get("reasonForIncompletion")
            engine.fail_waiting(
                wid,
                step["stepId"],
                reason if isinstance(reason, str) and reason else f"the task was updated {status}",
                output,
                step_execution_id=tid,
            )
        elif step["type"] == "TIMER":
            engine.complete_timer(wid, step["stepId"], output, step_execution_id=tid)
        elif step["type"] == "USER_TASK":
            engine.complete_user_task(wid, step["stepId"], output, step_execution_id=tid)
        elif step["type"] == "SUB_WORKFLOW":
            engine.complete_sub_workflow(wid, step["stepId"], output, step_execution_id=tid)
        else:
            engine.signal(wid, step["stepId"], output, step_execution_id=tid)

    def update_task(self) -> Any:
        tid, _, _ = self._apply_result(self.object_body())
        return text_answer(tid)

    def update_task_v2(self) -> Any:
        _, job_type, worker = self._apply_result(self.object_body())
        if not job_type:
            return empty_answer(204)
        engine = self.api.engine()
        jobs = engine.poll(worker, [job_type], 1)
        if not jobs:
            return empty_answer(204)
        return json_answer(self._tasks(engine, jobs, worker)[0])

    def update_by_ref(self, taskId: str, taskRefName: str, status: str) -> Any:
        """Conductor's updateTask(workflowId, taskRefName, status, output): the workflow's
        pending task of that reference name (``taskId`` is the workflow's id here) gets
        ``status`` with the body as its output; answers its task id."""
        return text_answer(self._update_by_ref(taskId, taskRefName, status)[0])

    def update_by_ref_sync(self, taskId: str, taskRefName: str, status: str) -> Any:
        """The same, answering the workflow as it stands after the update (Conductor's
        updateTaskSync)."""
        _, wid = self._update_by_ref(taskId, taskRefName, status)
        engine = self.api.engine()
        instance = for_conductor(engine, engine.get_instance(wid, conductor_view=True))
        return json_answer(cviews.workflow(instance, engine.audit_trail(wid)))

    def _update_by_ref(self, workflow: str, reference: str, status: str) -> tuple[str, str]:
        api = self.api
        wid, ref, said = api.path(workflow), api.path(reference), api.path(status)
        output = api.json()  # empty is {}
        if not isinstance(output, dict):
            raise ValidationFailed([Problem("$", "the request body must be a JSON object")])
        engine = api.engine()
        instance = engine.get_instance(wid, conductor_view=True)
        tasks = cviews.workflow(instance, engine.audit_trail(wid))["tasks"]
        pending = [t for t in tasks if t["status"] in ("SCHEDULED", "IN_PROGRESS")]
        # By its name as shown (``ref__2`` in a loop), or, as only one can be pending, without.
        found = [t for t in pending if t["referenceTaskName"] == ref] or [
            t for t in pending if cviews.without_iteration(t["referenceTaskName"]) == ref
        ]
        if not found:
            raise NotFound(
                "task",
                ref,
                f"workflow {wid} has no pending task {ref!r} (SCHEDULED or IN_PROGRESS)",
            )
        result = {
            "taskId": found[-1]["taskId"],
            "workflowInstanceId": wid,
            "status": said,
            "outputData": output,
            "workerId": api.query("workerid"),
        }
        tid, _, _ = self._apply_result(result)
        return tid, wid

    # --- signals -----------------------------------------------------------------------------

    def signal(self, taskId: str, taskRefName: str) -> Any:
        """Conductor's signalTask: the workflow's blocked task (its first WAIT task not ended,
        else that of each running sub-workflow in turn, depth first) gets the status with the
        body as its output. A workflow with nothing blocked answers 200 all the same, as
        Conductor's; an unknown one 404."""
        self._signal(taskId, taskRefName)
        return empty_answer()

    def signal_sync(self, taskId: str, taskRefName: str) -> Any:
        """The same, then Conductor's SignalResponse once the workflow is blocked again (a WAIT
        task not ended, in it or a running sub-workflow) or has ended, or after
        ``timeoutMillis`` (default 5000; ``signalTimeout`` then says so), shaped by
        ``returnStrategy``: TARGET_WORKFLOW (the default) or BLOCKING_WORKFLOW, a WorkflowRun;
        BLOCKING_TASK or BLOCKING_TASK_INPUT, a TaskRun of the blocking task (nothing when
        none). No blocked task to signal: 404."""
        api = self.api
        strategy = (api.query("returnStrategy") or "TARGET_WORKFLOW").upper()
        if strategy not in SIGNAL_STRATEGIES:
            message = f"one of {', '.join(SIGNAL_STRATEGIES)}, not {strategy!r}"
            raise ValidationFailed([Problem("returnStrategy", message)])
        wait_ms = self.query_int("timeoutMillis", 5000, 0, MAX_TIMEOUT_MS)
        wid = api.path(taskId)
        if self._signal(taskId, taskRefName) is None:
            raise NotFound("task", wid, f"Found no blocked task in workflow {wid} to signal")
        engine = api.engine()
        blocked: list[tuple[dict[str, Any], str] | None] = [None]
        over = [False]  # whether the last read looked settled

        def settled(instance: dict[str, Any]) -> bool:
            blocked[0] = self._blocked(instance["id"], instance)
            over[0] = blocked[0] is not None or instance["status"] not in ("RUNNING", "PAUSED")
            return over[0]

        instance = wait_for_instance(
            lambda: engine.get_instance(wid, conductor_view=True),
            settled,
            wid,
            min(wait_ms / 1000, MAX_INSTANCE_WAIT_SECONDS),
            engine.wakeups,
            gone=api.client_gone(),
        )
        timed_out = not over[0]
        target = self._run(instance)
        answer: dict[str, Any] | None
        if strategy in ("TARGET_WORKFLOW", "BLOCKING_WORKFLOW"):
            owner = blocked[0][1] if blocked[0] and strategy == "BLOCKING_WORKFLOW" else wid
            answer = (
                target
                if owner == wid
                else self._run(engine.get_instance(owner, conductor_view=True))
            )
            answer = {**answer}
        elif blocked[0] is not None:
            answer = _task_run(blocked[0][0])
        else:
            answer = None
        if answer is None:
            return empty_answer()
        answer.update(
            responseType=strategy,
            targetWorkflowId=wid,
            targetWorkflowStatus=target["status"],
            requestId=api.query("requestId") or str(uuid.uuid4()),
            signalTimeout=timed_out,
        )
        return json_answer(answer)

    def _run(self, instance: dict[str, Any]) -> dict[str, Any]:
        engine = self.api.engine()
        wid = str(instance["id"])
        return csync.workflow_run(for_conductor(engine, instance), engine.audit_trail(wid), None)

    def _signal(self, workflow: str, status: str) -> tuple[str, str] | None:
        """Signal the workflow's blocked task: (its task id, its workflow), or None."""
        api = self.api
        wid, said = api.path(workflow), api.path(status)
        if said not in RESULT_STATUSES:
            raise ValidationFailed([Problem("status", f"one of {', '.join(RESULT_STATUSES)}")])
        output = api.json()  # empty is {}
        if not isinstance(output, dict):
            raise ValidationFailed([Problem("$", "the request body must be a JSON object")])
        found = self._blocked(wid)
        if found is None:
            return None
        task, owner = found
        result = {
            "taskId": task["taskId"],
            "workflowInstanceId": owner,
            "status": said,
            "outputData": output,
        }
        tid, _, _ = self._apply_result(result)
        return tid, owner

    def _blocked(
        self, wid: str, instance: dict[str, Any] | None = None, seen: frozenset[str] = frozenset()
    ) -> tuple[dict[str, Any], str] | None:
        """The first WAIT task not ended of workflow ``wid`` (``instance``: as read already),
        else of its running sub-workflows in turn, depth first, with its workflow's id; None
        when nothing is blocked."""
        engine = self.api.engine()
        if instance is None:
            instance = engine.get_instance(wid, conductor_view=True)
        tasks = cviews.tasks_of(instance, engine.audit_trail(wid))
        for t in tasks:
            if t["taskType"] == "WAIT" and t["status"] in ("SCHEDULED", "IN_PROGRESS"):
                return t, wid
        for t in tasks:
            child = t.get("subWorkflowId")
            if (
                t["taskType"] == "SUB_WORKFLOW"
                and t["status"] in ("SCHEDULED", "IN_PROGRESS")
                and child
                and child not in seen
            ):
                found = self._blocked(child, None, seen | {wid})
                if found is not None:
                    return found
        return None

    # --- tasks and logs ----------------------------------------------------------------------

    def get_task(self, taskId: str) -> Any:
        api = self.api
        job_id, _ = cviews.parse_task_id(api.path(taskId))
        engine = api.engine()
        state = engine.job_state(job_id)
        instance = engine.get_instance(str(state["instance_id"]), conductor_view=True)
        instance = for_conductor(engine, instance)
        wf = cviews.workflow(instance, engine.audit_trail(str(state["instance_id"])))
        matches = [t for t in wf["tasks"] if t["taskId"] == api.path(taskId)]
        matches = matches or [t for t in wf["tasks"] if t["taskId"].startswith(job_id)]
        if not matches:
            raise JobNotFound(job_id)
        return json_answer(matches[-1])

    def get_logs(self, taskId: str) -> Any:
        job_id, _ = cviews.parse_task_id(self.api.path(taskId))
        return json_answer(self.api.engine().task_logs(job_id))

    def add_log(self, taskId: str) -> Any:
        job_id, attempt = cviews.parse_task_id(self.api.path(taskId))
        line = self.api.json()
        engine = self.api.engine()
        state = engine.job_state(job_id)
        entry = {
            "log": line if isinstance(line, str) else _dumps(line),
            "taskId": taskId,
            "createdTime": int(time.time() * 1000),
        }
        engine.add_task_logs(job_id, attempt or state["attempt"], [entry])
        return empty_answer()


def _inline_offloaded(engine: Any, jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Conductor's workers do not fetch external payloads themselves: an offloaded input is read
    and inlined while the response stays within the poll budget; beyond it the task carries
    only its externalInputPayloadStoragePath (as Conductor's server does)."""
    if engine.payloads is None or not any(is_payload_ref(j.get("input")) for j in jobs):
        return jobs
    budget = engine.settings.max_poll_response_bytes - sum(
        len(json.dumps(j.get("input"))) for j in jobs if not is_payload_ref(j.get("input"))
    )
    out = []
    for j in jobs:
        value = j.get("input")
        if is_payload_ref(value) and 0 < value[SIZE_KEY] <= budget:  # type: ignore[index]
            budget -= value[SIZE_KEY]  # type: ignore[index]
            j = {**j, "input": engine.payloads(value)}  # noqa: PLW2901 (the job, inlined)
        out.append(j)
    return out


# Conductor's WorkflowSignalReturnStrategy.
SIGNAL_STRATEGIES = ("TARGET_WORKFLOW", "BLOCKING_WORKFLOW", "BLOCKING_TASK", "BLOCKING_TASK_INPUT")


def _task_run(task: dict[str, Any]) -> dict[str, Any]:
    """Conductor's TaskRun of a task as its view gives it."""
    run = {
        "taskType": task.get("taskType"),
        "taskId": task.get("taskId"),
        "referenceTaskName": task.get("referenceTaskName"),
        "retryCount": task.get("retryCount", 0),
        "taskDefName": task.get("taskDefName"),
        "retriedTaskId": task.get("retriedTaskId"),
        "workflowType": task.get("workflowType"),
        "reasonForIncompletion": task.get("reasonForIncompletion"),
        "priority": task.get("workflowPriority", 0),
        "workflowId": task.get("workflowInstanceId"),
        "correlationId": task.get("correlationId"),
        "status": task.get("status"),
        "input": task.get("inputData") or {},
        "output": task.get("outputData") or {},
        "createdBy": task.get("workerId"),
        "createTime": task.get("startTime", 0),
        "updateTime": task.get("updateTime", 0),
    }
    return {k: v for k, v in run.items() if v is not None}
