"""Waits on an instance (``instance/<id>`` rows of job_waiter, Conductor's synchronous execution)
are notified by every statement that updates the instance: once per UPDATE statement since
migration 0021, over all the rows it updated, so a batch completion that ends many instances in
one statement notifies each waited-for one of them, and no other."""

from __future__ import annotations

from typing import Any

import psycopg
from baton.engine.batch_ops import BatchResult
from baton.engine.service import Engine

from tests.support.helpers import wait_until


def test_a_batch_write_notifies_each_waited_for_instance_it_ends(
    engine: Engine, database_url: str
) -> None:
    engine.register_definition(
        {"name": "notified", "steps": [{"id": "s", "type": "SERVICE_TASK", "jobType": "nt"}]}
    )
    ids = [engine.start_instance(definition_name="notified")[0]["id"] for _ in range(4)]
    jobs = engine.poll("w", ["nt"], 4)
    assert len(jobs) == 4
    waited = {f"instance/{i}" for i in ids[:2]}
    with psycopg.connect(database_url, autocommit=True) as listener:
        listener.execute("LISTEN baton_job")
        listener.execute(
            "INSERT INTO job_waiter (job_type, expires_at)"
            " SELECT unnest(%s::text[]), now() + interval '1 minute'",
            (sorted(waited),),
        )
        # A waiter that expired is not notified either.
        listener.execute(
            "INSERT INTO job_waiter (job_type, expires_at) VALUES (%s, now() - interval '1 s')",
            (f"instance/{ids[2]}",),
        )
        answers = engine.complete_batch(
            [BatchResult(j["id"], "w", j["attempt"], output={"r": 1}) for j in jobs]
        )
        assert [a["outcome"] for a in answers] == ["APPLIED"] * 4
        got: set[str] = set()

        def heard() -> Any:
            got.update(n.payload for n in listener.notifies(timeout=0.2, stop_after=1))
            return got >= waited

        wait_until(heard, timeout=10, what="both waited-for instances notified")
        # Sent at the write's commit, before the complete returned: nothing else comes.
        got.update(n.payload for n in listener.notifies(timeout=0.5))
    assert got == waited
