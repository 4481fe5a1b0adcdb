from __future__ import annotations

import pytest
from baton.engine.service import Engine
from baton.errors import Conflict, DefinitionNotFound, ValidationFailed

from tests.support.helpers import one_step


def test_registration_assigns_the_next_version(engine: Engine) -> None:
    assert engine.register_definition(one_step("flow"))["version"] == 1
    assert engine.register_definition(one_step("flow"))["version"] == 2
    assert engine.get_definition("flow")["version"] == 2
    assert engine.get_definition("flow", 1)["version"] == 1


def test_an_existing_name_and_version_is_a_conflict(engine: Engine) -> None:
    engine.register_definition({**one_step("flow"), "version": 3})
    with pytest.raises(Conflict):
        engine.register_definition({**one_step("flow"), "version": 3})
    assert engine.register_definition(one_step("flow"))["version"] == 4


def test_unknown_definition_is_not_found(engine: Engine) -> None:
    with pytest.raises(DefinitionNotFound):
        engine.get_definition("nope")
    engine.register_definition(one_step("flow"))
    with pytest.raises(DefinitionNotFound):
        engine.get_definition("flow", 9)


def test_registration_reports_every_problem_at_once(engine: Engine) -> None:
    bad = {
        "name": "flow",
        "steps": [
            {"id": "a", "type": "SERVICE_TASK", "jobType": "j", "retryCount": -1},
            {"id": "a", "type": "USER_TASK", "input": {"x": "${ghost.output.y}"}},
            {
                "id": "b",
                "type": "SERVICE_TASK",
                "jobType": "j",
                "timeoutSeconds": 5,
                "responseTimeoutSeconds": 10,
            },
        ],
    }
    with pytest.raises(ValidationFailed) as err:
        engine.register_definition(bad)
    paths = sorted(p.path for p in err.value.problems)
    assert paths == [
        "steps[0].retryCount",
        "steps[1].id",
        "steps[1].input.x",
        "steps[2].responseTimeoutSeconds",
    ]
    with pytest.raises(DefinitionNotFound):
        engine.get_definition("flow")


def test_concurrent_registrations_get_distinct_versions(engine: Engine) -> None:
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(8) as pool:
        versions = list(
            pool.map(lambda _: engine.register_definition(one_step("f"))["version"], range(16))
        )
    assert sorted(versions) == list(range(1, 17))


def test_list_definitions_pages_through_latest_versions(engine: Engine) -> None:
    for name in ["a", "b", "c"]:
        engine.register_definition(one_step(name))
    engine.register_definition(one_step("b"))
    first = engine.list_definitions(limit=2)
    assert [(d["name"], d["version"]) for d in first["definitions"]] == [("a", 1), ("b", 2)]
    rest = engine.list_definitions(limit=2, page_token=first["nextPageToken"])
    assert [d["name"] for d in rest["definitions"]] == ["c"]
    assert "nextPageToken" not in rest


def test_task_defs_upsert_and_validate(engine: Engine) -> None:
    body, created = engine.put_task_def("charge", {"retryCount": 5, "retryLogic": "FIXED"})
    assert created and body["retryCount"] == 5
    body, created = engine.put_task_def("charge", {"retryCount": 1})
    assert not created and body["retryCount"] == 1
    with pytest.raises(ValidationFailed) as err:
        engine.put_task_def("charge", {"rateLimitPerFrequency": 3, "retryCount": "x"})
    assert {p.path for p in err.value.problems} == {"retryCount", "rateLimitPerFrequency"}
