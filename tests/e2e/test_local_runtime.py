"""``baton dev`` over HTTP: the gateway's refusals, the events and contexts handlers receive, the
scheduled functions, a clean stop, and data that survives a restart."""

from __future__ import annotations

import concurrent.futures
import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import boto3
import httpx
import psycopg
import pytest

from tests.support.helpers import wait_until

if TYPE_CHECKING:
    from tests.support.servers import LocalServer

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("e2e")]

StartServer = Callable[..., "LocalServer"]


def assert_problem(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    doc: dict[str, Any] = response.json()
    assert doc["status"] == status
    assert doc["title"]
    assert doc["detail"]
    assert "type" in doc
    return doc


def echo(server: LocalServer, path: str = "/v1/taskdefs/echo", **kwargs: Any) -> dict[str, Any]:
    response = server.request("GET", path, **kwargs)
    assert response.status_code == 200, response.text
    doc: dict[str, Any] = response.json()
    return doc


# --- what the gateway refuses ----------------------------------------------------------------


def test_request_without_api_key_is_401(local_server: LocalServer) -> None:
    response = httpx.get(local_server.base_url + "/v1/definitions")
    assert_problem(response, 401)
    assert "x-api-key" in response.headers["www-authenticate"]


def test_request_with_wrong_api_key_is_403(local_server: LocalServer) -> None:
    response = local_server.request("GET", "/v1/definitions", headers={"x-api-key": "nope"})
    assert_problem(response, 403)


def test_credentials_are_checked_before_the_route(local_server: LocalServer) -> None:
    response = httpx.get(local_server.base_url + "/v1/no-such-thing")
    assert_problem(response, 401)


def test_a_path_outside_every_prefix_is_404(local_server: LocalServer) -> None:
    assert_problem(local_server.request("GET", "/no-such-thing"), 404)


def test_an_unserved_v1_path_or_method_reaches_the_function_that_answers_it(
    local_server: LocalServer,
) -> None:
    """As at API Gateway (the route table's ANY fallbacks): the runtime does not answer these
    itself, the function does (the real ones with a 404 or a 405 naming the methods served;
    tests/fuzz/test_methods.py holds them to it). The fake one answers its resolver's 404."""
    for method, path in [("GET", "/v1/no-such-thing"), ("PATCH", "/v1/definitions/x")]:
        response = local_server.request(method, path)
        assert response.status_code == 404, response.text
        assert response.json() == {"statusCode": 404, "message": "Not found"}


def test_body_over_the_limit_is_413_and_the_server_stays_usable(
    local_server: LocalServer,
) -> None:
    huge = b"x" * (10 * 1024 * 1024 + 1)
    response = local_server.request("PUT", "/v1/taskdefs/huge", content=huge)
    doc = assert_problem(response, 413)
    assert "10485760" in doc["detail"]
    assert echo(local_server)["event"]["resource"] == "/v1/taskdefs/{name}"


def test_a_chunked_body_reaches_the_function_whole(local_server: LocalServer) -> None:
    # Node's fetch sends a stream body chunked (Conductor's JavaScript client does): API Gateway
    # buffers it whole, and so does baton dev.
    parts = [b'{"name": "chunked", ', b'"parts": ' + b"[1, 2, 3]" * 1, b"}"]
    response = local_server.request("PUT", "/v1/taskdefs/echo", content=iter(parts))
    assert response.status_code == 200, response.text
    assert response.json()["event"]["body"] == b"".join(parts).decode()
    assert echo(local_server)["event"]["resource"] == "/v1/taskdefs/{name}"


def test_a_chunked_body_over_the_limit_is_413(local_server: LocalServer) -> None:
    block = b"x" * (1024 * 1024)
    response = local_server.request("PUT", "/v1/taskdefs/huge", content=iter([block] * 11))
    doc = assert_problem(response, 413)
    assert "10485760" in doc["detail"]
    assert echo(local_server)["event"]["resource"] == "/v1/taskdefs/{name}"


def test_an_unknown_transfer_encoding_is_400_naming_what_is_accepted(
    local_server: LocalServer,
) -> None:
    import http.client
    from urllib.parse import urlsplit

    url = urlsplit(local_server.base_url)
    conn = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port, timeout=30)
    try:
        conn.putrequest("PUT", "/v1/taskdefs/echo")
        conn.putheader("x-api-key", local_server.api_key)
        conn.putheader("Transfer-Encoding", "gzip")
        conn.endheaders(b"{}")
        answer = conn.getresponse()
        doc = json.loads(answer.read())
    finally:
        conn.close()
    assert answer.status == 400
    assert answer.getheader("Content-Type") == "application/problem+json"
    assert "Content-Length" in doc["detail"] and "chunked" in doc["detail"]


def test_refused_request_with_a_body_keeps_the_connection_usable(
    local_server: LocalServer,
) -> None:
    with httpx.Client(base_url=local_server.base_url) as client:
        refused = client.post("/v1/definitions", content=b"{}", headers={"x-api-key": "bad"})
        assert refused.status_code == 403
        ok = client.get("/v1/taskdefs/x", headers={"x-api-key": local_server.api_key})
        assert ok.status_code == 200


# --- what the handlers receive and return ------------------------------------------------------


def test_handler_receives_a_rest_proxy_event(local_server: LocalServer) -> None:
    doc = echo(local_server, "/v1/taskdefs/send%20mail?tag=a&tag=b&limit=5")
    event = doc["event"]
    assert event["resource"] == "/v1/taskdefs/{name}"
    assert event["path"] == "/v1/taskdefs/send%20mail"
    assert event["httpMethod"] == "GET"
    assert event["pathParameters"] == {"name": "send mail"}
    assert event["queryStringParameters"] == {"tag": "b", "limit": "5"}
    assert event["multiValueQueryStringParameters"] == {"tag": ["a", "b"], "limit": ["5"]}
    assert event["headers"]["x-api-key"] == local_server.api_key
    assert event["multiValueHeaders"]["x-api-key"] == [local_server.api_key]
    assert event["body"] is None
    assert event["isBase64Encoded"] is False
    context = event["requestContext"]
    assert context["stage"] == "local"
    assert context["resourcePath"] == "/v1/taskdefs/{name}"
    assert context["path"] == "/local/v1/taskdefs/send%20mail"
    assert context["identity"]["sourceIp"] == "127.0.0.1"
    assert context["identity"]["apiKey"] == local_server.api_key


def test_response_carries_the_gateway_request_id(local_server: LocalServer) -> None:
    response = local_server.request("GET", "/v1/taskdefs/x")
    request_id = response.json()["event"]["requestContext"]["requestId"]
    assert response.headers["x-amzn-requestid"] == request_id


def test_each_request_logs_a_json_line_with_its_ids_time_and_cpu(
    local_server: LocalServer,
) -> None:
    """The access log: one line per request, with the server's own CPU for it (the request
    thread's, from its parsed headers to its answer sent), so a benchmark can
    tell what each kind of request costs the server."""
    response = local_server.request("GET", "/v1/taskdefs/logged")
    request_id = response.headers["x-amzn-requestid"]

    def line() -> dict[str, Any] | None:
        for text in local_server.log_path.read_text(errors="replace").splitlines():
            if request_id in text and '"message": "request"' in text:
                entry: dict[str, Any] = json.loads(text)
                return entry
        return None

    entry = wait_until(line, timeout=10, what="the request's log line")
    assert entry["method"] == "GET"
    assert entry["path"] == "/v1/taskdefs/logged"
    assert entry["status"] == 200
    assert entry["function"] == "definitions"
    assert 0 < entry["cpu_ms"] <= entry["ms"] + 1  # CPU while it ran, not wall time


def test_handler_receives_a_lambda_context(local_server: LocalServer) -> None:
    context = echo(local_server)["context"]
    assert context["function_name"] == "baton-definitions"
    assert context["function_version"] == "$LATEST"
    assert context["invoked_function_arn"].endswith(":function:baton-definitions")
    assert context["memory_limit_in_mb"] == "512"
    assert context["log_group_name"] == "/aws/lambda/baton-definitions"
    assert context["log_stream_name"]
    assert context["aws_request_id"]
    assert 0 < context["remaining_ms"] <= 29_000


def test_handlers_see_the_local_environment(local_server: LocalServer) -> None:
    env = echo(local_server)["env"]
    assert env["BATON_STAGE"] == "local"
    assert env["DATABASE_URL"]
    assert env["BATON_S3_ENDPOINT"].startswith("http://127.0.0.1:")
    assert env["BATON_PAYLOAD_BUCKET"] == "baton-payloads"


def test_binary_request_body_arrives_base64_encoded(local_server: LocalServer) -> None:
    response = local_server.request("PUT", "/v1/taskdefs/blob", content=b"\x00\xff\xfe")
    event = response.json()["event"]
    assert event["isBase64Encoded"] is True
    assert event["body"] == "AP/+"


def test_json_body_arrives_as_text(local_server: LocalServer) -> None:
    response = local_server.request("PUT", "/v1/taskdefs/t", json={"name": "caf\u00e9"})
    event = response.json()["event"]
    assert event["isBase64Encoded"] is False
    assert event["body"] == '{"name":"caf\u00e9"}'


def test_base64_response_is_decoded_to_bytes(local_server: LocalServer) -> None:
    response = local_server.request("GET", "/v1/taskdefs")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/octet-stream"
    assert response.content == bytes(range(256))


def test_single_and_multi_value_response_headers_are_both_sent(local_server: LocalServer) -> None:
    response = local_server.request("POST", "/v1/instances/1/cancel", content=b"hello")
    assert response.status_code == 200
    assert response.text == "hello"
    assert response.headers["x-single"] == "one"
    assert response.headers.get_list("x-multi") == ["a", "b"]


def test_handler_that_raises_is_500(local_server: LocalServer) -> None:
    doc = assert_problem(local_server.request("POST", "/v1/instances", json={}), 500)
    assert "RuntimeError" in doc["detail"]


def test_malformed_proxy_result_is_502(local_server: LocalServer) -> None:
    assert_problem(local_server.request("GET", "/v1/instances"), 502)


def test_function_without_handler_is_500(local_server: LocalServer) -> None:
    doc = assert_problem(local_server.request("POST", "/v1/jobs/poll", json={}), 500)
    assert "jobs" in doc["detail"]


def test_concurrent_requests_run_in_separate_containers(local_server: LocalServer) -> None:
    def slow(_: int) -> str:
        response = local_server.request("GET", "/v1/instances/0.6")
        assert response.status_code == 200
        module: str = response.json()["module"]
        return module

    began = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        modules = list(pool.map(slow, range(3)))
    assert len(set(modules)) == 3  # three warm or cold "containers", one request each
    assert time.monotonic() - began < 1.7  # in parallel, not one after the other


def test_a_function_runs_as_many_requests_at_once_as_arrive(local_server: LocalServer) -> None:
    """Lambda gives each concurrent request its own environment: 12 overlapping requests run in
    12 containers (with 4, long-polls waiting in them held every other call of the function)."""

    def slow(_: int) -> str:
        response = local_server.request("GET", "/v1/instances/1.5")
        assert response.status_code == 200, response.text
        module: str = response.json()["module"]
        return module

    with concurrent.futures.ThreadPoolExecutor(12) as pool:
        modules = list(pool.map(slow, range(12)))
    assert len(set(modules)) == 12, modules


def test_a_burst_of_connections_is_served_not_reset(local_server: LocalServer) -> None:
    """80 clients connecting at once (workers started together): socketserver's listen backlog
    of 5 overflowed and the kernel reset about one connection in four."""
    url = f"{local_server.base_url}/v1/taskdefs/burst"
    headers = {"x-api-key": local_server.api_key or "", "content-type": "application/json"}
    body = json.dumps({"workerId": "w", "pad": "x" * 200}).encode()

    def one(_: int) -> int | str:
        # A connection of its own, and a body (the resets came with requests that carry one).
        request = urllib.request.Request(url, data=body, headers=headers, method="PUT")
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return int(response.status)
        except OSError as e:
            return type(e).__name__

    with concurrent.futures.ThreadPoolExecutor(80) as pool:
        statuses = list(pool.map(one, range(80)))
    assert statuses == [200] * 80, statuses


def test_a_function_at_its_concurrency_throttles_with_429(
    start_server: StartServer,
    fake_functions_dir: Path,
    e2e_database_url: str | None,
    tmp_path: Path,
) -> None:
    """BATON_LOCAL_CONCURRENCY=1: of two overlapping requests, one runs; the other waits a
    second for the container, then is refused as Lambda refuses a throttled invocation."""
    server = start_server(
        data_dir=tmp_path / "data",
        functions_dir=fake_functions_dir,
        database_url=e2e_database_url,
        extra_env={"BATON_LOCAL_CONCURRENCY": "1"},
    )
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        answers = list(pool.map(lambda _: server.request("GET", "/v1/instances/3"), range(2)))
    assert sorted(r.status_code for r in answers) == [200, 429], [r.text for r in answers]
    throttled = next(r for r in answers if r.status_code == 429)
    assert throttled.headers["retry-after"] == "1"
    doc = assert_problem(throttled, 429)
    assert "BATON_LOCAL_CONCURRENCY" in doc["detail"]
    assert server.stop() == 0, server.output()


@pytest.mark.parametrize("value", ["0", "-3", "1001", "many"])
def test_a_bad_local_concurrency_is_refused_at_start(value: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BATON_")}
    env["BATON_LOCAL_CONCURRENCY"] = value
    result = subprocess.run(
        [sys.executable, "-m", "baton.cli", "dev", "--data-dir", str(tmp_path / "data")],
        env=env,
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert "concurrency" in (result.stdout + result.stderr).lower()


# --- the scheduled functions -------------------------------------------------------------------


def ticks(database_url: str) -> dict[str, list[dict[str, Any]]]:
    with psycopg.connect(database_url) as conn:
        exists = conn.execute("SELECT to_regclass('fake_tick')").fetchone()
        if exists is None or exists[0] is None:
            return {}
        rows = conn.execute("SELECT function, event FROM fake_tick").fetchall()
    out: dict[str, list[dict[str, Any]]] = {}
    for function, event in rows:
        out.setdefault(function, []).append(event)
    return out


def test_scheduled_functions_tick_and_a_failing_one_keeps_ticking(
    local_server: LocalServer,
) -> None:
    database_url = echo(local_server)["env"]["DATABASE_URL"]
    deadline = time.monotonic() + 20
    seen: dict[str, list[dict[str, Any]]] = {}
    while time.monotonic() < deadline:
        seen = ticks(database_url)
        if all(len(seen.get(f"baton-{fn}", [])) >= 3 for fn in ("reaper", "sweeper")):
            break
        time.sleep(0.2)
    # The fake sweeper raises after every record: the timer carries on regardless.
    assert len(seen.get("baton-sweeper", [])) >= 3, seen.keys()
    assert len(seen.get("baton-reaper", [])) >= 3, seen.keys()
    event = seen["baton-reaper"][0]
    assert event["detail-type"] == "Scheduled Event"
    assert event["source"] == "aws.events"
    assert len({e["id"] for e in seen["baton-reaper"]}) == len(seen["baton-reaper"])


# --- start, stop, restart ----------------------------------------------------------------------


def test_second_server_on_a_taken_port_fails_fast(
    local_server: LocalServer, tmp_path: Path
) -> None:
    port, data_dir = str(local_server.port), str(tmp_path / "data")
    result = subprocess.run(
        [sys.executable, "-m", "baton.cli", "dev", "--port", port, "--data-dir", data_dir],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 1
    assert "cannot listen" in result.stdout
    assert not (tmp_path / "data").exists()  # nothing was started


def test_restart_keeps_definitions_and_payloads(
    start_server: StartServer,
    fake_functions_dir: Path,
    e2e_database_url: str | None,
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "data"
    first = start_server(
        data_dir=data_dir, functions_dir=fake_functions_dir, database_url=e2e_database_url
    )
    created = first.request("POST", "/v1/definitions", json={"name": "kept", "steps": [1]})
    assert created.status_code == 201, created.text
    s3 = s3_client(echo(first)["env"]["BATON_S3_ENDPOINT"])
    s3.put_object(Bucket="baton-payloads", Key="payloads/in/kept.json", Body=b'{"big": true}')
    assert first.stop() == 0, first.output()

    second = start_server(
        data_dir=data_dir, functions_dir=fake_functions_dir, database_url=e2e_database_url
    )
    again = second.request("GET", "/v1/definitions/kept")
    assert again.status_code == 200, again.text
    assert again.json() == {"name": "kept", "steps": [1]}
    s3 = s3_client(echo(second)["env"]["BATON_S3_ENDPOINT"])
    body = s3.get_object(Bucket="baton-payloads", Key="payloads/in/kept.json")["Body"].read()
    assert body == b'{"big": true}'
    assert second.stop() == 0, second.output()


def s3_client(endpoint: str) -> Any:
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )


# --- the real handlers -------------------------------------------------------------------------

REAL_DEFINITIONS = ROOT / "functions" / "definitions" / "handler.py"


@pytest.mark.skipif(not REAL_DEFINITIONS.exists(), reason="functions/definitions not written yet")
def test_real_definitions_function_registers_and_keeps_a_definition(
    start_server: StartServer, e2e_database_url: str | None, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    definition = {"name": "e2e-smoke", "steps": [{"id": "approve", "type": "USER_TASK"}]}
    server = start_server(data_dir=data_dir, functions_dir=None, database_url=e2e_database_url)
    created = server.request("POST", "/v1/definitions", json=definition)
    assert created.status_code == 201, created.text
    assert created.json()["name"] == "e2e-smoke"
    version = created.json()["version"]
    got = server.request("GET", "/v1/definitions/e2e-smoke")
    assert got.status_code == 200, got.text
    assert got.json()["version"] == version
    missing = server.request("GET", "/v1/definitions/no-such-definition")
    assert_problem(missing, 404)
    assert server.stop() == 0, server.output()

    restarted = start_server(data_dir=data_dir, functions_dir=None, database_url=e2e_database_url)
    kept = restarted.request("GET", f"/v1/definitions/e2e-smoke/versions/{version}")
    assert kept.status_code == 200, kept.text
    assert kept.json()["name"] == "e2e-smoke"


# --- the API key kept in the data directory ---------------------------------------------------


def test_generated_key_is_kept_in_the_data_directory_across_restarts(
    start_server: StartServer,
    e2e_database_url: str | None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from baton_worker.client import BatonClient
    from baton_worker.errors import PermissionDeniedError

    data_dir = tmp_path / "data"
    first = start_server(
        data_dir=data_dir, functions_dir=None, database_url=e2e_database_url, api_key=None
    )
    key_file = data_dir / "api-key"
    assert key_file.stat().st_mode & 0o777 == 0o600
    key = first.api_key
    assert key and key in first.log()  # printed at the start
    assert first.request("GET", "/v1/definitions").status_code == 200
    assert first.stop() == 0, first.output()

    second = start_server(
        data_dir=data_dir, functions_dir=None, database_url=e2e_database_url, api_key=None
    )
    assert second.api_key == key
    assert second.request("GET", "/v1/definitions").status_code == 200
    assert key in second.log()  # printed again

    # A client given no key finds the local server's own, by BATON_DATA_DIR or by default in
    # .baton/data under the working directory, as `baton dev` itself does.
    monkeypatch.delenv("BATON_API_KEY", raising=False)
    monkeypatch.setenv("BATON_URL", second.base_url)
    monkeypatch.setenv("BATON_DATA_DIR", str(data_dir))
    with BatonClient.from_env() as client:
        assert "definitions" in client.list_definitions()
    monkeypatch.delenv("BATON_DATA_DIR")
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".baton").mkdir()
    (tmp_path / ".baton" / "data").symlink_to(data_dir)
    with BatonClient.from_env() as client:
        assert "definitions" in client.list_definitions()
    # BATON_API_KEY still wins over the kept key.
    monkeypatch.setenv("BATON_API_KEY", "not-the-key")
    with BatonClient.from_env() as client, pytest.raises(PermissionDeniedError):
        client.list_definitions()
