"""A hot statement sent in ``$n`` form (``store.raw_sql``) is prepared at its first run on a
connection that prepares (so PostgreSQL parses and plans it once, not at each of psycopg's
first five runs), and never on one that does not (behind RDS Proxy)."""

from __future__ import annotations

import pytest
from baton.store.db import Conn, connect
from baton.store.raw_sql import RawStatement, unsized_array

STATEMENT = RawStatement("SELECT %(a)s::int + %(b)s::int AS n /* raw_sql test */")


def _prepared(conn: Conn) -> int:
    row = conn.execute(
        "SELECT count(*) AS n FROM pg_prepared_statements WHERE statement LIKE '%%raw_sql test%%'"
    ).fetchone()
    assert row is not None
    return int(row["n"])


def test_a_raw_statement_is_prepared_at_its_first_run(database_url: str) -> None:
    with connect(database_url, prepare=True, autocommit=True) as conn:
        assert STATEMENT.execute(conn, {"a": 1, "b": 2}).fetchall() == [{"n": 3}]
        assert _prepared(conn) == 1


def test_a_raw_statement_is_never_prepared_where_the_connection_does_not_prepare(
    database_url: str,
) -> None:
    with connect(database_url, prepare=False, autocommit=True) as conn:
        for _ in range(8):
            assert STATEMENT.execute(conn, {"a": 1, "b": 2}).fetchall() == [{"n": 3}]
        assert _prepared(conn) == 0


def test_an_unsized_array_reads_every_element_and_takes_identifiers_only(
    database_url: str,
) -> None:
    with connect(database_url, prepare=True, autocommit=True) as conn:
        ids_in = unsized_array("ids", "int")
        query = f"SELECT count(*) AS n FROM generate_series(1, 10) g WHERE g = ANY({ids_in})"
        for ids in ([], [3], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]):
            row = conn.execute(query, {"ids": ids}).fetchone()
            assert row is not None and row["n"] == len([i for i in ids if i <= 10])
    with pytest.raises(ValueError, match="parameter name"):
        unsized_array("ids)s; DROP TABLE job; --", "int")
    with pytest.raises(ValueError, match="parameter name"):
        unsized_array("ids", "int[]); --")
