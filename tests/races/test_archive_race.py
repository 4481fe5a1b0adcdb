"""Two duty loops archiving at once: each instance is archived once (one index row, one document,
its rows deleted once), and nothing deadlocks."""

from __future__ import annotations

import threading

from baton.store.db import Database

from tests.races.conftest import deadlocks
from tests.support.archive import (
    RETENTION,
    age,
    archiving_engine,
    count,
    keys,
    new_bucket,
    s3_client,
)
from tests.support.sqs import moto_endpoint

__all__ = ["moto_endpoint"]  # the fixture, used by name

N = 400


def test_two_archivers_archive_each_instance_once(
    db: Database, database_url: str, moto_endpoint: str
) -> None:
    s3 = s3_client(moto_endpoint)
    bucket = new_bucket(s3)
    seed = archiving_engine(db, s3, bucket)
    seed.register_definition(
        {"name": "race", "steps": [{"id": "s", "type": "SET_VARIABLE", "variables": {"k": 1}}]}
    )
    for _ in range(N):
        seed.start_instance(definition_name="race")
    age(db, RETENTION + 60)
    before = deadlocks(database_url)
    pools = [Database.pooled(database_url, min_size=1, max_size=4) for _ in range(2)]
    archived: list[int] = []
    errors: list[BaseException] = []
    start = threading.Barrier(2)

    def loop(pool: Database) -> None:
        engine = archiving_engine(pool, s3_client(moto_endpoint), bucket)
        try:
            start.wait()
            while n := engine.archive_expired(batch=25, max_batches=1):
                archived.append(n)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=loop, args=(p,)) for p in pools]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    for p in pools:
        p.close()

    assert not errors, errors
    assert sum(archived) == N
    assert count(db, "SELECT count(*) FROM archived_instance") == N
    assert count(db, "SELECT count(DISTINCT object_key) FROM archived_instance") == N
    assert count(db, "SELECT count(*) FROM instance") == 0
    assert count(db, "SELECT count(*) FROM archive_claim") == 0
    assert len(keys(s3, bucket, "archive/")) == N
    assert deadlocks(database_url) == before, "the race caused a deadlock"
