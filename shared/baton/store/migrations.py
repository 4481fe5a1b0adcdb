"""Plain-SQL migrations (``migrations/NNNN_name.sql``) applied in order, each once.

Concurrent migrators (two deploys, the local runtime and a test) serialize on a transaction-level
advisory lock, so each file is applied exactly once. Migrations must stay backward compatible: the
previous Lambda version keeps serving while the new one rolls out.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from importlib import resources

import psycopg

from baton.store.db import connect

log = logging.getLogger(__name__)

_LOCK_KEY = 0x0BA7_0001


@dataclass(frozen=True, slots=True)
class Migration:
    version: str
    name: str
    sql: str


def available() -> list[Migration]:
    folder = resources.files("baton.store").joinpath("migrations")
    found = []
    for entry in folder.iterdir():
        if entry.name.endswith(".sql"):
            version, _, rest = entry.name.partition("_")
            found.append(Migration(version, rest.removesuffix(".sql"), entry.read_text()))
    return sorted(found, key=lambda m: m.version)


def apply(conninfo: str) -> list[str]:
    """Apply every pending migration; return the versions applied now."""
    applied_now: list[str] = []
    with connect(conninfo, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version text PRIMARY KEY, name text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        for m in available():
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
                row = conn.execute(
                    "SELECT 1 FROM schema_migrations WHERE version = %s", (m.version,)
                ).fetchone()
                if row:
                    continue
                log.info("applying migration %s_%s", m.version, m.name)
                conn.execute(m.sql.encode())  # bytes: run as a simple-protocol script
                conn.execute(
                    "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)",
                    (m.version, m.name),
                )
                applied_now.append(m.version)
    return applied_now


def applied(conn: psycopg.Connection[dict[str, object]]) -> list[str]:
    rows = conn.execute("SELECT version FROM schema_migrations ORDER BY version").fetchall()
    return [str(r["version"]) for r in rows]
