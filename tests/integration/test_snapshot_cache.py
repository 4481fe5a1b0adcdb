"""The snapshot cache holds only committed snapshots: a snapshot met twice in the transaction
that inserted it (two starts of one definition in a batch, two children of one decision) is not
cached, so a rollback of that transaction leaves no id pointing at nothing."""

from __future__ import annotations

from typing import Any

import pytest
from baton.engine.service import Engine
from baton.store import definition_sql
from baton.store.db import Conn

from tests.support.helpers import one_step, unique


class _RolledBack(Exception):
    pass


def test_a_snapshot_met_twice_in_its_own_transaction_is_not_cached(engine: Engine) -> None:
    name = unique("snap")
    engine.register_definition(one_step(name, name))
    ids: list[int] = []

    def work(conn: Conn) -> Any:
        stored = conn.execute(
            definition_sql.DEFINITION_WITH_TASK_DEFS, {"name": name, "version": None}
        ).fetchone()
        assert stored is not None
        ids.append(engine.snapshots.of_stored(conn, stored)[0])  # inserted here
        ids.append(engine.snapshots.of_stored(conn, stored)[0])  # met again, same transaction
        raise _RolledBack

    with pytest.raises(_RolledBack):
        engine.db.transaction(work)
    assert ids[0] == ids[1]
    # The rolled-back snapshot is gone; a start after it must not reuse its id.
    instance, created = engine.start_instance(definition_name=name)
    assert created and instance["status"] == "RUNNING"
