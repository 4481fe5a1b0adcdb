"""The execution viewer in a real headless Chromium against ``baton dev`` on the real functions.

Every wait is on a condition with a deadline (Playwright's ``expect`` and ``wait_for``), never a
sleep. ``BATON_SCREENSHOTS=1`` (``make screenshots``) writes the list and a run page to
``docs/img/``.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.helpers import wait_until
from tests.support.servers import LocalServer

ROOT = Path(__file__).resolve().parents[2]
ORDER = json.loads((ROOT / "examples/order_fulfilment/definition.json").read_text())
IMG = ROOT / "docs" / "img"
TIMEOUT_MS = 15_000
SHOTS = os.environ.get("BATON_SCREENSHOTS") == "1"


def branching(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "steps": [
            {
                "id": "route",
                "type": "SWITCH",
                "on": "${workflow.input.kind}",
                "cases": {
                    "gold": [{"id": "vip", "type": "SERVICE_TASK", "jobType": f"{name}-vip"}],
                    "plain": [{"id": "std", "type": "SERVICE_TASK", "jobType": f"{name}-std"}],
                },
            },
            {
                "id": "fan",
                "type": "PARALLEL",
                "branches": [
                    [{"id": "left", "type": "SERVICE_TASK", "jobType": f"{name}-left"}],
                    [{"id": "right", "type": "SERVICE_TASK", "jobType": f"{name}-right"}],
                ],
            },
            {"id": "done", "type": "USER_TASK"},
        ],
    }


class Driver:
    """Plays the worker over the REST API."""

    def __init__(self, server: LocalServer) -> None:
        self.s = server

    def call(self, method: str, path: str, body: Any = None) -> Any:
        r = self.s.request(method, path, json=body)
        assert r.status_code < 300, r.text
        return r.json()

    def register(self, definition: dict[str, Any]) -> None:
        self.call("POST", "/v1/definitions", definition)

    def start(self, name: str, data: dict[str, Any]) -> str:
        correlation = f"ui-{uuid.uuid4().hex[:8]}"
        body = {"definitionName": name, "input": data, "correlationId": correlation}
        return str(self.call("POST", "/v1/instances", body)["id"])

    def job(self, job_type: str) -> dict[str, Any]:
        poll = {"workerId": "ui-test-worker", "jobTypes": [job_type]}
        jobs = wait_until(lambda: self.call("POST", "/v1/jobs/poll", poll)["jobs"])
        return dict(jobs[0])

    def complete(self, job_type: str, output: dict[str, Any] | None = None) -> None:
        job = self.job(job_type)
        body = {"jobId": job["id"], "workerId": "ui-test-worker", "variablesToSet": output or {}}
        self.call("POST", "/v1/jobs/complete", body)

    def fail(self, job_type: str, message: str) -> None:
        job = self.job(job_type)
        body = {"jobId": job["id"], "workerId": "ui-test-worker", "errorMessage": message}
        self.call("POST", "/v1/jobs/fail", body)


@pytest.fixture(scope="module")
def seeded(baton_server: LocalServer) -> dict[str, str]:
    d = Driver(baton_server)
    suffix = uuid.uuid4().hex[:6]
    order = {**ORDER, "name": f"order-fulfilment-{suffix}"}
    for step in order["steps"]:
        if "jobType" in step:
            step["jobType"] = f"{step['jobType']}-{suffix}"
            step.pop("retryDelaySeconds", None)
    d.register(order)
    jt = {s["id"]: s.get("jobType", "") for s in order["steps"]}
    data = json.loads((ROOT / "examples/order_fulfilment/input.json").read_text())
    run = d.start(order["name"], data)
    d.complete(jt["reserve"], {"reservationId": "R-1"})
    d.fail(jt["charge"], "payment gateway timed out")
    d.complete(jt["charge"], {"receipt": "RC-9"})
    wait_until(
        lambda: any(
            e["stepId"] == "approve" for e in d.call("GET", f"/v1/instances/{run}")["steps"]
        )
    )
    branch_name = f"branching-{suffix}"
    d.register(branching(branch_name))
    branch = d.start(branch_name, {"kind": "gold"})
    d.complete(f"{branch_name}-vip")
    d.complete(f"{branch_name}-left")
    to_cancel = d.start(order["name"], data)
    return {"order": run, "branch": branch, "cancel": to_cancel, "order_name": order["name"]}


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


def node_status(page: Any, step: str) -> str:
    return str(page.locator(f'svg.graph .node[data-step="{step}"]').get_attribute("data-status"))


def test_the_list_shows_runs_with_counts_and_opens_a_run(
    page: Any, seeded: dict[str, str], baton_server: LocalServer
) -> None:
    from playwright.sync_api import expect

    expect(page.locator(f'#runs tr[data-run="{seeded["order"]}"]')).to_be_visible()
    expect(page.locator('[data-count="RUNNING"]')).to_contain_text("RUNNING")
    page.select_option("#f-definitionName", seeded["order_name"])
    page.click("form.filters button[type=submit]")
    expect(page.locator("#runs tbody tr[data-run]")).to_have_count(2)
    # A time range is searched by the API: runs created from a time in the future are none.
    page.fill("#f-from", "2999-01-01T00:00")
    page.click("form.filters button[type=submit]")
    expect(page.locator("#runs tbody tr[data-run]")).to_have_count(0)
    expect(page.locator('[data-count="RUNNING"]')).to_contain_text("0")
    page.fill("#f-from", "")
    page.fill("#f-to", "2999-01-01T00:00")
    page.click("form.filters button[type=submit]")
    expect(page.locator("#runs tbody tr[data-run]")).to_have_count(2)
    if SHOTS:
        IMG.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(IMG / "ui-runs.png"), full_page=True)
    page.click(f'#runs a:text("{seeded["order"]}")')
    expect(page.locator("#run-id")).to_have_text(seeded["order"])
    assert "x-api-key" not in page.url and (baton_server.api_key or "?") not in page.url


def test_order_fulfilment_run_graph_timeline_detail_and_history(
    page: Any, seeded: dict[str, str], baton_server: LocalServer
) -> None:
    from playwright.sync_api import expect

    started = time.monotonic()
    page.goto(page.url.split("#")[0] + f"#/runs/{seeded['order']}")
    expect(page.locator("svg.graph .node")).to_have_count(5)
    load_ms = (time.monotonic() - started) * 1000
    assert load_ms < 5000
    wait_until(lambda: node_status(page, "approve") in ("IN_PROGRESS", "SCHEDULED"))
    assert node_status(page, "reserve") == "COMPLETED"
    assert node_status(page, "charge") == "COMPLETED"
    assert node_status(page, "ship") == "NONE"
    assert node_status(page, "notify") == "NONE"
    rows = page.locator("#timeline tbody tr")
    expect(rows.first).to_be_visible()
    steps = {rows.nth(i).get_attribute("data-step") for i in range(rows.count())}
    assert {"reserve", "charge", "approve"} <= steps
    # The charge failed once and was retried: the timeline shows it.
    charge_rows = page.locator('#timeline tbody tr[data-step="charge"]')
    attempts = charge_rows.first.locator("td").first.inner_text().strip()
    assert charge_rows.count() >= 2 or attempts == "2", attempts
    # From the history: one bar per attempt, the failed one first.
    bars = page.locator('#timeline tr[data-step="charge"] .bar.attempt')
    expect(bars).to_have_count(2)
    assert "st-FAILED" in (bars.nth(0).get_attribute("class") or "")
    assert "st-COMPLETED" in (bars.nth(1).get_attribute("class") or "")
    assert "payment gateway timed out" in (bars.nth(0).get_attribute("title") or "")
    # Keyboard: focus the node and press Enter: the detail panel shows its executions.
    page.locator('svg.graph .node[data-step="charge"]').focus()
    page.keyboard.press("Enter")
    # A step completed on its retry does not show the failed attempt's error as its own (the
    # failure stays on its attempt's bar above, from the history).
    expect(page.locator("#detail")).to_contain_text("ui-test-worker")
    expect(page.locator("#detail")).not_to_contain_text("payment gateway timed out")
    history = baton_server.request("GET", f"/v1/instances/{seeded['order']}/history")
    if history.status_code == 200:
        expect(page.locator("#history tbody tr").first).to_be_visible()
        assert page.locator("#history tbody tr").count() == len(history.json()["events"])
    else:  # a server without the history route: the page says so, it does not break
        expect(page.get_by_text("History not available")).to_be_visible()
    if SHOTS:
        page.screenshot(path=str(IMG / "ui-run.png"), full_page=True)


def test_branching_run_colours_the_branch_taken(page: Any, seeded: dict[str, str]) -> None:
    from playwright.sync_api import expect

    page.goto(page.url.split("#")[0] + f"#/runs/{seeded['branch']}")
    expect(page.locator("svg.graph .node")).to_have_count(7)
    wait_until(lambda: node_status(page, "left") == "COMPLETED")
    assert node_status(page, "vip") == "COMPLETED"
    assert node_status(page, "std") == "NONE"  # the case not taken
    assert node_status(page, "route") == "COMPLETED"
    assert node_status(page, "right") in ("IN_PROGRESS", "SCHEDULED")
    assert node_status(page, "fan") in ("IN_PROGRESS", "SCHEDULED")
    rows = page.locator('#timeline tbody tr[data-step="left"]')
    expect(rows).to_have_count(1)


def test_cancel_from_the_page(page: Any, seeded: dict[str, str], baton_server: LocalServer) -> None:
    from playwright.sync_api import expect

    page.goto(page.url.split("#")[0] + f"#/runs/{seeded['cancel']}")
    expect(page.locator("#run-status")).to_contain_text("RUNNING")
    page.click("#action-cancel")
    expect(page.locator("#confirm")).to_be_visible()
    page.click("#confirm-yes")
    expect(page.locator("#run-status")).to_contain_text("CANCELLED")
    body = baton_server.request("GET", f"/v1/instances/{seeded['cancel']}").json()
    assert body["status"] == "CANCELLED"
    expect(page.locator("#action-cancel")).to_be_disabled()


def test_an_unknown_run_is_a_not_found_page_without_the_previous_run(
    page: Any, seeded: dict[str, str]
) -> None:
    """From a run to an id no run has: the page says so (with the API's problem), and nothing
    of the run shown before stays, nor an endless "Loading…"."""
    from playwright.sync_api import expect

    base = page.url.split("#")[0]
    page.goto(base + f"#/runs/{seeded['order']}")
    expect(page.locator("#run-id")).to_have_text(seeded["order"])
    unknown = "00000000-0000-0000-0000-000000000000"
    page.goto(base + f"#/runs/{unknown}")
    expect(page.locator("#not-found")).to_have_text("No such run")
    expect(page.locator("#not-found-id")).to_have_text(unknown)
    expect(page.locator("main")).to_contain_text("Not found (404)")
    expect(page.locator("#run-id")).to_have_count(0)
    expect(page.locator("svg.graph")).to_have_count(0)
    expect(page.locator("#loading")).to_have_count(0)
    page.get_by_role("link", name="Back to the runs").click()
    expect(page.locator(f'#runs tr[data-run="{seeded["order"]}"]')).to_be_visible()
    # Opened directly (the first page of the tab): the same, not the HTML's "Loading…".
    page.goto(f"{base}#/definitions/no-such-definition-{uuid.uuid4().hex[:6]}")
    page.reload()
    expect(page.locator("#not-found")).to_have_text("No such definition")
    expect(page.locator("main")).not_to_contain_text("Loading")


def test_the_key_prompt_says_where_the_key_is_and_nothing_is_asked_before(
    browser: Any, baton_server: LocalServer, seeded: dict[str, str]
) -> None:
    from playwright.sync_api import expect

    context = browser.new_context()
    p = context.new_page()
    p.set_default_timeout(TIMEOUT_MS)
    asked: list[str] = []
    p.on("request", lambda r: asked.append(r.url) if "/v1/" in r.url else None)
    p.goto(f"{baton_server.base_url}/ui/#/runs/{seeded['order']}")
    where = p.locator("#key-where")
    expect(where).to_contain_text(".baton/data/api-key")
    expect(where).to_contain_text("$BATON_DATA_DIR/api-key")
    expect(where).to_contain_text("API key line of its banner")
    p.wait_for_load_state("networkidle")
    assert asked == []
    p.fill("#api-key", baton_server.api_key or "")
    p.click("#key-submit")
    expect(p.locator("#run-id")).to_have_text(seeded["order"])
    assert asked and all(
        "x-api-key" not in u for u in asked
    )  # the key travels in a header, never in a URL
    context.close()


def test_the_server_root_redirects_to_the_viewer(browser: Any, baton_server: LocalServer) -> None:
    from playwright.sync_api import expect

    context = browser.new_context()
    p = context.new_page()
    response = p.goto(f"{baton_server.base_url}/")
    assert response is not None and response.status == 200
    assert p.url == f"{baton_server.base_url}/ui/"
    expect(p.locator("#api-key")).to_be_visible()
    context.close()


# Every text of every graph inside the drawing, and each node's labels inside its box.
CLIPPED = """() => {
  const out = [];
  for (const svg of document.querySelectorAll("svg.graph")) {
    const vb = svg.viewBox.baseVal;
    for (const t of svg.querySelectorAll("text")) {
      const b = t.getBBox();
      if (b.x < vb.x || b.y < vb.y || b.x + b.width > vb.x + vb.width + 0.5
          || b.y + b.height > vb.y + vb.height + 0.5) out.push("outside: " + t.textContent);
    }
    for (const n of svg.querySelectorAll(".node")) {
      const r = n.querySelector("rect").getBBox();
      for (const t of n.querySelectorAll("text")) {
        const b = t.getBBox();
        if (b.x + b.width > r.x + r.width) out.push("past its node: " + t.textContent);
      }
    }
  }
  return out;
}"""


def test_labels_inside_the_graph_are_not_clipped(page: Any, baton_server: LocalServer) -> None:
    from playwright.sync_api import expect

    name = f"ui-labels-{uuid.uuid4().hex[:6]}"
    long_id = "reserve-stock-in-every-warehouse-of-the-region"
    Driver(baton_server).register(
        {
            "name": name,
            "steps": [
                {
                    "id": "each",
                    "type": "MAP",
                    "items": "${workflow.input.xs}",
                    "steps": [{"id": long_id, "type": "SET_VARIABLE", "variables": {"v": 1}}],
                },
                {
                    "id": "again",
                    "type": "DO_WHILE",
                    "while": "false",
                    "maxIterations": 3,
                    "steps": [{"id": "once", "type": "SET_VARIABLE", "variables": {"w": 1}}],
                },
                {
                    "id": "pick",
                    "type": "SWITCH",
                    "cases": [
                        {
                            "condition": "workflow.input.total > 100 and workflow.input.vip",
                            "steps": [{"id": "a", "type": "USER_TASK"}],
                        }
                    ],
                    "default": [{"id": "b", "type": "USER_TASK"}],
                },
            ],
        }
    )
    page.goto(page.url.split("#")[0] + f"#/definitions/{name}")
    expect(page.locator('svg.graph[data-fit="done"]')).to_have_count(1)
    expect(page.locator("svg.graph text", has_text="per item")).to_have_count(1)
    expect(page.locator("svg.graph text", has_text="repeat")).to_have_count(1)
    assert page.evaluate(CLIPPED) == []
    node = page.locator(f'svg.graph .node[data-step="{long_id}"]')
    assert long_id in (node.get_attribute("aria-label") or "")  # the whole id, shortened on screen
    if SHOTS:
        page.locator("svg.graph").screenshot(path=str(IMG / "ui-graph-labels.png"))


def test_definitions_and_queues_pages(
    page: Any, seeded: dict[str, str], baton_server: LocalServer
) -> None:
    from playwright.sync_api import expect

    base = page.url.split("#")[0]
    page.goto(base + "#/definitions")
    expect(page.locator(f'#definitions a:text("{seeded["order_name"]}")')).to_be_visible()
    page.click(f'#definitions a:text("{seeded["order_name"]}")')
    expect(page.locator("svg.graph .node")).to_have_count(5)
    queue = f"ui-q-{uuid.uuid4().hex[:6]}"
    Driver(baton_server).call("POST", f"/v1/queues/{queue}/push", {"title": "parcel 7"})
    page.goto(base + "#/queues")
    page.locator(f'#queues a:text("{queue}")').click()
    expect(page.locator("#peek tbody tr")).to_have_count(1)
    expect(page.locator("#peek")).to_contain_text("parcel 7")
    expect(page.locator("main dl")).to_contain_text("pending")


def test_without_a_key_the_page_prompts_and_every_api_call_is_401(
    browser: Any, baton_server: LocalServer, seeded: dict[str, str]
) -> None:
    from playwright.sync_api import expect

    context = browser.new_context()
    p = context.new_page()
    p.set_default_timeout(TIMEOUT_MS)
    statuses: list[tuple[str, int]] = []
    p.on(
        "response",
        lambda r: statuses.append((r.url, r.status)) if "/v1/" in r.url else None,
    )
    p.goto(f"{baton_server.base_url}/ui/#/runs/{seeded['order']}")
    expect(p.locator("#api-key")).to_be_visible()
    expect(p.locator("#api-key")).to_be_focused()
    for path in ("instances", f"instances/{seeded['order']}", "definitions", "queues"):
        status = p.evaluate(
            "async (path) => (await fetch(new URL('../v1/' + path, location.href))).status", path
        )
        assert status == 401, path
    assert statuses and all(s == 401 for _, s in statuses), statuses
    # A wrong key: the prompt comes back with the API's problem title.
    p.fill("#api-key", "not-the-key")
    p.click("#key-submit")
    expect(p.locator("#error")).to_contain_text("403")
    expect(p.locator("#api-key")).to_be_visible()
    context.close()


def test_a_map_of_2000_items_is_collapsed_and_stays_responsive(
    page: Any, baton_server: LocalServer
) -> None:
    from playwright.sync_api import expect

    d = Driver(baton_server)
    name = f"big-map-{uuid.uuid4().hex[:6]}"
    d.register(
        {
            "name": name,
            "steps": [
                {
                    "id": "each",
                    "type": "MAP",
                    "items": "${workflow.input.xs}",
                    "maxConcurrency": 100,
                    "steps": [{"id": "one", "type": "SET_VARIABLE", "variables": {"v": 1}}],
                },
                {"id": "hold", "type": "USER_TASK"},
            ],
        }
    )
    run = d.start(name, {"xs": list(range(2000))})
    wait_until(
        lambda: (
            d.call("GET", f"/v1/instances/{run}/steps?limit=1000").get("nextPageToken")
            and any(
                s["stepId"] == "hold"
                for s in d.call("GET", f"/v1/instances/{run}?includeSteps=true").get("steps") or []
            )
        ),
        timeout=60,
    )
    started = time.monotonic()
    page.goto(page.url.split("#")[0] + f"#/runs/{run}")
    collapsed = page.locator('#timeline tr[data-step="one"][data-collapsed]')
    expect(collapsed).to_have_attribute("data-collapsed", "2000")
    assert (time.monotonic() - started) < 10
    expect(page.locator("svg.graph .node")).to_have_count(3)
    assert node_status(page, "one") == "COMPLETED"
    assert node_status(page, "hold") in ("IN_PROGRESS", "SCHEDULED")
    # The page answers: a click on a node fills the detail panel at once.
    page.locator('svg.graph .node[data-step="one"]').click()
    expect(page.locator("#detail")).to_contain_text("2000 execution(s); the latest 50 shown")
    collapsed.get_by_role("button", name="Expand").click()
    expect(page.locator('#timeline tr[data-step="one"][data-execution]')).to_have_count(500)


def test_complete_a_user_task_and_send_a_signal_from_the_page(
    page: Any, baton_server: LocalServer
) -> None:
    from playwright.sync_api import expect

    d = Driver(baton_server)
    name = f"ui-tasks-{uuid.uuid4().hex[:6]}"
    d.register(
        {
            "name": name,
            "steps": [{"id": "approve", "type": "USER_TASK"}, {"id": "go", "type": "SIGNAL"}],
        }
    )
    run = d.start(name, {})
    page.goto(page.url.split("#")[0] + f"#/runs/{run}")
    wait_until(lambda: node_status(page, "approve") == "IN_PROGRESS")
    page.locator('svg.graph .node[data-step="approve"]').click()
    page.locator('#detail [data-action="complete"]').click()
    page.fill("#confirm textarea", '{"approvedBy": "ada"}')
    page.click("#confirm-yes")
    wait_until(lambda: node_status(page, "go") == "IN_PROGRESS")
    assert node_status(page, "approve") == "COMPLETED"
    assert d.call("GET", f"/v1/instances/{run}")["variables"]["approvedBy"] == "ada"
    page.locator('svg.graph .node[data-step="go"]').click()
    page.locator('#detail [data-action="signal"]').click()
    page.fill("#confirm textarea", '{"ok": true}')
    page.click("#confirm-yes")
    expect(page.locator("#run-status")).to_contain_text("COMPLETED")
    assert node_status(page, "go") == "COMPLETED"


def test_an_offloaded_output_is_a_download_link(page: Any, baton_server: LocalServer) -> None:
    from baton_worker.client import BatonClient
    from playwright.sync_api import expect

    suffix = uuid.uuid4().hex[:6]
    name, job_type = f"big-{suffix}", f"big-job-{suffix}"
    client = BatonClient(baton_server.base_url, api_key=baton_server.api_key)
    client.register_definition(
        {"name": name, "steps": [{"id": "make", "type": "SERVICE_TASK", "jobType": job_type}]}
    )
    run = client.start_instance(name)["id"]
    (job,) = wait_until(lambda: client.poll_jobs(worker_id="ui-big", job_types=[job_type]))
    # Above the 256 KB soft limit: the SDK uploads it and completes with its path.
    client.complete_job(job["id"], worker_id="ui-big", variables={"blob": "z" * 400_000})
    wait_until(lambda: client.get_instance(run)["status"] == "COMPLETED")
    page.goto(page.url.split("#")[0] + f"#/runs/{run}")
    page.locator('svg.graph .node[data-step="make"]').click()
    link = page.locator('#detail a[data-payload="output"]')
    expect(link).to_be_visible()
    expect(link).to_contain_text("offloaded")
    assert (link.get_attribute("href") or "").startswith("http")
    assert "z" * 1000 not in page.locator("#detail").inner_text()  # never inlined


def test_script_steps_say_what_decides_and_show_their_script(
    page: Any, baton_server: LocalServer
) -> None:
    from playwright.sync_api import expect

    d = Driver(baton_server)
    name = f"scripts-{uuid.uuid4().hex[:6]}"
    d.register(
        {
            "name": name,
            "steps": [
                {"id": "calc", "type": "SCRIPT", "script": "$.n * 2", "input": {"n": 21}},
                {"id": "shape", "type": "JQ", "query": ".n + 1", "input": {"n": 1}},
                {
                    "id": "route",
                    "type": "SWITCH",
                    "script": "$.n > 1 ? 'big' : 'small'",
                    "input": {"n": "${calc.output.result}"},
                    "cases": {"big": [{"id": "hold", "type": "USER_TASK"}]},
                },
            ],
        }
    )
    run = d.start(name, {})
    page.goto(page.url.split("#")[0] + f"#/runs/{run}")
    calc = page.locator('svg.graph .node[data-step="calc"]')
    expect(calc).to_contain_text("SCRIPT · JavaScript")
    expect(calc.locator("title")).to_contain_text("$.n * 2")
    expect(page.locator('svg.graph .node[data-step="shape"]')).to_contain_text("JQ · jq filter")
    expect(page.locator('svg.graph .node[data-step="route"]')).to_contain_text("SWITCH · by script")
    assert node_status(page, "calc") == "COMPLETED"
    assert node_status(page, "hold") in ("IN_PROGRESS", "SCHEDULED")


def test_http_steps_show_their_method_and_uri(page: Any, baton_server: LocalServer) -> None:
    from playwright.sync_api import expect

    d = Driver(baton_server)
    name = f"http-{uuid.uuid4().hex[:6]}"
    d.register(
        {
            "name": name,
            "steps": [
                {"id": "hold", "type": "USER_TASK"},
                {
                    "id": "call",
                    "type": "HTTP",
                    "request": {"uri": "http://127.0.0.1:9/orders", "method": "post"},
                },
            ],
        }
    )
    run = d.start(name, {})
    page.goto(page.url.split("#")[0] + f"#/runs/{run}")
    call = page.locator('svg.graph .node[data-step="call"]')
    expect(call).to_contain_text("HTTP · POST")
    expect(call.locator("title")).to_contain_text("http://127.0.0.1:9/orders")
