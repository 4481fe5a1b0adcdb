"""The instance version is a fencing token enforced by the database itself."""

from __future__ import annotations

import uuid

import pytest
from baton.engine.service import Engine
from baton.errors import StaleVersion
from baton.store import instance_sql
from baton.store.db import Conn, Database
from psycopg.types.json import Jsonb

from tests.support.helpers import one_step


def _write_with_version(db: Database, instance_id: str, expected: int) -> None:
    def work(conn: Conn) -> None:
        conn.execute(
            instance_sql.UPDATE_INSTANCE,
            {
                "id": uuid.UUID(instance_id),
                "status": "RUNNING",
                "variables": Jsonb({"writer": expected}),
                "output": None,
                "reason": None,
                "expected": expected,
                "clear_timeout": False,
                "reset_timeout": None,
                "added_steps": 0,
            },
        )

    db.transaction(work)


def test_a_write_carrying_a_stale_version_is_refused(engine: Engine, db: Database) -> None:
    engine.register_definition(one_step("flow"))
    inst, _ = engine.start_instance(definition_name="flow")
    read_version = inst["version"]
    _write_with_version(db, inst["id"], read_version)  # the first writer wins
    with pytest.raises(StaleVersion):
        _write_with_version(db, inst["id"], read_version)  # same token again: stale
    got = engine.get_instance(inst["id"])
    assert got["version"] == read_version + 1
    assert got["variables"] == {"writer": read_version}


def test_engine_transitions_bump_the_version(engine: Engine) -> None:
    engine.register_definition(
        {"name": "v", "steps": [{"id": "a", "type": "USER_TASK"}, {"id": "b", "type": "USER_TASK"}]}
    )
    inst, _ = engine.start_instance(definition_name="v")
    assert inst["version"] == 1
    engine.complete_user_task(inst["id"], "a", {})
    assert engine.get_instance(inst["id"])["version"] == 2
    engine.complete_user_task(inst["id"], "b", {})
    assert engine.get_instance(inst["id"])["version"] == 3
