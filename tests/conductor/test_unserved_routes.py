"""A Conductor route Baton does not serve is a 404 in Conductor's error body naming the route,
to a valid token (not a 401 asking for an API key), whatever the method and the path under
``/api`` (a method a served path does not take: a 405 naming those it does), and through
conductor-python's own clients, unmodified. Malformed JSON on ``/api`` says where, in
Conductor's error body."""

from __future__ import annotations

import uuid

import httpx
import pytest
from conductor.client.configuration.configuration import Configuration
from conductor.client.configuration.settings.authentication_settings import (
    AuthenticationSettings,
)
from conductor.client.http.models.skip_task_request import SkipTaskRequest
from conductor.client.http.rest import ApiException
from conductor.client.workflow.executor.workflow_executor import WorkflowExecutor

from tests.support.servers import LocalServer

pytestmark = [pytest.mark.e2e]


@pytest.fixture(scope="module")
def token(conductor_server: LocalServer) -> str:
    r = httpx.post(
        f"{conductor_server.base_url}/api/token",
        json={"keyId": "tests", "keySecret": conductor_server.api_key},
    )
    assert r.status_code == 200, r.text
    return str(r.json()["token"])


def _send(server: LocalServer, method: str, path: str, headers: dict[str, str]) -> httpx.Response:
    return httpx.request(method, server.base_url + path, headers=headers, json={}, timeout=30)


UNSERVED = [
    ("POST", "/api/workflow/execute/hello/1/more"),
    ("GET", "/api/workflow/running/hello"),
    ("GET", "/api/nothing/here/at/all"),
    ("PUT", "/api/workflow/00000000-0000-4000-8000-000000000000/skiptask/t1"),
]
OTHER_METHOD = [
    ("PATCH", "/api/metadata/taskdefs", "GET, POST, PUT"),
    ("PUT", "/api/workflow/00000000-0000-4000-8000-000000000000", "DELETE, GET, POST"),
    ("GET", "/api/token", "POST"),
]
CREDENTIALS = ["X-Authorization", "x-api-key"]


@pytest.mark.parametrize("header", CREDENTIALS)
@pytest.mark.parametrize(("method", "path"), UNSERVED, ids=[f"{m} {p}" for m, p in UNSERVED])
def test_an_unserved_route_is_a_404_in_conductors_shape_to_valid_credentials(
    conductor_server: LocalServer, token: str, method: str, path: str, header: str
) -> None:
    credential = token if header == "X-Authorization" else conductor_server.api_key or ""
    r = _send(conductor_server, method, path, {header: credential})
    assert r.status_code == 404, (r.status_code, r.text)
    assert r.headers["content-type"].startswith("application/json")
    body = r.json()
    assert (body["status"], body["code"]) == (404, "NOT_FOUND")
    assert body["message"].startswith(f"Baton does not serve {method} {path}: its /api is")


@pytest.mark.parametrize(
    ("method", "path", "allowed"), OTHER_METHOD, ids=[f"{m} {p}" for m, p, _ in OTHER_METHOD]
)
def test_a_method_a_served_path_does_not_take_is_a_405_naming_those_it_does(
    conductor_server: LocalServer, token: str, method: str, path: str, allowed: str
) -> None:
    r = _send(conductor_server, method, path, {"X-Authorization": token})
    assert r.status_code == 405, r.text
    assert r.headers["allow"] == allowed
    body = r.json()
    assert body["status"] == 405
    assert body["message"] == f"Baton does not serve {method} {path}: this path takes {allowed}"


@pytest.mark.parametrize(("method", "path"), UNSERVED, ids=[f"{m} {p}" for m, p in UNSERVED])
def test_without_credentials_an_unserved_route_is_still_a_401(
    conductor_server: LocalServer, method: str, path: str
) -> None:
    r = _send(conductor_server, method, path, {})
    assert r.status_code == 401, r.text
    r = _send(conductor_server, method, path, {"X-Authorization": "not-a-token"})
    assert r.status_code == 401, r.text
    assert r.json()["error"] == "INVALID_TOKEN"


def test_conductor_pythons_client_gets_a_404_naming_the_route(
    conductor_server: LocalServer,
) -> None:
    executor = WorkflowExecutor(
        Configuration(
            server_api_url=f"{conductor_server.base_url}/api",
            authentication_settings=AuthenticationSettings(
                key_id="tests", key_secret=conductor_server.api_key or ""
            ),
        )
    )
    wid = str(uuid.uuid4())
    with pytest.raises(ApiException) as refused:
        executor.skip_task_from_workflow(wid, "t1", SkipTaskRequest())
    assert refused.value.status == 404
    assert f"Baton does not serve PUT /api/workflow/{wid}/skiptask/t1" in str(refused.value)


def test_malformed_json_on_api_is_a_400_in_conductors_shape_naming_the_place(
    conductor_server: LocalServer, token: str
) -> None:
    body = '{\n  "name": "wf",\n  "input": {"ratio": NaN}\n}'
    r = httpx.post(
        f"{conductor_server.base_url}/api/workflow",
        content=body,
        headers={"X-Authorization": token, "content-type": "application/json"},
    )
    assert r.status_code == 400, r.text
    error = r.json()
    assert error["message"].startswith(
        "request body is not valid JSON at line 3, column 22 (input.ratio): NaN is not a JSON"
    )
    [item] = error["validationErrors"]
    assert item["path"] == "input.ratio"
