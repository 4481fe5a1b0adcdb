"""Races on real PostgreSQL with real concurrent connections. Every test also proves that no
deadlock happened: the racing engine's connections are closed first (a backend flushes its
statistics when it exits), then ``pg_stat_database.deadlocks`` of the test's database is read."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from baton.engine.queue_ops import Queues
from baton.engine.service import Engine
from baton.store.db import Database


def deadlocks(database_url: str) -> int:
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        row = conn.execute(
            "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()
    assert row is not None
    return int(row[0])


@pytest.fixture
def racing(database_url: str) -> Iterator[Engine]:
    """An engine whose pool serves the racing threads; the test fails if any deadlock happened."""
    before = deadlocks(database_url)
    db = Database.pooled(database_url, min_size=4, max_size=24)
    yield Engine(db)
    db.close()
    assert deadlocks(database_url) == before, "the race caused a deadlock"


@pytest.fixture
def racing_queues(racing: Engine) -> Queues:
    return Queues(racing)
