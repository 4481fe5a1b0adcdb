"""The rpc function fed API Gateway's events as they arrive on AWS: /rpc/{proxy+} with the
method in ``pathParameters.proxy``, a binary body base64-encoded (application/proto is a binary
media type), the answer base64 for API Gateway to turn back into bytes."""

from __future__ import annotations

import base64
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
