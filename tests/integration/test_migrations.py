"""Migrations: applied once each, and together identical to the canonical schema.sql."""

from __future__ import annotations

import uuid
from importlib import resources

import psycopg
from baton.store import migrations
from psycopg.conninfo import make_conninfo

from tests.support.schema import fingerprint


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
    assert "WHERE (status = 'LOCKED'::text)" in defs["job_lease_expiry_by_type"]
    assert "(job_type, lock_expires_at)" in defs["job_lease_expiry_by_type"]


def test_schema_sql_builds_the_database_the_migrations_build(
    server_url: str, database_url: str
) -> None:
    name = f"baton_schema_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    canonical = make_conninfo(server_url, dbname=name)
    try:
        schema = resources.files("baton.store").joinpath("schema.sql").read_text()
        with psycopg.connect(canonical, autocommit=True) as conn:
            conn.execute(schema.encode())
        from_schema, from_migrations = fingerprint(canonical), fingerprint(database_url)
        for aspect, rows in from_migrations.items():
            assert from_schema[aspect] == rows, (
                f"schema.sql and the migrations differ in {aspect}:\n"
                f"  only in schema.sql: {sorted(from_schema[aspect] - rows, key=str)}\n"
                f"  only in migrations: {sorted(rows - from_schema[aspect], key=str)}"
            )
    finally:
        with psycopg.connect(server_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
