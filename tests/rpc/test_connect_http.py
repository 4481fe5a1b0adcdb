"""The Connect protocol over HTTP against ``baton dev``: every RPC of the WorkflowEngine service in
binary and in JSON (one table, run once per encoding), and what is refused: no key, a malformed
body, an unknown method, a GET."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from baton.rpc import convert, methods, schema

from tests.rpc.connect_client import JSON, PROTO, SERVICE, Answer, call

pytestmark = pytest.mark.e2e

Ctx = dict[str, Any]


@dataclass(frozen=True)
class Step:
    rpc: str
    request: Callable[[Ctx], dict[str, Any]]
    check: Callable[[Ctx, Any], object] = lambda ctx, body: None
    code: str | None = None  # an expected Connect error code


def _save(key: str, value: Callable[[Any], Any]) -> Callable[[Ctx, Any], None]:
    def save(ctx: Ctx, body: Any) -> None:
        ctx[key] = value(body)

    return save


def _status(expected: str) -> Callable[[Ctx, Any], None]:
    def check(ctx: Ctx, body: Any) -> None:
        assert body["status"] == expected, body

    return check


def _started(ctx: Ctx, body: Any) -> None:
    assert body["status"] == "RUNNING" and body["input"] == {"n": 3, "f": 2.5}
    assert isinstance(body["input"]["n"], int)  # a whole number stays whole through a Struct
    ctx["instance"] = body["id"]


def _polled(ctx: Ctx, body: Any) -> None:
    jobs = body["jobs"]
    assert len(jobs) == 2 and {j["jobType"] for j in jobs} == {ctx["job_type"]}
    ctx["jobs"] = jobs


def _dequeued(key: str) -> Callable[[Ctx, Any], None]:
    def save(ctx: Ctx, body: Any) -> None:
        (task,) = body["tasks"]
        ctx[key] = task

    return save


NOW = datetime.now(UTC).replace(microsecond=0)
SCENARIO: tuple[Step, ...] = (
    Step("GetHealth", lambda c: {}, _status("ok")),
    Step("GetOpenApi", lambda c: {}, lambda c, b: b["openapi"].startswith("3.")),
    Step("GetConfig", lambda c: {}, lambda c, b: b["payloadLimits"]["stepOutput"]),
    Step(
        "CreatePayload",
        lambda c: {"kind": "STEP_OUTPUT", "sizeBytes": 10},
        lambda c, b: b["path"] and b["uploadUrl"],
    ),
    Step("PutTaskDef", lambda c: {"name": c["job_type"], "taskDef": {"retryCount": 1}}),
    Step("GetTaskDef", lambda c: {"name": c["job_type"]}, lambda c, b: b["retryCount"] == 1),
    Step("ListTaskDefs", lambda c: {"limit": 100}, lambda c, b: b["taskDefs"]),
    Step("DeleteTaskDef", lambda c: {"name": c["job_type"]}),
    Step(
        "RegisterDefinition",
        lambda c: {
            "name": c["workflow"],
            "steps": [
                {"id": "work", "type": "SERVICE_TASK", "jobType": c["job_type"]},
                {"id": "approve", "type": "USER_TASK"},
                {"id": "wait", "type": "SIGNAL"},
            ],
        },
        lambda c, b: b["version"] == 1,
    ),
    Step("ListDefinitions", lambda c: {"limit": 100}, lambda c, b: b["definitions"]),
    Step("GetDefinition", lambda c: {"name": c["workflow"]}, lambda c, b: b["version"] == 1),
    Step(
        "GetDefinition",
        lambda c: {"name": c["workflow"], "version": 1},
        lambda c, b: b["name"] == c["workflow"],
    ),
    Step(
        "StartInstance",
        lambda c: {"definitionName": c["workflow"], "input": {"n": 3, "f": 2.5}},
        _started,
    ),
    Step(
        "StartInstances",
        lambda c: {"instances": [{"definitionName": c["workflow"]}]},
        _save("second", lambda b: b["results"][0]["instance"]["id"]),
    ),
    Step(
        "SearchInstances",
        lambda c: {"definitionName": c["workflow"], "limit": 10},
        lambda c, b: len(b["instances"]) == 2,
    ),
    Step("GetInstance", lambda c: {"id": c["instance"], "includeSteps": False}),
    Step("ListSteps", lambda c: {"id": c["instance"]}, lambda c, b: b["steps"]),
    Step("GetHistory", lambda c: {"id": c["instance"]}, lambda c, b: b["events"]),
    Step(
        "PollJobs",
        lambda c: {"workerId": "w", "jobTypes": [c["job_type"]], "maxJobs": 10},
        _polled,
    ),
    Step(
        "Heartbeat",
        lambda c: {"jobId": c["jobs"][0]["id"], "workerId": "w", "attempt": 1},
    ),
    Step(
        "CompleteJob",
        lambda c: {"jobId": c["jobs"][0]["id"], "workerId": "w", "variablesToSet": {"x": 1}},
        lambda c, b: b["applied"] is True,
    ),
    Step(
        "CompleteBatch",
        lambda c: {"results": [{"jobId": c["jobs"][1]["id"], "workerId": "w", "attempt": 1}]},
        lambda c, b: b["results"][0]["outcome"] == "APPLIED",
    ),
    Step(
        "FailJob",
        lambda c: {"jobId": c["jobs"][1]["id"], "workerId": "w", "errorMessage": "late"},
        code="failed_precondition",  # already completed: a conflict
    ),
    Step("ClaimJob", lambda c: {"id": c["jobs"][0]["id"], "workerId": "w"}, code=None),
    Step(
        "CompleteUserTask",
        lambda c: {"id": c["instance"], "stepId": "approve", "variablesToSet": {"ok": True}},
    ),
    Step(
        "Signal",
        lambda c: {"id": c["instance"], "stepId": "wait", "payload": {"k": "v"}},
        _status("COMPLETED"),
    ),
    Step("PauseInstance", lambda c: {"id": c["second"]}, _status("PAUSED")),
    Step("ResumeInstance", lambda c: {"id": c["second"]}, _status("RUNNING")),
    Step("CancelInstance", lambda c: {"id": c["second"], "reason": "r"}, _status("CANCELLED")),
    # A cancelled instance is retried (as Conductor retries a TERMINATED workflow); a running
    # one is a conflict (409 on REST).
    Step("RetryInstance", lambda c: {"id": c["second"]}, _status("RUNNING")),
    Step("RetryInstance", lambda c: {"id": c["second"]}, code="failed_precondition"),
    Step("RestartInstance", lambda c: {"id": c["instance"]}, _status("RUNNING")),
    Step("RerunInstance", lambda c: {"id": c["instance"]}, code="failed_precondition"),
    Step("CancelInstance", lambda c: {"id": c["instance"]}, _status("CANCELLED")),
    Step(
        "RerunInstance",
        lambda c: {"id": c["instance"], "input": {"again": True}, "correlationId": "rerun"},
        lambda c, b: b["status"] == "RUNNING" and b["input"] == {"again": True},
    ),
    Step("CancelInstance", lambda c: {"id": c["instance"]}, _status("CANCELLED")),
    Step("DeleteInstance", lambda c: {"id": c["instance"]}),
    Step("StopWorker", lambda c: {"workerId": "w"}),
    Step("Push", lambda c: {"name": c["queue"], "title": "a", "maxRetries": 0}),
    Step("Push", lambda c: {"name": c["queue"], "title": "b", "maxRetries": 0}),
    Step("Stats", lambda c: {"name": c["queue"]}, lambda c, b: b["pending"] == 2),
    Step("Peek", lambda c: {"name": c["queue"], "limit": 5}, lambda c, b: len(b["tasks"]) == 2),
    Step("ListQueues", lambda c: {}, lambda c, b: b["queues"]),
    Step("ListQueueTasks", lambda c: {"name": c["queue"]}, lambda c, b: b["tasks"]),
    Step("Dequeue", lambda c: {"name": c["queue"], "consumerId": "c"}, _dequeued("first")),
    Step(
        "Ack",
        lambda c: {
            "name": c["queue"],
            "taskId": c["first"]["id"],
            "receipt": c["first"]["receipt"],
        },
    ),
    Step("Dequeue", lambda c: {"name": c["queue"], "consumerId": "c"}, _dequeued("other")),
    Step(
        "Nack",
        lambda c: {
            "name": c["queue"],
            "taskId": c["other"]["id"],
            "receipt": c["other"]["receipt"],
            "error": "no",
            "retryable": False,
        },
    ),
    Step("Redrive", lambda c: {"name": c["queue"]}),
    Step("Purge", lambda c: {"name": c["queue"]}),
    Step(
        "CreateSchedule",
        lambda c: {
            "definitionName": c["workflow"],
            "spec": {"interval": {"everySeconds": "3600"}},
            "paused": True,
        },
        _save("schedule", lambda b: b["id"]),
    ),
    Step("ListSchedules", lambda c: {}, lambda c, b: b["schedules"]),
    Step("GetSchedule", lambda c: {"id": c["schedule"]}),
    Step(
        "ReplaceSchedule",
        lambda c: {
            "id": c["schedule"],
            "definitionName": c["workflow"],
            "spec": {"interval": {"everySeconds": "7200"}},
        },
    ),
    Step("PauseSchedule", lambda c: {"id": c["schedule"], "note": "n"}),
    Step("UnpauseSchedule", lambda c: {"id": c["schedule"]}),
    Step("TriggerSchedule", lambda c: {"id": c["schedule"]}),
    Step(
        "BackfillSchedule",
        lambda c: {
            "id": c["schedule"],
            "from": (NOW - timedelta(hours=3)).isoformat().replace("+00:00", "Z"),
            "to": (NOW - timedelta(hours=1)).isoformat().replace("+00:00", "Z"),
        },
    ),
    Step("DeleteSchedule", lambda c: {"id": c["schedule"]}),
    Step("DeleteDefinition", lambda c: {"name": c["workflow"], "version": 1}),
    Step("GetInstance", lambda c: {"id": "no-such-instance"}, code="not_found"),
)


@pytest.fixture
def client(baton_server: Any) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=baton_server.base_url, timeout=30.0) as c:
        yield c


def test_the_scenario_calls_every_rpc_of_the_service() -> None:
    assert {s.rpc for s in SCENARIO} == set(schema.service().methods_by_name)
    assert set(methods.BY_RPC) == set(schema.service().methods_by_name)


@pytest.mark.parametrize("codec", [PROTO, JSON], ids=["binary", "json"])
def test_every_rpc_answers_in_binary_and_json(
    client: httpx.Client, baton_server: Any, codec: str
) -> None:
    tag = "bin" if codec == PROTO else "json"
    ctx: Ctx = {"workflow": f"rpc-{tag}", "job_type": f"rpc-job-{tag}", "queue": f"rpc-q-{tag}"}
    for n, step in enumerate(SCENARIO):
        answer = call(client, step.rpc, step.request(ctx), codec, baton_server.api_key)
        where = f"step {n} {step.rpc}: {answer.status} {answer.body}"
        if step.code is not None:
            assert answer.code == step.code, where
            _check_problem_detail(answer)
            continue
        if step.rpc == "ClaimJob":  # completed already: not claimable, whatever the encoding
            assert answer.code == "failed_precondition", where
            continue
        assert answer.status == 200, where
        assert step.check(ctx, answer.body) is not False, where


def _check_problem_detail(answer: Answer) -> None:
    (detail,) = answer.body["details"]
    assert detail["type"] == "workflow.v1.Problem"
    assert answer.body["message"].startswith(detail["debug"]["detail"])
    problem = schema.message_class("workflow.v1.Problem")()
    value = detail["value"]
    import base64

    problem.ParseFromString(base64.b64decode(value + "=" * (-len(value) % 4)))
    assert problem.status == detail["debug"]["status"]


def _post(client: httpx.Client, path: str, body: bytes, **headers: str) -> httpx.Response:
    return client.post(path, content=body, headers=headers)


def test_no_key_is_unauthenticated(client: httpx.Client) -> None:
    r = _post(client, f"/rpc/{SERVICE}/GetConfig", b"{}", **{"Content-Type": JSON})
    assert r.status_code == 401 and r.json()["code"] == "unauthenticated"
    r = _post(
        client, f"/rpc/{SERVICE}/GetConfig", b"", **{"Content-Type": PROTO, "x-api-key": "wrong"}
    )
    assert r.json()["code"] == "unauthenticated", r.text


def test_malformed_protobuf_is_invalid_argument(client: httpx.Client, baton_server: Any) -> None:
    key = baton_server.api_key
    r = _post(
        client,
        f"/rpc/{SERVICE}/PollJobs",
        b"\x0a\xff\xff\xff",  # field 1, a length past the end of the body
        **{"Content-Type": PROTO, "x-api-key": key},
    )
    assert r.status_code == 400, r.text
    assert r.json()["code"] == "invalid_argument"
    assert "not a binary workflow.v1.PollJobsRequest" in r.json()["message"]


@pytest.mark.parametrize(
    ("body", "ctype", "code", "status"),
    [
        (b'{"workerId": 3}', JSON, "invalid_argument", 400),  # wrong type
        (b'{"nope": 1}', JSON, "invalid_argument", 400),  # unknown field
        (b"{", JSON, "invalid_argument", 400),
        (b"\xff", JSON, "invalid_argument", 400),  # not UTF-8
        (b"{}", "text/plain", "invalid_argument", 415),
        (b"{}", "application/connect+json", "unimplemented", 501),  # streaming
    ],
)
def test_malformed_requests_are_refused_with_a_code_never_a_500(
    client: httpx.Client, baton_server: Any, body: bytes, ctype: str, code: str, status: int
) -> None:
    headers = {"Content-Type": ctype, "x-api-key": baton_server.api_key}
    r = _post(client, f"/rpc/{SERVICE}/PollJobs", body, **headers)
    assert (r.status_code, r.json()["code"]) == (status, code), r.text


def test_validation_problems_come_back_in_the_details(
    client: httpx.Client, baton_server: Any
) -> None:
    request = {"workerId": "w", "jobTypes": ["t"], "maxJobs": 5000}
    answer = call(client, "PollJobs", request, PROTO, baton_server.api_key)
    assert answer.status == 400 and answer.code == "invalid_argument"
    assert "maxJobs" in answer.body["message"]
    assert answer.body["details"][0]["debug"]["errors"][0]["path"] == "maxJobs"


def test_unknown_method_is_unimplemented(client: httpx.Client, baton_server: Any) -> None:
    headers = {"Content-Type": PROTO, "x-api-key": baton_server.api_key}
    r = _post(client, f"/rpc/{SERVICE}/LaunchRockets", b"", **headers)
    assert r.status_code == 404 and r.json()["code"] == "unimplemented"
    r = _post(client, "/rpc/other.v1.Service/PollJobs", b"", **headers)
    assert r.status_code == 404 and r.json()["code"] == "unimplemented"


def test_a_get_is_refused_with_allow_post(client: httpx.Client, baton_server: Any) -> None:
    r = client.get(f"/rpc/{SERVICE}/GetConfig", headers={"x-api-key": baton_server.api_key})
    assert r.status_code == 405 and r.headers["allow"] == "POST"
    assert r.json()["code"] == "unimplemented"


def test_gzip_request_bodies_are_read(client: httpx.Client, baton_server: Any) -> None:
    import gzip

    headers = {
        "Content-Type": JSON,
        "Content-Encoding": "gzip",
        "x-api-key": baton_server.api_key,
    }
    r = _post(client, f"/rpc/{SERVICE}/GetConfig", gzip.compress(b"{}"), **headers)
    assert r.status_code == 200, r.text


def test_the_sdk_client_over_connect_raises_what_rest_raises(baton_server: Any) -> None:
    from baton_worker import BatonClient
    from baton_worker.errors import (
        AuthenticationError,
        NotFoundError,
        PermissionDeniedError,
        ValidationError,
    )

    url, key = baton_server.base_url, baton_server.api_key
    with BatonClient(url, api_key=key, protocol="connect") as client:
        assert client.config()["payloadLimits"]["stepOutput"]["softLimitBytes"] > 0
        with pytest.raises(NotFoundError) as missing:
            client.get_instance("00000000-0000-0000-0000-000000000000")
        assert missing.value.status == 404
        with pytest.raises(ValidationError) as invalid:
            client.poll_jobs(worker_id="w", job_types=["t"], max_jobs=500)
        assert invalid.value.status == 422
    with (
        BatonClient(url, api_key="wrong", protocol="connect") as client,
        pytest.raises((AuthenticationError, PermissionDeniedError)),
    ):
        client.config()  # as over REST: the wrong key is API Gateway's 403


@pytest.mark.parametrize("retryable", [False, True])
def test_a_failure_keeps_its_retryable_over_connect(baton_server: Any, retryable: bool) -> None:
    # FailJobRequest.retryable is optional in the proto: a false must not read as absent (which
    # the engine takes as true) once it is binary.
    from baton_worker import BatonClient

    job_type = f"rpc-fail-{str(retryable).lower()}"
    with BatonClient(baton_server.base_url, api_key=baton_server.api_key, protocol="connect") as c:
        c.register_definition(
            {
                "name": job_type,
                "steps": [
                    {"id": "only", "type": "SERVICE_TASK", "jobType": job_type, "retryCount": 3}
                ],
            }
        )
        c.start_instance(job_type)
        (job,) = c.poll_jobs(worker_id="w", job_types=[job_type], max_jobs=1)
        done = c.fail_job(job["id"], worker_id="w", error_message="no", retryable=retryable)
    assert done["status"] == ("RETRY_SCHEDULED" if retryable else "FAILED"), done


@pytest.mark.parametrize("window", [0, 300])
def test_a_catchup_window_of_zero_crosses_connect(baton_server: Any, window: int) -> None:
    # ScheduleRequest.catchup_window_seconds has presence in the proto: 0 (no catch-up) must not
    # read as absent (the 60 s default) once it is binary.
    from baton_worker import BatonClient

    name = f"rpc-catchup-{window}"
    with BatonClient(baton_server.base_url, api_key=baton_server.api_key, protocol="connect") as c:
        c.register_definition(
            {"name": name, "steps": [{"id": "w", "type": "SERVICE_TASK", "jobType": name}]}
        )
        made = c.create_schedule(
            {
                "definitionName": name,
                "spec": {"cron": ["0 0 1 1 *"]},
                "catchupWindowSeconds": window,
                "paused": True,
            }
        )
        assert c.get_schedule(made["id"])["catchupWindowSeconds"] == window


def test_the_system_step_types_cross_connect_in_both_encodings(
    client: httpx.Client, baton_server: Any
) -> None:
    steps = [
        {"id": "nothing", "type": "NOOP"},
        {"id": "st", "type": "START_WORKFLOW", "request": {"name": "other", "version": 2}},
        {
            "id": "pick",
            "type": "SWITCH",
            "on": "${workflow.input.way}",
            "cases": {"a": [{"id": "a1", "type": "NOOP", "input": {}}]},
        },
        {"id": "xj", "type": "EXCLUSIVE_JOIN", "joinOn": ["a1"], "defaultJoinOn": ["nothing"]},
        {
            "id": "poll",
            "type": "HTTP_POLL",
            "request": {"uri": "http://127.0.0.1:1/x"},
            "terminationCondition": "$.output.response.statusCode === 200",
            "pollingIntervalSeconds": 5,
            "pollingStrategy": "LINEAR_BACKOFF",
            "maxPollCount": 7,
        },
        {"id": "publish", "type": "EVENT", "sink": "queue:rpc-events"},
        {"id": "stop", "type": "TERMINATE", "status": "CANCELLED", "reason": "done"},
    ]
    for codec, name in ((PROTO, "rpc-system-proto"), (JSON, "rpc-system-json")):
        registered = call(
            client,
            "RegisterDefinition",
            {"name": name, "steps": steps},
            codec,
            baton_server.api_key,
        )
        assert registered.status == 200, registered.body
        got = call(client, "GetDefinition", {"name": name}, codec, baton_server.api_key)
        back = got.body["steps"]
        assert [{k: b.get(k) for k in sent} for sent, b in zip(steps, back, strict=True)] == steps


def test_a_steps_expressions_travel_over_rpc_both_ways(
    client: httpx.Client, baton_server: Any
) -> None:
    """A step's input, optional, permissive and definitionVersion may each be one ${…} (every
    Conductor dynamic fork's steps are translated so): registered over RPC and read back over
    RPC as REST reads them, in either encoding."""
    for codec in (PROTO, JSON):
        name = f"rpc-expressions-{'proto' if codec == PROTO else 'json'}"
        sent = {
            "name": name,
            "steps": [
                {
                    "id": "a",
                    "type": "SERVICE_TASK",
                    "jobType": "j",
                    "input": "${workflow.input}",
                    "optional": "${workflow.input.optional}",
                    "permissive": True,
                },
                {
                    "id": "b",
                    "type": "SUB_WORKFLOW",
                    "definitionName": "child",
                    "definitionVersion": "${workflow.input.v}",
                    "input": {"n": 1},
                },
            ],
        }
        got = call(client, "RegisterDefinition", sent, codec, baton_server.api_key)
        assert got.status == 200, got.body
        rest = baton_server.request("GET", f"/v1/definitions/{name}").json()
        assert [s["input"] for s in rest["steps"]] == ["${workflow.input}", {"n": 1}]
        got = call(client, "GetDefinition", {"name": name}, codec, baton_server.api_key)
        assert got.status == 200, got.body
        assert got.body["steps"] == rest["steps"]


def test_code_generated_from_the_older_proto_registers_and_reads_the_old_fields(
    client: httpx.Client, baton_server: Any
) -> None:
    """The four widened fields kept their old numbers as deprecated legacy_* fields: a client
    built from the older proto (which knows only those) registers a definition that loses
    nothing, and reads back each value its old types can hold."""
    definition = schema.message_class("workflow.v1.Definition")(name="rpc-older-proto")
    step = definition.steps.add(id="a", type="SUB_WORKFLOW", definition_name="child")
    step.legacy_input.update({"n": 1, "s": "${workflow.input.s}"})
    step.legacy_optional = True
    step.legacy_permissive = False
    step.legacy_definition_version = 2
    r = client.post(
        f"/rpc/{SERVICE}/RegisterDefinition",
        content=definition.SerializeToString(),
        headers={
            "Content-Type": PROTO,
            "Connect-Protocol-Version": "1",
            "x-api-key": baton_server.api_key,
        },
    )
    assert r.status_code == 200, r.text
    (rest,) = baton_server.request("GET", "/v1/definitions/rpc-older-proto").json()["steps"]
    assert rest["input"] == {"n": 1, "s": "${workflow.input.s}"}
    assert (rest["optional"], rest["permissive"], rest["definitionVersion"]) == (True, False, 2)
    got = call(client, "GetDefinition", {"name": "rpc-older-proto"}, PROTO, baton_server.api_key)
    answer = schema.message_class("workflow.v1.Definition")()
    answer.ParseFromString(got.raw.content)
    (read,) = answer.steps
    assert convert.to_json(read.legacy_input) == {"n": 1, "s": "${workflow.input.s}"}
    assert (read.legacy_optional, read.legacy_permissive, read.legacy_definition_version) == (
        True,
        False,
        2,
    )
