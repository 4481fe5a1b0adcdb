"""The Mermaid builder behind ``baton instances graph`` and ``baton definitions graph`` (pure)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from baton_worker import cli
from baton_worker.cli.graph import STATUS_STYLES, mermaid, step_status
from baton_worker.env import ENV_API_KEY, ENV_DATA_DIR, ENV_URL

from tests.support.helpers import unique
from tests.support.servers import CheckedServer

ROOT = Path(__file__).resolve().parents[2]
ORDER = json.loads((ROOT / "examples/order_fulfilment/definition.json").read_text())


def nodes(text: str) -> dict[str, str]:
    """node id -> its label's first line (the step id)."""
    found = re.findall(r'^\s+(s\d+)[\[\{\(]+"([^"<]*)', text, flags=re.M)
    return {nid: label for nid, label in found}


def classes(text: str) -> dict[str, str]:
    """step id -> its status class."""
    ids = {nid: label for nid, label in nodes(text).items()}
    out = {}
    for line in text.splitlines():
        m = re.match(r"\s+class (\S+) (\w+)$", line)
        if m:
            for nid in m.group(1).split(","):
                out[ids[nid]] = m.group(2)
    return out


def test_a_definition_is_a_chain_from_start_to_end() -> None:
    text = mermaid(ORDER["steps"], title="order-fulfilment v1")
    assert text.startswith("---\ntitle: order-fulfilment v1\n---\nflowchart TD\n")
    assert list(nodes(text).values()) == ["reserve", "charge", "approve", "ship", "notify"]
    assert "start --> s1" in text and "s5 --> finish" in text
    for a, b in (("s1", "s2"), ("s2", "s3"), ("s3", "s4"), ("s4", "s5")):
        assert f"{a} --> {b}" in text
    assert "classDef" not in text  # no run: no statuses


def ex(step: str, status: str, at: str = "2026-01-01T00:00:00Z", **kw: Any) -> dict[str, Any]:
    return {"stepId": step, "status": status, "createdAt": at, **kw}


def test_a_run_colours_each_step_by_status() -> None:
    execs = [
        ex("reserve", "COMPLETED"),
        ex("charge", "COMPLETED", attempt=2),
        ex("approve", "IN_PROGRESS"),
    ]
    text = mermaid(ORDER["steps"], execs)
    assert classes(text) == {
        "reserve": "COMPLETED",
        "charge": "COMPLETED",
        "approve": "IN_PROGRESS",
        "ship": "NONE",
        "notify": "NONE",
    }
    for status, style in STATUS_STYLES.items():
        assert f"classDef {status} {style}" in text


def test_branches_fan_out_and_join() -> None:
    steps = [
        {
            "id": "route",
            "type": "SWITCH",
            "on": "${workflow.input.kind}",
            "cases": {"gold": [{"id": "vip", "type": "SET_VARIABLE"}], "plain": []},
            "default": [{"id": "other", "type": "SET_VARIABLE"}],
        },
        {
            "id": "fan",
            "type": "PARALLEL",
            "branches": [[{"id": "a", "type": "TIMER"}], [{"id": "b", "type": "USER_TASK"}]],
        },
    ]
    text = mermaid(steps)
    n = {label: nid for nid, label in nodes(text).items()}
    assert f'{n["route"]}{{"route<br/>SWITCH"}}' in text  # a SWITCH is a rhombus
    assert f'{n["route"]} -->|"gold"| {n["vip"]}' in text
    assert f'{n["route"]} -->|"default"| {n["other"]}' in text
    assert re.search(rf'{n["route"]} -->\|"plain"\| j\d+', text)  # an empty case goes to the join
    assert f'{n["fan"]} -->|"branch 0"| {n["a"]}' in text
    assert f'{n["fan"]} -->|"branch 1"| {n["b"]}' in text
    # Both branches join, and the join leads to the end.
    joins = re.findall(rf"{n['a']} --> (j\d+)", text) + re.findall(rf"{n['b']} --> (j\d+)", text)
    assert len(set(joins)) == 1 and f"{joins[0]} --> finish" in text


def test_loops_sit_in_a_subgraph_with_an_edge_back() -> None:
    steps = [
        {"id": "each", "type": "MAP", "items": "${x}", "steps": [{"id": "one", "type": "X"}]},
        {"id": "loop", "type": "DO_WHILE", "while": "true", "steps": [{"id": "two", "type": "X"}]},
    ]
    text = mermaid(steps, [ex("one", "COMPLETED")] * 3 + [ex("one", "IN_PROGRESS")])
    n = {label: nid for nid, label in nodes(text).items()}
    assert re.search(r'subgraph g\d+\["each: each item"\]', text)
    assert re.search(r'subgraph g\d+\["loop: loop"\]', text)
    assert f"{n['one']} -.->|next item| {n['one']}" in text
    assert f"{n['two']} -.->|repeat| {n['two']}" in text
    assert "one<br/>X x4" in text  # four executions
    assert classes(text)["one"] == "IN_PROGRESS"  # open work wins


def test_a_sub_workflow_names_its_child_run() -> None:
    steps = [{"id": "child", "type": "SUB_WORKFLOW", "definitionName": "kid"}]
    assert "→ kid" in mermaid(steps)
    text = mermaid(steps, [ex("child", "IN_PROGRESS", childInstanceId="c-123")])
    assert '[["child<br/>SUB_WORKFLOW<br/>→ c-123"]]' in text


def test_script_steps_say_what_decides() -> None:
    steps = [
        {"id": "calc", "type": "SCRIPT", "script": "$.a + 1"},
        {"id": "shape", "type": "JQ", "query": ".items | map(.price)"},
        {"id": "route", "type": "SWITCH", "script": "'a'", "cases": {"a": [{"id": "x"}]}},
        {
            "id": "loop",
            "type": "DO_WHILE",
            "whileLanguage": "javascript",
            "while": "$.n < 3",
            "steps": [{"id": "y", "type": "X"}],
        },
    ]
    text = mermaid(steps)
    assert '"calc<br/>SCRIPT"' in text
    assert '"shape<br/>JQ<br/>.items #124; map(.price)"' in text
    assert "route<br/>SWITCH<br/>by script" in text
    assert "loop<br/>DO_WHILE<br/>while (JavaScript)" in text


def test_http_steps_show_their_method_and_uri() -> None:
    steps = [
        {"id": "call", "type": "HTTP", "request": {"uri": "https://api.example.com/o"}},
        {"id": "post", "type": "HTTP", "request": {"uri": "http://h/x", "method": "post"}},
        {"id": "dyn", "type": "HTTP", "request": "${workflow.input.req}"},
    ]
    text = mermaid(steps)
    assert '"call<br/>HTTP<br/>GET https://api.example.com/o"' in text
    assert '"post<br/>HTTP<br/>POST http://h/x"' in text
    assert '"dyn<br/>HTTP"' in text


def test_system_steps_show_what_they_call_start_or_publish_to() -> None:
    steps = [
        {
            "id": "poll",
            "type": "HTTP_POLL",
            "request": {"uri": "http://h/jobs/1"},
            "terminationCondition": "true",
        },
        {"id": "st", "type": "START_WORKFLOW", "request": {"name": "billing"}},
        {"id": "ev", "type": "EVENT", "sink": "sqs:orders"},
    ]
    text = mermaid(steps)
    assert '"poll<br/>HTTP_POLL<br/>GET http://h/jobs/1"' in text
    assert '"st<br/>START_WORKFLOW<br/>→ billing"' in text
    assert '"ev<br/>EVENT<br/>→ sqs:orders"' in text


def test_labels_cannot_break_out_of_their_quotes() -> None:
    steps = [{"id": 'a"b<c>|d', "type": "X"}, {"id": "x" * 200, "type": "X"}]
    text = mermaid(steps)
    assert '"a#quot;b#lt;c#gt;#124;d<br/>X"' in text
    assert "x" * 60 not in text


def test_step_status_prefers_open_work_then_the_newest() -> None:
    assert step_status([]) == "NONE"
    older = ex("s", "FAILED", at="2026-01-01T00:00:00Z")
    newer = ex("s", "COMPLETED", at="2026-01-01T00:00:01Z")
    assert step_status([newer, older]) == "COMPLETED"
    assert step_status([older, ex("s", "SCHEDULED")]) == "SCHEDULED"


def test_an_empty_definition_and_odd_input_still_give_a_chart() -> None:
    assert "start --> finish" in mermaid([])
    assert "flowchart TD" in mermaid([{"id": "p", "type": "PARALLEL", "branches": [[], None]}])
    assert "flowchart TD" in mermaid([{"id": "s", "type": "SWITCH", "cases": [{"x": 1}, 3]}])


@pytest.mark.e2e
@pytest.mark.xdist_group("e2e")
def test_the_commands_print_mermaid_for_a_run_and_a_definition(
    baton_server: CheckedServer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    for name in (ENV_URL, ENV_API_KEY):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(ENV_DATA_DIR, str(tmp_path / "no-data-dir"))
    name = unique("graph")
    definition = {**ORDER, "name": name}
    assert baton_server.request("POST", "/v1/definitions", json=definition).status_code == 201
    run = baton_server.request("POST", "/v1/instances", json={"definitionName": name}).json()
    connection = ["--url", baton_server.base_url, "--api-key", baton_server.api_key or ""]

    capsys.readouterr()
    assert cli.main(["definitions", "graph", name, "--version", "1", *connection]) == 0
    out = capsys.readouterr().out
    assert f"title: {name} v1" in out and "flowchart TD" in out
    assert list(nodes(out).values()) == ["reserve", "charge", "approve", "ship", "notify"]

    assert cli.main(["instances", "graph", run["id"], *connection]) == 0
    out = capsys.readouterr().out
    assert f"{name} run {run['id']} (RUNNING)" in out
    assert classes(out)["reserve"] in ("SCHEDULED", "IN_PROGRESS")
    assert classes(out)["notify"] == "NONE"

    assert cli.main(["instances", "graph", "00000000-0000-0000-0000-000000000000", *connection])
    assert "error:" in capsys.readouterr().err
