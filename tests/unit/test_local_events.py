"""The local server's events have the shape AWS documents for API Gateway REST (v1) proxy events
and EventBridge scheduled events, and its routing follows API Gateway's."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime

import pytest
from baton.local.events import (
    LocalRequest,
    MethodNotAllowed,
    NoRoute,
    RouteMatch,
    RouteTable,
    parse_query,
    request_time,
    rest_api_event,
    scheduled_event,
)
from baton.local.responses import MalformedProxyResponse, from_proxy_result, problem
from baton.routes import ROUTED, ROUTES, SERVED_ROUTES, Route

# Top-level keys of the documented REST proxy event ("Input format of a Lambda function for
# proxy integration" in the API Gateway developer guide).
REST_EVENT_KEYS = {
    "resource",
    "path",
    "httpMethod",
    "headers",
    "multiValueHeaders",
    "queryStringParameters",
    "multiValueQueryStringParameters",
    "pathParameters",
    "stageVariables",
    "requestContext",
    "body",
    "isBase64Encoded",
}
REQUEST_CONTEXT_KEYS = {
    "accountId",
    "apiId",
    "domainName",
    "domainPrefix",
    "extendedRequestId",
    "httpMethod",
    "identity",
    "path",
    "protocol",
    "requestId",
    "requestTime",
    "requestTimeEpoch",
    "resourceId",
    "resourcePath",
    "stage",
}
IDENTITY_KEYS = {
    "accessKey",
    "accountId",
    "apiKey",
    "apiKeyId",
    "caller",
    "cognitoAuthenticationProvider",
    "cognitoAuthenticationType",
    "cognitoIdentityId",
    "cognitoIdentityPoolId",
    "principalOrgId",
    "sourceIp",
    "user",
    "userAgent",
    "userArn",
    "clientCert",
}

TABLE = RouteTable()
SERVED = RouteTable(SERVED_ROUTES)  # without the fallbacks: the router's own 404/405


def build(
    method: str,
    target: str,
    *,
    headers: tuple[tuple[str, str], ...] = (),
    body: bytes = b"",
    now: datetime | None = None,
) -> dict[str, object]:
    raw_path, _, query = target.partition("?")
    match = TABLE.match(method, raw_path)
    assert isinstance(match, RouteMatch), match
    request = LocalRequest(
        method=method,
        raw_path=raw_path,
        query_string=query,
        headers=(("Host", "127.0.0.1:8080"), ("User-Agent", "pytest"), *headers),
        body=body,
        source_ip="10.1.2.3",
        server_port=8080,
    )
    return rest_api_event(request, match, request_id="req-1", now=now)


def test_rest_event_has_every_documented_key() -> None:
    event = build("GET", "/v1/definitions")
    assert set(event) == REST_EVENT_KEYS
    context = event["requestContext"]
    assert isinstance(context, dict)
    assert set(context) == REQUEST_CONTEXT_KEYS
    assert set(context["identity"]) == IDENTITY_KEYS


def test_rest_event_names_the_route_template_as_resource() -> None:
    event = build("GET", "/v1/instances/5f1c")
    assert event["resource"] == "/v1/instances/{id}"
    assert event["path"] == "/v1/instances/5f1c"
    assert event["httpMethod"] == "GET"
    context = event["requestContext"]
    assert isinstance(context, dict)
    assert context["resourcePath"] == "/v1/instances/{id}"
    assert context["path"] == "/local/v1/instances/5f1c"
    assert context["stage"] == "local"
    assert context["httpMethod"] == "GET"
    assert context["requestId"] == "req-1"
    assert context["identity"]["sourceIp"] == "10.1.2.3"
    assert context["identity"]["userAgent"] == "pytest"


def test_an_event_without_parameters_or_body_has_nulls_where_aws_puts_them() -> None:
    event = build("GET", "/v1/definitions")
    assert event["queryStringParameters"] is None
    assert event["multiValueQueryStringParameters"] is None
    assert event["pathParameters"] is None
    assert event["stageVariables"] is None
    assert event["body"] is None
    assert event["isBase64Encoded"] is False


def test_path_parameters_are_extracted_and_decoded() -> None:
    event = build("POST", "/v1/instances/abc-1/user-tasks/review%20it/complete")
    assert event["resource"] == "/v1/instances/{id}/user-tasks/{stepId}/complete"
    assert event["pathParameters"] == {"id": "abc-1", "stepId": "review it"}
    # Like a REST API, the path itself stays as the client encoded it.
    assert event["path"] == "/v1/instances/abc-1/user-tasks/review%20it/complete"


def test_repeated_query_parameters_fill_both_maps() -> None:
    event = build("GET", "/v1/instances?status=RUNNING&status=FAILED&limit=5&empty=&flag")
    assert event["queryStringParameters"] == {
        "status": "FAILED",
        "limit": "5",
        "empty": "",
        "flag": "",
    }
    assert event["multiValueQueryStringParameters"] == {
        "status": ["RUNNING", "FAILED"],
        "limit": ["5"],
        "empty": [""],
        "flag": [""],
    }


def test_query_values_are_decoded_but_plus_is_kept() -> None:
    # A pageToken in base64 keeps its '+' even when the client forgot to encode it.
    assert parse_query("pageToken=ab%2Bc+d%3D&q=%E2%9C%93") == [
        ("pageToken", "ab+c+d="),
        ("q", "\u2713"),
    ]


def test_repeated_headers_fill_both_maps_keeping_the_first_spelling() -> None:
    event = build(
        "GET",
        "/v1/definitions",
        headers=(("X-Tag", "a"), ("x-tag", "b"), ("x-api-key", "k-1")),
    )
    headers = event["headers"]
    multi = event["multiValueHeaders"]
    assert isinstance(headers, dict)
    assert isinstance(multi, dict)
    assert headers["X-Tag"] == "b"
    assert multi["X-Tag"] == ["a", "b"]
    assert "x-tag" not in headers
    assert headers["x-api-key"] == "k-1"
    assert {k: v[-1] for k, v in multi.items()} == headers


def test_gateway_headers_are_added_and_forwarded_for_is_appended() -> None:
    event = build("GET", "/v1/definitions", headers=(("X-Forwarded-For", "192.0.2.7"),))
    headers = event["headers"]
    assert isinstance(headers, dict)
    assert headers["X-Forwarded-For"] == "192.0.2.7, 10.1.2.3"
    assert headers["X-Forwarded-Proto"] == "http"
    assert headers["X-Forwarded-Port"] == "8080"
    assert headers["X-Amzn-Trace-Id"].startswith("Root=1-")


def test_api_key_appears_in_the_identity() -> None:
    event = build("GET", "/v1/definitions", headers=(("X-Api-Key", "secret-1"),))
    context = event["requestContext"]
    assert isinstance(context, dict)
    assert context["identity"]["apiKey"] == "secret-1"
    assert context["identity"]["apiKeyId"]


def test_text_body_is_passed_as_is() -> None:
    body = '{"name": "caf\u00e9"}'.encode()
    event = build("POST", "/v1/definitions", body=body)
    assert event["body"] == '{"name": "caf\u00e9"}'
    assert event["isBase64Encoded"] is False


def test_binary_body_is_base64_encoded() -> None:
    body = bytes(range(256))
    event = build("POST", "/v1/definitions", body=body)
    assert event["isBase64Encoded"] is True
    assert isinstance(event["body"], str)
    assert base64.b64decode(event["body"]) == body


def test_request_time_uses_api_gateway_format_and_epoch_millis() -> None:
    now = datetime(2026, 3, 4, 19, 15, 17, 135000, tzinfo=UTC)
    event = build("GET", "/v1/definitions", now=now)
    context = event["requestContext"]
    assert isinstance(context, dict)
    assert context["requestTime"] == "04/Mar/2026:19:15:17 +0000"
    assert context["requestTimeEpoch"] == 1772651717135
    assert request_time(now) == "04/Mar/2026:19:15:17 +0000"


def test_every_route_in_the_table_is_reachable() -> None:
    for route in ROUTES:
        path = route.path.replace("{", "").replace("}", "")
        match = TABLE.match(route.method, path)
        assert isinstance(match, RouteMatch), route
        assert match.route == route


def test_unknown_path_is_no_route() -> None:
    assert isinstance(SERVED.match("GET", "/v1/nothing"), NoRoute)
    assert isinstance(SERVED.match("GET", "/v1/definitions/a/b/c/d"), NoRoute)
    assert isinstance(SERVED.match("GET", "/v1/instances//cancel"), NoRoute)
    assert isinstance(TABLE.match("GET", "/v2/definitions"), NoRoute)  # no fallback outside


def test_known_path_with_another_method_lists_the_allowed_ones() -> None:
    result = SERVED.match("POST", "/v1/taskdefs/x")
    assert result == MethodNotAllowed("/v1/taskdefs/{name}", ("DELETE", "GET", "PUT"))
    assert TABLE.match("POST", "/ui") == MethodNotAllowed("/ui", ("GET",))


@pytest.mark.parametrize(
    ("method", "path", "template", "params"),
    [
        ("POST", "/api/workflow/rerun/hello/1", "/api/{proxy+}", "workflow/rerun/hello/1"),
        ("GET", "/v1/nothing", "/v1/{proxy+}", "nothing"),
        ("GET", "/v1/definitions/a/b/c/d", "/v1/{proxy+}", "definitions/a/b/c/d"),
        ("GET", "/v1/a%2Fb/c", "/v1/{proxy+}", "a/b/c"),
        ("PUT", "/api/workflow/w1", "/api/workflow/{workflow}", None),
        ("POST", "/v1/taskdefs/x", "/v1/taskdefs/{name}", None),
    ],
)
def test_what_the_table_does_not_serve_falls_back_to_a_function(
    method: str, path: str, template: str, params: str | None
) -> None:
    match = TABLE.match(method, path)
    assert isinstance(match, RouteMatch), match
    assert (match.route.method, match.route.path) == ("ANY", template)
    if params is not None:
        assert match.path_parameters == {"proxy": params}
    event = rest_api_event(LocalRequest(method, path), match)
    assert (event["httpMethod"], event["resource"]) == (method, template)


def test_a_fallback_takes_only_what_no_route_serves() -> None:
    match = TABLE.match("GET", "/api/workflow/w1")
    assert isinstance(match, RouteMatch) and match.route.method == "GET"
    for empty in ("/api/", "/v1/definitions/", "/v1/instances//cancel"):
        assert isinstance(TABLE.match("GET", empty), NoRoute), empty  # no segment is empty


def test_literal_segments_win_over_parameters() -> None:
    table = RouteTable(
        [Route("GET", "/v1/things/{id}", "a"), Route("POST", "/v1/things/search", "b")]
    )
    assert table.match("GET", "/v1/things/7") == RouteMatch(
        Route("GET", "/v1/things/{id}", "a"), {"id": "7"}
    )
    # The literal resource is chosen first, then its methods: GET is not one of them.
    assert table.match("GET", "/v1/things/search") == MethodNotAllowed(
        "/v1/things/search", ("POST",)
    )


@pytest.mark.parametrize("method", ["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD"])
def test_a_path_spelled_as_a_template_matches_as_the_full_search_does(method: str) -> None:
    """A path equal to a template without parameters is looked up directly; the answer is the
    one the search through every resource, most specific first, gives."""
    paths = {r.path for r in ROUTED} | {"/v1/jobs/poll/", "/v1/jobs/p%6Fll", "/ui/"}
    for path in sorted(paths):
        assert TABLE.match(method, path) == TABLE._search(method, path), path


def test_scheduled_event_is_an_eventbridge_scheduled_event() -> None:
    now = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    event = scheduled_event("reaper", now=now)
    assert set(event) == {
        "version",
        "id",
        "detail-type",
        "source",
        "account",
        "time",
        "region",
        "resources",
        "detail",
    }
    assert event["detail-type"] == "Scheduled Event"
    assert event["source"] == "aws.events"
    assert event["time"] == "2026-01-02T03:04:05Z"
    assert event["detail"] == {}
    assert event["resources"] == [
        "arn:aws:events:us-east-1:123456789012:rule/baton-reaper-schedule"
    ]
    assert scheduled_event("reaper")["id"] != scheduled_event("reaper")["id"]


def test_proxy_result_merges_headers_with_multi_values_winning() -> None:
    response = from_proxy_result(
        {
            "statusCode": 201,
            "headers": {"X-A": "single", "X-B": "b", "Content-Length": "999"},
            "multiValueHeaders": {"x-a": ["m1", "m2"]},
            "body": "hi",
        }
    )
    assert response.status == 201
    assert response.headers == (
        ("x-a", "m1"),
        ("x-a", "m2"),
        ("X-B", "b"),
        ("Content-Type", "application/json"),
    )
    assert response.body == b"hi"


def test_proxy_result_with_base64_body_is_decoded() -> None:
    response = from_proxy_result(
        {"statusCode": 200, "body": base64.b64encode(b"\x00\xff").decode(), "isBase64Encoded": True}
    )
    assert response.body == b"\x00\xff"


@pytest.mark.parametrize(
    "result",
    [
        None,
        "text",
        {"body": "no status"},
        {"statusCode": 42},
        {"statusCode": 200, "body": {"not": "a string"}},
        {"statusCode": 200, "body": "!!", "isBase64Encoded": True},
        {"statusCode": 200, "headers": {"X": ["a list"]}},
    ],
)
def test_malformed_proxy_results_are_refused(result: object) -> None:
    with pytest.raises(MalformedProxyResponse):
        from_proxy_result(result)


def test_problem_is_rfc9457_json_typed_like_the_api_problems() -> None:
    response = problem(405, "no", headers=[("Allow", "GET")], instance="/v1/x")
    assert response.status == 405
    assert ("Content-Type", "application/problem+json") in response.headers
    assert ("Allow", "GET") in response.headers
    assert json.loads(response.body) == {
        "type": "https://baton.dev/problems/method-not-allowed",
        "title": "Method Not Allowed",
        "status": 405,
        "detail": "no",
        "errors": [],
        "instance": "/v1/x",
    }
    assert json.loads(problem(413, "big").body)["type"].endswith("/payload-too-large")
