"""The claim's cost does not grow with rows it must not look at: 100,000 terminal jobs, or
50,000 expired leases of another job type, leave a poll reading a handful of rows; and the plan
a connection keeps for it (the generic plan of the prepared statement) is that same plan, so a
poll is not planned again each time."""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

import psycopg
import pytest
from baton.store import job_sql

ROWS = 100_000


def _seed(
    conn: psycopg.Connection[Any], *, terminal: int, expired_other: int, ready: int = 3
) -> None:
    iid, sid = uuid.uuid4(), uuid.uuid4()
    conn.execute("INSERT INTO definition_snapshot (digest, body) VALUES ('d', '{}') RETURNING id")
    conn.execute(
        "INSERT INTO instance (id, definition_name, snapshot_id, status)"
        " SELECT %s, 'seed', id, 'RUNNING' FROM definition_snapshot",
        (iid,),
    )
    conn.execute(
        "INSERT INTO step_execution (id, instance_id, step_id, step_type, status)"
        " VALUES (%s, %s, 's', 'SERVICE_TASK', 'IN_PROGRESS')",
        (sid, iid),
    )
    insert = """
        INSERT INTO job (id, instance_id, step_execution_id, job_type, status, lease_seconds,
                         retries_remaining, payload, run_at, lock_expires_at, worker_id)
        SELECT gen_random_uuid(), %(iid)s, %(sid)s, %(type)s, %(status)s, 30, 3, '{}',
               now() - interval '1 hour', %(expires)s, %(worker)s
          FROM generate_series(1, %(n)s)
    """
    conn.execute(
        insert,
        {
            "iid": iid,
            "sid": sid,
            "type": "wanted",
            "status": "COMPLETED",
            "expires": None,
            "worker": None,
            "n": terminal,
        },
    )
    conn.execute(
        insert,
        {
            "iid": iid,
            "sid": sid,
            "type": "other",
            "status": "LOCKED",
            "expires": "-infinity",
            "worker": "gone",
            "n": expired_other,
        },
    )
    conn.execute(
        insert,
        {
            "iid": iid,
            "sid": sid,
            "type": "wanted",
            "status": "UNLOCKED",
            "expires": None,
            "worker": None,
            "n": ready,
        },
    )
    conn.execute("ANALYZE job")


def _claim_plan(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    """EXPLAIN ANALYZE of the real claim statement, rolled back."""
    params = {
        "worker_id": "w",
        "job_types": ["wanted"],
        "max_bytes": 5_000_000,
        "state_max_bytes": job_sql.CLAIMED_STATE_MAX_BYTES,
    }
    claim = job_sql.claim_sql(10)
    with conn.transaction(force_rollback=True):
        row = conn.execute(
            b"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + claim.encode(), params
        ).fetchone()
    assert row is not None
    plan: dict[str, Any] = row[0][0] if isinstance(row[0], list) else json.loads(row[0])[0]
    return plan


def _nodes(node: dict[str, Any]) -> list[dict[str, Any]]:
    out = [node]
    for child in node.get("Plans", []):
        out.extend(_nodes(child))
    return out


def test_the_real_claim_reads_only_its_partial_indexes_whatever_else_the_table_holds(
    database_url: str,
) -> None:
    with psycopg.connect(database_url, autocommit=True) as conn:
        _seed(conn, terminal=ROWS, expired_other=ROWS // 2)
        plan = _claim_plan(conn)
    nodes = _nodes(plan["Plan"])
    scans = {n.get("Index Name") for n in nodes if "Index Name" in n}
    assert {"job_claimable", "job_lease_expiry_by_type"} <= scans, scans
    assert not [
        n for n in nodes if n["Node Type"] == "Seq Scan" and n.get("Relation Name") == "job"
    ]
    # Rows the claim read from the job table: the 3 ready jobs (and their updates), never the
    # 100,000 terminal rows nor the 50,000 expired leases of the other type.
    read = sum(
        n.get("Actual Rows", 0) + n.get("Rows Removed by Filter", 0)
        for n in nodes
        if n.get("Relation Name") == "job" and "Scan" in n["Node Type"]
    )
    assert read <= 20, read
    assert plan["Plan"]["Shared Hit Blocks"] + plan["Plan"].get("Shared Read Blocks", 0) < 400


def test_the_reaper_skips_from_type_to_type(database_url: str) -> None:
    with psycopg.connect(database_url, autocommit=True) as conn:
        _seed(conn, terminal=ROWS, expired_other=ROWS // 2)
        with conn.transaction(force_rollback=True):
            row = conn.execute(
                b"EXPLAIN (ANALYZE, FORMAT JSON) " + job_sql.REAP_EXPIRED.encode(),
                {"limit": 100},
            ).fetchone()
    assert row is not None
    nodes = _nodes(row[0][0]["Plan"])
    assert not [
        n for n in nodes if n["Node Type"] == "Seq Scan" and n.get("Relation Name") == "job"
    ]
    read = sum(
        n.get("Actual Rows", 0) * n.get("Actual Loops", 1) + n.get("Rows Removed by Filter", 0)
        for n in nodes
        if n.get("Relation Name") == "job" and "Scan" in n["Node Type"]
    )
    assert read <= 1_000, read  # a batch of 100 out of 50,000 expired leases, not all of them


def _seed_workflows(conn: psycopg.Connection[Any], n: int) -> None:
    """``n`` one-step instances, each with its step execution and its job: a backlog, nine in
    ten of them waiting to be claimed."""
    conn.execute("INSERT INTO definition_snapshot (digest, body) VALUES ('d', '{}')")
    conn.execute(
        """
        CREATE TEMP TABLE seed AS
        SELECT gen_random_uuid() AS iid, gen_random_uuid() AS sid, gen_random_uuid() AS jid,
               g %% 10 <> 0 AS open
          FROM generate_series(1, %(n)s) AS g
        """,
        {"n": n},
    )
    conn.execute(
        """
        INSERT INTO instance (id, definition_name, snapshot_id, status)
        SELECT iid, 'seed', (SELECT id FROM definition_snapshot),
               CASE WHEN open THEN 'RUNNING' ELSE 'COMPLETED' END
          FROM seed
        """
    )
    conn.execute(
        """
        INSERT INTO step_execution (id, instance_id, step_id, step_type, status)
        SELECT sid, iid, 'work', 'SERVICE_TASK',
               CASE WHEN open THEN 'SCHEDULED' ELSE 'COMPLETED' END
          FROM seed
        """
    )
    conn.execute(
        """
        INSERT INTO job (id, instance_id, step_execution_id, job_type, status, lease_seconds,
                         retries_remaining, payload, run_at)
        SELECT jid, iid, sid, 'wanted', CASE WHEN open THEN 'UNLOCKED' ELSE 'COMPLETED' END,
               30, 3, '{}', now() - interval '1 hour'
          FROM seed
        """
    )
    for table in ("instance", "step_execution", "job"):
        conn.execute(f"ANALYZE {table}")


def _generic_plan(conn: psycopg.Connection[Any], sql: str) -> dict[str, Any]:
    """The plan PostgreSQL keeps for ``sql`` once prepared, whatever the parameters
    (EXPLAIN (GENERIC_PLAN), PostgreSQL 16+)."""
    names: list[str] = []

    def number(m: re.Match[str]) -> str:
        if m.group(1) not in names:
            names.append(m.group(1))
        return f"${names.index(m.group(1)) + 1}"

    text = re.sub(r"%\((\w+)\)s", number, sql).replace("%%", "%")
    row = conn.execute(("EXPLAIN (GENERIC_PLAN, FORMAT JSON) " + text).encode()).fetchone()
    assert row is not None
    plan: dict[str, Any] = row[0][0]
    return plan


def test_the_claims_generic_plan_reads_partial_indexes_and_primary_keys_only(
    database_url: str,
) -> None:
    """With LIMIT $n the generic plan guessed a tenth of the table and joined job,
    step_execution and instance by scanning them whole; so the server planned every poll anew.
    The batch size is in the claim's text now, and the kept plan is the one a poll wants."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        if conn.info.server_version < 160000:
            pytest.skip("EXPLAIN (GENERIC_PLAN) needs PostgreSQL 16")
        _seed_workflows(conn, ROWS // 2)
        plan = _generic_plan(conn, job_sql.claim_sql(32))
    nodes = _nodes(plan["Plan"])
    seq = [n.get("Relation Name") for n in nodes if n["Node Type"] == "Seq Scan"]
    assert not {"job", "step_execution", "instance"} & set(seq), seq
    scans = {n.get("Index Name") for n in nodes if "Index Name" in n}
    assert {"job_claimable", "job_lease_expiry_by_type", "job_pkey"} <= scans, scans
    assert "step_execution_pkey" in scans, scans
    assert "instance_pkey" in scans, scans


def test_a_connection_plans_its_claim_once(database_url: str) -> None:
    """Polling the same batch size keeps one prepared claim, run on its generic plan."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        # (a claim rolled back would not do: psycopg forgets its prepared statements at ROLLBACK)
        _seed(conn, terminal=1_000, expired_other=0, ready=40)
        for _ in range(20):
            job_sql.claim(
                conn,
                worker_id="w",
                job_types=["wanted"],
                max_jobs=2,
                max_bytes=5_000_000,
                with_state=True,
            )
        rows = conn.execute(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements"
            " WHERE statement LIKE '%%LIMIT 2%%'"
        ).fetchall()
    assert len(rows) == 1, rows  # one statement for the batch size
    generic, custom = rows[0]
    assert generic >= 5 and custom <= 5, rows  # psycopg prepares at the 6th run


def test_a_claim_outside_the_batch_bounds_is_refused() -> None:
    with pytest.raises(ValueError, match="1 to"):
        job_sql.claim_sql(0)
    with pytest.raises(ValueError, match="1 to"):
        job_sql.claim_sql(job_sql.MAX_CLAIM_BATCH + 1)


@pytest.mark.parametrize("n_types", [1, 3])
def test_the_claims_generic_plan_counts_the_job_types_it_was_given(
    database_url: str, n_types: int
) -> None:
    """The generic plan of ``unnest($1)`` guessed ten job types, so ten times the rows in every
    part of the claim after it: with 200,000 finished workflows in the tables its cost was ~3,500
    against a poll's ~380, and PostgreSQL chose a plan made anew at every poll (0 generic plans
    of 146 in a drain; the claim's PostgreSQL CPU per job 81-106 us, 57-65 with the count in
    the text). The number of types is in the claim's text now, as the batch size is."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        if conn.info.server_version < 160000:
            pytest.skip("EXPLAIN (GENERIC_PLAN) needs PostgreSQL 16")
        _seed_workflows(conn, 1_000)
        # As autovacuum leaves it in a deployment with no limited types: known to be empty.
        conn.execute("VACUUM ANALYZE job_type_limit")
        plan = _generic_plan(conn, job_sql.claim_sql(32, n_types))
    types = [n for n in _nodes(plan["Plan"]) if n.get("Subplan Name") == "CTE types"]
    assert len(types) == 1, types
    assert types[0]["Plan Rows"] <= n_types, types[0]["Plan Rows"]


def test_a_claim_names_at_least_one_job_type() -> None:
    with pytest.raises(ValueError, match="1 to"):
        job_sql.claim_sql(32, 0)


@pytest.mark.parametrize("n_types", [1, 3])
def test_the_limited_claims_generic_plan_counts_the_job_types_it_was_given(
    database_url: str, n_types: int
) -> None:
    """The same for the claim of types with limits: with 200,000 finished workflows in the
    tables it was planned anew at every poll (0 generic plans of 110 in a drain; 105 of 110
    with the count in its text, and the claim's PostgreSQL CPU per job 67-96 -> 52-60 us)."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        if conn.info.server_version < 160000:
            pytest.skip("EXPLAIN (GENERIC_PLAN) needs PostgreSQL 16")
        _seed_workflows(conn, 1_000)
        conn.execute("VACUUM ANALYZE job_type_limit")
        plan = _generic_plan(conn, job_sql.claim_limited_sql(n_types))
    # The rows the plan expects from the types: the unnest's, or the Limit's above it.
    counted = [
        parent["Plan Rows"] if parent["Node Type"] == "Limit" else child["Plan Rows"]
        for parent in _nodes(plan["Plan"])
        for child in parent.get("Plans", [])
        if child.get("Function Name") == "unnest"
    ]
    assert counted, "no scan of the types"
    assert all(rows <= n_types for rows in counted), counted


def test_the_claim_takes_its_rows_by_primary_key_on_small_tables_too(database_url: str) -> None:
    """The claim's update finds its jobs by primary key (``id = ANY(ARRAY(...))``), not by
    joining the picked rows: with 2,000 workflows in the tables that join planned as a hash
    join over a sequential scan of job and of step_execution, and a connection kept the plan
    until an ANALYZE made it plan anew. (With a few hundred rows a scan is the right plan.)"""
    with psycopg.connect(database_url, autocommit=True) as conn:
        if conn.info.server_version < 160000:
            pytest.skip("EXPLAIN (GENERIC_PLAN) needs PostgreSQL 16")
        _seed_workflows(conn, 2_000)
        plan = _generic_plan(conn, job_sql.claim_sql(32))
    nodes = _nodes(plan["Plan"])
    seq = [n.get("Relation Name") for n in nodes if n["Node Type"] == "Seq Scan"]
    assert not {"job", "step_execution", "instance"} & set(seq), seq
