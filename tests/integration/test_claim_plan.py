"""The claim's cost does not grow with rows it must not look at: 100,000 terminal jobs, or
50,000 expired leases of another job type, leave a poll reading a handful of rows."""

from __future__ import annotations

import json
import uuid
from typing import Any

import psycopg
from baton.store import job_sql

ROWS = 100_000


def _seed(conn: psycopg.Connection[Any], *, terminal: int, expired_other: int) -> None:
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
            "n": 3,
        },
    )
    conn.execute("ANALYZE job")


def _claim_plan(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    """EXPLAIN ANALYZE of the real claim statement, rolled back."""
    params = {"worker_id": "w", "job_types": ["wanted"], "max_jobs": 10, "max_bytes": 5_000_000}
    with conn.transaction(force_rollback=True):
        row = conn.execute(
            b"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + job_sql.CLAIM.encode(), params
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
