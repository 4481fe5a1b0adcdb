"""A crash between the S3 write and the delete loses nothing and duplicates nothing visible: an
archiver process is killed (SIGKILL) once its documents are stored and before any row is
deleted; the rows stay readable, and the next archiver writes the same keys again and deletes
the rows once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from baton.engine.service import Engine
from baton.store.db import Database

from tests.conftest import ROOT
from tests.support.archive import (
    RETENTION,
    age,
    archiving_engine,
    count,
    keys,
    new_bucket,
    s3_client,
)
from tests.support.helpers import wait_until
from tests.support.sqs import moto_endpoint

__all__ = ["moto_endpoint"]  # the fixture, used by name

N = 5


@pytest.fixture
def s3(moto_endpoint: str) -> Any:
    return s3_client(moto_endpoint)


def test_a_kill_between_write_and_delete_loses_and_duplicates_nothing(
    db: Database, database_url: str, moto_endpoint: str, s3: Any, tmp_path: Path
) -> None:
    bucket = new_bucket(s3)
    engine: Engine = archiving_engine(db, s3, bucket)
    engine.register_definition(
        {"name": "crashy", "steps": [{"id": "s", "type": "SET_VARIABLE", "variables": {"k": 1}}]}
    )
    ids = [engine.start_instance(definition_name="crashy")[0]["id"] for _ in range(N)]
    age(db, RETENTION + 60)
    before = {i: engine.get_instance(i) for i in ids}
    marker = tmp_path / "written"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "shared"), str(ROOT)])}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.support.archive_crasher",
            database_url,
            moto_endpoint,
            bucket,
            str(marker),
        ],
        cwd=ROOT,
        env=env,
    )
    try:
        wait_until(lambda: marker.exists() or proc.poll() is not None, timeout=60, what="write")
        assert proc.poll() is None, "the archiver ended before its fault hook"
        documents = keys(s3, bucket, "archive/")
        assert len(documents) == N  # every document written ...
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

    # ... and no row deleted: every instance still reads from the database, none is indexed.
    assert count(db, "SELECT count(*) FROM archived_instance") == 0
    for i in ids:
        assert engine.get_instance(i) == before[i]
    # The dead archiver's claims keep others off until they lapse.
    assert engine.archive_expired() == 0

    assert engine.archive_expired(lease_seconds=0) == N

    assert keys(s3, bucket, "archive/") == documents  # the same keys, written again
    assert count(db, "SELECT count(*) FROM archived_instance") == N
    assert count(db, "SELECT count(*) FROM instance") == 0
    assert count(db, "SELECT count(*) FROM archive_claim") == 0
    for i in ids:
        got = engine.get_instance(i)
        assert got.pop("archived") is True
        assert got.pop("archivedAt") >= got["completedAt"]
        assert got == before[i]
    found = engine.search_instances(archived=True, definition_name="crashy")["instances"]
    assert sorted(f["id"] for f in found) == sorted(ids)
