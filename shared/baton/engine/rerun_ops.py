"""Running an ended instance again from one of its step executions (Conductor's rerun), and the
parents that wait again when a child of theirs runs again.

A rerun from execution E removes what came after E: in E's list, every execution of a later
step (and any later execution of E's own step); in each list holding E, the same after the
operator execution holding it; in a DO_WHILE holding E, the iterations after E's; and whatever
ran inside the executions removed. E itself is removed too and runs again as a new execution
in its place (its old one gone, as Conductor resets its task), or, when E is a SUB_WORKFLOW
whose child runs again, waits again in place. The operator executions holding E are reopened
as a retry reopens them (``engine.reopen``): the other lists of a PARALLEL or MAP that did not
complete run again, the ones that completed stay. Unlike Conductor's rerun, which removes every
task scheduled after E's, whichever list it sat in, a sibling branch that completed is kept:
what ran in parallel with E did not come after it.

A child whose parent's step waited on it, and ended with it, runs again with its parent when it
is retried, restarted or rerun: the parent's step waits on it again (Conductor's
``updateAndPushParents``), up the chain.
"""

from __future__ import annotations

import functools
import itertools
import uuid
from dataclasses import replace
from typing import Any

from psycopg.types.json import Jsonb

from baton.engine.core import EngineCore, log
from baton.engine.decide import Decider, Exec
from baton.engine.ids import path_uuid
from baton.engine.plan import Plan
from baton.engine.reads import exec_from_row
from baton.engine.records import NewEvent, key_of, parent_of
from baton.errors import Conflict, InstanceNotFound, StepNotFound
from baton.status import InstanceStatus, StepStatus
from baton.steps import SubWorkflowStep
from baton.store import instance_sql
from baton.store.db import Conn, first_in_transaction


def rewound(
    plan: Plan, runs: list[dict[str, Any]], target: dict[str, Any], *, fresh: bool
) -> tuple[set[uuid.UUID], list[dict[str, Any]]]:
    """What a rerun from ``target`` removes (the ids of ``runs``, every execution of the
    instance), and ``target`` with the operator executions holding it, innermost first.
    ``fresh``: ``target`` runs again as a new execution, so it and what ran inside it go too."""
    by_id = {r["id"]: r for r in runs}
    chain = [target]
    scope = target["scope"]
    while scope:
        owner = by_id[parent_of(scope)]
        chain.append(owner)
        scope = owner["scope"]
    gone: set[uuid.UUID] = set()
    inside: list[str] = []  # the scope prefixes of what ran inside a removed execution
    if fresh:
        gone.add(target["id"])
        inside.append(f"{target['scope']}{target['id']}#")

    def index(step_id: str) -> int:
        return plan.position(step_id).index if plan.has_step(step_id) else -1

    for member in chain:
        at = index(member["step_id"])
        for r in runs:
            if r["scope"] != member["scope"] or r["id"] == member["id"]:
                continue
            later_step = index(r["step_id"]) > at
            later_run = r["step_id"] == member["step_id"] and r["seq"] > member["seq"]
            if later_step or later_run:
                gone.add(r["id"])
                inside.append(f"{r['scope']}{r['id']}#")
    for held, owner in itertools.pairwise(chain):
        if owner["step_type"] != "DO_WHILE":
            continue
        k = int(key_of(held["scope"])[1:])
        prefix = f"{owner['scope']}{owner['id']}#k"
        for r in runs:
            if r["scope"].startswith(prefix) and int(r["scope"][len(prefix) :].split("/")[0]) > k:
                gone.add(r["id"])
    prefixes = tuple(inside)
    for r in runs:
        if prefixes and r["scope"].startswith(prefixes):
            gone.add(r["id"])
    return gone, chain


# A sibling SUB_WORKFLOW's child its parent waits on again: one still running (a rerun of its
# own is under way), or one that ended unsuccessfully (retried in place).
LIVE_CHILD = frozenset({InstanceStatus.RUNNING, InstanceStatus.PAUSED})
RESUMABLE_CHILD = LIVE_CHILD | {
    InstanceStatus.FAILED,
    InstanceStatus.TIMED_OUT,
    InstanceStatus.CANCELLED,
}
# Step types with lists of their own (a retry reopens them over their lists).
LIST_TYPES = frozenset({"PARALLEL", "MAP", "DO_WHILE", "SWITCH"})
UNFINISHED = frozenset({StepStatus.FAILED, StepStatus.TIMED_OUT, StepStatus.CANCELLED})


def run_again(
    plan: Plan, runs: list[dict[str, Any]], gone: set[uuid.UUID], chain: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The executions a rewind runs again besides its target: inside the operator executions
    holding the target, the last execution of each list when it is a step without lists that
    did not complete (a sibling its failure cancelled, another failure): what the reopened
    operators run again. A rerun resets these in place, as Conductor's does: their old
    executions go, and each runs again as a new one."""
    owners = tuple(f"{o['scope']}{o['id']}#" for o in chain[1:])
    if not owners:
        return []
    skip = {m["id"] for m in chain}

    def place(r: dict[str, Any]) -> tuple[int, int]:
        step_id = r["step_id"]
        return (plan.position(step_id).index if plan.has_step(step_id) else -1, r["seq"] or 0)

    lasts: dict[str, dict[str, Any]] = {}
    for r in runs:
        if r["id"] in gone or not r["scope"].startswith(owners):
            continue
        now = lasts.get(r["scope"])
        if now is None or place(r) > place(now):
            lasts[r["scope"]] = r
    return [
        r
        for r in lasts.values()
        if r["id"] not in skip and r["step_type"] not in LIST_TYPES and r["status"] in UNFINISHED
    ]


class RerunOps(EngineCore):
    def _rewind(
        self,
        conn: Conn,
        row: dict[str, Any],
        target_id: uuid.UUID,
        *,
        how: str,
        detail: dict[str, Any],
        step_input: dict[str, Any] | None = None,
        child_ended: dict[str, Any] | None = None,
        runs: list[dict[str, Any]] | None = None,
    ) -> list[uuid.UUID]:
        """Run the instance locked in ``row`` again from its execution ``target_id`` (see the
        module), ``how``: ``fresh``, a new execution in its place (given ``step_input`` as its
        input, if any); ``wait``, waiting again in place on its child; ``join``, an operator
        execution reopened over its lists as they ended (its JOIN run again).
        ``child_ended``: the event to leave the instance when the child it waits on again has
        ended already. The other executions it runs again are reset in place (``run_again``);
        with ``wait`` (a parent running again with its child), a SUB_WORKFLOW among them whose
        child ended unsuccessfully or still runs waits on that child again instead, as
        Conductor's parent resumes its sibling sub-workflows: returns the ended children, to be
        retried in place once this transaction commits."""
        iid = row["id"]
        plan = self.snapshots.plan(conn, row["snapshot_id"])
        if runs is None:
            runs = conn.execute(instance_sql.RUN_EXECUTIONS, {"id": iid}).fetchall()
        target = next((r for r in runs if r["id"] == target_id), None)
        if target is None:
            raise StepNotFound(str(iid), str(target_id))
        gone, chain = rewound(plan, runs, target, fresh=how == "fresh")
        again = run_again(plan, runs, gone, chain)
        children: dict[uuid.UUID, str] = {}
        if how == "wait":
            kids = [r["child_instance_id"] for r in again if r["step_type"] == "SUB_WORKFLOW"]
            if kids:
                children = {
                    c["id"]: c["status"]
                    for c in conn.execute(instance_sql.STATUSES, {"ids": kids}).fetchall()
                }
        waits = {
            r["id"]: r["child_instance_id"]
            for r in again
            if r["step_type"] == "SUB_WORKFLOW"
            and children.get(r["child_instance_id"]) in RESUMABLE_CHILD
        }
        resets = {r["id"] for r in again if r["id"] not in waits}
        with conn.pipeline():
            held = conn.execute(
                instance_sql.EXECUTIONS_BY_ID,
                {"ids": [m["id"] for m in chain] + [r["id"] for r in again]},
            )
            if gone or resets:
                conn.execute(
                    instance_sql.DELETE_EXECUTIONS, {"id": iid, "ids": list(gone | resets)}
                )
            last = conn.execute(instance_sql.LATEST_BY_STEP, {"id": iid})
            waiting = conn.execute(
                instance_sql.EVENTS_OF_INSTANCE,
                {"id": iid, "kinds": ["CONTINUE", "CHILD_ENDED"]},
            )
        latest: dict[str, dict[str, Exec]] = {}
        for r in last.fetchall():
            latest.setdefault(r["scope"], {})[r["step_id"]] = exec_from_row(r)
        # The target, what holds it and what runs again, given as unfinished, are the last of
        # their lists.
        for r in held.fetchall():
            e = replace(exec_from_row(r), status=StepStatus.FAILED)
            latest.setdefault(e.scope, {})[e.step_id] = e
        stale = [e["id"] for e in waiting.fetchall()]
        unfinished = latest[target["scope"]][target["step_id"]]

        def act(d: Decider) -> None:
            d.changes.consumed_events.extend(stale)
            if step_input is not None:
                d.rerun_inputs[(target["step_id"], target["scope"])] = step_input
            d.rerun_from(
                latest,
                None if how == "join" else unfinished,
                wait=how == "wait",
                detail=detail,
                waits=frozenset(waits),
            )
            if child_ended is not None:
                d.changes.events.append(NewEvent(iid, "CHILD_ENDED", target_id, child_ended))

        self._decide(conn, row, act)
        return [c for c in waits.values() if children[c] not in LIVE_CHILD]

    def _reopen_parents(self, child_id: uuid.UUID) -> list[tuple[uuid.UUID, uuid.UUID]]:
        """The parent whose step waited on ``child_id`` and ended runs again, waiting on it once
        more; then its own parent, and so on up. Returns (parent, child) for each other child
        a reopened parent waits on again, to be retried in place (InstanceOps does)."""
        resumed: list[tuple[uuid.UUID, uuid.UUID]] = []
        while True:
            reopened = self.db.transaction(
                functools.partial(self._reopen_parent, child_id=child_id), explicit_begin=True
            )
            if reopened is None:
                return resumed
            parent, siblings = reopened
            log.info(
                "parent runs again with its child",
                extra={"instance_id": str(parent), "child_id": str(child_id)},
            )
            resumed += [(parent, sibling) for sibling in siblings]
            child_id = parent

    def _hand_back(self, parent: uuid.UUID, child: uuid.UUID, why: str) -> None:
        """A child its parent waits on again could not be retried (a TERMINATE step ended it,
        it is archived): the parent is told it ended, as it did."""
        log.info(
            "a sibling child could not be retried: its parent is told it ended",
            extra={"instance_id": str(parent), "child_id": str(child), "why": why},
        )
        self.db.transaction(
            functools.partial(self._child_ended_again, parent=parent, child=child),
            explicit_begin=True,
        )

    def _child_ended_again(self, conn: Conn, parent: uuid.UUID, child: uuid.UUID) -> None:
        """Leave ``parent`` the end of ``child`` (an event, delivered as any child's end)."""
        row = first_in_transaction(conn, instance_sql.LOCK_INSTANCE, {"id": parent})
        ended = conn.execute(instance_sql.CHILD_AS_ENDED, {"child": child}).fetchone()
        if row is None or ended is None or ended["parent_step_execution_id"] is None:
            return
        payload = {
            "childId": str(child),
            "status": ended["status"],
            "output": ended["output"],
            "reason": ended["reason"],
        }
        event = NewEvent(parent, "CHILD_ENDED", ended["parent_step_execution_id"], payload)

        def act(d: Decider) -> None:
            d.changes.events.append(event)

        self._decide(conn, row, act)

    def _reopen_parent(
        self, conn: Conn, child_id: uuid.UUID
    ) -> tuple[uuid.UUID, list[uuid.UUID]] | None:
        row = first_in_transaction(conn, instance_sql.LOCK_PARENT_OF, {"child": child_id})
        if row is None or not InstanceStatus(row["status"]).terminal:
            return None  # no parent, or one still running (its step waits, or moved on)
        child = conn.execute(instance_sql.CHILD_AS_ENDED, {"child": child_id}).fetchone()
        if child is None or child["parent_step_execution_id"] is None:
            return None
        exec_id = child["parent_step_execution_id"]
        runs = conn.execute(instance_sql.RUN_EXECUTIONS, {"id": row["id"]}).fetchall()
        found = next((r for r in runs if r["id"] == exec_id), None)
        if found is None or found["child_instance_id"] != child_id:
            return None  # the step was rerun meanwhile, or started another child
        if any(
            r["step_id"] == found["step_id"]
            and r["scope"] == found["scope"]
            and r["seq"] > found["seq"]
            for r in runs
        ):
            return None  # a later execution of the step took over from it
        plan = self.snapshots.plan(conn, row["snapshot_id"])
        step = plan.step(found["step_id"]) if plan.has_step(found["step_id"]) else None
        if not isinstance(step, SubWorkflowStep) or step.optional is True:
            return None  # an optional step's failure did not end its parent
        ended = None
        if InstanceStatus(child["status"]).terminal:
            ended = {
                "childId": str(child_id),
                "status": child["status"],
                "output": child["output"],
                "reason": child["reason"],
            }
        siblings = self._rewind(
            conn,
            row,
            exec_id,
            how="wait",
            detail={"childId": str(child_id), "stepId": found["step_id"]},
            child_ended=ended,
            runs=runs,
        )
        return uuid.UUID(str(row["id"])), siblings

    def _rerun_from(
        self,
        iid: uuid.UUID,
        target_id: uuid.UUID,
        *,
        input: dict[str, Any] | None,
        step_input: dict[str, Any] | None,
        correlation_id: str | None,
        at_join: bool,
    ) -> None:
        """The transaction of :meth:`InstanceOps.rerun_instance` from a step execution."""

        def work(conn: Conn) -> None:
            row = self._lock_instance(conn, iid)
            if not InstanceStatus(row["status"]).terminal:
                raise Conflict(
                    f"instance {iid} is {row['status']}; only an ended instance can be rerun "
                    "(cancel it first)"
                )
            if input is not None or correlation_id is not None:
                conn.execute(
                    instance_sql.SET_INPUT,
                    {
                        "id": iid,
                        "input": None if input is None else Jsonb(input),
                        "correlation_id": correlation_id,
                        "expected": row["version"],
                    },
                )
                row = {
                    **row,
                    "version": row["version"] + 1,
                    "input": row["input"] if input is None else input,
                    "correlation_id": correlation_id or row["correlation_id"],
                }
            self._rewind(
                conn,
                row,
                target_id,
                how="join" if at_join else "fresh",
                detail={"stepExecutionId": str(target_id), **({"join": True} if at_join else {})},
                step_input=step_input,
            )

        self.db.transaction(work, explicit_begin=True)

    def find_execution(self, instance_id: str, key: str) -> tuple[str, str] | None:
        """(instance id, step execution id) of ``key``, the id of a step execution or of its
        job, in the instance or one of its descendants; None if there is none."""
        iid = path_uuid(instance_id, InstanceNotFound)
        k = _as_uuid(key)
        if k is None:
            return None
        row = self.db.autocommit(
            lambda conn: conn.execute(instance_sql.FIND_EXECUTION, {"id": iid, "key": k}).fetchone()
        )
        return None if row is None else (str(row["instance_id"]), str(row["id"]))

    def instance_of_execution(self, execution_id: str) -> str | None:
        """The instance a step execution belongs to (its id alone), or None."""
        eid = _as_uuid(execution_id)
        if eid is None:
            return None
        row = self.db.autocommit(
            lambda conn: conn.execute(instance_sql.INSTANCE_OF_EXECUTION, {"id": eid}).fetchone()
        )
        return None if row is None else str(row["instance_id"])

    def forks_of(self, instance_id: str) -> list[tuple[str, str]]:
        """(instance id, step execution id) of every PARALLEL and MAP execution of the instance
        and its descendants."""
        iid = path_uuid(instance_id, InstanceNotFound)
        rows = self.db.autocommit(
            lambda conn: conn.execute(instance_sql.FORKS_OF_TREE, {"id": iid}).fetchall()
        )
        return [(str(r["instance_id"]), str(r["id"])) for r in rows]


def _as_uuid(value: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(value)
    except ValueError:
        return None
