"""``baton instances start --batch FILE.jsonl`` against ``baton dev``: 100 starts per request,
progress and a summary on stderr, exit 1 when any line did not start; and the client's
``start_instances``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.sdk.test_cli import Baton, baton  # noqa: F401 (the fixture)
from tests.support.helpers import unique

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("e2e")]


def _define(baton: Baton, folder: Path) -> str:  # noqa: F811
    name = unique("cli-batch")
    path = folder / f"{name}.json"
    step = {"id": "work", "type": "SERVICE_TASK", "jobType": name}
    path.write_text(json.dumps({"name": name, "steps": [step]}))
    created = baton("definitions", "create", str(path))
    assert created.code == 0, created.err
    return name


def test_batch_file_starts_every_line_and_summarises(baton: Baton, tmp_path: Path) -> None:  # noqa: F811
    name = _define(baton, tmp_path)
    lines = [json.dumps({"definitionName": name, "input": {"n": n}}) for n in range(150)]
    file = tmp_path / "starts.jsonl"
    file.write_text("\n".join(lines) + "\n\n")
    run = baton("instances", "start", "--batch", str(file), "--json")
    assert run.code == 0, run.err
    answers = run.json()
    assert [a["outcome"] for a in answers] == ["STARTED"] * 150
    assert [a["line"] for a in answers] == list(range(1, 151))
    assert "100/150 sent, 0 not started" in run.err
    assert "150/150 sent, 0 not started" in run.err
    assert "150 starts: 150 STARTED" in run.err


def test_batch_file_with_a_failed_line_exits_1_naming_it(baton: Baton, tmp_path: Path) -> None:  # noqa: F811
    name = _define(baton, tmp_path)
    key = unique("k")
    file = tmp_path / "mixed.jsonl"
    file.write_text(
        "\n".join(
            [
                json.dumps({"definitionName": name, "idempotencyKey": key}),
                json.dumps({"definitionName": unique("missing")}),
                json.dumps({"definitionName": name, "idempotencyKey": key}),
            ]
        )
    )
    run = baton("instances", "start", "--batch", str(file))
    assert run.code == 1
    assert "line 2: NOT_FOUND" in run.err
    assert "3 starts: 1 EXISTING, 1 NOT_FOUND, 1 STARTED" in run.err
    rows = [line.split("\t") for line in run.out.splitlines()]
    assert [r[1] for r in rows] == ["STARTED", "NOT_FOUND", "EXISTING"]
    assert rows[0][2] == rows[2][2]


def test_batch_file_that_is_not_json_lines_is_a_usage_error(baton: Baton, tmp_path: Path) -> None:  # noqa: F811
    file = tmp_path / "bad.jsonl"
    file.write_text('{"definitionName": "x"}\nnot json\n')
    run = baton("instances", "start", "--batch", str(file))
    assert run.code == 2
    assert "line 2: not valid JSON" in run.err
    both = baton("instances", "start", "x", "--batch", str(file))
    assert both.code == 2 and "give no NAME" in both.err
