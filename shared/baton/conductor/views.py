"""Baton instances, step executions and claimed jobs as Conductor's Workflow and Task JSON.

Only Conductor's enum values ever leave here (conductor-python drops a whole poll batch, or a
whole workflow, on one value it does not know): see :data:`WORKFLOW_STATUS` and
:data:`TASK_STATUS`. A Conductor task is one attempt: a step whose job ran three times shows as
three tasks, the earlier attempts FAILED (or TIMED_OUT) with ``retryCount`` 0, 1, and the one
in flight with ``retryCount`` 2. A task id is ``<jobId>.<attempt>`` for work handed to workers,
the step execution id for everything else.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from baton.conductor.tasks.common import join_back
from baton.payload_ref import REF_KEY, is_payload_ref

WORKFLOW_STATUS = {
    "RUNNING": "RUNNING",
    "PAUSED": "PAUSED",
    "COMPLETED": "COMPLETED",
    "FAILED": "FAILED",
    "TIMED_OUT": "TIMED_OUT",
    "CANCELLED": "TERMINATED",
}
TASK_STATUS = {
    "SCHEDULED": "SCHEDULED",
    "IN_PROGRESS": "IN_PROGRESS",
    "COMPLETED": "COMPLETED",
    "FAILED": "FAILED",
    "TIMED_OUT": "TIMED_OUT",
    "CANCELLED": "CANCELED",
    "SKIPPED": "SKIPPED",
    # job lease states, should one ever reach a view
    "UNLOCKED": "SCHEDULED",
    "LOCKED": "IN_PROGRESS",
}
CONDUCTOR_WORKFLOW_STATUSES = frozenset(WORKFLOW_STATUS.values())
CONDUCTOR_TASK_STATUSES = frozenset(
    {
        "IN_PROGRESS",
        "CANCELED",
        "FAILED",
        "FAILED_WITH_TERMINAL_ERROR",
        "COMPLETED",
        "COMPLETED_WITH_ERRORS",
        "SCHEDULED",
        "TIMED_OUT",
        "SKIPPED",
    }
)
TASK_TYPE = {
    "SWITCH": "SWITCH",
    "PARALLEL": "FORK",
    "MAP": "FORK_JOIN_DYNAMIC",
    "DO_WHILE": "DO_WHILE",
    "SUB_WORKFLOW": "SUB_WORKFLOW",
    "TIMER": "WAIT",
    "SIGNAL": "WAIT",
    "USER_TASK": "HUMAN",
    "SET_VARIABLE": "SET_VARIABLE",
    "TERMINATE": "TERMINATE",
    "NOOP": "NOOP",
    "START_WORKFLOW": "START_WORKFLOW",
    "EXCLUSIVE_JOIN": "EXCLUSIVE_JOIN",
    "HTTP_POLL": "HTTP_POLL",
    "EVENT": "EVENT",
    "SCRIPT": "INLINE",
    "JQ": "JSON_JQ_TRANSFORM",
    "HTTP": "HTTP",
}
_ATTEMPT_ENDS = {
    "JOB_FAILED": "FAILED",
    "JOB_LEASE_EXPIRED": "TIMED_OUT",
    "JOB_TIMED_OUT": "TIMED_OUT",
}


def workflow_status(status: str) -> str:
    return WORKFLOW_STATUS.get(status, "RUNNING")


def task_status(status: str | None) -> str:
    return TASK_STATUS.get(status or "", "SCHEDULED")


def ms(iso: str | None) -> int:
    """Epoch milliseconds of an ISO timestamp (0 for none, as Conductor shows unset times)."""
    if not iso:
        return 0
    return int(datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000)


def task_id(job_id: str, attempt: int) -> str:
    return f"{job_id}.{attempt}"


def join_task_id(fork_id: str) -> str:
    """The id of the JOIN task a view gives the fork (PARALLEL or MAP) execution ``fork_id``."""
    return str(uuid.uuid5(uuid.UUID(fork_id), "join"))


def parse_task_id(value: str) -> tuple[str, int | None]:
    """(job id, attempt) of a task id; a bare job id has no attempt."""
    job, dot, attempt = value.rpartition(".")
    if dot and attempt.isdigit():
        return job, int(attempt)
    return value, None


def data_of(value: Any) -> tuple[dict[str, Any], str | None]:
    """A Baton value as Conductor's ``*Data`` map and its ``external*PayloadStoragePath``: an
    offloaded payload is an empty map and its path (Conductor's external payload storage)."""
    if is_payload_ref(value):
        return {}, str(value[REF_KEY])
    if isinstance(value, dict):
        return value, None
    return ({} if value is None else {"result": value}), None


def polled_task(
    job: dict[str, Any],
    worker_id: str,
    response_timeout: int,
    reference: str | None = None,
    iteration: int | None = None,
) -> dict[str, Any]:
    """A job claimed through ``/v1``'s poll (wire form) as the Task a Conductor worker gets;
    ``reference``: a dynamic fork's task's own reference name (else the step's id);
    ``iteration``: the innermost DO_WHILE's it runs in, named ``<ref>__<iteration>`` as the
    workflow's read names it."""
    now_ms = ms(job.get("lockExpiresAt")) - response_timeout * 1000
    data, path = data_of(job.get("input"))
    name = reference or job["stepId"]
    task = {
        "taskId": task_id(job["id"], job["attempt"]),
        "taskType": job["jobType"],
        "taskDefName": job["jobType"],
        "referenceTaskName": name if iteration is None else f"{name}{LOOP_DELIMITER}{iteration}",
        "iteration": iteration or 0,
        "workflowInstanceId": job["instanceId"],
        "status": "IN_PROGRESS",
        "inputData": data,
        "outputData": {},
        "retryCount": job["attempt"] - 1,
        "pollCount": 1,
        "seq": 0,
        "workerId": worker_id,
        "callbackAfterSeconds": 0,
        "responseTimeoutSeconds": response_timeout,
        "startTime": max(now_ms, 0),
        "scheduledTime": max(now_ms, 0),
        "updateTime": max(now_ms, 0),
        "retried": False,
        "executed": False,
        "workflowPriority": 0,
    }
    if path is not None:
        task["externalInputPayloadStoragePath"] = path
    return task


def workflow(
    instance: dict[str, Any],
    audit: list[dict[str, Any]] | None = None,
    *,
    include_tasks: bool = True,
) -> dict[str, Any]:
    """A Baton instance (wire form, with its steps) as a Conductor Workflow; ``audit``: its
    history, for the tasks of earlier attempts and what a worker said failing one (a failed
    workflow's reason names its task, so pass it for one even without ``include_tasks``)."""
    status = workflow_status(instance["status"])
    failed = status in ("FAILED", "TIMED_OUT") and instance.get("reason") is not None
    shown = tasks_of(instance, audit or []) if include_tasks or failed else []
    tasks = shown if include_tasks else []
    failed_tasks = [
        t
        for t in tasks
        if t["status"] in ("FAILED", "FAILED_WITH_TERMINAL_ERROR", "TIMED_OUT") and not t["retried"]
    ]
    out: dict[str, Any] = {
        "workflowId": instance["id"],
        "workflowName": instance["definitionName"],
        "workflowType": instance["definitionName"],
        "workflowVersion": instance.get("definitionVersion") or 1,
        "status": status,
        "correlationId": instance.get("correlationId"),
        "reasonForIncompletion": reason(instance, shown),
        "input": data_of(instance.get("input"))[0],
        "output": data_of(instance.get("output"))[0],
        "externalInputPayloadStoragePath": data_of(instance.get("input"))[1],
        "externalOutputPayloadStoragePath": data_of(instance.get("output"))[1],
        "variables": instance.get("variables") or {},
        "tasks": tasks,
        "failedReferenceTaskNames": sorted({t["referenceTaskName"] for t in failed_tasks}),
        "failedTaskNames": sorted({t["taskDefName"] for t in failed_tasks}),
        "createTime": ms(instance.get("createdAt")),
        "startTime": ms(instance.get("createdAt")),
        "updateTime": ms(instance.get("updatedAt")),
        "endTime": ms(instance.get("completedAt")),
        "priority": 0,
        "parentWorkflowId": instance.get("parentInstanceId"),
        "idempotencyKey": instance.get("idempotencyKey"),
        "taskToDomain": {},
        "lastRetriedTime": _last_retried(audit),
    }
    return {k: v for k, v in out.items() if v is not None}


# The history rows of a run made to run again, as Conductor's lastRetriedTime counts them.
_RUN_AGAIN = frozenset({"INSTANCE_RETRIED", "INSTANCE_RERUN"})


def _last_retried(audit: list[dict[str, Any]] | None) -> int | None:
    """When the workflow was last retried or rerun (epoch ms; 0 never), from its history; None
    when the history was not read."""
    if audit is None:
        return None
    return max((ms(r.get("at")) for r in audit if r.get("event") in _RUN_AGAIN), default=0)


# The task definition name Conductor's own mappers give these task types.
_OWN_DEF_NAMES = {
    "SWITCH": "SWITCH",
    "DECISION": "DECISION",
    "FORK": "FORK",
    "FORK_JOIN_DYNAMIC": "FORK",
    "EXCLUSIVE_JOIN": "EXCLUSIVE_JOIN",
}


def workflow_tasks(source: Any) -> dict[str, dict[str, Any]]:
    """The WorkflowTasks of a Conductor definition as registered (``source``), by reference
    name, nested ones too (a SWITCH's cases, a FORK's branches, a DO_WHILE's loop): what
    Conductor's task shows as its ``workflowTask``."""
    out: dict[str, dict[str, Any]] = {}

    def walk(items: Any) -> None:
        for t in items if isinstance(items, list) else []:
            if not isinstance(t, dict):
                continue
            if isinstance(t.get("taskReferenceName"), str):
                out.setdefault(t["taskReferenceName"], t)
            for branch in (t.get("decisionCases") or {}).values():
                walk(branch)
            walk(t.get("defaultCase"))
            for branch in t.get("forkTasks") or []:
                walk(branch)
            walk(t.get("loopOver"))

    if isinstance(source, dict):
        walk(source.get("tasks"))
    return out


def reason(instance: dict[str, Any], tasks: list[dict[str, Any]]) -> str | None:
    """The workflow's ``reasonForIncompletion`` as Conductor words it, given its ``tasks``
    (``tasks_of``): for a workflow a task's failure ended, ``Task <taskId> failed with status:
    <workflow status> and reason: '<the task's reason>'`` (``DeciderService.retry``); for one a
    TERMINATE without a ``terminationReason`` ended, ``Workflow is <status> by TERMINATE task:
    <taskId>`` (``WorkflowExecutorOps.endExecution``), whatever that status. Baton's reason
    otherwise, and when the step execution it names is not among the steps read."""
    said: str | None = instance.get("reason")
    status = workflow_status(instance["status"])
    steps = instance.get("steps") or []
    if status in {"RUNNING", "PAUSED"}:
        return said
    if said is None:
        for step in steps:
            if step.get("type") == "TERMINATE" and step.get("status") == "COMPLETED":
                return f"Workflow is {status} by TERMINATE task: {step['id']}"
        return None
    if status not in ("FAILED", "TIMED_OUT"):
        return said
    for step in reversed(steps):
        error = step.get("error")
        # Baton's reason for a step's failure names the step and says its error: the step
        # execution whose failure ended the workflow is the one it was made from.
        if step.get("status") not in ("FAILED", "TIMED_OUT") or error is None:
            continue
        if said not in (
            f"step {step['stepId']!r} failed: {error}",
            f"step {step['stepId']!r} {error}",
        ):
            continue
        tid = (
            task_id(step["jobId"], int(step.get("attempt") or 1))
            if step.get("jobId")
            else step["id"]
        )
        task = next((t for t in tasks if t["taskId"] == tid), None)
        if task is None or task["status"] not in _UNSUCCESSFUL:
            # Not a task Conductor shows failed (a fork that failed to fork, which Conductor's
            # mapper refuses in its own words before scheduling any task): Baton's reason.
            return said
        why = task.get("reasonForIncompletion")
        why = "null" if why is None else why  # as Java's String.format writes it
        return f"Task {tid} failed with status: {status} and reason: '{why}'"
    return said


def summary(instance: dict[str, Any]) -> dict[str, Any]:
    """A Conductor WorkflowSummary (search results)."""
    return {
        k: v
        for k, v in {
            "workflowId": instance["id"],
            "workflowType": instance["definitionName"],
            "version": instance.get("definitionVersion") or 1,
            "status": workflow_status(instance["status"]),
            "correlationId": instance.get("correlationId"),
            "reasonForIncompletion": instance.get("reason"),
            "startTime": instance.get("createdAt"),
            "updateTime": instance.get("updatedAt"),
            "endTime": instance.get("completedAt"),
            "createdBy": None,
            "priority": 0,
        }.items()
        if v is not None
    }


def tasks_of(instance: dict[str, Any], audit: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every step execution as Conductor tasks, earlier attempts of a job first; a task inside
    a DO_WHILE is named ``<reference>__<iteration>`` with that ``iteration`` (Conductor's
    ``TaskUtils.appendIteration``), and a DO_WHILE's own task has its running iteration."""
    ended, begun = _attempts(audit)
    defined = instance.get("workflowTasks") or {}
    tasks: list[dict[str, Any]] = []
    steps = instance.get("steps") or []
    refs, hidden = _forked(steps)
    loops = _Loops(steps)
    joins = _Joins(instance, steps, hidden)
    placed: list[tuple[str, dict[str, Any]]] = []  # (the step execution's id, its task)
    for step in steps:
        sid = str(step["id"])
        if sid in joins.unforked:
            continue
        if sid in hidden:
            placed.extend(joins.after(sid))
            continue
        shown = _step_tasks(instance, step, ended, begun)
        given: dict[str, Any] = defined.get(step["stepId"]) or {}
        for t in shown if given else []:
            t["workflowTask"] = given
            # A system task's definition name: its WorkflowTask's name, but a few mappers'
            # own (Conductor's TaskMapperContext and its FORK, JOIN and SWITCH mappers).
            if t["taskDefName"] == step["stepId"] and isinstance(given.get("name"), str):
                t["taskDefName"] = _OWN_DEF_NAMES.get(t["taskType"], given["name"])
        # A dynamic fork's task is shown by its own reference name (the item's key).
        for t in shown if sid in refs else []:
            t["referenceTaskName"] = refs[sid]
        joins.seen(step, shown)
        placed.extend((sid, t) for t in shown)
        placed.extend(joins.after(sid))
    for sid, t in placed:
        iteration = loops.iteration(sid)
        if iteration is not None:
            t["referenceTaskName"] = f"{t['referenceTaskName']}{LOOP_DELIMITER}{iteration}"
            t["iteration"] = iteration
        if t["taskType"] == "DO_WHILE" and sid in loops.count:
            t["iteration"] = loops.count[sid]  # a DO_WHILE's own task: its running iteration
        if t["taskType"] == "JOIN" and sid in joins.forks:
            joins.finish(sid, t, iteration)
        tasks.append(t)
    for n, t in enumerate(tasks, start=1):
        t["seq"] = n
    return tasks


# What Conductor appends to the reference name of a task inside a DO_WHILE, before its iteration.
LOOP_DELIMITER = "__"

# A task's ends that are not a success (Conductor's ``Status.isSuccessful()`` false, terminal).
_UNSUCCESSFUL = ("FAILED", "FAILED_WITH_TERMINAL_ERROR", "TIMED_OUT", "CANCELED")


def without_iteration(reference: str) -> str:
    """A task's reference name without a loop's ``__<iteration>`` (Conductor's
    ``TaskUtils.removeIterationFromTaskRefName``)."""
    base, delimiter, iteration = reference.rpartition(LOOP_DELIMITER)
    return base if delimiter and iteration.isdigit() else reference


class _Loops:
    """Where each step execution is among an instance's DO_WHILE iterations: the innermost
    iteration it runs in, and each loop's running iteration (the latest its executions show).
    A ``keepLastN`` loop's older iterations are not among the steps: the Conductor surface reads
    instances without them (``get_instance(conductor_view=True)``)."""

    def __init__(self, steps: list[dict[str, Any]]) -> None:
        self._by_id = {str(s["id"]): s for s in steps}
        self.count: dict[str, int] = {}  # a loop's execution id -> its running iteration
        for s in steps:
            parent, k = s.get("parentStepExecutionId"), s.get("iteration")
            if parent is not None and isinstance(k, int):
                self.count[str(parent)] = max(self.count.get(str(parent), 0), k)

    def iteration(self, sid: str) -> int | None:
        """The iteration of the innermost loop ``sid`` runs in (None: in none)."""
        step = self._by_id.get(sid)
        while step is not None:
            parent = step.get("parentStepExecutionId")
            if parent is None:
                return None
            if isinstance(step.get("iteration"), int):
                return int(step["iteration"])
            step = self._by_id.get(str(parent))
        return None


class _Joins:
    """The JOIN task Conductor shows after each FORK_JOIN and FORK_JOIN_DYNAMIC (a PARALLEL or
    MAP execution, given ``forks``: what ``get_instance(conductor_view=True)`` reads of the
    definition): Conductor's FORK task ends as it is scheduled and its JOIN, scheduled with it
    after the first task of each branch, waits for the forked tasks (the execution's status),
    with ``joinOn`` as its input and, as output, the output of each of those that has one. The
    JOIN's reference name is the one registered (``tasks.common.join_note``)."""

    def __init__(
        self, instance: dict[str, Any], steps: list[dict[str, Any]], hidden: set[str]
    ) -> None:
        self.instance = instance
        forks = instance.get("forks") or {}
        self.forks = {
            str(s["id"]): forks[s["stepId"]]
            for s in steps
            if s["type"] in ("PARALLEL", "MAP") and s["stepId"] in forks
        }
        self._steps = {str(s["id"]): s for s in steps}
        # A fork that failed before forking anything (its task list or inputs not what it
        # takes) shows no task: Conductor's mapper refuses it before scheduling the FORK or
        # its JOIN.
        parents = {str(s.get("parentStepExecutionId")) for s in steps}
        self.unforked = {
            sid
            for sid in self.forks
            if self._steps[sid].get("status") == "FAILED" and sid not in parents
        }
        for sid in self.unforked:
            del self.forks[sid]
        # Where each JOIN goes: after the last task of a branch's first step (or its FORK's),
        # the latest in the list. A dynamic fork's item that chooses its task by type (a
        # hidden SWITCH) begins with the task it chose.
        self._at: dict[str, str] = {sid: sid for sid in self.forks}
        position = {str(s["id"]): n for n, s in enumerate(steps)}
        chosen: dict[str, str] = {}
        for s in steps:
            parent = str(s.get("parentStepExecutionId"))
            if parent in hidden:
                chosen.setdefault(parent, str(s["id"]))
        firsts: set[tuple[str, Any]] = set()
        for s in steps:
            parent = str(s.get("parentStepExecutionId"))
            branch = (
                parent,
                s.get("branch") if s.get("branch") is not None else s.get("itemIndex"),
            )
            if parent in self.forks and branch not in firsts:
                firsts.add(branch)
                at = chosen.get(str(s["id"]), str(s["id"]))
                if position[at] > position[self._at[parent]]:
                    self._at[parent] = at
        self._joins_at: dict[str, list[str]] = {}
        for fork, at in self._at.items():
            self._joins_at.setdefault(at, []).append(fork)
        # Each fork's joinOn: a dynamic fork's tasks' reference names, a FORK's branches' last.
        self._join_on: dict[str, list[str]] = {}
        for sid, info in self.forks.items():
            given = self._steps[sid].get("input")
            keys = given.get("keys") if isinstance(given, dict) else None
            self._join_on[sid] = (
                [str(k) for k in keys] if isinstance(keys, list) else list(info["joinOn"])
            )
        # Each fork's JOIN's output, filled as its forked tasks are seen (after it is placed).
        self._outputs: dict[str, dict[str, Any]] = {sid: {} for sid in self.forks}
        # The reasons of its forked tasks that failed (filled by ``seen``, for a JOIN that
        # fails), and the forks that failed once all their branches or items had ended.
        self._reasons: dict[str, list[str]] = {sid: [] for sid in self.forks}
        self._failed_at_join = {str(x) for x in instance.get("failedAtJoin") or ()}
        # Its optional forked tasks that failed (COMPLETED_WITH_ERRORS), as ``<name>/<taskId>``.
        self._with_errors: dict[str, list[str]] = {sid: [] for sid in self.forks}

    def seen(self, step: dict[str, Any], shown: list[dict[str, Any]]) -> None:
        """Note a step's tasks: a FORK's ends as it starts; a forked task's output is kept for
        its JOIN."""
        sid = str(step["id"])
        if sid in self.forks and shown[-1]["status"] != "SCHEDULED":
            own = shown[-1]
            own["status"], own["executed"] = "COMPLETED", True
            own["endTime"] = own.get("startTime") or own.get("scheduledTime")
            own["outputData"] = {}
            own.pop("reasonForIncompletion", None)
        parent = self._steps.get(str(step.get("parentStepExecutionId")))
        if parent is not None and str(parent["id"]) not in self.forks:
            parent = self._steps.get(str(parent.get("parentStepExecutionId")))  # a chosen task
        task = shown[-1]
        fork = str(parent["id"]) if parent is not None else ""
        if fork not in self.forks or task["referenceTaskName"] not in self._join_on[fork]:
            return
        if task["status"] in ("COMPLETED", "COMPLETED_WITH_ERRORS") and task["outputData"]:
            self._outputs[fork][task["referenceTaskName"]] = task["outputData"]
        elif task["status"] in _UNSUCCESSFUL and task.get("reasonForIncompletion"):
            self._reasons[fork].append(str(task["reasonForIncompletion"]))
        if task["status"] == "COMPLETED_WITH_ERRORS":
            self._with_errors[fork].append(f"{task['taskDefName']}/{task['taskId']}")

    def finish(self, fork_id: str, join: dict[str, Any], iteration: int | None) -> None:
        """Complete ``join`` (the JOIN of ``fork_id``) once every task is seen: in a loop, its
        output keys are its forked tasks' names in that iteration (Conductor's JOIN appends
        the iteration to each of its ``joinOn``); a JOIN that failed names why its forked tasks
        did; one over an optional task that failed is COMPLETED_WITH_ERRORS, naming it."""
        if iteration is not None:
            join["outputData"] = {
                f"{ref}{LOOP_DELIMITER}{iteration}": out for ref, out in join["outputData"].items()
            }
        if join["status"] == "FAILED" and self._reasons[fork_id]:
            join["reasonForIncompletion"] = " ".join(self._reasons[fork_id])
        elif join["status"] == "COMPLETED" and self._with_errors[fork_id]:
            # Conductor's JOIN over an optional task that failed (since 3.9).
            join["status"] = "COMPLETED_WITH_ERRORS"
            join["reasonForIncompletion"] = " ".join(
                [*self._with_errors[fork_id], "completed with errors"]
            )

    def after(self, sid: str) -> list[tuple[str, dict[str, Any]]]:
        """The JOIN tasks that go after the tasks of step execution ``sid``."""
        return [(fork, self._join(fork)) for fork in self._joins_at.get(sid, [])]

    def _join(self, fork_id: str) -> dict[str, Any]:
        fork = self._steps[fork_id]
        info = self.forks[fork_id]
        ref, _ = join_back({"id": fork["stepId"], "description": info.get("description")}, {})
        status = task_status(fork.get("status"))
        if status == "SCHEDULED":
            status = "IN_PROGRESS"
        elif status in _UNSUCCESSFUL:
            # Conductor's JOIN fails only over a permissive task of its joinOn that failed
            # (waiting for the other forked tasks first); any other failure of a forked task
            # fails (or times out) the workflow at once, which cancels the JOIN still waiting.
            status = "FAILED" if fork_id in self._failed_at_join else "CANCELED"
        t: dict[str, Any] = {
            "taskId": join_task_id(fork_id),
            "taskType": "JOIN",
            "taskDefName": "JOIN",
            "referenceTaskName": ref,
            "workflowInstanceId": self.instance["id"],
            "workflowType": self.instance["definitionName"],
            "correlationId": self.instance.get("correlationId"),
            "status": status,
            "inputData": {"joinOn": self._join_on[fork_id]},
            "outputData": self._outputs[fork_id],  # filled by ``seen`` as the list goes on
            "reasonForIncompletion": fork.get("error") if status == "FAILED" else None,
            "retryCount": 0,
            "pollCount": 0,
            "retried": False,
            "executed": status not in ("SCHEDULED", "IN_PROGRESS", "CANCELED"),
            "iteration": 0,
            "scheduledTime": ms(fork.get("createdAt")),
            "startTime": ms(fork.get("startedAt") or fork.get("createdAt")),
            "endTime": ms(fork.get("completedAt")),
            "updateTime": ms(fork.get("completedAt") or fork.get("createdAt")),
            "callbackAfterSeconds": 0,
            "workflowPriority": 0,
            "workflowTask": (self.instance.get("workflowTasks") or {}).get(ref),
        }
        return {k: v for k, v in t.items() if v is not None}


def _forked(steps: list[dict[str, Any]]) -> tuple[dict[str, str], set[str]]:
    """The tasks of keyed MAPs (Conductor's dynamic forks): each one's reference name (its
    item's key) by execution id, and the SWITCHes choosing a task by its type, which are no
    task of Conductor's (their chosen task takes the item's reference name)."""
    keys: dict[str, list[str]] = {}
    for step in steps:
        given = step.get("input")
        if (
            step.get("type") == "MAP"
            and isinstance(given, dict)
            and isinstance(given.get("keys"), list)
        ):
            keys[str(step["id"])] = [str(k) for k in given["keys"]]
    refs: dict[str, str] = {}
    hidden: set[str] = set()
    for step in steps:
        forked = keys.get(str(step.get("parentStepExecutionId")))
        index = step.get("itemIndex")
        if forked is not None and isinstance(index, int) and index < len(forked):
            refs[str(step["id"])] = forked[index]
            if step.get("type") == "SWITCH":
                hidden.add(str(step["id"]))
    for step in steps:
        parent = str(step.get("parentStepExecutionId"))
        if parent in hidden:
            refs[str(step["id"])] = refs[parent]
    return refs, hidden


def _attempts(
    audit: list[dict[str, Any]],
) -> tuple[dict[tuple[str, int], dict[str, Any]], dict[tuple[str, int], dict[str, Any]]]:
    """From the audit log, by (job id, attempt), in one pass: how each attempt ended (its
    status, what its worker said, when, whether retryable), and when it was scheduled (a retry
    when it was decided, with its delay: Conductor's ``callbackAfterSeconds``; the next attempt
    of a lapsed lease when it lapsed) and first handed to a worker."""
    ended: dict[tuple[str, int], dict[str, Any]] = {}
    begun: dict[tuple[str, int], dict[str, Any]] = {}
    for row in audit:
        detail = row.get("detail") or {}
        job, n, event = row.get("jobId"), detail.get("attempt"), row.get("event", "")
        if not job or not isinstance(n, int):
            continue
        kind = _ATTEMPT_ENDS.get(event)
        if kind:
            ended.setdefault(
                (job, n),
                {
                    "status": kind,
                    "reason": detail.get("error"),
                    "at": row.get("at"),
                    "retryable": detail.get("retryable"),
                },
            )
        if event == "JOB_DISPATCHED":
            begun.setdefault((job, n), {}).setdefault("started", row.get("at"))
        elif event == "JOB_RETRY_SCHEDULED":
            delay = detail.get("delaySeconds")
            at = begun.setdefault((job, n), {})
            at.setdefault("scheduled", row.get("at"))
            if isinstance(delay, (int, float)):
                at["callback"] = round(delay)
        elif event == "JOB_LEASE_EXPIRED":
            begun.setdefault((job, n + 1), {}).setdefault("scheduled", row.get("at"))
    return ended, begun


def _attempt_times(task: dict[str, Any], begun: dict[str, Any]) -> None:
    """Give ``task`` (one attempt) its own times: when it was scheduled and polled, and the
    delay its retry waited; an attempt not yet polled has no start and no reason yet."""
    if begun.get("scheduled"):
        task["scheduledTime"] = ms(begun["scheduled"])
    if begun.get("started") and task["status"] != "SCHEDULED":
        task["startTime"] = ms(begun["started"])
    if task["status"] == "SCHEDULED":
        task.pop("startTime", None)
    if task["status"] in ("SCHEDULED", "IN_PROGRESS"):
        task.pop("reasonForIncompletion", None)  # the step's is an earlier attempt's
    task["callbackAfterSeconds"] = begun.get("callback", 0)


def _step_tasks(
    instance: dict[str, Any],
    step: dict[str, Any],
    ended: dict[tuple[str, int], dict[str, Any]],
    begun: dict[tuple[str, int], dict[str, Any]],
) -> list[dict[str, Any]]:
    job_id = step.get("jobId")
    attempt = int(step.get("attempt") or 1)
    status = task_status(step.get("status"))
    if status == "COMPLETED" and step.get("error"):
        status = "COMPLETED_WITH_ERRORS"  # an optional step that failed (its error is kept)
    current = _task(instance, step, status, attempt)
    if not job_id:
        return [current]
    current["taskId"] = task_id(job_id, attempt)
    _attempt_times(current, begun.get((job_id, attempt), {}))
    earlier = []
    for n in range(1, attempt):
        end = ended.get((job_id, n), {"status": "FAILED", "reason": None, "at": None})
        t = _task(instance, step, end["status"], n)
        t["taskId"] = task_id(job_id, n)
        t["retried"] = True
        t["reasonForIncompletion"] = end["reason"]
        t["outputData"] = {}
        t["endTime"] = ms(end["at"])
        t["updateTime"] = ms(end["at"]) or t.get("updateTime")
        _attempt_times(t, begun.get((job_id, n), {}))
        earlier.append({k: v for k, v in t.items() if v is not None})
    last = ended.get((job_id, attempt), {})
    if status == "FAILED" and last.get("status") == "FAILED" and last.get("reason") is not None:
        # What the worker said, as Conductor keeps it (the step's error may add "retries
        # exhausted after …"): the reason a permissive task's workflow names too.
        current["reasonForIncompletion"] = last["reason"]
    if status == "FAILED" and last.get("retryable") is False:
        current["status"] = "FAILED_WITH_TERMINAL_ERROR"
    return [*earlier, current]


def _task(
    instance: dict[str, Any], step: dict[str, Any], status: str, attempt: int
) -> dict[str, Any]:
    # An HTTP step's job is the engine's own (baton:http): the task is Conductor's HTTP task.
    job_type = step.get("jobType") if step["type"] not in ("HTTP", "HTTP_POLL", "EVENT") else None
    kind = job_type or TASK_TYPE.get(step["type"], step["type"])
    output = step.get("output")
    t: dict[str, Any] = {
        "taskId": step["id"],
        "taskType": kind,
        "taskDefName": job_type or step["stepId"],
        "referenceTaskName": step["stepId"],
        "workflowInstanceId": instance["id"],
        "workflowType": instance["definitionName"],
        "correlationId": instance.get("correlationId"),
        "status": status,
        "inputData": data_of(step.get("input"))[0] if isinstance(step.get("input"), dict) else {},
        "outputData": data_of(output)[0],
        "externalInputPayloadStoragePath": data_of(step.get("input"))[1],
        "externalOutputPayloadStoragePath": data_of(output)[1],
        "reasonForIncompletion": None if status == "COMPLETED" else step.get("error"),
        "retryCount": attempt - 1,
        "pollCount": attempt if job_type and status != "SCHEDULED" else 0,
        "workerId": step.get("workerId"),
        "retried": False,
        "executed": status not in ("SCHEDULED", "IN_PROGRESS"),
        "iteration": step.get("iteration") or 0,
        "scheduledTime": ms(step.get("createdAt")),
        "startTime": ms(step.get("startedAt")),
        "endTime": ms(step.get("completedAt")),
        "updateTime": ms(step.get("completedAt") or step.get("startedAt") or step.get("createdAt")),
        "subWorkflowId": step.get("childInstanceId"),
        "parentTaskId": step.get("parentStepExecutionId"),
        "callbackAfterSeconds": 0,
        "workflowPriority": 0,
    }
    child = (instance.get("childDefinitions") or {}).get(str(step.get("childInstanceId")))
    if step["type"] == "SUB_WORKFLOW" and child is not None:
        # Conductor's SubWorkflowTaskMapper: the task's input, the child's definition, and
        # the input again as the child's workflowInput.
        given = t["inputData"]
        t["inputData"] = {
            **given,
            "subWorkflowName": child[0],
            "subWorkflowVersion": child[1],
            "workflowInput": given,
        }
    if step["type"] == "TIMER" and step.get("wakeAt"):
        # Conductor's WAIT with a duration or an until: its due time, and how long it waits
        # from its start (WaitTaskMapper).
        due = ms(step["wakeAt"])
        began = ms(step.get("startedAt") or step.get("createdAt"))
        t["waitTimeout"] = due
        t["callbackAfterSeconds"] = max(0, (due - began) // 1000) if began else 0
    elif step["type"] == "SIGNAL":
        t["callbackAfterSeconds"] = WAIT_FOREVER_SECONDS
    return {k: v for k, v in t.items() if v is not None}


# What Conductor's WAIT without a duration shows as its callbackAfterSeconds (Integer.MAX_VALUE).
WAIT_FOREVER_SECONDS = 2**31 - 1
