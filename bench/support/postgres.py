"""The PostgreSQL server a benchmark runs against, and fresh databases on it. The server is the
one named by ``--database-url`` / ``$DATABASE_URL``, else an embedded PostgreSQL in a temporary
directory that is stopped and deleted on exit; each phase gets its own database (dropped on exit)
so no phase sees another's rows, and ``settle`` makes every timed phase start from the same
state rather than paying for the previous phase's dirty buffers."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
from psycopg.conninfo import make_conninfo

from support.library import apply_migrations, embedded_postgres
from support.reporting import log


@contextlib.contextmanager
def postgres_server(url: str | None) -> Iterator[str]:
    """Yield a server URL: ``url`` if given, else ``$DATABASE_URL``, else an embedded PostgreSQL
    in a temporary directory that is stopped and deleted on exit."""
    url = url or os.environ.get("DATABASE_URL") or None
    if url:
        log("using the external PostgreSQL server from --database-url / DATABASE_URL")
        yield url
        return
    root = Path(tempfile.mkdtemp(prefix="baton-bench-pg-"))
    # pgserver keeps files under XDG_RUNTIME_DIR; give it its own directory, outside the data
    # directory (initdb refuses a non-empty one).
    os.environ.setdefault("XDG_RUNTIME_DIR", str(root / "run"))
    Path(os.environ["XDG_RUNTIME_DIR"]).mkdir(parents=True, exist_ok=True)
    pg = embedded_postgres(root / "data")
    log(f"starting embedded PostgreSQL in {root}")
    try:
        uri = pg.start()
        yield uri
    finally:
        log("stopping embedded PostgreSQL")
        with contextlib.suppress(Exception):  # Ctrl-C may already have stopped it
            pg.stop()
        shutil.rmtree(root, ignore_errors=True)


def server_summary(url: str) -> str:
    """One line of the server settings that decide commit cost."""
    with psycopg.connect(url, autocommit=True) as conn:
        version = conn.execute("SHOW server_version").fetchone()
        names = ("fsync", "synchronous_commit", "shared_buffers", "max_connections")
        values = {
            n: row[0] for n in names if (row := conn.execute(f"SHOW {n}").fetchone()) is not None
        }
    parts = [f"PostgreSQL {version[0] if version else '?'}"]
    parts += [f"{k}={v}" for k, v in values.items()]
    return ", ".join(parts)


@contextlib.contextmanager
def fresh_database(
    server_url: str, label: str, *, migrate: bool = True, keep: bool = False
) -> Iterator[str]:
    """Create an empty database (with Baton's migrations applied unless ``migrate=False``), yield
    its conninfo, and drop it on exit."""
    name = f"bench_{label}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = make_conninfo(server_url, dbname=name)
    try:
        if migrate:
            apply_migrations(url)
        yield url
    finally:
        if not keep:
            with (
                contextlib.suppress(psycopg.Error),
                psycopg.connect(server_url, autocommit=True) as conn,
            ):
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def settle(url: str, *tables: str) -> None:
    """ANALYZE the tables and CHECKPOINT (when allowed), so a timed phase starts from the same
    state rather than paying for the previous phase's dirty buffers."""
    with psycopg.connect(url, autocommit=True) as conn:
        for t in tables:
            conn.execute(f"ANALYZE {t}")
        with contextlib.suppress(psycopg.errors.InsufficientPrivilege):
            conn.execute("CHECKPOINT")
