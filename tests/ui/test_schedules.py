"""The viewer's Schedules views in a real headless Chromium against ``baton dev``.

A schedule's list row and page (spec in words, next fire times, recent actions linking to the
runs they started), its actions behind a confirmation, and the link from a run a schedule started
back to it. Every wait is on a condition with a deadline (Playwright's ``expect``,
``wait_until``), never a sleep.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.servers import LocalServer

ROOT = Path(__file__).resolve().parents[2]
SHOTS = os.environ.get("BATON_SCREENSHOTS") == "1"
TIMEOUT_MS = 15_000
FIRED_MS = 30_000  # a loaded machine: a sweep, then the page's refresh


def call(server: LocalServer, method: str, path: str, body: Any = None) -> Any:
    r = server.request(method, path, json=body)
    assert r.status_code < 300, r.text
    return r.json()


@pytest.fixture(scope="module")
def definition(baton_server: LocalServer) -> str:
    """A definition whose runs wait on a user task, so a run a schedule started stays running."""
    name = f"ui-sched-{uuid.uuid4().hex[:6]}"
    call(
        baton_server,
        "POST",
        "/v1/definitions",
        {"name": name, "steps": [{"id": "hold", "type": "USER_TASK"}]},
    )
    return name


def create(server: LocalServer, definition: str, **fields: Any) -> dict[str, Any]:
    body = {
        "id": f"ui-{uuid.uuid4().hex[:8]}",
        "definitionName": definition,
        "spec": {"cron": ["0 9 * * 1"], "timeZone": "Europe/Berlin"},
        **fields,
    }
    return dict(call(server, "POST", "/v1/schedules", body))


@pytest.fixture
def page(browser: Any, baton_server: LocalServer) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1440, "height": 1000})
    p = context.new_page()
    p.set_default_timeout(TIMEOUT_MS)
    errors: list[str] = []
    p.on("pageerror", lambda e: errors.append(str(e)))
    p.goto(f"{baton_server.base_url}/ui/")
    p.fill("#api-key", baton_server.api_key or "")
    p.click("#key-submit")
    yield p
    context.close()
    assert not errors, errors


def list_row(page: Any, schedule_id: str) -> Any:
    """The list's row of a schedule, following the pages (other tests' schedules share them)."""
    from playwright.sync_api import expect

    page.goto(page.url.split("#")[0] + "#/schedules")
    for _ in range(50):
        expect(page.locator("#schedules")).to_be_visible()
        row = page.locator(f'#schedules tr[data-schedule="{schedule_id}"]')
        if row.count():
            return row
        assert page.locator("#next-page").is_enabled(), f"{schedule_id} is on no page"
        page.click("#next-page")
        expect(page.locator("#first-page")).to_be_enabled()
    raise AssertionError(f"{schedule_id} not found in 50 pages")


def test_the_list_says_each_spec_in_words_and_opens_a_schedule(
    page: Any, baton_server: LocalServer, definition: str
) -> None:
    from playwright.sync_api import expect

    weekly = create(
        baton_server,
        definition,
        spec={
            "cron": ["0 9 * * 1", "30 17 * * MON-FRI"],
            "timeZone": "Europe/Berlin",
            "jitterSeconds": 30,
        },
    )
    hourly = create(
        baton_server,
        definition,
        spec={"interval": {"everySeconds": 3600, "offsetSeconds": 900}},
        overlapPolicy="BUFFER_ONE",
        paused=True,
    )
    row = list_row(page, weekly["id"])
    expect(row.locator("td.spec")).to_contain_text("0 9 * * 1: at 09:00 on Monday")
    expect(row.locator("td.spec")).to_contain_text(
        "30 17 * * MON-FRI: at 17:30 on Monday to Friday"
    )
    expect(row.locator("td.spec")).to_contain_text("time zone Europe/Berlin; jitter up to 30 s")
    expect(row).to_contain_text("SKIP")
    expect(row.locator("[data-status]")).to_have_attribute("data-status", "ACTIVE")
    expect(row.locator("td.next")).to_contain_text(
        weekly["nextFireTimes"][0].replace("T", " ").replace(".000Z", "Z")[:16]
    )
    other = list_row(page, hourly["id"])
    expect(other.locator("td.spec")).to_contain_text("every 1 h, offset 15 min")
    expect(other.locator("td.spec")).to_contain_text("time zone UTC")
    expect(other).to_contain_text("BUFFER_ONE")
    expect(other.locator("[data-status]")).to_have_attribute("data-status", "PAUSED")
    list_row(page, weekly["id"]).get_by_role("link", name=weekly["id"]).click()
    expect(page.locator("#schedule-id")).to_have_text(weekly["id"])
    assert page.url.endswith(f"#/schedules/{weekly['id']}")
    expect(page.locator("#next-fire-times li")).to_have_count(10)
    got = [page.locator("#next-fire-times li").nth(i).get_attribute("data-time") for i in range(10)]
    assert got == call(baton_server, "GET", f"/v1/schedules/{weekly['id']}")["nextFireTimes"]
    expect(page.locator("#schedule-spec")).to_contain_text("at 09:00 on Monday")
    # In the schedule's own wall time too: Monday 09:00 or a weekday 17:30, in Berlin.
    wall = re.compile(r"\((Mon 09:00:00|(Mon|Tue|Wed|Thu|Fri) 17:30:00) Europe/Berlin, in ")
    texts = page.locator("#next-fire-times li").all_inner_texts()
    assert all(wall.search(t) for t in texts), texts
    expect(page.locator("#schedule-overlap")).to_have_text("SKIP")
    expect(page.locator("#recent-actions")).to_contain_text("No slot has been settled yet.")
    expect(page.locator('[data-nav="schedules"]')).to_have_attribute("aria-current", "page")


def test_a_schedule_url_opens_its_page_after_the_key_and_an_unknown_one_says_so(
    browser: Any, baton_server: LocalServer, definition: str
) -> None:
    from playwright.sync_api import expect

    sc = create(baton_server, definition)
    context = browser.new_context()
    p = context.new_page()
    p.set_default_timeout(TIMEOUT_MS)
    p.goto(f"{baton_server.base_url}/ui/#/schedules/{sc['id']}")
    p.fill("#api-key", baton_server.api_key or "")
    p.click("#key-submit")
    expect(p.locator("#schedule-id")).to_have_text(sc["id"])
    expect(p.locator("#next-fire-times li")).to_have_count(10)
    assert (baton_server.api_key or "?") not in p.url
    p.goto(f"{baton_server.base_url}/ui/#/schedules/no-such-{uuid.uuid4().hex[:6]}")
    expect(p.locator("#not-found")).to_have_text("No such schedule")
    expect(p.locator("#schedule-id")).to_have_count(0)
    p.get_by_role("link", name="Back to the schedules").click()
    expect(p.locator("#schedules")).to_be_visible()
    context.close()


def test_pause_asks_first_and_trigger_starts_a_run_linked_both_ways(
    page: Any, baton_server: LocalServer, definition: str
) -> None:
    from playwright.sync_api import expect

    sc = create(baton_server, definition)
    sid = sc["id"]
    api = f"/v1/schedules/{sid}"
    page.goto(page.url.split("#")[0] + f"#/schedules/{sid}")
    expect(page.locator("#schedule-id")).to_have_text(sid)
    # Pause asks first; cancelled, nothing changes.
    page.click("#action-pause")
    expect(page.locator("#confirm")).to_be_visible()
    expect(page.locator("#confirm-text")).to_contain_text(f"Pause {sid}?")
    page.click("#confirm-no")
    expect(page.locator("#confirm")).to_be_hidden()
    assert call(baton_server, "GET", api)["paused"] is False
    expect(page.locator("#schedule-state [data-status]")).to_have_attribute("data-status", "ACTIVE")
    # Confirmed, with a note.
    page.click("#action-pause")
    page.fill("#pause-note", "holidays")
    page.click("#confirm-yes")
    expect(page.locator("#schedule-state [data-status]")).to_have_attribute("data-status", "PAUSED")
    expect(page.locator("#schedule-note")).to_contain_text("holidays")
    view = call(baton_server, "GET", api)
    assert view["paused"] is True and view["note"] == "holidays"
    expect(page.locator("#action-pause")).to_be_disabled()
    page.click("#action-unpause")
    page.click("#confirm-yes")
    expect(page.locator("#schedule-state [data-status]")).to_have_attribute("data-status", "ACTIVE")
    assert call(baton_server, "GET", api)["paused"] is False
    # Trigger now: a run starts (it waits on its user task); a second trigger meanwhile is
    # skipped (SKIP). The page refreshes itself and shows both outcomes.
    page.click("#action-trigger")
    expect(page.locator("#confirm-text")).to_contain_text("overlap policy (SKIP)")
    page.click("#confirm-yes")
    started = page.locator('#recent-actions tr[data-outcome="STARTED"]')
    # Fired by the next sweep (about a second), shown by the page's next refresh (5 s).
    expect(started).to_have_count(1, timeout=FIRED_MS)
    page.click("#action-trigger")
    page.click("#confirm-yes")
    expect(page.locator('#recent-actions tr[data-outcome="SKIPPED"]')).to_have_count(
        1, timeout=FIRED_MS
    )
    expect(started.locator("td").nth(1)).to_have_text("TRIGGER")
    actions = call(baton_server, "GET", api)["recentActions"]
    (run,) = [a["instanceId"] for a in actions if a["outcome"] == "STARTED"]
    if SHOTS:
        page.screenshot(path=str(ROOT / "docs" / "img" / "ui-schedule.png"), full_page=True)
    started.get_by_role("link", name=run).click()
    expect(page.locator("#run-id")).to_have_text(run)
    link = page.locator("#run-schedule")
    expect(link).to_have_text(sid)
    link.click()
    expect(page.locator("#schedule-id")).to_have_text(sid)
    call(baton_server, "POST", f"/v1/instances/{run}/cancel", {})
    call(baton_server, "DELETE", api)


def test_a_refused_action_shows_the_problem_detail(
    page: Any, baton_server: LocalServer, definition: str
) -> None:
    from playwright.sync_api import expect

    sc = create(baton_server, definition)
    page.goto(page.url.split("#")[0] + f"#/schedules/{sc['id']}")
    expect(page.locator("#schedule-id")).to_have_text(sc["id"])
    call(baton_server, "DELETE", f"/v1/schedules/{sc['id']}")
    problem = baton_server.request("POST", f"/v1/schedules/{sc['id']}/trigger").json()
    page.click("#action-trigger")
    page.click("#confirm-yes")
    expect(page.locator("#error")).to_contain_text("(404)")
    expect(page.locator("#error")).to_contain_text(problem["detail"])


def test_the_list_is_paged(page: Any, baton_server: LocalServer, definition: str) -> None:
    from playwright.sync_api import expect

    made = [
        create(baton_server, definition, id=f"ui-page-{uuid.uuid4().hex[:6]}-{i:02}")["id"]
        for i in range(51)
    ]
    try:
        page.goto(page.url.split("#")[0] + "#/schedules")
        expect(page.locator("#schedules tbody tr[data-schedule]")).to_have_count(50)
        expect(page.locator("#first-page")).to_be_disabled()
        first = set(
            page.locator("#schedules tbody tr[data-schedule]").evaluate_all(
                "rows => rows.map((r) => r.dataset.schedule)"
            )
        )
        page.click("#next-page")
        expect(page.locator("#first-page")).to_be_enabled()
        assert "pageToken=" in page.url
        expect(page.locator("#schedules tbody tr[data-schedule]").first).to_be_visible()
        second = set(
            page.locator("#schedules tbody tr[data-schedule]").evaluate_all(
                "rows => rows.map((r) => r.dataset.schedule)"
            )
        )
        assert second and not first & second
        page.click("#first-page")
        expect(page.locator("#first-page")).to_be_disabled()
    finally:
        for sid in made:
            baton_server.request("DELETE", f"/v1/schedules/{sid}")
