"""Batch starts racing on the same idempotency keys, with real concurrent connections: each key
starts exactly one instance, every other item answers EXISTING with it, and no batch deadlocks
another (they take their keys in key order)."""

from __future__ import annotations

import random
import threading
from concurrent.futures import ThreadPoolExecutor

import psycopg
from baton.engine.service import Engine
from baton.engine.start_batch import StartAnswer, StartItem

from tests.support.helpers import one_step, unique

BATCHES = 8
KEYS = 40


def test_concurrent_batches_sharing_keys_start_each_key_once(
    racing: Engine, database_url: str
) -> None:
    name = unique("batch-race")
    racing.register_definition(one_step(name, f"{name}-job"))
    keys = [f"{name}-k{n}" for n in range(KEYS)]
    barrier = threading.Barrier(BATCHES)

    def batch(seed: int) -> list[tuple[str, StartAnswer]]:
        mine = keys[:]
        random.Random(seed).shuffle(mine)  # each batch sends the keys in its own order
        items = [StartItem(definition_name=name, input={"k": k}, idempotency_key=k) for k in mine]
        barrier.wait(timeout=30)
        return list(zip(mine, racing.start_instances(items), strict=True))

    with ThreadPoolExecutor(BATCHES) as pool:
        answers = [a for r in pool.map(batch, range(BATCHES)) for a in r]
    # Again, on keys half taken: inserts that find a key being inserted wait for its batch.
    keys += [f"{name}-k{n}" for n in range(KEYS, 2 * KEYS)]
    with ThreadPoolExecutor(BATCHES) as pool:
        answers += [a for r in pool.map(batch, range(BATCHES, 2 * BATCHES)) for a in r]

    by_key: dict[str, set[str]] = {}
    started = 0
    for key, answer in answers:
        assert answer.outcome in ("STARTED", "EXISTING"), answer
        assert answer.instance is not None
        by_key.setdefault(key, set()).add(answer.instance["id"])
        started += answer.outcome == "STARTED"
    assert started == 2 * KEYS
    assert all(len(ids) == 1 for ids in by_key.values())
    with psycopg.connect(database_url) as conn:
        row = conn.execute(
            "SELECT count(*), count(DISTINCT idempotency_key) FROM instance"
            " WHERE definition_name = %s",
            (name,),
        ).fetchone()
        jobs = conn.execute(
            "SELECT count(*) FROM job WHERE job_type = %s", (f"{name}-job",)
        ).fetchone()
    assert row == (2 * KEYS, 2 * KEYS)
    assert jobs == (2 * KEYS,)
