"""A DO_WHILE that keeps its last n iterations (``keepLastIterations``, Conductor's ``keepLastN``)
keeps no more in its output while it runs, as Conductor removes the older ones after each
iteration; and what a decision reads of that output stays as long as the kept iterations, however
many iterations the loop has run (it grew with every one: a Conductor loop of a few thousand
iterations spent most of each decision reading every earlier iteration's rows)."""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
import pytest
from baton.engine.reads import DbReader
from baton.engine.service import Engine
from baton.engine.snapshots import Snapshots
from baton.store import instance_sql
from baton.store.db import Database

from tests.integration.test_claim_plan import _generic_plan, _nodes, _seed_workflows
from tests.integration.test_control_flow import steps_of


def _loop(
    keep: int | None, iterations: int, script: str = "$.so_far", **extra: Any
) -> dict[str, Any]:
    loop: dict[str, Any] = {
        "id": "loop",
        "type": "DO_WHILE",
        "while": f"loop.iteration < {iterations}",
        "maxIterations": iterations + 5,
        "steps": [
            {
                "id": "seen",
                "type": "SCRIPT",
                "script": script,
                "input": {"so_far": "${loop.output}"},
            }
        ],
        **extra,
    }
    if keep is not None:
        loop["keepLastIterations"] = keep
    return loop


def _run(engine: Engine, name: str, loop: dict[str, Any]) -> dict[str, Any]:
    engine.register_definition({"name": name, "steps": [loop]})
    inst, _ = engine.start_instance(definition_name=name, input={})
    got = engine.get_instance(inst["id"])
    assert got["status"] == "COMPLETED", got.get("reason")
    return got


def test_a_loop_keeping_two_iterations_shows_no_more_while_it_runs(engine: Engine) -> None:
    got = _run(engine, "keep_two", _loop(2, 5))
    seen = [s["output"]["result"] for s in steps_of(engine, got["id"], "seen")]
    assert len(seen) == 5
    # While iteration k runs, its own step has not ended: iterations k - 1 is all that is kept
    # of the earlier ones (the last two begun are k - 1 and k).
    assert seen[0] == {"iteration": 1}
    assert seen[1] == {"iteration": 2, "1": {"seen": {"result": seen[0]}}}
    assert seen[2] == {"iteration": 3, "2": {"seen": {"result": seen[1]}}}
    assert seen[4] == {"iteration": 5, "4": {"seen": {"result": seen[3]}}}


def test_a_javascript_while_sees_only_the_kept_iterations(engine: Engine) -> None:
    # Without the trim, the fourth key (iteration 3) would stop the loop after 3 iterations.
    loop = _loop(
        2,
        5,
        whileLanguage="javascript",
        iterationOutputs=True,
        **{"while": "$.loop.iteration < 6 && Object.keys($.loop).length <= 3"},
    )
    got = _run(engine, "keep_two_js", loop)
    assert len(steps_of(engine, got["id"], "seen")) == 6
    (ended,) = steps_of(engine, got["id"], "loop")
    assert sorted(ended["output"]) == ["5", "6", "iteration"]
    assert ended["output"]["iteration"] == 6


def test_a_javascript_while_naming_only_the_iteration_still_runs_as_before(
    engine: Engine,
) -> None:
    for while_ in (
        "$.loop.iteration < 4",
        "$.loop['iteration'] < 4",
        '$.loop [ "iteration" ] < 4',
        "$.loop.iterations === undefined && $.loop.iteration < 4",
    ):
        name = f"iteration_only_{abs(hash(while_))}"
        got = _run(engine, name, _loop(None, 4, whileLanguage="javascript", **{"while": while_}))
        assert len(steps_of(engine, got["id"], "seen")) == 4, while_


def test_the_read_of_a_long_loop_s_output_begins_after_the_iterations_not_kept(
    engine: Engine, db: Database
) -> None:
    # Each step shows only the keys it saw (its whole output so far nests all the others).
    got = _run(engine, "long_loop", _loop(3, 30, script="Object.keys($.so_far)"))
    (loop,) = steps_of(engine, got["id"], "loop")
    prefix = f"{loop['id']}#"

    def read(after: tuple[str, str] | None) -> list[dict[str, Any]]:
        return db.autocommit(
            lambda conn: DbReader(conn, uuid.UUID(got["id"]), Snapshots()).outputs_by_list(
                prefix, ["seen"], after
            )
        )

    every = read(None)
    after = read(("seen", f"{prefix}k27/"))
    none_such = read(("seen", f"{prefix}k99/"))
    assert sorted(int(r["list"][1:]) for r in every) == list(range(1, 31))
    assert sorted(int(r["list"][1:]) for r in after) == [28, 29, 30]
    assert len(none_such) == 30  # no such execution: no bound
    # The loop's own steps read no more than that: the last one saw iteration 29 only.
    seen = steps_of(engine, got["id"], "seen")
    assert sorted(seen[-1]["output"]["result"]) == ["28", "29", "iteration"]
    assert sorted(seen[9]["output"]["result"]) == ["8", "9", "iteration"]


def test_the_kept_plan_reads_each_step_by_its_range_of_the_instance(database_url: str) -> None:
    """A generic plan takes an instance for a handful of rows: with the steps as one ANY() it
    read a long loop's instance through (instance_id, id), every one of its executions."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        if conn.info.server_version < 160000:
            pytest.skip("EXPLAIN (GENERIC_PLAN) needs PostgreSQL 16")
        _seed_workflows(conn, 20_000)
        plan = _generic_plan(conn, instance_sql.LAST_OUTPUTS_BY_LIST)
    scans = [n for n in _nodes(plan["Plan"]) if n.get("Relation Name") == "step_execution"]
    assert scans and all(n["Node Type"] != "Seq Scan" for n in scans), scans
    (outputs,) = [n for n in scans if n.get("Alias") == "s"]
    assert outputs["Index Name"] == "step_execution_by_instance", outputs
    cond = outputs["Index Cond"]
    assert "step_id = wanted.step_id" in cond and "seq >" in cond, cond
