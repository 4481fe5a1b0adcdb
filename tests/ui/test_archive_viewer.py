"""The viewer and archived runs: a run read back from the archive carries an "archived" badge and
no actions (it cannot be changed); the runs list searches the archive with "Archived runs"."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from baton import settings

from tests.support.helpers import unique, wait_until
from tests.support.servers import LocalServer

pytestmark = [pytest.mark.e2e]

TIMEOUT_MS = 15_000


@pytest.fixture(scope="module")
def archiving_server(
    tmp_path_factory: pytest.TempPathFactory, e2e_database_url: str | None
) -> Iterator[LocalServer]:
    if e2e_database_url:
        pytest.skip("archives every ended run of its database (this run shares DATABASE_URL)")
    folder: Path = tmp_path_factory.mktemp("archiving-ui")
    server = LocalServer(
        data_dir=folder / "data",
        functions_dir=None,
        log_path=folder / "server.log",
        extra_env={settings.ENV_RETENTION_SECONDS: "1"},
    ).start()
    yield server
    assert server.stop() == 0, server.output()


def test_an_archived_run_has_a_badge_and_no_actions(
    browser: Any, archiving_server: LocalServer
) -> None:
    from playwright.sync_api import expect

    s = archiving_server
    name = unique("ui-archived")
    steps = [{"id": "mark", "type": "SET_VARIABLE", "variables": {"done": True}}]
    assert s.request("POST", "/v1/definitions", json={"name": name, "steps": steps}).is_success
    iid = s.request("POST", "/v1/instances", json={"definitionName": name}).json()["id"]
    wait_until(
        lambda: s.request("GET", f"/v1/instances/{iid}").json().get("archived"),
        timeout=60,
        what="the run archived",
    )
    context = browser.new_context(viewport={"width": 1440, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{s.base_url}/ui/")
    page.fill("#api-key", s.api_key or "")
    page.click("#key-submit")

    page.goto(f"{s.base_url}/ui/#/runs/{iid}")
    expect(page.locator("#run-id")).to_have_text(iid)
    expect(page.locator("#run-status .archived")).to_have_text("archived")
    expect(page.locator("#archived-note")).to_be_visible()
    expect(page.locator("#action-retry")).to_have_count(0)

    page.goto(f"{s.base_url}/ui/#/runs")
    expect(page.locator(f'#runs tr[data-run="{iid}"]')).to_have_count(0)  # not in the database
    page.check("#f-archived")
    page.click("form.filters button[type=submit]")
    row = page.locator(f'#runs tr[data-run="{iid}"]')
    expect(row).to_be_visible()
    expect(row.locator(".archived")).to_have_text("archived")
    context.close()
    assert not errors, errors
