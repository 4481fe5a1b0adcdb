"""The worker's hot RPCs, answered by the REST views directly (``methods.DIRECT``), against REST
itself on one ``baton dev``: the same calls over REST JSON, Connect binary and Connect JSON give
the same answers, leave the same instances behind, and refuse bad input with the same problem
(Connect's detail is REST's problem+json); malformed input is ``invalid_argument``, never a
500."""

from __future__ import annotations

import base64
import math
import re
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from baton.rpc import methods, schema

from tests.rpc.connect_client import JSON, PROTO, SERVICE, Answer, call

pytestmark = pytest.mark.e2e

WIRES = ("rest", PROTO, JSON)
# What differs between two runs of the same calls: ids and times.
_VOLATILE = frozenset(
    {
        "id",
        "jobId",
        "instanceId",
        "stepExecutionId",
        "lockExpiresAt",
        "nextAttemptAt",
        "createdAt",
        "updatedAt",
        "startedAt",
        "endedAt",
        "completedAt",
        "stoppedAt",
        "at",
        "timestamp",
        "definitionName",
        "jobType",
        "workerId",
        "instance",
    }
)


@pytest.fixture
def client(baton_server: Any) -> Iterator[httpx.Client]:
    headers = {"x-api-key": baton_server.api_key}
    with httpx.Client(base_url=baton_server.base_url, timeout=30.0, headers=headers) as c:
        yield c


def _rest(client: httpx.Client, rpc: str, request: dict[str, Any]) -> Answer:
    """The RPC's REST twin, answered as :func:`call` answers (the body, or the problem)."""
    twin = methods.BY_RPC[rpc]
    made = methods.rest_call(twin, request)
    r = client.request(made.method, made.path, json=made.body)
    return Answer(r.status_code, r.json(), r)


def _send(client: httpx.Client, wire: str, rpc: str, request: dict[str, Any], key: str) -> Any:
    answer = (
        _rest(client, rpc, request) if wire == "rest" else call(client, rpc, request, wire, key)
    )
    return answer


def _problem(wire: str, answer: Answer) -> dict[str, Any]:
    """The problem an error answer carries: REST's body, or the Connect error's detail (an
    empty ``errors`` list is absent there, as proto3 writes it)."""
    assert answer.status >= 400, answer.body
    if wire == "rest":
        return {k: v for k, v in answer.body.items() if v != []}
    (detail,) = answer.body["details"]
    problem = schema.message_class("workflow.v1.Problem")()
    value = detail["value"]
    problem.ParseFromString(base64.b64decode(value + "=" * (-len(value) % 4)))
    assert problem.status == answer.body["details"][0]["debug"]["status"]
    return dict(detail["debug"])


_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _stable(value: Any) -> Any:
    """``value`` without what differs between runs (ids, times, names made per run), and
    without a message field's default (``false``, ``0``, ``""``, ``[]``: absent in proto3,
    as binary carries it), so REST's answer compares with an RPC's."""
    if isinstance(value, dict):
        return {
            k: _stable(v)
            for k, v in value.items()
            if k not in _VOLATILE and (v is None or v is True or v not in (False, 0, "", []))
        }
    if isinstance(value, list):
        return [_stable(v) for v in value]
    if isinstance(value, str):
        return _UUID.sub("<id>", value)
    return value


def _register(client: httpx.Client, name: str, retries: int = 0) -> None:
    steps = [
        {"id": "a", "type": "SERVICE_TASK", "jobType": name, "retryCount": retries},
        {"id": "b", "type": "SERVICE_TASK", "jobType": name, "retryCount": retries},
    ]
    r = client.post("/v1/definitions", json={"name": name, "steps": steps})
    assert r.status_code in (200, 201), r.text


def _start(client: httpx.Client, name: str, count: int) -> list[str]:
    ids = []
    for n in range(count):
        r = client.post("/v1/instances", json={"definitionName": name, "input": {"n": n}})
        assert r.status_code in (200, 201), r.text
        ids.append(r.json()["id"])
    return ids


def _run(client: httpx.Client, wire: str, key: str) -> dict[str, Any]:
    """One worker's session over ``wire``: poll, heartbeat, complete, fail with a retry,
    complete-batch with a bad item, the repeats and conflicts; every answer, normalized."""
    name = f"eq-{'rest' if wire == 'rest' else wire.rsplit('/', 1)[1]}-{uuid.uuid4().hex[:6]}"
    _register(client, name, retries=1)
    instances = _start(client, name, 3)
    seen: list[Any] = []

    def send(rpc: str, request: dict[str, Any]) -> Any:
        answer = _send(client, wire, rpc, request, key)
        body = answer.body if answer.status == 200 else _problem(wire, answer)
        seen.append((rpc, answer.status == 200, _stable(body)))
        return body

    polled = send("PollJobs", {"workerId": "w", "jobTypes": [name], "maxJobs": 3})
    jobs = sorted(polled["jobs"], key=lambda j: instances.index(j["instanceId"]))
    assert len(jobs) == 3
    first, second, third = (j["id"] for j in jobs)
    send("Heartbeat", {"jobId": first, "workerId": "w", "attempt": 1})
    send("Heartbeat", {"jobId": first, "workerId": "someone-else"})  # a conflict
    out = {"x": 1, "f": 2.5, "s": "é", "l": [1, None, True], "o": {"k": {"n": -3}}}
    send("CompleteJob", {"jobId": first, "workerId": "w", "variablesToSet": out, "attempt": 1})
    send("CompleteJob", {"jobId": first, "workerId": "w", "variablesToSet": out})  # a repeat
    send("FailJob", {"jobId": second, "workerId": "w", "errorMessage": "later", "retryable": True})
    send("FailJob", {"jobId": first, "workerId": "w", "errorMessage": "too late"})  # conflict
    results = [
        {"jobId": third, "workerId": "w", "attempt": 1, "variablesToSet": {"y": 2}},
        {"jobId": str(uuid.uuid4()), "workerId": "w", "variablesToSet": {}},  # not found
        {"jobId": third, "workerId": "w", "variablesToSet": {"bad": "a\u0000b"}},  # invalid
        {"jobId": third, "workerId": "w", "failure": {"errorMessage": "x"}, "attempt": 1},
    ]
    send("CompleteBatch", {"results": results})
    send("ClaimJob", {"id": second, "workerId": "w"})  # scheduled for a retry: not claimable
    send("StopWorker", {"workerId": f"stop-{name}"})
    finals = [_stable(client.get(f"/v1/instances/{i}").json()) for i in instances]
    history = [
        [e.get("type") for e in client.get(f"/v1/instances/{i}/history").json()["events"]]
        for i in instances
    ]
    return {"answers": seen, "instances": finals, "history": history}


def test_rest_and_both_rpc_encodings_give_the_same_answers_and_rows(
    client: httpx.Client, baton_server: Any
) -> None:
    runs = {wire: _run(client, wire, baton_server.api_key) for wire in WIRES}
    rest = runs["rest"]
    for wire in (PROTO, JSON):
        for n, (want, got) in enumerate(zip(rest["answers"], runs[wire]["answers"], strict=True)):
            assert got == want, f"{wire} answer {n}"
        assert runs[wire]["instances"] == rest["instances"], wire
        assert runs[wire]["history"] == rest["history"], wire


BAD_REQUESTS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("PollJobs", {"workerId": "w", "jobTypes": ["t"], "maxJobs": 5000}),
    ("PollJobs", {"workerId": "w", "jobTypes": [f"t{n}" for n in range(51)]}),
    ("PollJobs", {"workerId": "w\u0000", "jobTypes": ["t"]}),
    ("PollJobs", {"workerId": "w", "jobTypes": ["no spaces allowed"]}),
    ("PollJobs", {"jobTypes": ["t"]}),
    ("PollJobs", {"workerId": "w", "jobTypes": ["t"], "waitSeconds": 21.5}),
    ("CompleteJob", {"jobId": "not-a-uuid", "workerId": "w"}),
    ("CompleteJob", {"jobId": str(uuid.UUID(int=0)), "workerId": "w"}),
    ("CompleteJob", {"jobId": str(uuid.UUID(int=1)), "workerId": "w", "attempt": 0}),
    (
        "CompleteJob",
        {"jobId": str(uuid.UUID(int=1)), "workerId": "w", "variablesToSet": {"a\u0000": 1}},
    ),
    (
        "CompleteJob",
        {
            "jobId": str(uuid.UUID(int=1)),
            "workerId": "w",
            "variablesToSet": {"a": 1},
            "outputPayloadPath": "x",
        },
    ),
    ("FailJob", {"jobId": str(uuid.UUID(int=1)), "workerId": "w"}),
    (
        "FailJob",
        {
            "jobId": str(uuid.UUID(int=1)),
            "workerId": "w",
            "errorMessage": "e",
            "nextRetryDelaySeconds": -1,
        },
    ),
    ("Heartbeat", {"jobId": str(uuid.UUID(int=2)), "workerId": "w"}),
    ("CompleteBatch", {"results": [{"jobId": "x", "workerId": "w", "attempt": -1}] * 2}),
    ("CompleteBatch", {"results": [{"jobId": "x", "workerId": "w"}] * 101}),
    ("ClaimJob", {"id": str(uuid.UUID(int=3)), "workerId": "w"}),
    ("ClaimJob", {"id": "a/b%2F", "workerId": "w"}),
    ("StopWorker", {}),
)


@pytest.mark.parametrize(
    ("rpc", "request_"), BAD_REQUESTS, ids=lambda v: v if isinstance(v, str) else ""
)
def test_bad_requests_get_rest_s_problem_over_both_encodings(
    client: httpx.Client, baton_server: Any, rpc: str, request_: dict[str, Any]
) -> None:
    assert rpc in methods.DIRECT
    rest = _rest(client, rpc, request_)
    assert rest.status < 500, rest.body
    want = rest.body if rest.status == 200 else _problem("rest", rest)
    for codec in (PROTO, JSON):
        answer = call(client, rpc, request_, codec, baton_server.api_key)
        assert answer.status < 500 and answer.code != "internal", answer.body
        assert (answer.status == 200) == (rest.status == 200), answer.body
        got = answer.body if answer.status == 200 else _problem(codec, answer)
        assert got == want, codec


def _binary(rpc: str, build: Any) -> bytes:
    method = schema.method(rpc)
    assert method is not None
    message = schema.message_class(method.input_type.full_name)()
    build(message)
    data: bytes = message.SerializeToString()
    return data


def _deep(message: Any) -> None:
    message.job_id, message.worker_id = str(uuid.UUID(int=4)), "w"
    level = message.variables_to_set
    for _ in range(300):
        level = level.get_or_create_struct("k")


MALFORMED: tuple[tuple[str, bytes], ...] = (
    ("PollJobs", b"\x0a\xff\xff"),  # a length past the end
    ("PollJobs", b"\x0a\x02\xc3\x28"),  # worker_id not UTF-8
    ("PollJobs", b"\x0a\x03\xed\xa0\x80"),  # worker_id a lone surrogate, UTF-8 encoded
    ("CompleteBatch", b"\x0a\x03\x0a\x01"),  # an item cut short
    (
        "PollJobs",
        _binary(
            "PollJobs",
            lambda m: (
                setattr(m, "worker_id", "w"),
                m.job_types.append("t"),
                setattr(m, "wait_seconds", math.nan),
            ),
        ),
    ),
    (
        "PollJobs",
        _binary(
            "PollJobs",
            lambda m: (
                setattr(m, "worker_id", "w"),
                m.job_types.append("t"),
                setattr(m, "max_jobs", -1),
            ),
        ),
    ),
    (
        "CompleteJob",
        _binary(
            "CompleteJob",
            lambda m: (
                setattr(m, "job_id", str(uuid.UUID(int=5))),
                setattr(m, "worker_id", "w"),
                m.variables_to_set.update({"n": math.inf}),
            ),
        ),
    ),
    ("CompleteJob", _binary("CompleteJob", _deep)),
    (
        "FailJob",
        _binary(
            "FailJob",
            lambda m: (
                setattr(m, "job_id", "j"),
                setattr(m, "worker_id", "w"),
                setattr(m, "error_message", "e"),
                setattr(m, "next_retry_delay_seconds", math.nan),
            ),
        ),
    ),
    (
        "Heartbeat",
        _binary(
            "Heartbeat",
            lambda m: (
                setattr(m, "job_id", "j" * 100),
                setattr(m, "worker_id", "w"),
                setattr(m, "attempt", -5),
            ),
        ),
    ),
)


@pytest.mark.parametrize(
    ("rpc", "body"), MALFORMED, ids=[f"{r}-{n}" for n, (r, _) in enumerate(MALFORMED)]
)
def test_malformed_messages_are_invalid_argument_never_a_500(
    client: httpx.Client, rpc: str, body: bytes
) -> None:
    r = client.post(f"/rpc/{SERVICE}/{rpc}", content=body, headers={"Content-Type": PROTO})
    assert r.status_code == 400, r.text
    assert r.json()["code"] == "invalid_argument", r.text
    assert r.json()["message"], r.text
