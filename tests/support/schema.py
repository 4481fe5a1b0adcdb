"""A database schema as comparable data: tables and columns, constraints, indexes, triggers,
functions and storage options, read from the catalogs (no pg_dump needed)."""

from __future__ import annotations

from typing import Any

import psycopg

_QUERIES = {
    "columns": """
        SELECT c.relname, a.attnum, a.attname, format_type(a.atttypid, a.atttypmod),
               a.attnotnull, pg_get_expr(d.adbin, d.adrelid)
          FROM pg_attribute a
          JOIN pg_class c ON c.oid = a.attrelid
          JOIN pg_namespace n ON n.oid = c.relnamespace
          LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
         WHERE n.nspname = 'public' AND c.relkind = 'r' AND a.attnum > 0 AND NOT a.attisdropped
    """,
    "constraints": """
        SELECT c.relname, k.conname, pg_get_constraintdef(k.oid)
          FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid
          JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = 'public'
    """,
    "indexes": "SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = 'public'",
    "triggers": """
        SELECT c.relname, t.tgname, pg_get_triggerdef(t.oid)
          FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
         WHERE NOT t.tgisinternal
    """,
    "functions": """
        SELECT p.proname, pg_get_functiondef(p.oid)
          FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
         WHERE n.nspname = 'public'
    """,
    "options": """
        SELECT c.relname, c.relkind, c.reloptions
          FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = 'public' AND c.relkind IN ('r', 'i', 'S')
    """,
}
# The migrations' own bookkeeping is not part of the schema they build.
_IGNORED_TABLES = {"schema_migrations", "schema_migrations_pkey"}


def fingerprint(conninfo: str) -> dict[str, set[tuple[Any, ...]]]:
    """Everything that defines the schema, as sets of rows per catalog aspect."""
    out: dict[str, set[tuple[Any, ...]]] = {}
    with psycopg.connect(conninfo) as conn:
        for aspect, query in _QUERIES.items():
            rows = conn.execute(query).fetchall()
            out[aspect] = {
                tuple(tuple(v) if isinstance(v, list) else v for v in row)
                for row in rows
                if row[0] not in _IGNORED_TABLES
            }
    return out
