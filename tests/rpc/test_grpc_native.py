"""Native gRPC on ``baton dev``'s gRPC port: an unmodified Python gRPC client (what grpcurl does)
runs a workflow's job, is refused without a key, reads errors as gRPC statuses with the problem
in the trailing metadata, and finds the service through server reflection."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from baton.rpc import convert, schema
from google.protobuf import json_format

from tests.support.servers import free_port

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def grpc_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from tests.support.servers import LocalServer

    base = tmp_path_factory.mktemp("grpc-server")
    port = free_port()
    server = LocalServer(
        data_dir=base / "data",
        functions_dir=None,
        log_path=base / "server.log",
        extra_env={"BATON_GRPC_PORT": str(port)},
    ).start()
    server.grpc_port = port  # type: ignore[attr-defined]
    yield server
    assert server.stop() == 0, server.output()


@pytest.fixture
def channel(grpc_server: Any) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(f"127.0.0.1:{grpc_server.grpc_port}") as ch:
        grpc.channel_ready_future(ch).result(timeout=10)
        yield ch


def _stub(channel: grpc.Channel, rpc: str) -> Any:
    method = schema.method(rpc)
    assert method is not None
    request = schema.message_class(method.input_type.full_name)
    response = schema.message_class(method.output_type.full_name)
    call = channel.unary_unary(
        f"/{schema.SERVICE_NAME}/{rpc}",
        request_serializer=request.SerializeToString,
        response_deserializer=response.FromString,
    )

    def invoke(body: dict[str, Any], key: str | None) -> Any:
        message = json_format.ParseDict(body, request())
        metadata = [("x-api-key", key)] if key else None
        return convert.to_json(call(message, metadata=metadata, timeout=30))

    return invoke


def test_a_job_runs_over_grpc(channel: grpc.Channel, grpc_server: Any) -> None:
    key = grpc_server.api_key
    definition = {"name": "grpc-wf", "steps": [{"id": "a", "type": "SERVICE_TASK", "jobType": "g"}]}
    assert _stub(channel, "RegisterDefinition")(definition, key)["version"] == 1
    started = _stub(channel, "StartInstance")({"definitionName": "grpc-wf", "input": {"n": 2}}, key)
    polled = _stub(channel, "PollJobs")(
        {"workerId": "w", "jobTypes": ["g"], "maxJobs": 5, "waitSeconds": 5}, key
    )
    (job,) = polled["jobs"]
    assert job["instanceId"] == started["id"]
    done = _stub(channel, "CompleteJob")(
        {
            "jobId": job["id"],
            "workerId": "w",
            "attempt": job["attempt"],
            "variablesToSet": {"r": 4},
        },
        key,
    )
    assert done["applied"] is True
    instance = _stub(channel, "GetInstance")({"id": started["id"]}, key)
    assert instance["status"] == "COMPLETED" and instance["variables"]["r"] == 4


def test_no_key_is_unauthenticated(channel: grpc.Channel) -> None:
    with pytest.raises(grpc.RpcError) as e:
        _stub(channel, "GetConfig")({}, None)
    assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
    with pytest.raises(grpc.RpcError) as e:
        _stub(channel, "GetConfig")({}, "wrong")
    assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_errors_are_statuses_with_the_problem_in_the_trailers(
    channel: grpc.Channel, grpc_server: Any
) -> None:
    with pytest.raises(grpc.RpcError) as e:
        _stub(channel, "PollJobs")(
            {"workerId": "w", "jobTypes": ["g"], "maxJobs": 500}, grpc_server.api_key
        )
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "maxJobs" in e.value.details()
    (raw,) = [v for k, v in e.value.trailing_metadata() if k == "baton-problem-bin"]
    problem = schema.message_class("workflow.v1.Problem").FromString(raw)
    assert problem.status == 422 and problem.errors[0].path == "maxJobs"


def test_malformed_protobuf_is_refused_not_a_crash(channel: grpc.Channel, grpc_server: Any) -> None:
    raw = channel.unary_unary(f"/{schema.SERVICE_NAME}/PollJobs")
    with pytest.raises(grpc.RpcError) as e:
        raw(b"\x0a\xff\xff\xff", metadata=[("x-api-key", grpc_server.api_key)], timeout=10)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "not a binary workflow.v1.PollJobsRequest" in (e.value.details() or "")


def test_unknown_method_is_unimplemented(channel: grpc.Channel, grpc_server: Any) -> None:
    raw = channel.unary_unary(f"/{schema.SERVICE_NAME}/LaunchRockets")
    with pytest.raises(grpc.RpcError) as e:
        raw(b"", metadata=[("x-api-key", grpc_server.api_key)], timeout=10)
    assert e.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_server_reflection_lists_the_service(channel: grpc.Channel) -> None:
    from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

    stub = reflection_pb2_grpc.ServerReflectionStub(channel)
    request = reflection_pb2.ServerReflectionRequest(list_services="")
    (answer,) = list(stub.ServerReflectionInfo(iter([request])))
    names = {s.name for s in answer.list_services_response.service}
    assert schema.SERVICE_NAME in names


def test_grpc_port_zero_serves_no_grpc(tmp_path: Path, start_server: Any) -> None:
    # The test servers run with BATON_GRPC_PORT=0 (tests/support/servers.py): their banner says
    # Connect only.
    server = start_server(data_dir=tmp_path / "data", functions_dir=None)
    assert "gRPC on" not in server.log() and "Connect at" in server.log()
