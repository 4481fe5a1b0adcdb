"""The rpc function fed API Gateway's events as they arrive on AWS: /rpc/{proxy+} with the
method in ``pathParameters.proxy``, a binary body base64-encoded (application/proto is a binary
media type), the answer base64 for API Gateway to turn back into bytes."""

from __future__ import annotations

import base64
import math
import uuid
from typing import Any

from baton.rpc import convert, schema
from google.protobuf import json_format

from tests.support.helpers import one_step
from tests.support.lambda_events import FakeContext, api_event, load_function


def _rpc_event(rpc: str, body: bytes, content_type: str = "application/proto") -> dict[str, Any]:
    event = api_event(
        "POST",
        "/rpc/{proxy+}",
        path_params={"proxy": f"workflow.v1.WorkflowEngine/{rpc}"},
    )
    event["path"] = f"/rpc/workflow.v1.WorkflowEngine/{rpc}"
    event["headers"] = {**(event.get("headers") or {}), "Content-Type": content_type}
    event["multiValueHeaders"] = {k: [v] for k, v in event["headers"].items()}
    event["body"] = base64.b64encode(body).decode()
    event["isBase64Encoded"] = True
    return event


def _message(name: str, **fields: Any) -> Any:
    return schema.message_class(f"workflow.v1.{name}")(**fields)


def test_binary_calls_arrive_base64_and_answer_base64(lambda_env: None) -> None:
    rpc = load_function("rpc")
    definition = _message("Definition")
    json_format.ParseDict(one_step("rpc-handler", "rpc-job"), definition)
    answer = rpc.handler(
        _rpc_event("RegisterDefinition", definition.SerializeToString()), FakeContext()
    )
    assert answer["statusCode"] == 200 and answer["isBase64Encoded"] is True
    assert answer["headers"]["Content-Type"] == "application/proto"
    registered = _message("Definition").FromString(base64.b64decode(answer["body"]))
    assert (registered.name, registered.version) == ("rpc-handler", 1)

    start = _message("StartInstanceRequest", definition_name="rpc-handler")
    start.input.update({"n": 7})
    answer = rpc.handler(_rpc_event("StartInstance", start.SerializeToString()), FakeContext())
    instance = convert.to_json(_message("Instance").FromString(base64.b64decode(answer["body"])))
    assert instance["status"] == "RUNNING" and instance["input"] == {"n": 7}


def test_errors_are_connect_json_never_base64(lambda_env: None) -> None:
    rpc = load_function("rpc")
    answer = rpc.handler(
        _rpc_event("GetInstance", _message("GetInstanceRequest", id="x").SerializeToString()),
        FakeContext(),
    )
    assert answer["statusCode"] == 404 and answer["isBase64Encoded"] is False
    assert '"code":"not_found"' in answer["body"]
    answer = rpc.handler(_rpc_event("PollJobs", b"\x0a\xff\xff"), FakeContext())
    assert answer["statusCode"] == 400 and '"code":"invalid_argument"' in answer["body"]
    event = _rpc_event("PollJobs", b"")
    event["body"] = "not base64!"
    assert rpc.handler(event, FakeContext())["statusCode"] == 400


def test_the_workers_rpcs_are_answered_by_the_views_without_json(
    lambda_env: None, monkeypatch: Any
) -> None:
    """Poll, heartbeat, complete, fail and complete-batch (``methods.DIRECT``) never reach the
    REST handler of their twin, nor make JSON of their answer: the view answers them directly."""
    rpc = load_function("rpc")
    definition = _message("Definition")
    json_format.ParseDict(one_step("rpc-direct", "rpc-direct-job"), definition)
    rpc.handler(_rpc_event("RegisterDefinition", definition.SerializeToString()), FakeContext())
    for _ in range(3):
        start = _message("StartInstanceRequest", definition_name="rpc-direct")
        rpc.handler(_rpc_event("StartInstance", start.SerializeToString()), FakeContext())

    def no_rest(event: dict[str, Any], context: Any) -> dict[str, Any]:
        raise AssertionError(f"{event.get('resource')} went through the REST handler")

    def no_json(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the answer was made from JSON")

    monkeypatch.setattr(rpc.function._twin("jobs"), "handler", no_rest)
    monkeypatch.setattr(convert, "from_json", no_json)

    def send(name: str, response: str, **fields: Any) -> Any:
        answer = rpc.handler(
            _rpc_event(name, _message(f"{name}Request", **fields).SerializeToString()),
            FakeContext(),
        )
        assert answer["statusCode"] == 200, answer["body"]
        return _message(response).FromString(base64.b64decode(answer["body"]))

    polled = send(
        "PollJobs", "PollJobsResponse", worker_id="w", job_types=["rpc-direct-job"], max_jobs=3
    )
    first, second, third = (j.id for j in polled.jobs)
    assert all(j.HasField("input") and j.HasField("lock_expires_at") for j in polled.jobs)
    beat = send("Heartbeat", "HeartbeatResponse", job_id=first, worker_id="w", attempt=1)
    assert beat.job_id == first and beat.HasField("lock_expires_at")
    done = send("CompleteJob", "CompleteJobResponse", job_id=first, worker_id="w")
    assert (done.status, done.applied) == ("COMPLETED", True)
    failed = send(
        "FailJob",
        "FailJobResponse",
        job_id=second,
        worker_id="w",
        error_message="x",
        retryable=False,
    )
    assert (failed.status, failed.applied) == ("FAILED", True)
    batch = _message("CompleteBatchRequest")
    batch.results.add(job_id=third, worker_id="w", attempt=1).variables_to_set.update({"n": 2})
    batch.results.add(job_id=third, worker_id="w").variables_to_set.update({"bad": "\x00"})
    answer = rpc.handler(_rpc_event("CompleteBatch", batch.SerializeToString()), FakeContext())
    outcomes = _message("CompleteBatchResponse").FromString(base64.b64decode(answer["body"]))
    assert [r.outcome for r in outcomes.results] == ["APPLIED", "INVALID"]
    assert "NUL" in outcomes.results[1].error


def test_a_number_json_cannot_hold_is_invalid_argument(lambda_env: None) -> None:
    """Binary protobuf carries NaN and infinities in a Struct; JSON, and so REST, has no such
    number: the RPC is refused as REST refuses NaN, never stored as the string "Infinity"."""
    rpc = load_function("rpc")
    request = _message("CompleteJobRequest", job_id=str(uuid.UUID(int=7)), worker_id="w")
    request.variables_to_set.update({"n": math.inf})
    answer = rpc.handler(_rpc_event("CompleteJob", request.SerializeToString()), FakeContext())
    assert answer["statusCode"] == 400 and '"code":"invalid_argument"' in answer["body"]
    assert "not a JSON number" in answer["body"]


def test_a_long_poll_answered_directly_asks_whether_its_client_left(lambda_env: None) -> None:
    """The runtime's hang-up probe reaches the view through the direct path as through REST: a
    waiting PollJobs whose client left ends empty."""
    rpc = load_function("rpc")
    asked: list[bool] = []

    class Context(FakeContext):
        def client_gone(self) -> bool:
            asked.append(True)
            return True

    request = _message(
        "PollJobsRequest", worker_id="w", job_types=["rpc-nobody-pushes"], wait_seconds=20
    )
    answer = rpc.handler(_rpc_event("PollJobs", request.SerializeToString()), Context())
    assert answer["statusCode"] == 200, answer["body"]
    assert not _message("PollJobsResponse").FromString(base64.b64decode(answer["body"])).jobs
    assert asked
