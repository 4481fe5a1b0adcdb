"""Conductor's own workflow definitions (``tests/conductor/corpus``: its test resources,
documentation and examples; see the NOTICE there) registered on ``/api`` as a team moving from
Conductor would: each registers and reads back exactly as sent, or is refused for a reason listed
in :mod:`tests.conductor.corpus_refusals` (and only then)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conductor.corpus_refusals import REFUSED
from tests.support.servers import LocalServer

pytestmark = [pytest.mark.e2e]

CORPUS = Path(__file__).parent / "corpus"
FILES = sorted(p.name for p in CORPUS.glob("*.json"))


def _tasks(items: Any) -> Iterator[dict[str, Any]]:
    for t in items or []:
        if not isinstance(t, dict):
            continue
        yield t
        for branch in (t.get("decisionCases") or {}).values():
            yield from _tasks(branch)
        yield from _tasks(t.get("defaultCase"))
        yield from _tasks(t.get("loopOver"))
        for branch in t.get("forkTasks") or []:
            yield from _tasks(branch)


def _task_defs(definition: dict[str, Any]) -> list[dict[str, Any]]:
    """A task definition for each SIMPLE task's name, as a team registers them first."""
    names = {
        t["name"]
        for t in _tasks(definition.get("tasks"))
        if t.get("type", "SIMPLE") == "SIMPLE" and isinstance(t.get("name"), str)
    }
    return [
        {"name": n, "retryCount": 0, "timeoutSeconds": 0, "responseTimeoutSeconds": 3600}
        for n in sorted(names)
    ]


def test_the_corpus_is_there_and_its_refusals_name_files_of_it() -> None:
    assert len(FILES) > 150
    assert set(REFUSED) <= set(FILES), set(REFUSED) - set(FILES)


@pytest.mark.parametrize("file", FILES, ids=FILES)
def test_a_conductor_definition_registers_and_reads_back_or_is_refused_as_listed(
    conductor_server: LocalServer, file: str
) -> None:
    definition = json.loads((CORPUS / file).read_text())
    task_defs = _task_defs(definition)
    if task_defs:
        r = conductor_server.request("POST", "/api/metadata/taskdefs", json=task_defs)
        assert r.status_code == 200, r.text
    r = conductor_server.request("PUT", "/api/metadata/workflow", json=[definition])
    assert r.status_code < 500, r.text
    if file in REFUSED:
        assert r.status_code == 400, f"{file} now registers: remove it from corpus_refusals"
        assert REFUSED[file] in r.json()["message"], r.text
        return
    assert r.status_code == 200, f"{file} is refused: {r.text}"
    version = definition.get("version")
    query = f"?version={version}" if isinstance(version, int) else ""
    got = conductor_server.request("GET", f"/api/metadata/workflow/{definition['name']}{query}")
    assert got.status_code == 200, got.text
    back = got.json()
    if not isinstance(version, int):
        definition.pop("version", None)
        back.pop("version")
    assert back == definition
