"""HTTP steps on a real PostgreSQL, the calls made by the system tasks (``run_system_tasks``, as
the system-tasks function and ``baton dev`` run it) to a local server: a JSON answer, a 500
retried then failing, a server slower than readTimeOut, the metadata address refused; the engine
keeps serving while a call is in flight."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from baton.engine.service import Engine

from tests.integration.test_control_flow import steps_of
from tests.support.helpers import wait_until
from tests.support.http_target import Target, http_target


@pytest.fixture
def target() -> Iterator[Target]:
    with http_target() as t:
        yield t


def _start(engine: Engine, name: str, steps: list[dict[str, Any]], data: Any = None) -> str:
    engine.register_definition({"name": name, "steps": steps})
    inst, _ = engine.start_instance(definition_name=name, input=data or {})
    return str(inst["id"])


def _run_until_ended(engine: Engine, iid: str) -> dict[str, Any]:
    def ended() -> dict[str, Any] | None:
        engine.run_system_tasks(wait_seconds=0.2)
        got = engine.get_instance(iid)
        return got if got["status"] not in ("RUNNING",) else None

    return wait_until(ended, timeout=30, what="the instance to end")


def test_a_json_answer_is_the_step_output(engine: Engine, target: Target) -> None:
    iid = _start(
        engine,
        "call",
        [
            {
                "id": "call",
                "type": "HTTP",
                "request": {
                    "uri": "${workflow.input.base}/json?q=1",
                    "method": "POST",
                    "headers": {"X-Id": "${workflow.input.id}"},
                    "body": {"n": "${workflow.input.n}"},
                },
            },
            {
                "id": "after",
                "type": "SET_VARIABLE",
                "variables": {"ok": "${call.output.response.body.ok}"},
            },
        ],
        {"base": target.url(""), "id": "abc", "n": 7},
    )
    got = _run_until_ended(engine, iid)
    assert got["status"] == "COMPLETED", got.get("reason")
    call = steps_of(engine, iid, "call")[0]
    response = call["output"]["response"]
    assert response["statusCode"] == 200
    assert response["reasonPhrase"] == "OK"
    assert response["body"] == {"ok": True, "method": "POST", "echo": {"n": 7}}
    assert response["headers"]["X-Trace"] == ["t-1"]
    assert call["input"]["request"]["uri"] == target.url("/json?q=1")
    sent = target.requests[0]
    assert sent["path"] == "/json?q=1"
    assert sent["headers"]["X-Id"] == "abc"
    assert sent["headers"]["Content-Type"] == "application/json"
    assert sent["headers"]["Host"] == f"127.0.0.1:{target.port}"
    assert got["variables"]["ok"] is True


def test_a_text_answer_is_text(engine: Engine, target: Target) -> None:
    iid = _start(
        engine, "text", [{"id": "t", "type": "HTTP", "request": {"uri": target.url("/text")}}]
    )
    assert _run_until_ended(engine, iid)["status"] == "COMPLETED"
    assert steps_of(engine, iid, "t")[0]["output"]["response"]["body"] == "plain words"


def test_a_500_is_retried_then_fails_the_step(engine: Engine, target: Target) -> None:
    iid = _start(
        engine,
        "fails",
        [
            {
                "id": "call",
                "type": "HTTP",
                "request": {"uri": target.url("/fail")},
                "retryCount": 2,
                "retryDelaySeconds": 0,
            }
        ],
    )
    got = _run_until_ended(engine, iid)
    assert got["status"] == "FAILED"
    assert target.hits["/fail"] == 3  # the first attempt and two retries
    step = steps_of(engine, iid, "call")[0]
    assert "HTTP 500 Internal Server Error" in step["error"]
    assert '{"error":"boom"}' in step["error"]


def test_a_server_slower_than_read_timeout_fails_the_attempt(
    engine: Engine, target: Target
) -> None:
    iid = _start(
        engine,
        "slow",
        [
            {
                "id": "call",
                "type": "HTTP",
                "request": {"uri": target.url("/hold"), "readTimeOut": 300},
                "retryCount": 0,
            }
        ],
    )
    got = _run_until_ended(engine, iid)
    assert got["status"] == "FAILED"
    assert "no answer within readTimeOut 300 ms" in steps_of(engine, iid, "call")[0]["error"]


@pytest.mark.parametrize(
    ("uri", "said"),
    [
        (
            "http://169.254.169.254/latest/meta-data/",
            "refused: 169.254.169.254 is an instance-metadata address",
        ),
        ("http://[fd00:ec2::254]/", "refused: fd00:ec2::254 is an instance-metadata address"),
        ("http://169.254.10.1/", "refused: 169.254.10.1 is a link-local address"),
    ],
)
def test_forbidden_addresses_are_refused_without_retries(
    engine: Engine, uri: str, said: str
) -> None:
    iid = _start(
        engine,
        "meta",
        [
            {
                "id": "call",
                "type": "HTTP",
                "request": {"uri": uri},
                "retryCount": 3,
                "retryDelaySeconds": 0,
            }
        ],
    )
    got = _run_until_ended(engine, iid)
    assert got["status"] == "FAILED"
    step = steps_of(engine, iid, "call")[0]
    assert step["error"] == said
    assert step["attempt"] == 1  # refused once, not retried


def test_too_large_an_answer_and_a_redirect_fail(engine: Engine, target: Target) -> None:
    big = _start(
        engine,
        "big",
        [{"id": "b", "type": "HTTP", "request": {"uri": target.url("/big")}, "retryCount": 0}],
    )
    moved = _start(
        engine,
        "moved",
        [{"id": "r", "type": "HTTP", "request": {"uri": target.url("/redirect")}, "retryCount": 0}],
    )
    assert _run_until_ended(engine, big)["status"] == "FAILED"
    assert _run_until_ended(engine, moved)["status"] == "FAILED"
    assert "above the limit of 1048576 bytes" in steps_of(engine, big, "b")[0]["error"]
    error = steps_of(engine, moved, "r")[0]["error"]
    assert "HTTP 302" in error and "redirects are not followed" in error
    assert target.hits.get("/", 0) == 0


def test_the_engine_keeps_serving_while_a_call_is_in_flight(engine: Engine, target: Target) -> None:
    held = _start(
        engine, "held", [{"id": "h", "type": "HTTP", "request": {"uri": target.url("/hold")}}]
    )
    passes = threading.Thread(target=engine.run_system_tasks, kwargs={"wait_seconds": 1})
    passes.start()
    try:
        wait_until(lambda: target.hits.get("/hold"), what="the call to reach the server")
        # the call is in flight: no transaction is held, other instances go on
        other = _start(
            engine, "other", [{"id": "s", "type": "SET_VARIABLE", "variables": {"x": 1}}]
        )
        assert engine.get_instance(other)["status"] == "COMPLETED"
        assert engine.get_instance(held)["status"] == "RUNNING"
    finally:
        target.release.set()
        passes.join(30)
    assert engine.get_instance(held)["status"] == "COMPLETED"


def _deadlocks(engine: Engine) -> int:
    row = engine.db.autocommit(
        lambda c: c.execute(
            "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()
    )
    assert row is not None
    return int(row["deadlocks"])


def test_two_system_task_runners_make_each_call_once(db: Any, target: Target) -> None:
    """Two engines (two functions' processes) claiming at once: every call is made once."""
    first, second = Engine(db), Engine(db)
    first.register_definition(
        {
            "name": "many",
            "steps": [{"id": "c", "type": "HTTP", "request": {"uri": "${workflow.input.u}"}}],
        }
    )
    before = _deadlocks(first)
    ids = [
        str(
            first.start_instance(definition_name="many", input={"u": target.url(f"/json?n={n}")})[
                0
            ]["id"]
        )
        for n in range(24)
    ]
    stop = threading.Event()

    def run(engine: Engine) -> None:
        while not stop.is_set():
            engine.run_system_tasks(wait_seconds=0.2)

    threads = [threading.Thread(target=run, args=(e,)) for e in (first, second, first, second)]
    for t in threads:
        t.start()
    try:
        wait_until(
            lambda: all(first.get_instance(i)["status"] == "COMPLETED" for i in ids),
            what="every instance to complete",
        )
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    paths = sorted(r["path"] for r in target.requests)
    assert paths == sorted(f"/json?n={n}" for n in range(24))  # each once, none twice
    assert _deadlocks(first) == before


def test_a_call_whose_runner_died_runs_again_after_its_lease(
    engine: Engine, target: Target
) -> None:
    """A system-tasks process that claimed the job and died before reporting (its lease,
    responseTimeoutSeconds 1, lapses): the reaper gives the job its next attempt, which the next
    pass runs, as for any worker."""
    iid = _start(
        engine,
        "lapsed",
        [
            {
                "id": "call",
                "type": "HTTP",
                "request": {"uri": target.url("/json")},
                "responseTimeoutSeconds": 1,
                "retryCount": 1,
            }
        ],
    )
    (claimed,) = engine.poll("baton:system-tasks:dead", ["baton:http"], 1)
    assert claimed["input"]["request"] == {"uri": target.url("/json")}
    wait_until(lambda: engine.reap_expired_leases() or None, what="the lease to lapse")
    got = _run_until_ended(engine, iid)
    assert got["status"] == "COMPLETED", got.get("reason")
    step = steps_of(engine, iid, "call")[0]
    assert step["attempt"] == 2
    assert target.hits["/json"] == 1  # the dead runner never called


SECRET_HEADERS = {
    "Authorization": "Bearer ${workflow.input.token}",
    "Proxy-Authorization": "Basic cHJveHk6cHc=",
    "Cookie": "session=${workflow.input.token}",
    "X-Api-Key": "k-123",
    "X-Auth-Token": "t-456",
    "Client-Secret": "s-789",
    "X-Password": "pw",
}


def test_sensitive_header_values_are_sent_but_never_stored_with_the_step(
    engine: Engine, target: Target
) -> None:
    iid = _start(
        engine,
        "secret",
        [
            {
                "id": "call",
                "type": "HTTP",
                "request": {
                    "uri": target.url("/json"),
                    "headers": {**SECRET_HEADERS, "X-Trace": "${workflow.input.trace}"},
                },
            }
        ],
        {"token": "tok-secret-1", "trace": "tr-1"},
    )
    assert _run_until_ended(engine, iid)["status"] == "COMPLETED"
    sent = target.requests[0]["headers"]
    assert sent["Authorization"] == "Bearer tok-secret-1"
    assert sent["Cookie"] == "session=tok-secret-1"
    assert sent["X-Api-Key"] == "k-123" and sent["X-Auth-Token"] == "t-456"
    assert sent["Client-Secret"] == "s-789" and sent["X-Password"] == "pw"
    shown = steps_of(engine, iid, "call")[0]["input"]["request"]["headers"]
    assert shown == {**{k: "[redacted]" for k in SECRET_HEADERS}, "X-Trace": "tr-1"}
    # Nowhere in its steps or its history is a secret value (the instance's own input is the
    # caller's, shown as given).
    everything = repr(engine.get_instance(iid)["steps"]) + repr(engine.audit_trail(iid))
    for secret in ("tok-secret-1", "k-123", "t-456", "s-789", "cHJveHk6cHc="):
        assert secret not in everything


def test_a_conductor_top_level_http_input_is_redacted_too(engine: Engine, target: Target) -> None:
    """Conductor's top-level form keeps ``headers`` in the step's input as well."""
    headers = {"Authorization": "Bearer top-secret", "Accept-Language": "en"}
    iid = _start(
        engine,
        "top",
        [
            {
                "id": "call",
                "type": "HTTP",
                "request": {"uri": target.url("/json"), "headers": headers},
                "input": {"uri": target.url("/json"), "headers": headers},
            }
        ],
    )
    assert _run_until_ended(engine, iid)["status"] == "COMPLETED"
    assert target.requests[0]["headers"]["Authorization"] == "Bearer top-secret"
    step_input = steps_of(engine, iid, "call")[0]["input"]
    expected = {"Authorization": "[redacted]", "Accept-Language": "en"}
    assert step_input["headers"] == expected
    assert step_input["request"]["headers"] == expected
    assert "top-secret" not in repr(engine.get_instance(iid))


def test_a_slow_target_holds_up_no_call_claimed_beside_or_after_it(
    engine: Engine, target: Target
) -> None:
    """Head-of-line: while one call waits on a slow server, the pass goes on claiming and
    making the others (before, a pass waited for all of its calls before claiming again)."""
    held = _start(
        engine, "slow", [{"id": "h", "type": "HTTP", "request": {"uri": target.url("/hold")}}]
    )
    passes = threading.Thread(
        target=engine.run_system_tasks, kwargs={"wait_seconds": 1, "claim_seconds": 20}
    )
    passes.start()
    try:
        wait_until(lambda: target.hits.get("/hold"), what="the slow call to reach the server")
        fast = [
            _start(
                engine,
                f"fast{n}",
                [{"id": "f", "type": "HTTP", "request": {"uri": target.url(f"/json?n={n}")}}],
            )
            for n in range(3)
        ]
        wait_until(
            lambda: all(engine.get_instance(i)["status"] == "COMPLETED" for i in fast),
            timeout=15,
            what="the fast calls to complete while the slow one is held",
        )
        assert engine.get_instance(held)["status"] == "RUNNING"
    finally:
        target.release.set()
        passes.join(60)
    assert not passes.is_alive()
    assert engine.get_instance(held)["status"] == "COMPLETED"


def test_a_pass_fills_no_more_places_than_http_concurrency(db: Any, target: Target) -> None:
    from dataclasses import replace

    base = Engine(db)
    engine = Engine(db, settings=replace(base.settings, http_concurrency=2))
    ids = [
        _start(
            engine,
            f"held{n}",
            [{"id": "h", "type": "HTTP", "request": {"uri": target.url(f"/hold?n={n}")}}],
        )
        for n in range(3)
    ]
    passes = threading.Thread(
        target=engine.run_system_tasks, kwargs={"wait_seconds": 1, "claim_seconds": 3}
    )
    passes.start()
    try:
        wait_until(lambda: target.hits.get("/hold", 0) >= 2, what="two calls in flight")
        # the third job stays unclaimed while both places are taken
        jobs = [s for i in ids for s in engine.get_instance(i)["steps"]]
        assert sorted(s["status"] for s in jobs) == ["IN_PROGRESS", "IN_PROGRESS", "SCHEDULED"]
        assert target.hits["/hold"] == 2
    finally:
        target.release.set()
        passes.join(60)
    assert not passes.is_alive()


def test_the_task_definition_named_by_an_http_step_sets_its_retries(
    engine: Engine, target: Target
) -> None:
    """As Conductor applies the TaskDef of an HTTP task's name: its retryCount (and the rest of
    its retry and timeout settings) govern the HTTP job; the step's own settings still win."""
    engine.put_task_def("flaky_api", {"retryCount": 1, "retryDelaySeconds": 0})
    named = _start(
        engine,
        "named",
        [
            {
                "id": "call",
                "name": "flaky_api",
                "type": "HTTP",
                "request": {"uri": target.url("/fail")},
            }
        ],
    )
    assert _run_until_ended(engine, named)["status"] == "FAILED"
    assert target.hits["/fail"] == 2  # the first attempt and the task definition's one retry
    # A nested HTTP step with no name takes the task definition of its id.
    engine.put_task_def("by_id", {"retryCount": 0, "retryDelaySeconds": 0})
    by_id = _start(
        engine,
        "by_id_flow",
        [
            {
                "id": "par",
                "type": "PARALLEL",
                "branches": [
                    [{"id": "by_id", "type": "HTTP", "request": {"uri": target.url("/fail")}}]
                ],
            }
        ],
    )
    assert _run_until_ended(engine, by_id)["status"] == "FAILED"
    assert target.hits["/fail"] == 3
    # The step's own retryCount wins over its task definition's.
    own = _start(
        engine,
        "own",
        [
            {
                "id": "call",
                "name": "flaky_api",
                "type": "HTTP",
                "request": {"uri": target.url("/fail")},
                "retryCount": 0,
            }
        ],
    )
    assert _run_until_ended(engine, own)["status"] == "FAILED"
    assert target.hits["/fail"] == 4
