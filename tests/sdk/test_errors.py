"""Problem+json responses become the SDK's error family; transient failures are retried only
when a repeat is harmless."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import httpx
import pytest
from baton_worker.backoff import RetryPolicy
from baton_worker.client import BatonClient, may_retry
from baton_worker.errors import (
    AuthenticationError,
    BatonApiError,
    BatonError,
    ConflictError,
    JobError,
    NonRetryableError,
    NotFoundError,
    ProblemItem,
    RateLimitedError,
    ServerError,
    TransportError,
    UnavailableError,
    ValidationError,
    is_transient,
    problem_error,
)

PROBLEM = "application/problem+json"


def problem(status: int, title: str, detail: str, **extra: Any) -> dict[str, Any]:
    return {
        "type": "https://baton.dev/problems/x",
        "title": title,
        "status": status,
        "detail": detail,
        "errors": [],
        **extra,
    }


# --- mapping ------------------------------------------------------------------------------------


def test_404_problem_becomes_not_found_with_its_fields() -> None:
    body = problem(404, "Not found", "definition 'x' not found", instance="/v1/definitions/x")
    error = problem_error(404, body)
    assert isinstance(error, NotFoundError)
    assert (error.status, error.title, error.detail) == (404, "Not found", body["detail"])
    assert error.instance == "/v1/definitions/x"
    assert str(error) == "404 Not found: definition 'x' not found"


def test_422_lists_every_problem_in_errors_and_in_its_message() -> None:
    body = problem(
        422,
        "Validation failed",
        "2 problems found",
        errors=[
            {"path": "steps[0].id", "message": "duplicate step id"},
            {"path": "name", "message": "too long"},
        ],
    )
    error = problem_error(422, body)
    assert isinstance(error, ValidationError)
    assert error.errors == (
        ProblemItem("steps[0].id", "duplicate step id"),
        ProblemItem("name", "too long"),
    )
    assert str(error) == (
        "422 Validation failed: 2 problems found (steps[0].id: duplicate step id; name: too long)"
    )


@pytest.mark.parametrize(
    ("status", "cls"),
    [
        (401, AuthenticationError),
        (409, ConflictError),
        (429, RateLimitedError),
        (500, ServerError),
        (502, ServerError),
        (503, UnavailableError),
        (418, BatonApiError),
    ],
)
def test_each_status_has_its_class(status: int, cls: type[BatonApiError]) -> None:
    error = problem_error(status, problem(status, "t", "d"))
    assert type(error) is cls
    assert isinstance(error, BatonError)


def test_retry_after_is_kept_in_seconds() -> None:
    error = problem_error(503, problem(503, "Service unavailable", "db down"), retry_after="2")
    assert isinstance(error, UnavailableError)
    assert error.retry_after == 2.0


def test_a_body_that_is_not_a_problem_still_gives_a_useful_error() -> None:
    error = problem_error(502, "<html>Bad Gateway</html>", reason="Bad Gateway")
    assert isinstance(error, ServerError)
    assert error.title == "Bad Gateway"
    assert "Bad Gateway" in error.detail


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        (problem_error(429, None), True),
        (problem_error(500, None), True),
        (problem_error(503, None), True),
        (problem_error(404, None), False),
        (problem_error(409, None), False),
        (TransportError("refused", sent=False, method="GET", url="u"), True),
        (ValueError("not ours"), False),
    ],
)
def test_transient_errors_are_connection_trouble_429_and_5xx(
    error: BaseException, transient: bool
) -> None:
    assert is_transient(error) is transient


@pytest.mark.parametrize(
    ("error", "idempotent", "expected"),
    [
        (TransportError("refused", sent=False, method="POST", url="u"), False, True),
        (TransportError("reset", sent=True, method="POST", url="u"), False, False),
        (TransportError("reset", sent=True, method="POST", url="u"), True, True),
        (problem_error(503, None), False, True),
        (problem_error(429, None), False, True),
        (problem_error(500, None), False, False),
        (problem_error(502, None), True, True),
        (problem_error(409, None), True, False),
    ],
)
def test_only_harmless_repeats_are_retried(
    error: TransportError | BatonApiError, idempotent: bool, expected: bool
) -> None:
    assert may_retry(error, idempotent=idempotent) is expected


# --- the client over a scripted transport ---------------------------------------------------------


Script = list[httpx.Response | Exception]


def scripted_client(
    script: Script, seen: list[httpx.Request], retry: RetryPolicy | None = None
) -> BatonClient:
    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        step = script.pop(0)
        if isinstance(step, Exception):
            raise step
        return step

    return BatonClient(
        "http://baton.test",
        api_key="k",
        transport=httpx.MockTransport(handle),
        retry=retry or RetryPolicy(initial_interval=0.01, maximum_interval=0.01, jitter=0),
        sleep=lambda _: None,
    )


def reply(status: int, body: Any, headers: dict[str, str] | None = None) -> httpx.Response:
    content_type = PROBLEM if status >= 400 else "application/json"
    return httpx.Response(
        status, content=json.dumps(body), headers={"content-type": content_type, **(headers or {})}
    )


def test_client_sends_the_api_key_and_decodes_the_answer() -> None:
    seen: list[httpx.Request] = []
    client = scripted_client([reply(200, {"name": "d", "version": 3, "steps": []})], seen)
    assert client.get_definition("d", version=3)["version"] == 3
    assert seen[0].headers["x-api-key"] == "k"
    assert seen[0].url.path == "/v1/definitions/d/versions/3"


def test_client_percent_encodes_path_segments() -> None:
    seen: list[httpx.Request] = []
    client = scripted_client([reply(200, {"id": "x"})], seen)
    client.get_instance("a/../b c")
    assert seen[0].url.raw_path == b"/v1/instances/a%2F..%2Fb%20c"


def test_client_raises_the_mapped_error() -> None:
    seen: list[httpx.Request] = []
    client = scripted_client(
        [reply(404, problem(404, "Not found", "instance 'x' not found"))], seen
    )
    with pytest.raises(NotFoundError, match="instance 'x' not found"):
        client.get_instance("x")
    assert len(seen) == 1


def test_503_is_retried_then_succeeds() -> None:
    seen: list[httpx.Request] = []
    unavailable = reply(503, problem(503, "Service unavailable", "db"), {"retry-after": "0"})
    client = scripted_client([unavailable, unavailable, reply(200, {"jobs": []})], seen)
    assert client.poll_jobs(worker_id="w", job_types=["t"]) == []
    assert len(seen) == 3


def test_a_poll_that_may_have_claimed_jobs_is_not_repeated() -> None:
    seen: list[httpx.Request] = []
    client = scripted_client([reply(500, problem(500, "Internal error", "boom"))], seen)
    with pytest.raises(ServerError):
        client.poll_jobs(worker_id="w", job_types=["t"])
    assert len(seen) == 1


def test_a_completion_is_repeated_after_an_ambiguous_failure() -> None:
    seen: list[httpx.Request] = []
    done = {"jobId": "j", "status": "COMPLETED", "applied": True}
    client = scripted_client(
        [httpx.ReadError("connection reset"), reply(502, {}), reply(200, done)], seen
    )
    assert client.complete_job("j", worker_id="w")["applied"] is True
    assert len(seen) == 3


def test_connection_refused_is_a_transport_error_after_the_retries() -> None:
    seen: list[httpx.Request] = []
    refused = httpx.ConnectError("[Errno 111] Connection refused")
    client = scripted_client(
        [refused, refused, refused],
        seen,
        retry=RetryPolicy(initial_interval=0.01, maximum_attempts=3, jitter=0),
    )
    with pytest.raises(TransportError, match=r"cannot reach http://baton\.test") as caught:
        client.list_definitions()
    assert caught.value.sent is False
    assert len(seen) == 3


def test_retry_none_means_one_attempt() -> None:
    seen: list[httpx.Request] = []
    client = scripted_client([reply(503, problem(503, "Service unavailable", "db"))], seen)
    with pytest.raises(UnavailableError):
        client.heartbeat("j", worker_id="w", retry=None)
    assert len(seen) == 1


def test_start_with_an_idempotency_key_may_be_repeated_but_without_one_may_not() -> None:
    instance = {"id": "i", "status": "RUNNING"}
    seen: list[httpx.Request] = []
    client = scripted_client([reply(500, {}), reply(200, instance)], seen)
    assert client.start_instance("d", idempotency_key="k-1")["id"] == "i"
    assert json.loads(seen[-1].content)["idempotencyKey"] == "k-1"

    seen.clear()
    client = scripted_client([reply(500, {})], seen)
    with pytest.raises(ServerError):
        client.start_instance("d")
    assert len(seen) == 1


def test_requests_leave_out_unset_fields() -> None:
    seen: list[httpx.Request] = []
    client = scripted_client([reply(201, {"id": "i"})], seen)
    client.start_instance("order", input={"a": 1})
    assert json.loads(seen[0].content) == {"definitionName": "order", "input": {"a": 1}}


@pytest.mark.parametrize(
    ("body", "error"), [({"x": float("nan")}, ValueError), ({"x": object()}, TypeError)]
)
def test_a_body_that_is_not_strict_json_is_refused_before_sending(
    body: dict[str, Any], error: type[Exception]
) -> None:
    seen: list[httpx.Request] = []
    client = scripted_client([], seen)
    with pytest.raises(error):
        client.start_instance("d", input=body)
    assert seen == []


def test_bodies_are_sent_as_utf8_json() -> None:
    seen: list[httpx.Request] = []
    client = scripted_client([reply(201, {"id": "i"})], seen)
    client.start_instance("d", input={"name": "José"})
    assert seen[0].headers["content-type"] == "application/json"
    assert seen[0].content == '{"definitionName":"d","input":{"name":"José"}}'.encode()


def test_client_refuses_two_kinds_of_credentials() -> None:
    with pytest.raises(ValueError):
        BatonClient(api_key="k", auth=httpx.BasicAuth("a", "b"))


def test_a_problem_the_detail_already_states_is_not_repeated() -> None:
    detail = "'bad!' is not a valid queue name"
    body = problem(422, "Validation failed", detail, errors=[{"path": "name", "message": detail}])
    assert str(problem_error(422, body)) == f"422 Validation failed: {detail}"


# --- handler failures ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "seconds"),
    [
        (None, None),
        (0, 0.0),
        (2.5, 2.5),
        (timedelta(minutes=2), 120.0),
        (timedelta(days=365), 365 * 24 * 3600.0),
    ],
)
def test_job_error_takes_its_retry_delay_in_seconds_or_as_a_timedelta(
    given: float | timedelta | None, seconds: float | None
) -> None:
    error = JobError("slow down", next_retry_delay=given)
    assert error.next_retry_delay_seconds == seconds
    assert error.next_retry_delay == (None if seconds is None else timedelta(seconds=seconds))
    assert error.non_retryable is False


@pytest.mark.parametrize(
    "bad", [-1, timedelta(seconds=-1), timedelta(days=366), float("nan"), float("inf")]
)
def test_job_error_refuses_a_retry_delay_the_api_would_refuse(bad: float | timedelta) -> None:
    with pytest.raises(ValueError, match="next_retry_delay"):
        JobError("x", next_retry_delay=bad)


@pytest.mark.parametrize("bad", [True, "5", [1]])
def test_job_error_refuses_a_retry_delay_that_is_not_a_duration(bad: Any) -> None:
    with pytest.raises(TypeError, match="next_retry_delay"):
        JobError("x", next_retry_delay=bad)


def test_non_retryable_error_is_a_job_error_without_a_delay() -> None:
    error = NonRetryableError("card declined")
    assert isinstance(error, JobError)
    assert (error.message, error.non_retryable, error.next_retry_delay) == (
        "card declined",
        True,
        None,
    )


def test_fail_job_sends_the_next_retry_delay_only_when_given() -> None:
    seen: list[httpx.Request] = []
    failed = {"jobId": "j", "status": "RETRY_SCHEDULED", "applied": True}
    client = scripted_client([reply(200, failed), reply(200, failed)], seen)
    client.fail_job("j", worker_id="w", error_message="later", next_retry_delay_seconds=0)
    client.fail_job("j", worker_id="w", error_message="later", retryable=False)
    first, second = (json.loads(r.content) for r in seen)
    assert first == {
        "jobId": "j",
        "workerId": "w",
        "errorMessage": "later",
        "retryable": True,
        "nextRetryDelaySeconds": 0,
    }
    assert second == {"jobId": "j", "workerId": "w", "errorMessage": "later", "retryable": False}
