"""A ``baton dev`` on the real functions per fuzz module, with a fresh database of its own on the
suite's test PostgreSQL: a test can read the tables and prove that a refused write wrote nothing,
and what one module's fuzzer created (definitions with queue triggers, short leases) cannot
write behind another module's back."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from tests.support.servers import LocalServer, _session_server

# More examples per operation (and per property) for a longer run: BATON_FUZZ_EXAMPLES=500.
FUZZ_EXAMPLES = int(os.environ.get("BATON_FUZZ_EXAMPLES", "0")) or None


@pytest.fixture(scope="module")
def fuzz_database_url(server_url: str) -> Iterator[str]:
    """An empty database of its own; the server applies the migrations when it starts."""
    name = f"baton_fuzz_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield make_conninfo(server_url, dbname=name)
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="module")
def fuzz_server(
    tmp_path_factory: pytest.TempPathFactory, fuzz_database_url: str
) -> Iterator[LocalServer]:
    yield from _session_server(
        LocalServer, tmp_path_factory, "fuzz-server", None, fuzz_database_url
    )
