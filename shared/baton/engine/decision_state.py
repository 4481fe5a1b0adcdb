"""What one decision holds and reads: the instance, the rows written so far (:class:`Changes`),
the step executions it has seen, and the values its expressions resolve to (outputs read by
scope, a MAP item, a loop's iteration) and its payloads (stored inline or offloaded).

Pure: its only I/O is through a :class:`Reader` (read-only lookups inside the decision's
transaction) and the ``unref``/``offload`` callables it is given.
"""

from __future__ import annotations

import json
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from baton import expressions
from baton.engine.plan import Plan, nested
from baton.engine.records import (
    Changes,
    Exec,
    InputNotObject,
    InstanceState,
    OverLimit,
    Reader,
    limit_of_kind,
    parent_of,
    segments,
    truncate,
)
from baton.payload_ref import is_payload_ref
from baton.scripting import Sandbox, default_sandbox
from baton.settings import PayloadLimits
from baton.status import StepStatus
from baton.steps import DoWhileStep, Step

MAX_STEP_EXECUTIONS = 100_000


def _same(value: Any) -> Any:
    return value


class DecisionState:
    """The state of one decision and the values it reads (see ``engine.decide.Decider``)."""

    def __init__(
        self,
        plan: Plan,
        instance: InstanceState,
        reader: Reader,
        now: datetime,
        *,
        max_job_input_bytes: int = 2_000_000,
        max_step_executions: int = MAX_STEP_EXECUTIONS,
        unref: Callable[[Any], Any] | None = None,
        offload: Callable[[str, str], Any] | None = None,
        payload_limits: PayloadLimits | None = None,
        sandbox: Sandbox | None = None,
    ) -> None:
        self.plan = plan
        # Runs the definition's scripts (SCRIPT, JQ, JavaScript conditions), bounded.
        self.sandbox = sandbox or default_sandbox()
        # Stores a value's JSON in the payload bucket under a kind (STEP_INPUT, ...) and returns
        # its reference (None: no bucket, values stay inline); with the soft/hard limits.
        self.offload = offload
        self.payload_limits = payload_limits
        # Turns an offloaded payload's reference into its content (the engine's reader of the
        # payload bucket); the decider stays pure: it only calls what it was given.
        self.unref: Callable[[Any], Any] = unref or _same
        self.instance = instance
        self.reader = reader
        self.now = now
        self.max_job_input_bytes = max_job_input_bytes
        self.max_step_executions = max_step_executions
        self.changes = Changes()
        self._work: deque[Callable[[], None]] = deque()
        self._outputs: dict[tuple[str, str], Any] = {}
        # A rerun's input for the step it runs again, by (step id, scope): used once, in place
        # of the step's own input (Conductor's rerun ``taskInput``).
        self.rerun_inputs: dict[tuple[str, str], dict[str, Any]] = {}
        self._done_here: list[tuple[str, str, Any]] = []  # (step_id, scope, output) this decision
        self._execs: dict[uuid.UUID, Exec] = {}
        # Lists (by scope) whose last step failed permissively in this decision: the reason.
        self._list_failures: dict[str, str] = {}
        # The step execution whose failure failed the instance here (the first such: an
        # operator failing after its branch's task is not it), as Conductor's ``failedTaskId``.
        self.failed_task: uuid.UUID | None = None
        # The step execution, job and attempt of the last job failed in this decision (its
        # failure may have failed the instance: then it is ``failed_task``'s).
        self.failed_job: tuple[uuid.UUID, uuid.UUID, int] | None = None

    # --- executions ------------------------------------------------------------------------

    def done_here(self) -> list[tuple[str, str, Any]]:
        """(step id, scope, output) of every execution completed in this decision so far."""
        return list(self._done_here)

    def operator_execution(self, scope: str) -> Exec:
        """The operator execution that owns ``scope`` (from this decision, or read)."""
        exec_id = parent_of(scope)
        assert exec_id is not None
        return self.execution(exec_id)

    def knows(self, execs: Iterable[Exec]) -> None:
        """Step executions read with the decision's state (a batch's read brings the operator
        execution of each job): not read again. One this decision already holds is kept."""
        for e in execs:
            self._execs.setdefault(e.id, e)

    def execution(self, exec_id: uuid.UUID) -> Exec:
        found = self._execs.get(exec_id)
        if found is not None:
            return found
        new = self.changes.new_steps.get(exec_id)
        if new is not None:
            return Exec(
                new.id,
                new.step_id,
                new.scope,
                new.status,
                new.attempt,
                new.state,
                new.input,
                new.child_instance_id,
                new.output,
            )
        read = self.reader.execution(exec_id)
        assert read is not None, f"step execution {exec_id} is referenced but missing"
        self._execs[exec_id] = read
        return read

    # --- expressions ------------------------------------------------------------------------------

    def resolve_input(self, step: Step, scope: str, own: dict[str, Any] | None = None) -> Any:
        """``step``'s input resolved where it is scheduled: an object (an input given as one
        ``${…}`` expression must give one), else :class:`InputNotObject`. ``own``: the record
        of the execution being scheduled (``${<step>.executionId}`` and the like read it)."""
        if self.rerun_inputs:
            given = self.rerun_inputs.pop((step.id, scope), None)
            if given is not None:
                return given
        point = f"step:{step.id}"
        where = self.expression_scope(point, scope)
        if own is not None:
            others = where.step_record
            where = replace(where, step_record=lambda sid: own if sid == step.id else others(sid))
        value = expressions.resolve(step.input, where)
        if isinstance(value, dict):
            return value
        kind = "null" if value is None else type(value).__name__
        raise InputNotObject(f"its input resolved to {kind}, not an object")

    def resolve(self, template: Any, point: str, scope: str) -> Any:
        """Resolve ``template`` evaluated at ``point`` (see ``Plan.read_depth``) in ``scope``."""
        return expressions.resolve(template, self.expression_scope(point, scope))

    def expression_scope(self, point: str, scope: str) -> expressions.Scope:
        inst = self.instance
        created = inst.created_at or self.now  # None: this decision starts the instance
        workflow = {
            "input": self.unref(inst.input),
            "variables": inst.variables,
            "instanceId": str(inst.id),
            "correlationId": inst.correlation_id,
            "definitionName": inst.definition_name,
            "createdAt": created.isoformat(),
            "createTime": _epoch_ms(created),
        }
        return expressions.Scope(
            workflow=workflow,
            step_output=lambda step_id: self._output(step_id, point, scope),
            map=self.map_context(scope),
            loops=self.loop_iterations(point, scope),
            step_record=lambda step_id: self.record(step_id, point, scope),
        )

    def context(self, point: str, scope: str, step_ids: Sequence[str]) -> dict[str, Any]:
        """The JSONata context of a condition: workflow, map, the steps it reads and the running
        iteration of each loop it is inside (``<loopId>.iteration``)."""
        s = self.expression_scope(point, scope)
        out: dict[str, Any] = {"workflow": dict(s.workflow)}
        if s.map is not None:
            out["map"] = dict(s.map)
        for lid, k in s.loops.items():
            out[lid] = {"iteration": k}
        for sid in step_ids:
            out.setdefault(sid, {})["output"] = self.read(sid, point, scope)
        return out

    def loop_iterations(self, point: str, scope: str) -> dict[str, int]:
        """The running iteration (from 1) of each DO_WHILE ``point`` is inside, by loop id: read
        off ``scope``, whose segment for a loop's body is ``<execution>#k<iteration>``."""
        loops = self.plan.loops(point)
        if not loops:
            return {}
        parts = segments(scope)
        return {lid: int(parts[i].split("#k", 1)[1]) for lid, i in loops.items()}

    def _output(self, step_id: str, point: str, scope: str) -> Any:
        """What ``${<step_id>.output…}`` reads at ``point``: a step's output, or, for a DO_WHILE
        the point is inside, its output so far (:meth:`loop_so_far`)."""
        at = self.plan.loops(point).get(step_id)
        if at is None:
            return self.read(step_id, point, scope)
        return self.loop_so_far(step_id, scope, at)

    def loop_so_far(self, loop_id: str, scope: str, at: int) -> dict[str, Any]:
        """A running DO_WHILE's output as Conductor's DO_WHILE task keeps it while it runs: the
        running ``iteration`` and, for each iteration begun (``"1"``, ``"2"``…), the output of
        each of its steps (at any depth) by id, the latest of each; a loop with
        ``keepLastIterations`` n keeps only the last n iterations begun, as Conductor's
        ``keepLastN`` removes the older ones from its DO_WHILE task's output after each
        iteration, and only those are read. ``at``: the index of the loop body's segment in
        ``scope`` (``<execution>#k<iteration>``)."""
        parts = segments(scope)
        execution, _, running = parts[at].partition("#k")
        prefix = "".join(f"{p}/" for p in parts[:at]) + f"{execution}#"
        loop = self.plan.step(loop_id)
        ids = _ids_within(loop)
        first_kept = 1
        after = None
        if isinstance(loop, DoWhileStep) and loop.keep_last_iterations is not None:
            first_kept = int(running) - loop.keep_last_iterations + 1
            if first_kept > 1:
                # Every iteration begins with the body's first step, after the one before it
                # ended: only what came after iteration first_kept - 1's first step is read
                # (the rest of that iteration is dropped below).
                after = (loop.steps[0].id, f"{prefix}k{first_kept - 1}/")
        by_iteration: dict[int, dict[str, Any]] = {}
        for row in self.reader.outputs_by_list(prefix, ids, after):
            by_iteration.setdefault(int(row["list"][1:]), {})[row["step_id"]] = row["output"]
        for sid, done_scope, output in self._done_here:
            if sid in ids and done_scope.startswith(prefix):
                k = int(done_scope[len(prefix) :].split("/", 1)[0][1:])
                by_iteration.setdefault(k, {})[sid] = output
        out: dict[str, Any] = {"iteration": int(running)}
        for k in sorted(by_iteration):
            if k >= first_kept:
                out[str(k)] = {sid: self.unref(v) for sid, v in by_iteration[k].items()}
        return out

    def read(self, step_id: str, point: str, scope: str) -> Any:
        """The output of the execution of ``step_id`` that an expression at ``point`` in
        ``scope`` reads: the latest one inside the list the two share."""
        prefix = truncate(scope, self.plan.read_depth(point, step_id))
        for sid, done_scope, output in reversed(self._done_here):
            if sid == step_id and done_scope.startswith(prefix):
                return self.unref(output)
        key = (step_id, prefix)
        if key not in self._outputs:
            self._outputs[key] = self.unref(self.reader.output(step_id, prefix))
        return self._outputs[key]

    def record(self, step_id: str, point: str, scope: str) -> dict[str, Any] | None:
        """What ``${<step_id>.status}`` and the like read at ``point`` in ``scope``: the latest
        execution of ``step_id`` inside the list the two share, as this decision leaves it."""
        prefix = truncate(scope, self.plan.read_depth(point, step_id))
        new = next(
            (
                n
                for n in reversed(self.changes.new_steps.values())
                if n.step_id == step_id and n.scope.startswith(prefix)
            ),
            None,
        )
        if new is not None:
            job = next((j.id for j in self.changes.new_jobs if j.step_execution_id == new.id), None)
            row: dict[str, Any] = {
                "id": new.id,
                "status": new.status,
                "attempt": new.attempt,
                "started_at": None if new.status == StepStatus.SCHEDULED else self.now,
                "completed_at": None if new.status in _OPEN else self.now,
                "job_id": job,
            }
        else:
            read = self.reader.record(step_id, prefix)
            if read is None:
                return None
            row = dict(read)
            update = self.changes.step_updates.get(row["id"])
            if update is not None:  # changed by this decision: as it will be written
                row["status"] = update.status
                row["attempt"] = update.attempt or row["attempt"]
                if update.status not in _OPEN:
                    row["started_at"] = row["started_at"] or self.now
                    row["completed_at"] = row["completed_at"] or self.now
        started, completed = row["started_at"], row["completed_at"]
        return {
            "executionId": str(row["id"]),
            "jobId": None if row["job_id"] is None else str(row["job_id"]),
            "attempt": row["attempt"],
            "status": str(row["status"]),
            "startedAt": None if started is None else started.isoformat(),
            "completedAt": None if completed is None else completed.isoformat(),
            "startTime": None if started is None else _epoch_ms(started),
            "endTime": None if completed is None else _epoch_ms(completed),
        }

    def map_context(self, scope: str) -> dict[str, Any] | None:
        """``{item, index, input}`` of the innermost MAP item ``scope`` is in (None outside
        MAPs); ``input``: a keyed MAP's ``inputs`` entry for the item's key."""
        for part in reversed(segments(scope)):
            exec_id, key = part.split("#", 1)
            if key.startswith("i"):
                index = int(key[1:])
                stored = self.unref(self.execution(uuid.UUID(exec_id)).input)
                items = stored.get("items") if isinstance(stored, dict) else stored
                item = items[index] if isinstance(items, list) and index < len(items) else None
                given = None
                if isinstance(stored, dict) and isinstance(stored.get("inputs"), dict):
                    keys = stored.get("keys") or []
                    # An item without an entry reads {} (as Conductor gives a forked task).
                    given = stored["inputs"].get(keys[index], {}) if index < len(keys) else None
                elif isinstance(stored, dict) and isinstance(stored.get("indexAs"), str):
                    # Conductor's dynamic fork: the item with its index (a non-object wrapped).
                    whole = item if isinstance(item, dict) else {"input": item}
                    given = {**whole, stored["indexAs"]: index}
                return {"item": item, "index": index, "input": given}
        return None

    def payload_json(self, value: Any) -> str:
        return json.dumps(value, separators=(",", ":"))

    # --- payloads ---------------------------------------------------------------------------------

    def stored(self, value: Any, kind: str) -> Any:
        """``value`` as the engine keeps it: itself up to ``kind``'s soft limit, above it a
        reference to its JSON in the payload bucket; :class:`OverLimit` above the hard limit.
        Without a payload bucket, and for a value that is already a reference, itself."""
        if self.offload is None or self.payload_limits is None or is_payload_ref(value):
            return value
        if value is None or isinstance(value, (bool, int, float)):
            return value
        limit = limit_of_kind(self.payload_limits, kind)
        text = self.payload_json(value)
        size = len(text)  # ASCII (json.dumps escapes the rest): characters are bytes
        if size <= limit.soft_bytes:
            return value
        if size > limit.hard_bytes:
            self.changes.count("PayloadRefused", Kind=kind)
            raise OverLimit(
                f"is {size} bytes, above the {kind.lower().replace('_', ' ')} hard limit of "
                f"{limit.hard_bytes} bytes"
            )
        return self.offload(text, kind)

    def unref_all(self, values: dict[int, Any]) -> dict[int, Any]:
        """``values`` with each offloaded element read back (a join builds one value of them)."""
        return {k: self.unref(v) for k, v in values.items()}


_OPEN = (StepStatus.SCHEDULED, StepStatus.IN_PROGRESS)


def _ids_within(step: Step) -> list[str]:
    """The ids of every step nested in operator ``step``, at any depth."""
    out: list[str] = []
    for _, inner in nested(step):
        for s in inner:
            out.append(s.id)
            out.extend(_ids_within(s))
    return out


def _epoch_ms(at: datetime) -> int:
    return int(at.timestamp() * 1000)
