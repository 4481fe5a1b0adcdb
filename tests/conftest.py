"""Test databases: real PostgreSQL (embedded pgserver unless DATABASE_URL is set), one fresh
database per test cloned from a migrated template, so tests are isolated and fast."""

from __future__ import annotations

import os
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

ROOT = Path(__file__).resolve().parents[1]
# pgserver asks platformdirs for a runtime dir; CI machines often have none set.
os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.mkdtemp(prefix="baton-xdg-"))
# Set for every function in AWS (and by the local runtime); handler modules read it at import.
os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "BatonTest")
sys.path.insert(0, str(ROOT / "shared"))

from baton.engine.service import Engine  # noqa: E402
from baton.settings import ENV_DATABASE_URL  # noqa: E402
from baton.store import migrations  # noqa: E402
from baton.store.db import Database  # noqa: E402
from baton.store.embedded import EmbeddedPostgres  # noqa: E402

# Local-server fixtures (``baton dev`` subprocesses) for the e2e and SDK suites.
pytest_plugins = ["tests.support.servers"]


def _worker() -> str:
    return os.environ.get("PYTEST_XDIST_WORKER", "main")


@pytest.fixture(scope="session")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    external = os.environ.get(ENV_DATABASE_URL)
    if external:
        yield external
        return
    pg = EmbeddedPostgres(tmp_path_factory.mktemp(f"pg-{_worker()}"), keep_data=False)
    url = pg.start()
    yield url
    pg.stop()


@pytest.fixture(scope="session")
def template_db(server_url: str) -> str:
    name = f"baton_tpl_{_worker()}_{uuid.uuid4().hex[:6]}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    migrations.apply(make_conninfo(server_url, dbname=name))
    return name


@pytest.fixture
def database_url(server_url: str, template_db: str) -> Iterator[str]:
    name = f"baton_t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template_db}"')
    yield make_conninfo(server_url, dbname=name)
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def db(database_url: str) -> Iterator[Database]:
    database = Database.pooled(database_url, min_size=1, max_size=16)
    yield database
    database.close()


@pytest.fixture
def engine(db: Database) -> Engine:
    return Engine(db)
