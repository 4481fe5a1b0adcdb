"""Hand-written hostile inputs that generators rarely reach, sent raw over HTTP: NUL characters in
strings, keys, query and path parameters; lone UTF-16 surrogates (as JSON escapes and as raw
bytes); integers beyond int32 and int64; fractional floats where integers belong; NaN, Infinity
and 1e400; malformed page tokens; huge nesting.

Every one must be refused with a 4xx ``application/problem+json``, never a 5xx, and leave the
database exactly as it was (a fingerprint of every table's rows, before and after).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import psycopg
import pytest
from psycopg import sql

from tests.support.helpers import unique
from tests.support.servers import LocalServer

pytestmark = [pytest.mark.e2e, pytest.mark.fuzz]

NUL = "\u0000"
LONE_HIGH = "\ud835"  # the first half of a surrogate pair, alone
LONE_LOW = "\udc00"
INT32_OVER = 3_000_000_000
INT64_OVER = 2**63
HUGE = 99_999_999_999_999_999_999
NON_UTF8 = b"\xed\xa0\xb5"  # a surrogate encoded in UTF-8 bytes: not valid UTF-8


def j(value: Any) -> str:
    """JSON text; NUL and lone surrogates come out as \\u escapes, NaN/Infinity as JS literals."""
    return json.dumps(value)


def garbage_token(*parts: bytes) -> str:
    return base64.urlsafe_b64encode(b"|".join(parts)).decode()


@dataclass(frozen=True)
class Hostile:
    id: str
    method: str
    path: str  # {svc} {user} {sig} {job} {task} {receipt} {defn} filled from the seeded state
    body: str | bytes | None = None


def _cases() -> list[Hostile]:
    poll = {"workerId": "w-poll", "jobTypes": ["nothing-to-claim"]}
    cases = [
        # --- jobs ---------------------------------------------------------------------------
        Hostile("poll-worker-nul", "POST", "/v1/jobs/poll", j({**poll, "workerId": f"a{NUL}b"})),
        Hostile(
            "poll-worker-surrogate", "POST", "/v1/jobs/poll", j({**poll, "workerId": LONE_HIGH})
        ),
        Hostile("poll-jobtype-nul", "POST", "/v1/jobs/poll", j({**poll, "jobTypes": [f"x{NUL}"]})),
        Hostile("poll-max-int32", "POST", "/v1/jobs/poll", j({**poll, "maxJobs": INT32_OVER})),
        Hostile("poll-max-int64", "POST", "/v1/jobs/poll", j({**poll, "maxJobs": INT64_OVER})),
        Hostile("poll-max-fraction", "POST", "/v1/jobs/poll", j({**poll, "maxJobs": 1.5})),
        Hostile("poll-max-nan", "POST", "/v1/jobs/poll", j({**poll, "maxJobs": float("nan")})),
        Hostile("poll-max-inf", "POST", "/v1/jobs/poll", j({**poll, "maxJobs": float("inf")})),
        Hostile("poll-max-1e400", "POST", "/v1/jobs/poll", j(poll)[:-1] + ', "maxJobs": 1e400}'),
        Hostile("poll-non-utf8", "POST", "/v1/jobs/poll", b'{"workerId": "' + NON_UTF8 + b'"}'),
    ]
    complete = {"jobId": "{job}", "workerId": "w-hold"}
    for tag, variables in _hostile_variables():
        cases.append(
            Hostile(
                f"complete-{tag}",
                "POST",
                "/v1/jobs/complete",
                j({**complete, "variablesToSet": variables})
                if isinstance(variables, dict)
                else j(complete)[:-1] + f', "variablesToSet": {variables}}}',
            )
        )
    cases += [
        Hostile(
            "complete-worker-nul", "POST", "/v1/jobs/complete", j({**complete, "workerId": NUL})
        ),
        Hostile(
            "fail-message-nul",
            "POST",
            "/v1/jobs/fail",
            j({**complete, "errorMessage": f"boom{NUL}"}),
        ),
        Hostile(
            "fail-message-surrogate",
            "POST",
            "/v1/jobs/fail",
            j({**complete, "errorMessage": LONE_LOW}),
        ),
        Hostile(
            "fail-delay-nan",
            "POST",
            "/v1/jobs/fail",
            j({**complete, "errorMessage": "e", "nextRetryDelaySeconds": float("nan")}),
        ),
        Hostile(
            "fail-delay-1e400",
            "POST",
            "/v1/jobs/fail",
            j({**complete, "errorMessage": "e"})[:-1] + ', "nextRetryDelaySeconds": 1e400}',
        ),
        Hostile(
            "heartbeat-worker-nul",
            "POST",
            "/v1/jobs/heartbeat",
            j({**complete, "workerId": f"w-hold{NUL}"}),
        ),
        Hostile("heartbeat-job-nul", "POST", "/v1/jobs/heartbeat", j({**complete, "jobId": NUL})),
    ]
    # --- instances ------------------------------------------------------------------------
    start = {"definitionName": "{defn}"}
    for tag, variables in _hostile_variables():
        cases.append(
            Hostile(
                f"start-input-{tag}",
                "POST",
                "/v1/instances",
                j({**start, "input": variables})
                if isinstance(variables, dict)
                else j(start)[:-1] + f', "input": {variables}}}',
            )
        )
    cases += [
        Hostile(
            "start-correlation-nul", "POST", "/v1/instances", j({**start, "correlationId": NUL})
        ),
        Hostile(
            "start-idempotency-nul",
            "POST",
            "/v1/instances",
            j({**start, "idempotencyKey": f"k{NUL}"}),
        ),
        Hostile("start-name-nul", "POST", "/v1/instances", j({"definitionName": f"x{NUL}"})),
        Hostile(
            "start-version-int32",
            "POST",
            "/v1/instances",
            j({**start, "definitionVersion": INT32_OVER}),
        ),
        Hostile(
            "start-version-int64",
            "POST",
            "/v1/instances",
            j({**start, "definitionVersion": INT64_OVER}),
        ),
        Hostile(
            "start-version-huge", "POST", "/v1/instances", j({**start, "definitionVersion": HUGE})
        ),
        Hostile(
            "start-version-fraction",
            "POST",
            "/v1/instances",
            j({**start, "definitionVersion": 1.5}),
        ),
        Hostile(
            "start-version-1e400",
            "POST",
            "/v1/instances",
            j(start)[:-1] + ', "definitionVersion": 1e400}',
        ),
        Hostile(
            "start-inline-step-input-nul",
            "POST",
            "/v1/instances",
            j({"definition": _definition("inline", {"k": NUL})}),
        ),
        Hostile(
            "start-non-utf8", "POST", "/v1/instances", b'{"definitionName": "' + NON_UTF8 + b'"}'
        ),
        Hostile(
            "start-nesting-5000",
            "POST",
            "/v1/instances",
            j(start)[:-1] + ', "input": {"a": ' + "[" * 5000 + "]" * 5000 + "}}",
        ),
        Hostile("start-nesting-100000", "POST", "/v1/instances", "[" * 100_000 + "]" * 100_000),
        Hostile("cancel-reason-nul", "POST", "/v1/instances/{user}/cancel", j({"reason": NUL})),
        Hostile(
            "cancel-reason-surrogate",
            "POST",
            "/v1/instances/{user}/cancel",
            j({"reason": LONE_HIGH}),
        ),
        Hostile("cancel-id-nul", "POST", "/v1/instances/a%00b/cancel", j({})),
        Hostile(
            "user-task-step-nul",
            "POST",
            "/v1/instances/{user}/user-tasks/approve%00/complete",
            j({}),
        ),
    ]
    for tag, variables in _hostile_variables():
        body = (
            j({"variablesToSet": variables})
            if isinstance(variables, dict)
            else f'{{"variablesToSet": {variables}}}'
        )
        cases.append(
            Hostile(
                f"user-task-{tag}", "POST", "/v1/instances/{user}/user-tasks/approve/complete", body
            )
        )
        payload = (
            j({"payload": variables})
            if isinstance(variables, dict)
            else f'{{"payload": {variables}}}'
        )
        cases.append(Hostile(f"signal-{tag}", "POST", "/v1/instances/{sig}/signals/go", payload))
    # --- definitions and task definitions ------------------------------------------------
    cases += [
        Hostile(
            "definition-description-nul",
            "POST",
            "/v1/definitions",
            j({**_definition("d"), "description": NUL}),
        ),
        Hostile(
            "definition-step-input-nul-key",
            "POST",
            "/v1/definitions",
            j(_definition("d", {NUL: 1})),
        ),
        Hostile(
            "definition-step-input-nul",
            "POST",
            "/v1/definitions",
            j(_definition("d", {"k": f"v{NUL}"})),
        ),
        Hostile(
            "definition-step-input-surrogate",
            "POST",
            "/v1/definitions",
            j(_definition("d", {"k": LONE_HIGH})),
        ),
        Hostile(
            "definition-output-nul",
            "POST",
            "/v1/definitions",
            j({**_definition("d"), "outputParameters": {"o": NUL}}),
        ),
        Hostile(
            "definition-timeout-int32",
            "POST",
            "/v1/definitions",
            j({**_definition("d"), "timeoutSeconds": INT32_OVER}),
        ),
        Hostile(
            "definition-timeout-nan",
            "POST",
            "/v1/definitions",
            j({**_definition("d"), "timeoutSeconds": float("nan")}),
        ),
        Hostile(
            "definition-retry-fraction",
            "POST",
            "/v1/definitions",
            j(_definition("d", retryCount=881.5)),
        ),
        Hostile(
            "taskdef-retry-float-delay-int64",
            "PUT",
            "/v1/taskdefs/{taskdef}",
            j({"retryCount": 881.0, "retryDelaySeconds": 99_999_999_999}),
        ),
        Hostile(
            "taskdef-retry-fraction", "PUT", "/v1/taskdefs/{taskdef}", j({"retryCount": 881.5})
        ),
        Hostile(
            "taskdef-description-nul", "PUT", "/v1/taskdefs/{taskdef}", j({"description": NUL})
        ),
        Hostile(
            "taskdef-owner-nul", "PUT", "/v1/taskdefs/{taskdef}", j({"ownerEmail": f"a{NUL}@b"})
        ),
        Hostile(
            "taskdef-template-nul-key",
            "PUT",
            "/v1/taskdefs/{taskdef}",
            j({"inputTemplate": {NUL: 1}}),
        ),
        Hostile(
            "taskdef-template-surrogate",
            "PUT",
            "/v1/taskdefs/{taskdef}",
            j({"inputTemplate": {"k": LONE_LOW}}),
        ),
        Hostile(
            "taskdef-concurrency-int32",
            "PUT",
            "/v1/taskdefs/{taskdef}",
            j({"concurrentExecLimit": INT32_OVER}),
        ),
        Hostile(
            "taskdef-concurrency-huge",
            "PUT",
            "/v1/taskdefs/{taskdef}",
            j({"concurrentExecLimit": HUGE}),
        ),
        Hostile(
            "taskdef-rate-int32",
            "PUT",
            "/v1/taskdefs/{taskdef}",
            j({"rateLimitPerFrequency": INT32_OVER, "rateLimitFrequencyInSeconds": 1}),
        ),
        Hostile("taskdef-name-nul", "PUT", "/v1/taskdefs/t%00", j({})),
        # --- queues ---------------------------------------------------------------------------
        Hostile("push-title-nul", "POST", "/v1/queues/{queue}/push", j({"title": f"a{NUL}b"})),
        Hostile("push-body-nul", "POST", "/v1/queues/{queue}/push", j({"title": "t", "body": NUL})),
        Hostile("push-title-surrogate", "POST", "/v1/queues/{queue}/push", j({"title": LONE_HIGH})),
        Hostile(
            "push-priority-int32",
            "POST",
            "/v1/queues/{queue}/push",
            j({"title": "t", "priority": INT32_OVER}),
        ),
        Hostile(
            "push-priority-fraction",
            "POST",
            "/v1/queues/{queue}/push",
            j({"title": "t", "priority": 881.5}),
        ),
        Hostile(
            "push-priority-nan",
            "POST",
            "/v1/queues/{queue}/push",
            j({"title": "t", "priority": float("nan")}),
        ),
        Hostile(
            "push-priority-1e400",
            "POST",
            "/v1/queues/{queue}/push",
            '{"title": "t", "priority": 1e400}',
        ),
        Hostile("push-queue-nul", "POST", "/v1/queues/q%00/push", j({"title": "t"})),
        Hostile(
            "dequeue-consumer-nul",
            "POST",
            "/v1/queues/{queue}/dequeue",
            j({"consumerId": f"c{NUL}"}),
        ),
        Hostile(
            "ack-receipt-nul", "POST", "/v1/queues/{queue}/tasks/{task}/ack", j({"receipt": NUL})
        ),
        Hostile(
            "nack-error-nul",
            "POST",
            "/v1/queues/{queue}/tasks/{task}/nack",
            j({"receipt": "{receipt}", "error": NUL}),
        ),
        Hostile(
            "nack-error-surrogate",
            "POST",
            "/v1/queues/{queue}/tasks/{task}/nack",
            j({"receipt": "{receipt}", "error": LONE_LOW}),
        ),
        Hostile(
            "ack-task-nul", "POST", "/v1/queues/{queue}/tasks/a%00/ack", j({"receipt": "{receipt}"})
        ),
        # --- query and path parameters ---------------------------------------------------------
        Hostile("list-definition-nul", "GET", "/v1/instances?definitionName=a%00b"),
        Hostile("list-correlation-nul", "GET", "/v1/instances?correlationId=a%00b"),
        Hostile("list-status-nul", "GET", "/v1/instances?status=%00"),
        Hostile("list-limit-int32", "GET", f"/v1/instances?limit={INT32_OVER}"),
        Hostile("list-limit-int64", "GET", f"/v1/instances?limit={INT64_OVER}"),
        Hostile("list-limit-float", "GET", "/v1/instances?limit=881.0"),
        Hostile("peek-limit-int32", "GET", f"/v1/queues/{{queue}}/peek?limit={INT32_OVER}"),
        Hostile("definition-name-nul", "GET", "/v1/definitions/a%00b"),
        Hostile("version-name-nul", "GET", "/v1/definitions/a%00b/versions/1"),
        Hostile(
            "ack-queue-nul", "POST", "/v1/queues/q%00/tasks/{task}/ack", j({"receipt": "{receipt}"})
        ),
        Hostile(
            "nack-queue-nul",
            "POST",
            "/v1/queues/q%00/tasks/{task}/nack",
            j({"receipt": "{receipt}"}),
        ),
        Hostile("definition-name-non-utf8", "GET", "/v1/definitions/%ED%A0%B5"),
        Hostile("taskdef-name-get-nul", "GET", "/v1/taskdefs/a%00b"),
        Hostile("instance-id-nul", "GET", "/v1/instances/a%00b"),
        Hostile("queue-name-nul", "GET", "/v1/queues/a%00b/stats"),
        Hostile("purge-queue-nul", "DELETE", "/v1/queues/a%00b"),
        Hostile("version-int32", "GET", f"/v1/definitions/{{defn}}/versions/{INT32_OVER}"),
        Hostile("version-int64", "GET", f"/v1/definitions/{{defn}}/versions/{INT64_OVER}"),
        Hostile("version-huge", "GET", f"/v1/definitions/{{defn}}/versions/{HUGE}"),
        Hostile("version-float", "GET", "/v1/definitions/{defn}/versions/881.0"),
        Hostile("version-nul", "GET", "/v1/definitions/{defn}/versions/1%00"),
    ]
    for listing in ("/v1/instances", "/v1/definitions", "/v1/taskdefs"):
        tag = listing.rsplit("/", 1)[1]
        cases += [
            Hostile(
                f"{tag}-token-two-garbage-parts",
                "GET",
                f"{listing}?pageToken={garbage_token(b'garbage', b'more-garbage')}",
            ),
            Hostile(
                f"{tag}-token-timestamp-garbage",
                "GET",
                f"{listing}?pageToken={garbage_token(b'2024-01-01T00:00:00+00:00', b'not-a-uuid')}",
            ),
            Hostile(f"{tag}-token-not-base64", "GET", f"{listing}?pageToken=!!!"),
            Hostile(f"{tag}-token-nul", "GET", f"{listing}?pageToken=%00"),
            Hostile(
                f"{tag}-token-non-utf8",
                "GET",
                f"{listing}?pageToken={garbage_token(NON_UTF8, NON_UTF8)}",
            ),
        ]
    return cases


def _hostile_variables() -> list[tuple[str, dict[str, Any] | str]]:
    """Variable maps (or raw JSON text for values ``json`` cannot write) no store may accept."""
    return [
        ("nul-key", {f"a{NUL}": 1}),
        ("nul-value", {"a": f"x{NUL}y"}),
        ("nul-nested", {"a": [{"b": NUL}]}),
        ("surrogate-value", {"a": LONE_HIGH}),
        ("surrogate-key", {LONE_LOW: 1}),
        ("nan", {"a": float("nan")}),
        ("infinity", {"a": float("-inf")}),
        ("1e400", '{"a": 1e400}'),
    ]


def _definition(name: str, step_input: dict[str, Any] | None = None, **step: Any) -> dict[str, Any]:
    return {
        "name": name,
        "steps": [
            {
                "id": "only",
                "type": "SERVICE_TASK",
                "jobType": "hostile-never-polled",
                "input": step_input or {},
                **step,
            }
        ],
    }


CASES = _cases()


@dataclass
class Seeded:
    server: LocalServer
    conn: psycopg.Connection[Any]
    ids: dict[str, str]
    tables: list[str]

    def fingerprint(self) -> dict[str, str]:
        """Every table's rows, hashed: equal before and after means nothing was written."""
        out = {}
        for table in self.tables:
            query = sql.SQL(
                "SELECT count(*)::text || ':' || coalesce(md5(string_agg(t::text, '|' ORDER BY "
                "t::text)), '') FROM {} AS t"
            ).format(sql.Identifier(table))
            out[table] = self.conn.execute(query).fetchone()[0]
        return out

    def request_of(self, case: Hostile) -> tuple[str, str | bytes | None]:
        """The case's path and body with the seeded ids filled in."""
        body = case.body
        if isinstance(body, str):
            for name in ("job", "defn", "receipt"):
                body = body.replace("{" + name + "}", self.ids[name])
        return case.path.format(**self.ids), body

    def send(self, case: Hostile) -> httpx.Response:
        path, body = self.request_of(case)
        headers = {"x-api-key": self.server.api_key, "content-type": "application/json"}
        assert self.server.client is not None
        return self.server.client.request(case.method, path, content=body, headers=headers)


@pytest.fixture(scope="module")
def seeded(fuzz_server: LocalServer, fuzz_database_url: str) -> Iterator[Seeded]:
    """One instance waiting on each kind of step, a job held by ``w-hold`` for an hour, and a
    queue task dequeued for an hour: state the hostile writes could corrupt."""
    s = fuzz_server
    job_type, defn = unique("hostile-job"), unique("hostile")

    def ok(r: httpx.Response) -> Any:
        assert r.status_code < 300, r.text
        return r.json()

    held = {**_definition(defn, responseTimeoutSeconds=3600)}
    held["steps"][0]["jobType"] = job_type
    ok(s.request("POST", "/v1/definitions", json=held))
    user, sig = f"{defn}-user", f"{defn}-sig"
    ok(
        s.request(
            "POST",
            "/v1/definitions",
            json={"name": user, "steps": [{"id": "approve", "type": "USER_TASK"}]},
        )
    )
    ok(
        s.request(
            "POST", "/v1/definitions", json={"name": sig, "steps": [{"id": "go", "type": "SIGNAL"}]}
        )
    )
    ids = {
        "defn": defn,
        "svc": ok(s.request("POST", "/v1/instances", json={"definitionName": defn}))["id"],
        "user": ok(s.request("POST", "/v1/instances", json={"definitionName": user}))["id"],
        "sig": ok(s.request("POST", "/v1/instances", json={"definitionName": sig}))["id"],
        "taskdef": unique("hostile-taskdef"),
        "queue": unique("hostile-q"),
    }
    jobs = ok(
        s.request("POST", "/v1/jobs/poll", json={"workerId": "w-hold", "jobTypes": [job_type]})
    )
    ids["job"] = jobs["jobs"][0]["id"]
    ok(s.request("POST", f"/v1/queues/{ids['queue']}/push", json={"title": "hostile"}))
    tasks = ok(
        s.request(
            "POST",
            f"/v1/queues/{ids['queue']}/dequeue",
            json={"consumerId": "c", "visibilityTimeoutSecs": 3600},
        )
    )
    ids["task"], ids["receipt"] = tasks["tasks"][0]["id"], tasks["tasks"][0]["receipt"]
    with psycopg.connect(fuzz_database_url, autocommit=True) as conn:
        tables = [
            name
            for (name,) in conn.execute(
                "SELECT table_name FROM information_schema.tables "
                "WHERE table_schema = 'public' AND table_type = 'BASE TABLE' ORDER BY 1"
            ).fetchall()
        ]
        yield Seeded(s, conn, ids, tables)


@pytest.mark.parametrize(
    "case",
    [pytest.param(c, id=c.id) for c in CASES],
)
def test_hostile_input_is_refused_with_a_problem_and_writes_nothing(
    seeded: Seeded, case: Hostile
) -> None:
    before = seeded.fingerprint()
    r = seeded.send(case)
    changed = sorted(t for t, v in seeded.fingerprint().items() if before[t] != v)
    path, body = seeded.request_of(case)
    request = f"{case.method} {path} {body!r:.300}"
    assert 400 <= r.status_code < 500 and not changed, (
        f"{request}\n-> {r.status_code} {r.headers.get('content-type')} {r.text[:500]}\n"
        f"tables changed: {changed}"
    )
    assert r.headers.get("content-type") == "application/problem+json", request
    problem = r.json()
    assert problem["status"] == r.status_code and problem["title"], problem


@pytest.mark.parametrize(
    ("path", "body", "field", "read"),
    [
        ("/v1/taskdefs/{taskdef}", {"retryCount": 881.0}, "retryCount", "/v1/taskdefs/{taskdef}"),
        (
            "/v1/queues/{queue}-float/push",
            {"title": "t", "priority": 881.0},
            "priority",
            "/v1/queues/{queue}-float/peek",
        ),
    ],
    ids=["taskdef-retry-count", "queue-priority"],
)
def test_an_integral_float_is_refused_or_stored_as_the_integer(
    seeded: Seeded, path: str, body: dict[str, Any], field: str, read: str
) -> None:
    """Proto3 JSON accepts 881.0 for an int32 field; whatever the API decides, it never answers a
    5xx and never stores (or echoes) a float where an integer belongs."""
    s = seeded.server
    method = "PUT" if path.startswith("/v1/taskdefs") else "POST"
    r = s.request(method, path.format(**seeded.ids), json=body)
    assert r.status_code < 500, r.text
    if r.status_code >= 400:
        assert r.headers["content-type"] == "application/problem+json"
        return
    stored = s.request("GET", read.format(**seeded.ids)).json()
    value = stored.get(field) if field in stored else stored["tasks"][0][field]
    assert value == 881 and isinstance(value, int), stored
