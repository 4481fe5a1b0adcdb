from __future__ import annotations

import psycopg
from baton.store import migrations


def test_applying_migrations_twice_applies_nothing_the_second_time(database_url: str) -> None:
    assert migrations.apply(database_url) == []
    with psycopg.connect(database_url) as conn:
        rows = conn.execute("SELECT version FROM schema_migrations ORDER BY version").fetchall()
    assert [r[0] for r in rows] == [m.version for m in migrations.available()]


def test_claim_and_lease_indexes_are_partial(database_url: str) -> None:
    with psycopg.connect(database_url) as conn:
        defs = dict(
            conn.execute(
                "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'job'"
            ).fetchall()
        )
    assert "WHERE (status = 'UNLOCKED'::text)" in defs["job_claimable"]
    assert "(job_type, run_at)" in defs["job_claimable"]
    assert "WHERE (status = 'LOCKED'::text)" in defs["job_lease_expiry"]
    assert "(lock_expires_at)" in defs["job_lease_expiry"]


def test_claim_reads_the_partial_indexes_not_the_table(database_url: str) -> None:
    with psycopg.connect(database_url) as conn:
        conn.execute("SET enable_seqscan = off")
        plan = "\n".join(
            r[0]
            for r in conn.execute(
                "EXPLAIN SELECT id FROM job WHERE job_type = 'x' AND status = 'UNLOCKED'"
                " AND run_at <= now() ORDER BY run_at LIMIT 10"
            ).fetchall()
        )
    assert "job_claimable" in plan
