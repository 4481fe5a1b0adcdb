from __future__ import annotations

import json
import time
from typing import Any

import pytest
from baton.routes import SERVED_ROUTES, api_functions

from tests.support.helpers import one_step
from tests.support.lambda_events import EVENTS, FakeContext, Invoke, load_function

DEFINITION = {
    "name": "order",
    "steps": [
        {
            "id": "charge",
            "type": "SERVICE_TASK",
            "jobType": "charge",
            "input": {"amount": "${workflow.input.amount}"},
        },
        {"id": "approve", "type": "USER_TASK"},
    ],
}


def test_every_route_of_the_table_is_served_by_its_function() -> None:
    # The viewer's function serves files without a router (tests/handlers/test_ui_handler.py).
    # The Connect function answers through these (tests/unit/test_rpc_contract.py).
    for fn in (f for f in api_functions() if f not in ("ui", "rpc")):
        api = load_function(fn).api
        expected = {(r.method, r.path) for r in SERVED_ROUTES if r.function == fn}
        assert api.registered == expected, fn


def test_definition_instance_job_round_trip(invoke: Invoke) -> None:
    status, headers, body = invoke("definitions", "POST", "/v1/definitions", body=DEFINITION)
    assert status == 201 and body["version"] == 1
    assert headers["location"] == "/v1/definitions/order/versions/1"
    status, _, inst = invoke(
        "instances",
        "POST",
        "/v1/instances",
        body={"definition_name": "order", "input": {"amount": 3}},
    )
    assert status == 201 and inst["status"] == "RUNNING"
    status, _, polled = invoke(
        "jobs",
        "POST",
        "/v1/jobs/poll",
        body={"workerId": "w1", "jobTypes": ["charge"], "maxJobs": 5},
    )
    assert status == 200 and len(polled["jobs"]) == 1
    job = polled["jobs"][0]
    assert job["input"] == {"amount": 3} and job["instanceId"] == inst["id"]
    status, _, hb = invoke(
        "jobs", "POST", "/v1/jobs/heartbeat", body={"jobId": job["id"], "workerId": "w1"}
    )
    assert status == 200 and hb["lockExpiresAt"]
    status, _, done = invoke(
        "jobs",
        "POST",
        "/v1/jobs/complete",
        body={"jobId": job["id"], "workerId": "w1", "variablesToSet": {"paid": True}},
    )
    assert (status, done["applied"]) == (200, True)
    status, _, final = invoke(
        "instances",
        "POST",
        "/v1/instances/{id}/user-tasks/{stepId}/complete",
        path_params={"id": inst["id"], "stepId": "approve"},
        body={"variablesToSet": {"ok": 1}},
    )
    assert status == 200 and final["status"] == "COMPLETED"
    assert final["variables"] == {"paid": True, "ok": 1}
    status, _, page = invoke(
        "instances", "GET", "/v1/instances", query={"status": "COMPLETED", "limit": "5"}
    )
    assert status == 200 and [i["id"] for i in page["instances"]] == [inst["id"]]
    where = {"id": inst["id"]}
    status, _, bare = invoke(
        "instances", "GET", "/v1/instances/{id}", path_params=where, query={"includeSteps": "false"}
    )
    assert status == 200 and "steps" not in bare and bare["status"] == "COMPLETED"
    status, _, steps = invoke(
        "instances", "GET", "/v1/instances/{id}/steps", path_params=where, query={"limit": "1"}
    )
    assert status == 200 and [s["stepId"] for s in steps["steps"]] == ["charge"]
    assert steps["steps"][0]["attempts"] == 1 and steps["nextPageToken"]
    status, _, history = invoke("instances", "GET", "/v1/instances/{id}/history", path_params=where)
    assert status == 200 and history["events"][0]["type"] == "INSTANCE_STARTED"
    assert history["events"][-1]["type"] == "INSTANCE_COMPLETED"


@pytest.mark.parametrize(
    ("function", "method", "resource", "kw", "status"),
    [
        ("definitions", "POST", "/v1/definitions", {"raw_body": "{not json"}, 400),
        ("definitions", "POST", "/v1/definitions", {"body": {"name": "x", "steps": []}}, 422),
        ("definitions", "GET", "/v1/definitions/{name}", {"path_params": {"name": "ghost"}}, 404),
        (
            "definitions",
            "GET",
            "/v1/definitions/{name}/versions/{version}",
            {"path_params": {"name": "x", "version": "one"}},
            422,
        ),
        # An id in a path that is not a UUID names nothing: 404 (in a body it is a 422).
        ("instances", "GET", "/v1/instances/{id}", {"path_params": {"id": "not-a-uuid"}}, 404),
        (
            "jobs",
            "POST",
            "/v1/jobs/complete",
            {"body": {"jobId": "not-a-uuid", "workerId": "w"}},
            422,
        ),
        (
            "instances",
            "GET",
            "/v1/instances/{id}",
            {"path_params": {"id": "0b8f2b6e-4b55-4a50-9c5e-1f7c9e3f4a10"}},
            404,
        ),
        ("instances", "GET", "/v1/instances", {"query": {"limit": "lots"}}, 422),
        ("instances", "POST", "/v1/instances", {"body": ["a", "list"]}, 422),
        ("instances", "POST", "/v1/instances", {"body": {"definitionName": "ghost"}}, 404),
        ("jobs", "POST", "/v1/jobs/poll", {"body": {"workerId": "", "jobTypes": []}}, 422),
        (
            "jobs",
            "POST",
            "/v1/jobs/poll",
            {"body": {"workerId": "w", "jobTypes": ["a"], "surprise": 1}},
            422,
        ),
        (
            "jobs",
            "POST",
            "/v1/jobs/complete",
            {"body": {"jobId": "0b8f2b6e-4b55-4a50-9c5e-1f7c9e3f4a10", "workerId": "w"}},
            404,
        ),
        ("jobs", "POST", "/v1/jobs/fail", {"raw_body": "[1,"}, 400),
        ("jobs", "POST", "/v1/jobs/unknown", {"body": {}}, 404),
        # Hostile input: refused where it enters, never a driver error (500).
        (
            "jobs",
            "POST",
            "/v1/jobs/poll",
            {"body": {"workerId": "a\u0000b", "jobTypes": ["x"]}},
            422,
        ),
        (
            "jobs",
            "POST",
            "/v1/jobs/poll",
            {"raw_body": '{"workerId": "\\ud835", "jobTypes": ["x"]}'},
            400,
        ),
        (
            "jobs",
            "POST",
            "/v1/jobs/poll",
            {"raw_body": '{"workerId": "w", "jobTypes": ["x"], "maxJobs": NaN}'},
            400,
        ),
        (
            "jobs",
            "POST",
            "/v1/jobs/poll",
            {"raw_body": '{"workerId": "w", "jobTypes": ["x"], "maxJobs": 1e400}'},
            400,
        ),
        (
            "jobs",
            "POST",
            "/v1/jobs/poll",
            {"body": {"workerId": "w", "jobTypes": ["x"], "maxJobs": True}},
            422,
        ),
        (
            "jobs",
            "POST",
            "/v1/jobs/poll",
            {"body": {"workerId": "w", "jobTypes": ["x"], "maxJobs": 2.0}},
            422,
        ),
        (
            "instances",
            "POST",
            "/v1/instances",
            {"body": {"definitionName": "x", "input": {"k\u0000": 1}}},
            422,
        ),
        (
            "instances",
            "POST",
            "/v1/instances",
            {"body": {"definitionName": "x", "definitionVersion": 3000000000}},
            422,
        ),
        ("instances", "GET", "/v1/instances", {"query": {"pageToken": "Zm9vH2Jhcg"}}, 422),
        ("instances", "GET", "/v1/instances", {"query": {"createdAfter": "tomorrow"}}, 422),
        ("instances", "GET", "/v1/instances", {"query": {"createdBefore": "9" * 400}}, 422),
        (
            "instances",
            "GET",
            "/v1/instances/{id}",
            {
                "path_params": {"id": "7f0e7a58-54d4-4c4b-9d8e-0d7cf0e1a111"},
                "query": {"includeSteps": "no"},
            },
            422,
        ),
        (
            "instances",
            "GET",
            "/v1/instances/{id}/history",
            {"path_params": {"id": "7f0e7a58-54d4-4c4b-9d8e-0d7cf0e1a111"}},
            404,
        ),
        (
            "instances",
            "GET",
            "/v1/instances/{id}/steps",
            {
                "path_params": {"id": "7f0e7a58-54d4-4c4b-9d8e-0d7cf0e1a111"},
                "query": {"limit": "0"},
            },
            422,
        ),
        ("instances", "GET", "/v1/instances", {"query": {"status": "RUN\u0000NING"}}, 422),
        (
            "definitions",
            "GET",
            "/v1/definitions/{name}/versions/{version}",
            {"path_params": {"name": "x", "version": "3000000000"}},
            422,
        ),
        (
            "definitions",
            "GET",
            "/v1/definitions/{name}",
            {"path_params": {"name": "a\u0000b"}},
            422,
        ),
        (
            "definitions",
            "PUT",
            "/v1/taskdefs/{name}",
            {
                "path_params": {"name": "t"},
                "body": {"retryCount": 881.0, "retryDelaySeconds": 99999999999},
            },
            422,
        ),
        (
            "definitions",
            "PUT",
            "/v1/taskdefs/{name}",
            {"path_params": {"name": "t"}, "body": {"retryCount": True}},
            422,
        ),
        (
            "queues",
            "POST",
            "/v1/queues/{name}/push",
            {"path_params": {"name": "q"}, "body": {"title": "a\u0000"}},
            422,
        ),
    ],
)
def test_bad_input_gets_a_problem_with_the_right_status(
    invoke: Invoke, function: str, method: str, resource: str, kw: dict[str, Any], status: int
) -> None:
    got, headers, body = invoke(function, method, resource, **kw)
    assert got == status, body
    assert headers["content-type"] == "application/problem+json"
    assert body["status"] == status and body["title"] and body["detail"]
    assert isinstance(body["errors"], list)
    if status == 422:
        assert body["errors"], "a 422 lists its problems"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("ten", "'ten' is not a whole number"),
        ("1.5", "'1.5' is not a whole number"),
        ("0", "must be between 1 and 100, not 0"),
        ("99999999999999999999", "must be between 1 and 100, not 99999999999999999999"),
        ("9" * 5000, "must be between 1 and 100, not " + "9" * 20 + "…"),
    ],
)
def test_an_integer_query_parameter_out_of_range_says_its_range(
    invoke: Invoke, raw: str, message: str
) -> None:
    status, _, body = invoke("instances", "GET", "/v1/instances", query={"limit": raw})
    assert status == 422
    assert body["errors"] == [{"path": "limit", "message": message}]


def test_validation_lists_every_problem(invoke: Invoke) -> None:
    status, _, body = invoke(
        "jobs", "POST", "/v1/jobs/fail", body={"jobId": "", "retryable": "perhaps"}
    )
    assert status == 422
    assert {e["path"] for e in body["errors"]} == {"jobId", "workerId", "errorMessage", "retryable"}


def test_conflicts_are_409(invoke: Invoke) -> None:
    invoke("definitions", "POST", "/v1/definitions", body={**DEFINITION, "version": 1})
    status, _, body = invoke(
        "definitions", "POST", "/v1/definitions", body={**DEFINITION, "version": 1}
    )
    assert status == 409 and body["type"].endswith("/conflict")


def test_database_unreachable_is_503_with_retry_after(
    lambda_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from baton_lambda import runtime

    monkeypatch.setenv("DATABASE_URL", "postgresql://nobody@127.0.0.1:1/none?connect_timeout=1")
    runtime.reset()
    from tests.support.lambda_events import api_event

    response = load_function("jobs").handler(
        api_event("POST", "/v1/jobs/poll", body={"workerId": "w", "jobTypes": ["a"]}),
        FakeContext(),
    )
    assert response["statusCode"] == 503
    headers = {k.lower(): v for k, v in response["multiValueHeaders"].items()}
    assert headers["retry-after"] == ["2"]
    assert json.loads(response["body"])["type"].endswith("/unavailable")


def test_scheduled_functions_run_their_duty(lambda_env: None) -> None:
    event = json.loads((EVENTS / "scheduled_event.json").read_text())
    reaped = load_function("reaper").handler(event, FakeContext())
    assert (reaped["leasesExpired"], reaped["passes"]) == (0, 1)
    swept = load_function("sweeper").handler(event, FakeContext())
    assert (swept["instancesTimedOut"], swept["passes"]) == (0, 1)


def test_a_scheduled_function_keeps_sweeping_once_a_second_while_its_loop_lasts(
    lambda_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from baton_lambda import runtime

    monkeypatch.setenv("BATON_DUTY_LOOP_SECONDS", "2.5")
    runtime.settings.cache_clear()
    event = json.loads((EVENTS / "scheduled_event.json").read_text())
    started = time.monotonic()
    result = load_function("sweeper").handler(event, FakeContext())
    assert result["passes"] == 3  # at 0, 1 and 2 s
    assert 1.9 <= time.monotonic() - started < 3.5

    class Ending(FakeContext):
        def get_remaining_time_in_millis(self) -> int:
            return 5_500  # its margin is reached before a second pass

    assert load_function("sweeper").handler(event, Ending())["passes"] == 1


def test_migrate_custom_resource_applies_and_reports(lambda_env: None) -> None:
    event = json.loads((EVENTS / "custom_resource_create.json").read_text())
    result = load_function("migrate").handler(event, FakeContext())
    assert result["PhysicalResourceId"] == "baton-schema"
    assert result["Data"]["Applied"] == "none"  # the test database is already current
    delete = {**event, "RequestType": "Delete", "PhysicalResourceId": "baton-schema"}
    assert load_function("migrate").handler(delete, FakeContext()) == {
        "PhysicalResourceId": "baton-schema"
    }


def test_a_lost_connection_is_reopened_on_the_next_invocation(
    invoke: Invoke, database_url: str
) -> None:
    import psycopg

    assert invoke("definitions", "GET", "/v1/definitions")[0] == 200
    with psycopg.connect(database_url, autocommit=True) as admin:
        killed = admin.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchone()
    assert killed is not None and killed[0] >= 1
    # The request that meets the dead connection is refused as retryable, never a 500...
    status = invoke("definitions", "GET", "/v1/definitions")[0]
    assert status in (200, 503)
    # ...and the next one runs on a fresh connection.
    assert invoke("definitions", "GET", "/v1/definitions")[0] == 200


def test_each_function_reports_its_metrics_under_its_own_name(
    invoke: Invoke, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    invoke("definitions", "POST", "/v1/definitions", body=one_step("metered", "m"))
    invoke("instances", "POST", "/v1/instances", body={"definitionName": "metered"})
    invoke("jobs", "POST", "/v1/jobs/poll", body={"workerId": "w", "jobTypes": ["m"]})
    flushed: dict[str, set[str]] = {}
    for line in capsys.readouterr().out.splitlines():
        if '"_aws"' in line:
            emf = json.loads(line)
            names = {m["Name"] for d in emf["_aws"]["CloudWatchMetrics"] for m in d["Metrics"]}
            flushed.setdefault(emf["service"], set()).update(names)
    assert "InstancesStarted" in flushed["baton-instances"]
    assert "JobsClaimed" in flushed["baton-jobs"]
    assert "JobsClaimed" not in flushed["baton-instances"]
    assert "InstancesStarted" not in flushed["baton-jobs"]


def test_functions_in_one_process_share_no_metrics_state(lambda_env: None) -> None:
    jobs, instances = load_function("jobs"), load_function("instances")
    # The engine a function calls reports to that function's own sink...
    assert jobs.api.engine().metrics is jobs.api._sink
    assert instances.api.engine().metrics is instances.api._sink
    # ...and one function's pending metrics are not flushed by another (the local server runs
    # every function in one process).
    jobs.api.metrics.add_metric(name="OnlyJobs", unit="Count", value=1)
    assert "OnlyJobs" not in instances.api.metrics.metric_set
    jobs.api.metrics.clear_metrics()


def test_concurrent_invocations_in_one_process_never_see_each_others_event(
    invoke: Invoke,
) -> None:
    """The local server runs every function's containers as threads of one process."""
    from concurrent.futures import ThreadPoolExecutor

    routes = [
        ("definitions", "/v1/definitions/{name}", "definition"),
        ("definitions", "/v1/taskdefs/{name}", "task definition"),
        ("instances", "/v1/instances/{id}", "instance"),
    ]

    def call(n: int) -> tuple[str, str]:
        function, resource, kind = routes[n % len(routes)]
        ident = f"00000000-0000-4000-8000-{n:012d}"
        key = "id" if "{id}" in resource else "name"
        status, _, body = invoke(function, "GET", resource, path_params={key: ident})
        # The problem names the request's own path, read from the event after the database
        # answered: another thread's request in between must not have replaced it.
        path = resource.replace("{" + key + "}", ident)
        detail = f"{kind} {ident!r} not found"
        if kind == "instance":
            detail = f"no instance has the id {ident} (it was never started here, or was deleted)"
        expected = f"404 {detail} at {path}"
        return expected, f"{status} {body['detail']} at {body.get('instance')}"

    with ThreadPoolExecutor(12) as pool:
        answers = list(pool.map(call, range(600)))
    assert all(expected == got for expected, got in answers), [a for a in answers if a[0] != a[1]][
        :3
    ]


def test_deletes_answer_404_409_and_200(invoke: Invoke) -> None:
    invoke("definitions", "POST", "/v1/definitions", body=DEFINITION)
    version = {"name": "order", "version": "1"}
    resource = "/v1/definitions/{name}/versions/{version}"
    _, _, inst = invoke("instances", "POST", "/v1/instances", body={"definitionName": "order"})
    status, _, deleted = invoke("definitions", "DELETE", resource, path_params=version)
    assert status == 200 and deleted["name"] == "order" and deleted["version"] == 1
    status, _, problem = invoke("definitions", "DELETE", resource, path_params=version)
    assert status == 404 and "order" in problem["detail"]
    status, _, _ = invoke(
        "definitions", "DELETE", resource, path_params={"name": "order", "version": "x"}
    )
    assert status == 422

    one = {"id": inst["id"]}
    status, _, problem = invoke("instances", "DELETE", "/v1/instances/{id}", path_params=one)
    assert status == 409 and "RUNNING" in problem["detail"]
    invoke("instances", "POST", "/v1/instances/{id}/cancel", path_params=one, body={})
    status, _, gone = invoke("instances", "DELETE", "/v1/instances/{id}", path_params=one)
    assert status == 200 and gone["id"] == inst["id"] and gone["status"] == "CANCELLED"
    for missing in (inst["id"], "not-a-uuid"):
        status, headers, problem = invoke(
            "instances", "DELETE", "/v1/instances/{id}", path_params={"id": missing}
        )
        assert status == 404 and headers["content-type"] == "application/problem+json"


def test_an_unknown_instance_is_a_404_that_reads_well(invoke: Invoke) -> None:
    ident = "0b8f2b6e-4b55-4a50-9c5e-1f7c9e3f4a10"
    for path_id, detail in [
        (ident, f"no instance has the id {ident} (it was never started here, or was deleted)"),
        (
            "not-a-uuid",
            "no instance has the id 'not-a-uuid': instance ids are UUIDs, as POST /v1/instances "
            "returns them",
        ),
    ]:
        for method, resource, body in [
            ("GET", "/v1/instances/{id}", None),
            ("POST", "/v1/instances/{id}/cancel", {}),
            ("POST", "/v1/instances/{id}/signals/{stepId}", {}),
            ("DELETE", "/v1/instances/{id}", None),
        ]:
            params = {"id": path_id, "stepId": "s"} if "stepId" in resource else {"id": path_id}
            status, _, problem = invoke(
                "instances", method, resource, path_params=params, body=body
            )
            assert (status, problem["detail"]) == (404, detail), (method, resource)
            assert problem["title"] == "Not found"
    status, _, problem = invoke(
        "queues",
        "POST",
        "/v1/queues/{name}/tasks/{taskId}/ack",
        path_params={"name": "q", "taskId": "nope"},
        body={"receipt": ident},
    )
    assert status == 404


def test_complete_batch_answers_each_item_with_200(invoke: Invoke) -> None:
    invoke(
        "definitions",
        "POST",
        "/v1/definitions",
        body={"name": "batched", "steps": [{"id": "s", "type": "SERVICE_TASK", "jobType": "bj"}]},
    )
    for _ in range(3):
        invoke("instances", "POST", "/v1/instances", body={"definitionName": "batched"})
    _, _, polled = invoke(
        "jobs", "POST", "/v1/jobs/poll", body={"workerId": "w", "jobTypes": ["bj"], "maxJobs": 3}
    )
    a, b, c = (j["id"] for j in polled["jobs"])
    status, _, body = invoke(
        "jobs",
        "POST",
        "/v1/jobs/complete-batch",
        body={
            "results": [
                {"jobId": a, "workerId": "w", "attempt": 1, "variablesToSet": {"x": 1}},
                {
                    "jobId": b,
                    "workerId": "w",
                    "failure": {"errorMessage": "no", "retryable": False},
                },
                {
                    "jobId": c,
                    "workerId": "w",
                    "variablesToSet": {},
                    "failure": {"errorMessage": "?"},
                },
                {"jobId": c, "workerId": "w", "outputPayloadPath": "payloads/nowhere"},
            ]
        },
    )
    assert status == 200
    assert [(r["outcome"], r.get("status")) for r in body["results"]] == [
        ("APPLIED", "COMPLETED"),
        ("APPLIED", "FAILED"),
        ("INVALID", None),
        ("INVALID", None),
    ]
    assert "give one of" in body["results"][2]["error"]
    # The whole request is malformed (not a list, too many items): 422 problem, nothing applied.
    for bad in ({"results": []}, {"results": [{"jobId": c}] * 101}, {"results": "x"}):
        status, headers, _ = invoke("jobs", "POST", "/v1/jobs/complete-batch", body=bad)
        assert status in (400, 422) and headers["content-type"] == "application/problem+json"


def test_complete_batch_answers_a_malformed_item_invalid_and_applies_its_neighbours(
    invoke: Invoke,
) -> None:
    invoke("definitions", "POST", "/v1/definitions", body=one_step("mixed", "mj"))
    for _ in range(2):
        invoke("instances", "POST", "/v1/instances", body={"definitionName": "mixed"})
    _, _, polled = invoke(
        "jobs", "POST", "/v1/jobs/poll", body={"workerId": "w", "jobTypes": ["mj"], "maxJobs": 2}
    )
    a, b = (j["id"] for j in polled["jobs"])
    malformed: list[Any] = [
        {"jobId": a, "workerId": "w", "attempt": 10**25, "variablesToSet": {}},
        {"jobId": a, "workerId": "w", "variablesToSet": {"note": "a\u0000b"}},
        {"jobId": a, "workerId": "w", "variablesToSet": {"note": "\ud800"}},
        {"jobId": a, "variablesToSet": {}},
        {"jobId": a, "workerId": "w", "colour": "red"},
        {"jobId": "x\u0000", "workerId": "w"},
        {"jobId": 7, "workerId": "w"},
        "not an object",
    ]
    results = [
        {"jobId": a, "workerId": "w", "attempt": 1, "variablesToSet": {"x": 1}},
        *malformed,
        {"jobId": b, "workerId": "w", "failure": {"errorMessage": "no", "retryable": False}},
    ]
    status, _, body = invoke("jobs", "POST", "/v1/jobs/complete-batch", body={"results": results})
    assert status == 200, body
    answers = body["results"]
    assert len(answers) == len(results)
    assert (answers[0]["outcome"], answers[-1]["outcome"]) == ("APPLIED", "APPLIED")
    assert answers[-1]["status"] == "FAILED"
    refused = answers[1:-1]
    assert [r["outcome"] for r in refused] == ["INVALID"] * len(malformed)
    assert [r["jobId"] for r in refused] == [a, a, a, a, a, None, None, None]
    errors = [r["error"] for r in refused]
    assert errors[0].startswith("results[1].attempt: ") and "2147483647" in errors[0]
    assert errors[1].startswith("results[2].variablesToSet.note: ") and "NUL" in errors[1]
    assert errors[2].startswith("results[3].variablesToSet.note: ") and "surrogate" in errors[2]
    assert errors[3].startswith("results[4].workerId: ")
    assert errors[4].startswith("results[5].colour: ")
    assert errors[7].startswith("results[8]: ")
    # Nothing of the refused items was applied: the job completed with its first result only.
    _, _, job_a = invoke("jobs", "POST", "/v1/jobs/complete-batch", body={"results": results[:1]})
    assert job_a["results"][0]["outcome"] == "DUPLICATE"
    # What is wrong with the body itself still refuses it whole: an unknown key beside a bad
    # item, or too many items of which one is bad.
    for bad in (
        {"results": malformed, "extra": 1},
        {"results": [{"jobId": a, "workerId": "w"}] * 100 + [malformed[1]]},
    ):
        status, headers, problem = invoke("jobs", "POST", "/v1/jobs/complete-batch", body=bad)
        assert status == 422 and headers["content-type"] == "application/problem+json", problem


def test_the_fallbacks_answer_404_for_a_path_and_405_for_a_method(lambda_env: None) -> None:
    """What API Gateway routes to a function through ``baton.routes.FALLBACK_ROUTES``."""
    from tests.support.lambda_events import api_event

    definitions = load_function("definitions")
    event = api_event("GET", "/v1/{proxy+}")
    event.update(path="/v1/nothing/here", pathParameters={"proxy": "nothing/here"})
    response = definitions.handler(event, FakeContext())
    assert response["statusCode"] == 404
    assert json.loads(response["body"])["detail"] == "no route for GET /v1/nothing/here"

    event = api_event("PATCH", "/v1/taskdefs/{name}", path_params={"name": "t"})
    response = definitions.handler(event, FakeContext())
    assert response["statusCode"] == 405
    headers = {k.lower(): v for k, v in (response.get("headers") or {}).items()}
    multi = {k.lower(): v for k, v in (response.get("multiValueHeaders") or {}).items()}
    assert headers.get("allow", (multi.get("allow") or [None])[0]) == "DELETE, GET, PUT"
