"""The ``baton`` client commands against ``baton dev``: tables and JSON, one-line errors with
non-zero exits, and ``baton worker run`` driving the example until Ctrl-C."""

from __future__ import annotations

import io
import json
import re
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
from baton_worker import cli
from baton_worker.env import ENV_API_KEY, ENV_DATA_DIR, ENV_URL

from tests.support.helpers import unique
from tests.support.helpers import wait_until as wait_for
from tests.support.servers import CheckedServer, free_port

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("e2e")]

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "order_fulfilment"
T = TypeVar("T")


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


Baton = Callable[..., Result]


@pytest.fixture
def baton(
    baton_server: CheckedServer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> Baton:
    """Run ``baton <args>`` in this process against the session's server."""
    for name in (ENV_URL, ENV_API_KEY):
        monkeypatch.delenv(name, raising=False)
    # No key of a `make dev` run in this checkout (.baton/data/api-key) is found by accident.
    monkeypatch.setenv(ENV_DATA_DIR, str(tmp_path / "no-data-dir"))

    def run(
        *args: str, stdin: str | None = None, connect: bool = True, connect_first: bool = False
    ) -> Result:
        """``connect``: add ``--url`` and ``--api-key`` after the command (``connect_first``:
        before it, as ``baton --url U --api-key K instances list``)."""
        argv = list(args)
        connection = ["--url", baton_server.base_url, "--api-key", baton_server.api_key]
        if connect_first:
            argv = connection + argv
        elif connect:
            argv += connection
        capsys.readouterr()
        if stdin is not None:
            monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
        code = cli.main(argv)
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run


def write_definition(folder: Path, name: str, job_type: str = "cli-job") -> Path:
    path = folder / f"{name}.json"
    path.write_text(
        json.dumps(
            {
                "name": name,
                "description": "from the CLI tests",
                "steps": [
                    {"id": "work", "type": "SERVICE_TASK", "jobType": job_type, "retryCount": 1},
                    {"id": "check", "type": "USER_TASK"},
                ],
            }
        )
    )
    return path


# --- definitions ---------------------------------------------------------------------------------


def test_definitions_create_list_and_get(baton: Baton, tmp_path: Path) -> None:
    name = unique("cli-def")
    created = baton("definitions", "create", str(write_definition(tmp_path, name)))
    assert created.code == 0, created.err
    header, row = created.out.splitlines()
    assert header.split() == ["NAME", "VERSION", "STEPS", "CREATED"]
    assert row.split()[:3] == [name, "1", "2"]

    again = baton("definitions", "create", str(write_definition(tmp_path, name)), "--json")
    assert again.json()["version"] == 2

    listed = baton("definitions", "list")
    assert listed.code == 0
    assert any(line.split()[:2] == [name, "2"] for line in listed.out.splitlines())

    shown = baton("definitions", "get", name, "--version", "1")
    assert shown.code == 0, shown.err
    assert f"name:        {name}" in shown.out
    assert "version:     1" in shown.out
    assert any(
        line.split()[:3] == ["work", "SERVICE_TASK", "cli-job"] for line in shown.out.splitlines()
    )
    assert baton("definitions", "get", name, "--json").json()["version"] == 2


def test_definition_from_stdin(baton: Baton) -> None:
    name = unique("cli-stdin")
    body = json.dumps({"name": name, "steps": [{"id": "wait", "type": "USER_TASK"}]})
    created = baton("definitions", "create", "-", "--json", stdin=body)
    assert created.code == 0, created.err
    assert created.json()["name"] == name


def test_unknown_definition_is_one_line_on_stderr_and_exit_1(baton: Baton) -> None:
    result = baton("definitions", "get", "no-such-definition")
    assert result.code == 1
    assert result.out == ""
    assert result.err == "error: 404 Not found: definition 'no-such-definition' not found\n"


def test_invalid_definition_lists_every_problem(baton: Baton, tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(
        json.dumps({"name": "bad", "steps": [{"id": "a", "type": "NOPE"}, {"id": "a"}]})
    )
    result = baton("definitions", "create", str(path))
    assert result.code == 1
    assert result.err.startswith("error: 422 Validation failed: ")
    assert "steps[0]" in result.err and "steps[1]" in result.err
    assert result.err.count("\n") == 1


def test_unreadable_file_and_bad_json_are_usage_errors(baton: Baton, tmp_path: Path) -> None:
    missing = baton("definitions", "create", str(tmp_path / "missing.json"))
    assert missing.code == 2
    assert missing.err.startswith("error: the definition: cannot read")
    (tmp_path / "broken.json").write_text("{nope")
    broken = baton("definitions", "create", str(tmp_path / "broken.json"))
    assert broken.code == 2
    assert "not valid JSON" in broken.err


# --- task definitions ----------------------------------------------------------------------------


def test_taskdefs_put_get_list_and_delete(baton: Baton, tmp_path: Path) -> None:
    name = unique("cli-taskdef")
    path = tmp_path / "taskdef.json"
    path.write_text(
        json.dumps(
            {
                "retryCount": 2,
                "retryLogic": "FIXED",
                "retryDelaySeconds": 1,
                "timeoutSeconds": 120,
                "pollTimeoutSeconds": 30,
                "responseTimeoutSeconds": 15,
                "timeoutPolicy": "RETRY",
                "concurrentExecLimit": 4,
                "rateLimitPerFrequency": 50,
                "rateLimitFrequencyInSeconds": 10,
            }
        )
    )
    put = baton("taskdefs", "put", name, str(path))
    assert put.code == 0, put.err
    assert "retry:            2 FIXED 1s" in put.out

    shown = baton("taskdefs", "get", name)
    assert shown.code == 0, shown.err
    assert f"name:             {name}" in shown.out
    assert "timeout:          120s" in shown.out
    assert "on timeout:       RETRY" in shown.out
    assert "rate limit:       50 per 10s" in shown.out

    listed = baton("taskdefs", "list")
    assert listed.code == 0, listed.err
    (row,) = [line for line in listed.out.splitlines() if line.startswith(name + " ")]
    cells = re.split(r"\s{2,}", row)
    assert cells[:8] == [name, "2 FIXED 1s", "120s", "30s", "15s", "RETRY", "4", "50/10s"]

    deleted = baton("taskdefs", "delete", name, "--json")
    assert deleted.code == 0, deleted.err
    assert deleted.json()["timeoutPolicy"] == "RETRY"  # the definition as it was
    assert name not in baton("taskdefs", "list").out

    again = baton("taskdefs", "delete", name)
    assert (again.code, again.out) == (1, "")
    assert again.err == f"error: 404 Not found: task definition {name!r} not found\n"
    assert baton("taskdefs", "get", name).code == 1


# --- instances and jobs --------------------------------------------------------------------------


def test_instances_start_get_list_and_cancel(baton: Baton, tmp_path: Path) -> None:
    name = unique("cli-inst")
    assert baton("definitions", "create", str(write_definition(tmp_path, name))).code == 0
    correlation = unique("corr")
    started = baton(
        "instances",
        "start",
        name,
        "--input",
        '{"orderId": 7}',
        "--correlation-id",
        correlation,
        "--json",
    )
    assert started.code == 0, started.err
    instance = started.json()
    assert instance["status"] == "RUNNING"
    assert instance["input"] == {"orderId": 7}

    shown = baton("instances", "get", instance["id"])
    assert f"id:             {instance['id']}" in shown.out
    assert "status:         RUNNING" in shown.out
    assert any(
        line.split()[:3] == ["work", "SERVICE_TASK", "SCHEDULED"] for line in shown.out.splitlines()
    )

    listed = baton("instances", "list", "--correlation-id", correlation, "--status", "running")
    assert listed.code == 0, listed.err
    rows = listed.out.splitlines()
    assert rows[0].split()[:4] == ["ID", "DEFINITION", "VERSION", "STATUS"]
    assert [r.split()[0] for r in rows[1:]] == [instance["id"]]

    cancelled = baton("instances", "cancel", instance["id"], "--reason", "testing", "--json")
    assert cancelled.json()["status"] == "CANCELLED"
    twice = baton("instances", "cancel", instance["id"])
    assert twice.code == 1
    assert twice.err.startswith("error: 409 Conflict: ")


def test_definitions_delete_and_instances_delete(baton: Baton, tmp_path: Path) -> None:
    name = unique("cli-del")
    baton("definitions", "create", str(write_definition(tmp_path, name)))
    baton("definitions", "create", str(write_definition(tmp_path, name)))
    started = baton("instances", "start", name, "--version", "2", "--json").json()
    deleted = baton("definitions", "delete", name, "--version", "2")
    assert deleted.code == 0, deleted.err
    assert deleted.out.strip() == f"deleted definition {name} version 2"
    assert baton("definitions", "get", name, "--json").json()["version"] == 1
    again = baton("definitions", "delete", name, "--version", "2")
    assert again.code == 1
    assert again.err.startswith("error: 404 ")
    with pytest.raises(SystemExit) as usage:  # --version is required: argparse's usage error
        baton("definitions", "delete", name)
    assert usage.value.code == 2

    running = baton("instances", "delete", started["id"])
    assert running.code == 1
    assert running.err.startswith("error: 409 ") and "RUNNING" in running.err
    baton("instances", "cancel", started["id"])
    gone = baton("instances", "delete", started["id"])
    assert gone.code == 0, gone.err
    assert gone.out.startswith(f"deleted instance {started['id']} (CANCELLED): 1 step execution(s)")
    missing = baton("instances", "get", started["id"])
    assert missing.code == 1 and missing.err.startswith("error: 404 ")
    assert baton("instances", "delete", started["id"]).err.startswith("error: 404 ")


def test_a_3_mb_input_from_a_file_is_offloaded_by_the_cli(baton: Baton, tmp_path: Path) -> None:
    name = unique("cli-big")
    assert baton("definitions", "create", str(write_definition(tmp_path, name))).code == 0
    big = tmp_path / "big.json"
    big.write_text(json.dumps({"blob": "x" * 3_000_000}))  # over the 2 MB inline cap
    started = baton("instances", "start", name, "--input", f"@{big}", "--json")
    assert started.code == 0, started.err
    instance = started.json()
    assert instance["status"] == "RUNNING"
    assert instance["input"]["$payload"].startswith("payloads/workflow-input/")
    assert instance["input"]["sizeBytes"] > 3_000_000


def test_instance_input_must_be_a_json_object(baton: Baton) -> None:
    result = baton("instances", "start", "whatever", "--input", "{broken")
    assert result.code == 2
    assert result.err.startswith("error: --input is not valid JSON")
    assert baton("instances", "start", "whatever", "--input", "[1, 2]").code == 2


def test_jobs_poll_claims_and_jobs_complete_settles(baton: Baton, tmp_path: Path) -> None:
    name = unique("cli-jobs")
    job_type = unique("cli-type")
    assert baton("definitions", "create", str(write_definition(tmp_path, name, job_type))).code == 0
    instance = baton("instances", "start", name, "--input", '{"n": 1}', "--json").json()

    nothing = baton("jobs", "poll", "--type", unique("other-type"))
    assert (nothing.code, nothing.out.strip()) == (0, "(none)")

    polled = baton("jobs", "poll", "--type", job_type, "--max", "5", "--worker", "cli-w", "--json")
    assert polled.code == 0, polled.err
    [job] = polled.json()["jobs"]
    assert (job["instanceId"], job["stepId"], job["attempt"]) == (instance["id"], "work", 1)

    done = baton("jobs", "complete", job["id"], "--worker", "cli-w", "--variables", '{"ok": true}')
    assert done.code == 0, done.err
    assert "applied:" in done.out
    after = baton("instances", "get", instance["id"], "--json").json()
    assert after["variables"] == {"ok": True}

    complete = baton(
        "instances",
        "complete-task",
        instance["id"],
        "check",
        "--variables",
        '{"by": "cli"}',
        "--json",
    )
    assert complete.code == 0, complete.err
    assert complete.json()["status"] == "COMPLETED"


def test_jobs_poll_table_shows_the_claimed_job(baton: Baton, tmp_path: Path) -> None:
    name = unique("cli-table")
    job_type = unique("cli-type")
    assert baton("definitions", "create", str(write_definition(tmp_path, name, job_type))).code == 0
    baton("instances", "start", name)
    polled = baton("jobs", "poll", "--type", job_type, "--worker", "table-w")
    header, row, footer = polled.out.splitlines()
    assert header.split()[:2] == ["ID", "TYPE"]
    assert row.split()[1] == job_type
    assert footer == "(claimed by worker table-w)"


def test_jobs_fail_with_a_next_retry_delay_is_retried_at_once(baton: Baton, tmp_path: Path) -> None:
    name = unique("cli-fail")
    job_type = unique("cli-type")
    step = {"id": "work", "type": "SERVICE_TASK", "jobType": job_type, "retryCount": 1}
    (tmp_path / "slow.json").write_text(
        json.dumps({"name": name, "steps": [{**step, "retryDelaySeconds": 3600}]})
    )
    assert baton("definitions", "create", str(tmp_path / "slow.json")).code == 0
    baton("instances", "start", name)
    poll = ["jobs", "poll", "--type", job_type, "--worker", "fail-w", "--json"]
    [job] = baton(*poll).json()["jobs"]
    fail = ["jobs", "fail", job["id"], "--worker", "fail-w", "--message", "later"]
    failed = baton(*fail, "--next-retry-delay", "0")  # not the step's hour
    assert failed.code == 0, failed.err
    assert "RETRY_SCHEDULED" in failed.out
    [again] = baton(*poll).json()["jobs"]
    assert (again["id"], again["attempt"]) == (job["id"], 2)


def test_a_step_completed_on_a_retry_shows_no_error_of_the_attempt_before(
    baton: Baton, tmp_path: Path
) -> None:
    name = unique("cli-retried")
    job_type = unique("cli-type")
    step = {"id": "work", "type": "SERVICE_TASK", "jobType": job_type, "retryCount": 1}
    (tmp_path / "d.json").write_text(
        json.dumps({"name": name, "steps": [{**step, "retryDelaySeconds": 0}]})
    )
    assert baton("definitions", "create", str(tmp_path / "d.json")).code == 0
    instance = baton("instances", "start", name, "--json").json()
    poll = ["jobs", "poll", "--type", job_type, "--worker", "retry-w", "--json"]
    [job] = baton(*poll).json()["jobs"]
    fail = ["jobs", "fail", job["id"], "--worker", "retry-w", "--message", "gateway timed out"]
    assert baton(*fail).code == 0
    [again] = wait_for(lambda: baton(*poll).json()["jobs"], what="the retry")
    done = baton("jobs", "complete", again["id"], "--worker", "retry-w", "--variables", "{}")
    assert done.code == 0, done.err

    shown = baton("instances", "get", instance["id"])
    assert shown.code == 0, shown.err
    [row] = [line for line in shown.out.splitlines() if line.startswith("work ")]
    assert row.split()[:4] == ["work", "SERVICE_TASK", "COMPLETED", "2"]
    assert "gateway timed out" not in shown.out
    [work] = baton("instances", "get", instance["id"], "--json").json()["steps"]
    assert "error" not in work, work
    history = baton("instances", "history", instance["id"])
    assert "gateway timed out" in history.out  # the attempt's error stays in its history


def test_retries_exhausted_after_one_attempt_is_said_in_the_singular(
    baton: Baton, tmp_path: Path
) -> None:
    name = unique("cli-once")
    job_type = unique("cli-type")
    step = {"id": "work", "type": "SERVICE_TASK", "jobType": job_type, "retryCount": 0}
    (tmp_path / "d.json").write_text(json.dumps({"name": name, "steps": [step]}))
    assert baton("definitions", "create", str(tmp_path / "d.json")).code == 0
    instance = baton("instances", "start", name, "--json").json()
    [job] = baton("jobs", "poll", "--type", job_type, "--worker", "w1", "--json").json()["jobs"]
    assert baton("jobs", "fail", job["id"], "--worker", "w1", "--message", "boom").code == 0
    [work] = baton("instances", "get", instance["id"], "--json").json()["steps"]
    assert work["status"] == "FAILED"
    assert work["error"] == "boom (retries exhausted after 1 attempt)"


# --- queues --------------------------------------------------------------------------------------


def test_queues_push_stats_peek_and_purge(baton: Baton) -> None:
    queue = unique("cliq")
    low = baton("queues", "push", queue, "--title", "later", "--body", '{"n": 1}', "--json")
    assert low.code == 0, low.err
    assert low.json()["status"] == "pending"
    high = baton("queues", "push", queue, "--title", "first please", "--priority", "5")
    assert high.code == 0
    assert "priority:  5" in high.out

    stats = baton("queues", "stats", queue)
    assert stats.out.splitlines() == [
        "PENDING  PROCESSING  COMPLETED  FAILED  DEAD",
        "2        0           0          0       0",
    ]

    peeked = baton("queues", "peek", queue, "--limit", "5")
    rows = peeked.out.splitlines()
    assert rows[0].split() == ["ID", "PRIORITY", "RETRIES", "TITLE", "CREATED"]
    assert [r.split()[1] for r in rows[1:]] == ["5", "0"]  # priority first
    assert "first please" in rows[1]
    assert len(baton("queues", "peek", queue, "--limit", "1", "--json").json()["tasks"]) == 1

    purged = baton("queues", "purge", queue)
    assert purged.out.strip() == f"deleted 2 task(s) from {queue}"
    assert baton("queues", "stats", queue, "--json").json()["pending"] == 0


def test_queues_list_tasks_and_redrive_dead_letters(
    baton: Baton, baton_server: CheckedServer
) -> None:
    from baton_worker.client import BatonClient

    queue = unique("dlq")
    with BatonClient(baton_server.base_url, api_key=baton_server.api_key) as client:
        dead = []
        for title in ("first", "second"):
            client.push(queue, title=title, max_retries=1)
            (task,) = client.dequeue(queue, consumer_id="c")
            client.nack(queue, task["id"], receipt=task["receipt"], error=f"{title} broke")
            dead.append(task["id"])
        alive = client.push(queue, title="alive")["id"]

    listed = baton("queues", "list", "--json").json()["queues"]
    (mine,) = [q for q in listed if q["name"] == queue]
    assert (mine["pending"], mine["dead"]) == (1, 2)
    text = baton("queues", "list").out
    assert any(line.split()[:6] == [queue, "1", "0", "0", "0", "2"] for line in text.splitlines())

    tasks = baton("queues", "tasks", queue, "--status", "dead")
    assert tasks.code == 0, tasks.err
    rows = tasks.out.splitlines()
    assert rows[0].split()[:4] == ["ID", "STATUS", "PRIORITY", "RETRIES"]
    assert [r.split()[0] for r in rows[1:]] == dead
    assert "first broke" in rows[1] and "1/1" in rows[1]
    paged = baton("queues", "tasks", queue, "--limit", "1", "--json").json()
    assert len(paged["tasks"]) == 1 and paged["nextPageToken"]

    one = baton("queues", "redrive", queue, "--task", dead[0], "--task", alive)
    assert one.code == 1  # a named task was not redriven: said, and the exit code shows it
    assert one.out.splitlines() == [
        f"redrove 1 dead task(s) of {queue} back to pending",
        f"not redriven: {alive}: the task is pending, not dead",
        f"1 dead task(s) left in {queue}",
    ]
    rest = baton("queues", "redrive", queue, "--json")
    assert rest.code == 0, rest.err
    assert rest.json() == {"redriven": 1, "taskIds": [dead[1]], "skipped": [], "remaining": 0}
    assert baton("queues", "stats", queue, "--json").json()["pending"] == 3


def test_invalid_queue_name_is_refused(baton: Baton) -> None:
    result = baton("queues", "push", "bad_name!", "--title", "x")
    assert result.code == 1
    assert result.err.startswith("error: 422 Validation failed: 'bad_name!' is not a valid queue")
    assert result.err.count("is not a valid queue name") == 1


# --- connection settings -------------------------------------------------------------------------


def test_environment_variables_configure_the_connection(
    baton: Baton, baton_server: CheckedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_URL, baton_server.base_url)
    monkeypatch.setenv(ENV_API_KEY, baton_server.api_key)
    result = baton("definitions", "list", "--json", connect=False)
    assert result.code == 0, result.err
    assert "definitions" in result.json()


def test_connection_and_output_options_before_the_command(baton: Baton) -> None:
    result = baton("--json", "instances", "list", "--limit", "1", connect_first=True)
    assert result.code == 0, result.err
    assert "instances" in result.json()


def test_connection_and_output_options_mixed_around_the_command(
    baton: Baton, baton_server: CheckedServer
) -> None:
    result = baton(
        "--url",
        baton_server.base_url,
        "--json",
        "definitions",
        "list",
        "--api-key",
        baton_server.api_key,
        connect=False,
    )
    assert result.code == 0, result.err
    assert "definitions" in result.json()
    queue = unique("q")
    key_first = ["--api-key", baton_server.api_key, "queues", "stats", queue]
    stats = baton(*key_first, "--url", baton_server.base_url, connect=False)
    assert stats.code == 0, stats.err
    assert stats.out.split()[:2] == ["PENDING", "PROCESSING"]
    unkeyed = baton("--url", baton_server.base_url, "queues", "stats", queue, connect=False)
    assert unkeyed.code == 1
    assert unkeyed.err.startswith("error: 401 ")


def test_missing_api_key_is_a_401_saying_how_to_give_one(
    baton: Baton, baton_server: CheckedServer, tmp_path: Path
) -> None:
    result = baton("definitions", "list", "--url", baton_server.base_url, connect=False)
    assert result.code == 1
    assert result.err.startswith("error: 401 ")
    assert "No API key was sent: pass --api-key or set $BATON_API_KEY" in result.err
    assert f"keeps it in {tmp_path / 'no-data-dir' / 'api-key'})" in result.err


def test_wrong_api_key_is_a_403_naming_the_option(
    baton: Baton, baton_server: CheckedServer
) -> None:
    result = baton(
        "definitions", "list", "--url", baton_server.base_url, "--api-key", "nope", connect=False
    )
    assert result.code == 1
    assert result.err.startswith("error: 403 ")
    assert "The API key sent came from the --api-key option; pass --api-key or set" in result.err
    assert result.err.count("\n") == 1


def test_a_key_from_the_environment_is_named_when_refused(
    baton: Baton, baton_server: CheckedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_API_KEY, "stale-env-key")
    result = baton("definitions", "list", "--url", baton_server.base_url, connect=False)
    assert result.code == 1
    assert "The API key sent came from $BATON_API_KEY;" in result.err


def test_a_stale_key_file_is_named_by_its_path_when_refused(
    baton: Baton, baton_server: CheckedServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The issue's case: the key file holds another key than the server's."""
    data = tmp_path / "stale-data"
    data.mkdir()
    (data / "api-key").write_text("stale-file-key\n")
    monkeypatch.setenv(ENV_DATA_DIR, str(data))
    result = baton("definitions", "list", "--url", baton_server.base_url, connect=False)
    assert result.code == 1
    assert result.err.startswith("error: 403 ")
    key_file = data / "api-key"
    assert f"came from the key file {key_file} ($BATON_API_KEY unset)" in result.err


def test_unreachable_server_is_a_clear_error(baton: Baton) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    result = baton("instances", "list", "--url", url, "--api-key", "k", connect=False)
    assert result.code == 1
    assert result.err.startswith(f"error: cannot reach {url}: ")
    assert "(the URL comes from the --url option; is a server running there? " in result.err
    assert "Set another with --url or $BATON_URL)" in result.err
    assert result.err.count("\n") == 1


def test_worker_run_with_a_refused_key_stops_with_the_error(baton_server: CheckedServer) -> None:
    cmd = [sys.executable, "-m", "baton_worker.cli", "worker", "run"]
    cmd += ["examples.order_fulfilment.worker:registry", "--url", baton_server.base_url]
    cmd += ["--api-key", "nope"]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1, done.stderr
    last = done.stderr.splitlines()[-1]  # after the runner's log lines
    assert last.startswith("error: 403 ")
    assert "The API key sent came from the --api-key option" in last
    assert "refused this worker's credentials; stopping" in done.stderr


def test_group_without_a_command_prints_its_help(baton: Baton) -> None:
    result = baton("queues", connect=False)
    assert result.code == 2
    assert "push" in result.err and "purge" in result.err


# --- worker run ----------------------------------------------------------------------------------


def test_worker_run_drives_the_example_and_drains_on_sigint(
    baton: Baton, baton_server: CheckedServer, tmp_path: Path
) -> None:
    definition = json.loads((EXAMPLE / "definition.json").read_text())
    definition["name"] = unique("order-fulfilment")
    (tmp_path / "def.json").write_text(json.dumps(definition))
    assert baton("definitions", "create", str(tmp_path / "def.json")).code == 0

    cmd = [sys.executable, "-m", "baton_worker.cli", "worker", "run"]
    cmd += ["examples.order_fulfilment.worker:registry", "--poll-interval", "0.05"]
    cmd += [
        "--url",
        baton_server.base_url,
        "--api-key",
        baton_server.api_key,
        "--worker-id",
        "cli-worker",
    ]
    log_path = tmp_path / "worker.log"
    with log_path.open("wb") as log:
        worker = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    try:
        started = baton(
            "instances",
            "start",
            definition["name"],
            "--input",
            f"@{EXAMPLE / 'input.json'}",
            "--json",
        )
        assert started.code == 0, started.err
        instance_id = started.json()["id"]

        def waiting_for_approval() -> bool:
            assert worker.poll() is None, log_path.read_text()
            steps = baton("instances", "get", instance_id, "--json").json().get("steps", [])
            return any(s["stepId"] == "approve" and s["status"] == "IN_PROGRESS" for s in steps)

        wait_for(waiting_for_approval, what="the approval step")
        approved = baton(
            "instances",
            "complete-task",
            instance_id,
            "approve",
            "--variables",
            '{"approvedBy": "cli"}',
        )
        assert approved.code == 0, approved.err

        def finished() -> dict[str, Any] | None:
            doc: dict[str, Any] = baton("instances", "get", instance_id, "--json").json()
            return doc if doc["status"] != "RUNNING" else None

        done = wait_for(finished, what="the instance to finish")
        assert done["status"] == "COMPLETED", done
        assert done["output"]["approvedBy"] == "cli"
        assert {s["workerId"] for s in done["steps"] if s["type"] == "SERVICE_TASK"} == {
            "cli-worker"
        }
    finally:
        worker.send_signal(signal.SIGINT)
        try:
            code = worker.wait(20)
        except subprocess.TimeoutExpired:
            worker.kill()
            pytest.fail(f"worker did not stop on SIGINT:\n{log_path.read_text()[-3000:]}")
    output = log_path.read_text()
    assert code == 0, output[-3000:]
    assert "runner stopped" in output
    assert "job_type=charge-card" in output and "instance_id=" in output


def test_worker_run_with_a_bad_target_is_a_usage_error(baton: Baton) -> None:
    missing = baton("worker", "run", "no_such_module_anywhere:registry")
    assert missing.code == 2
    assert missing.err.startswith("error: cannot import no_such_module_anywhere")
    wrong = baton("worker", "run", "json:dumps")
    assert wrong.code == 2
    assert "not a baton_worker Registry" in wrong.err
