"""Task definitions from the client and the ``baton taskdefs`` commands, against a scripted API:
the delete call and when it is repeated, and how the enforced fields are printed."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

import httpx
import pytest
from baton_worker import cli
from baton_worker.cli import options
from baton_worker.errors import NotFoundError, TransportError

from tests.sdk.test_errors import problem, reply, scripted_client

FULL = {
    "name": "charge-card",
    "description": "Charge the customer's card",
    "retryCount": 3,
    "retryLogic": "EXPONENTIAL_BACKOFF",
    "retryDelaySeconds": 2,
    "maxRetryDelaySeconds": 60,
    "timeoutSeconds": 300,
    "pollTimeoutSeconds": 60,
    "responseTimeoutSeconds": 30,
    "timeoutPolicy": "TIME_OUT_WF",
    "concurrentExecLimit": 10,
    "rateLimitPerFrequency": 100,
    "rateLimitFrequencyInSeconds": 60,
    "inputKeys": ["amount", "card"],
    "ownerEmail": "payments@example.com",
    "createdAt": "2026-11-23T17:00:00.123456Z",
    "updatedAt": "2026-11-23T17:05:00.5Z",
}
BARE = {
    "name": "send-email",
    "createdAt": "2026-11-23T17:00:00Z",
    "updatedAt": "2026-11-23T17:00:00Z",
}


def columns(line: str) -> list[str]:
    """A table row's cells (cells are separated by at least two spaces)."""
    return re.split(r"\s{2,}", line.strip())


@dataclass
class Api:
    """What the commands' client is answered (in order), and what it sent."""

    script: list[httpx.Response | Exception] = field(default_factory=list)
    seen: list[httpx.Request] = field(default_factory=list)


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> Api:
    fake = Api()
    monkeypatch.setattr(
        options, "make_client", lambda args: scripted_client(fake.script, fake.seen)
    )
    return fake


def run(
    api: Api, capsys: pytest.CaptureFixture[str], answers: list[httpx.Response], *argv: str
) -> tuple[int, str, str]:
    """``baton <argv>`` answered with ``answers``: (exit code, stdout, stderr)."""
    api.script[:] = answers
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# --- the client ---------------------------------------------------------------------------------


def test_delete_task_def_returns_the_definition_as_it_was() -> None:
    seen: list[httpx.Request] = []
    client = scripted_client([reply(200, FULL)], seen)
    assert client.delete_task_def("charge card/v2") == FULL
    assert seen[0].method == "DELETE"
    assert seen[0].url.raw_path == b"/v1/taskdefs/charge%20card%2Fv2"


def test_deleting_an_unknown_task_def_is_not_found() -> None:
    seen: list[httpx.Request] = []
    missing = problem(404, "Not found", "task definition 'x' not found")
    client = scripted_client([reply(404, missing)], seen)
    with pytest.raises(NotFoundError, match="task definition 'x' not found"):
        client.delete_task_def("x")
    assert len(seen) == 1


def test_a_delete_whose_answer_was_lost_is_not_repeated() -> None:
    # A repeat would answer 404 for the deletion that did happen.
    seen: list[httpx.Request] = []
    client = scripted_client([httpx.ReadError("connection reset"), reply(200, FULL)], seen)
    with pytest.raises(TransportError) as caught:
        client.delete_task_def("charge-card")
    assert caught.value.sent is True
    assert len(seen) == 1


def test_a_delete_refused_before_doing_anything_is_repeated() -> None:
    seen: list[httpx.Request] = []
    unavailable = reply(503, problem(503, "Service unavailable", "db"), {"retry-after": "0"})
    client = scripted_client([unavailable, reply(200, FULL)], seen)
    assert client.delete_task_def("charge-card")["name"] == "charge-card"
    assert len(seen) == 2


def test_iter_task_defs_follows_page_tokens() -> None:
    seen: list[httpx.Request] = []
    pages = [
        reply(200, {"taskDefs": [FULL], "nextPageToken": "t1"}),
        reply(200, {"taskDefs": [BARE]}),
    ]
    client = scripted_client(pages, seen)
    assert [t["name"] for t in client.iter_task_defs(page_size=1)] == ["charge-card", "send-email"]
    assert [r.url.params.get("pageToken") for r in seen] == [None, "t1"]
    assert {r.url.params["limit"] for r in seen} == {"1"}


# --- the commands -------------------------------------------------------------------------------


def test_list_shows_the_enforced_fields_one_row_each(
    api: Api, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(api, capsys, [reply(200, {"taskDefs": [FULL, BARE]})], "taskdefs", "list")
    assert (code, err) == (0, "")
    header, full, bare = out.splitlines()
    assert columns(header) == [
        "NAME",
        "RETRY",
        "TIMEOUT",
        "POLL",
        "RESPONSE",
        "ON TIMEOUT",
        "CONCURRENCY",
        "RATE",
        "UPDATED",
    ]
    assert columns(full) == [
        "charge-card",
        "3 EXPONENTIAL_BACKOFF 2s..60s",
        "300s",
        "60s",
        "30s",
        "TIME_OUT_WF",
        "10",
        "100/60s",
        "2026-11-23T17:05:00Z",
    ]
    # Unset: the step's own value or the engine's default applies.
    assert columns(bare) == ["send-email", *["-"] * 7, "2026-11-23T17:00:00Z"]


def test_list_follows_every_page_and_json_holds_them_all(
    api: Api, capsys: pytest.CaptureFixture[str]
) -> None:
    pages = [
        reply(200, {"taskDefs": [FULL], "nextPageToken": "t1"}),
        reply(200, {"taskDefs": [BARE]}),
    ]
    code, out, _ = run(api, capsys, pages, "taskdefs", "list", "--json")
    assert code == 0
    assert [t["name"] for t in json.loads(out)["taskDefs"]] == ["charge-card", "send-email"]
    assert len(api.seen) == 2


def test_partial_retry_and_rate_settings_show_what_is_set() -> None:
    from baton_worker.cli.definitions import _rate, _retry

    assert _retry({"retryCount": 5}) == "5"
    assert _retry({"retryLogic": "FIXED", "retryDelaySeconds": 0}) == "FIXED 0s"
    assert _retry({"maxRetryDelaySeconds": 30}) == "-..30s"
    assert _retry({}) is None
    assert _rate({"rateLimitPerFrequency": 5}) == "5/-"
    assert _rate({}) is None


def test_get_groups_the_enforced_fields_and_keeps_any_other(
    api: Api, capsys: pytest.CaptureFixture[str]
) -> None:
    newer = {**FULL, "inputTemplate": {"currency": "EUR"}, "futureField": True}
    code, out, _ = run(api, capsys, [reply(200, newer)], "taskdefs", "get", "charge-card")
    assert code == 0
    assert api.seen[0].method == "GET" and api.seen[0].url.path == "/v1/taskdefs/charge-card"
    lines = dict(line.split(":", 1) for line in out.splitlines())
    shown = {k: v.strip() for k, v in lines.items()}
    assert shown == {
        "name": "charge-card",
        "description": "Charge the customer's card",
        "retry": "3 EXPONENTIAL_BACKOFF 2s..60s",
        "timeout": "300s",
        "poll timeout": "60s",
        "response timeout": "30s",
        "on timeout": "TIME_OUT_WF",
        "concurrency": "10",
        "rate limit": "100 per 60s",
        "input keys": '["amount","card"]',
        "input template": '{"currency":"EUR"}',
        "owner": "payments@example.com",
        "futureField": "yes",
        "created": "2026-11-23T17:00:00Z",
        "updated": "2026-11-23T17:05:00Z",
    }


def test_get_leaves_unset_fields_out(api: Api, capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(api, capsys, [reply(200, BARE)], "taskdefs", "get", "send-email")
    assert [line.split(":")[0] for line in out.splitlines()] == ["name", "created", "updated"]


def test_delete_prints_one_line_or_the_deleted_definition(
    api: Api, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(api, capsys, [reply(200, FULL)], "taskdefs", "delete", "charge-card")
    assert (code, out, err) == (0, "deleted task definition charge-card\n", "")
    assert api.seen[0].method == "DELETE" and api.seen[0].url.path == "/v1/taskdefs/charge-card"

    code, out, _ = run(
        api, capsys, [reply(200, FULL)], "taskdefs", "delete", "charge-card", "--json"
    )
    assert code == 0
    assert json.loads(out) == FULL


def test_deleting_an_unknown_task_def_fails_with_one_line(
    api: Api, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = problem(404, "Not found", "task definition 'nope' not found")
    code, out, err = run(api, capsys, [reply(404, missing)], "taskdefs", "delete", "nope")
    assert (code, out) == (1, "")
    assert err == "error: 404 Not found: task definition 'nope' not found\n"


def test_delete_needs_a_name(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["taskdefs", "delete"])
    assert exited.value.code == 2
    assert "NAME" in capsys.readouterr().err
