"""``baton schedules`` against ``baton dev``: create (with the next fire times), list, get, pause,
unpause, trigger, backfill, delete; and the SDK client's schedule methods."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.sdk.test_cli import Baton, baton  # noqa: F401 (the fixture)
from tests.support.helpers import unique, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("e2e")]


def test_schedules_commands(baton: Baton, tmp_path: Path) -> None:  # noqa: F811
    name = unique("cli-sched")
    path = tmp_path / "d.json"
    path.write_text(
        json.dumps(
            {
                "name": name,
                "steps": [
                    {"id": "n", "type": "SET_VARIABLE", "variables": {"t": "${workflow.input.t}"}}
                ],
            }
        )
    )
    assert baton("definitions", "create", str(path)).code == 0
    sid = unique("cli-s")
    preview = baton("schedules", "preview", name, "--id", sid, "--cron", "0 9 * * 1")
    assert preview.code == 0, preview.err
    assert "nothing was created" in preview.out
    assert len(re.findall(r"^  \d{4}-\d\d-\d\dT09:00:00Z$", preview.out, re.M)) == 10
    assert baton("schedules", "create", name, "--id", sid, "--every", "60", "--dry-run").code == 0
    assert baton("schedules", "get", sid).code == 1  # neither created it
    created = baton(
        "schedules",
        "create",
        name,
        "--id",
        sid,
        "--cron",
        "0 9 * * 1",
        "--time-zone",
        "Europe/Berlin",
        "--input",
        '{"t": "${schedule.time}"}',
        "--paused",
    )
    assert created.code == 0, created.err
    assert "next fire times:" in created.out
    assert len(re.findall(r"^  \d{4}-\d\d-\d\dT0[78]:00:00Z$", created.out, re.M)) == 10
    listed = baton("schedules", "list")
    assert sid in listed.out and "0 9 * * 1" in listed.out
    paused = baton("schedules", "pause", sid, "--note", "holidays", "--json").json()
    assert paused["paused"] is True and paused["note"] == "holidays"
    assert baton("schedules", "unpause", sid, "--json").json()["paused"] is False
    triggered = baton("schedules", "trigger", sid)
    assert triggered.code == 0 and "fires now" in triggered.out

    def fired() -> bool:
        out = baton("schedules", "get", sid, "--json").json()
        return any(a["outcome"] == "STARTED" for a in out["recentActions"])

    wait_until(fired, timeout=30, interval=0.2, what="the triggered slot fired")
    assert "recent actions:" in baton("schedules", "get", sid).out
    back = baton(
        "schedules",
        "backfill",
        sid,
        "--from",
        "2026-01-01T00:00:00Z",
        "--to",
        "2026-01-31T00:00:00Z",
        "--json",
    ).json()
    assert back["slots"] == 4  # the Mondays of January 2026 at 09:00 in Berlin
    bad = baton("schedules", "create", name, "--cron", "nope")
    assert bad.code == 1 and "422" in bad.err
    assert baton("schedules", "delete", sid).code == 0
    assert baton("schedules", "get", sid).code == 1
