"""The proto stays the single source: every REST operation of the route table has its RPC twin
in the WorkflowEngine service, with the same message shapes, and every RPC routes somewhere."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from baton.routes import ROUTES, SERVED_ROUTES
from baton.rpc import bridge, convert, methods, schema
from baton.rpc.connect import CODE_STATUS, ConnectError, code_for
from google.protobuf.descriptor import FieldDescriptor

from tests.support.proto_contract import RESPONSES

ROOT = Path(__file__).resolve().parents[2]
PROTO = ROOT / "proto" / "workflow" / "v1" / "engine.proto"
FUNCTIONS = ROOT / "functions"


def _proto_comments() -> dict[str, tuple[str, set[str]]]:
    """Each rpc line's REST twin comment: method and paths (``[...]`` optional segments)."""
    out = {}
    for line in PROTO.read_text().splitlines():
        m = re.match(r"\s*rpc (\w+)\(.*//\s*(GET|POST|PUT|DELETE) (\S+)", line)
        if m:
            path = m.group(3)
            paths = {re.sub(r"\[.*?\]", "", path), path.replace("[", "").replace("]", "")}
            out[m.group(1)] = (m.group(2), paths)
    return out


def test_the_descriptor_sets_are_compiled_from_the_proto() -> None:
    from proto.compile import TARGETS, compile_descriptor_set

    compiled = compile_descriptor_set()
    for target in TARGETS:
        assert target.read_bytes() == compiled, f"{target} is stale: run make proto"


def test_every_rest_operation_has_its_rpc_twin() -> None:
    twins = {(t.method, p) for t in methods.TWINS for p in t.paths}
    assert {(r.method, r.path) for r in ROUTES} <= twins


def test_every_rpc_of_the_service_has_one_rest_twin_as_its_comment_says() -> None:
    service = schema.service()
    assert set(methods.BY_RPC) == set(service.methods_by_name)
    assert len(methods.BY_RPC) == len(methods.TWINS)
    comments = _proto_comments()
    for twin in methods.TWINS:
        method, paths = comments[twin.rpc]
        assert (twin.method, set(twin.paths)) == (method, paths), twin.rpc


def test_every_rpc_routes_to_a_function_that_serves_its_operation() -> None:
    routed = {(r.method, r.path): r.function for r in ROUTES}
    unrouted = set()
    for twin in methods.TWINS:
        for path in twin.paths:
            function = routed.get((twin.method, path))
            if function is None:
                unrouted.add(twin.rpc)
                continue
            assert (FUNCTIONS / function / "handler.py").is_file()
    assert not unrouted
    assert [r.function for r in SERVED_ROUTES if r.path.startswith("/rpc/")] == ["rpc"]


@pytest.mark.parametrize("twin", methods.TWINS, ids=lambda t: t.rpc)
def test_rpc_messages_have_the_rest_shapes(twin: methods.RestTwin) -> None:
    method = schema.service().methods_by_name[twin.rpc]
    for path in twin.paths:
        if (twin.method, path) in RESPONSES:  # the response message REST answers with
            expected = RESPONSES[(twin.method, path)]
            assert method.output_type.full_name.endswith("." + expected.split(".")[-1])
    request = method.input_type
    fields = {f.json_name: f for f in request.fields}
    for path in twin.paths:
        for param in twin.params(path):  # path parameters come from the request's fields
            assert param in fields, f"{twin.rpc}: {param}"
    if twin.body is not None:
        assert fields[twin.body].type == FieldDescriptor.TYPE_MESSAGE
    if twin.method in ("GET", "DELETE"):  # the rest are query parameters: scalars only
        params = {p for path in twin.paths for p in twin.params(path)}
        for name, field in fields.items():
            if name not in params and field.message_type is not None:
                assert field.message_type.full_name == "google.protobuf.Timestamp", name


def test_a_request_becomes_its_rest_call() -> None:
    get = methods.BY_RPC["GetDefinition"]
    assert methods.rest_call(get, {"name": "a b"}).path == "/v1/definitions/a%20b"
    call = methods.rest_call(get, {"name": "a", "version": 2})
    assert (call.template, call.path_parameters) == (
        "/v1/definitions/{name}/versions/{version}",
        {"name": "a", "version": "2"},
    )
    put = methods.rest_call(methods.BY_RPC["PutTaskDef"], {"name": "t", "taskDef": {"x": 1}})
    assert (put.path, put.body) == ("/v1/taskdefs/t", {"x": 1})
    steps = methods.rest_call(methods.BY_RPC["GetInstance"], {"id": "i/1", "includeSteps": False})
    assert (steps.path, steps.query, steps.body) == (
        "/v1/instances/i%2F1",
        {"includeSteps": "false"},
        None,
    )
    with pytest.raises(methods.MissingPathField, match="id"):
        methods.rest_call(methods.BY_RPC["GetInstance"], {})


def test_messages_become_rest_json_with_numbers_kept_whole() -> None:
    Instance = schema.message_class("workflow.v1.Instance")
    msg = Instance(id="i", version=7)
    msg.input.update({"n": 3, "f": 2.5, "big": 2.0**60, "list": [1, {"k": None}]})
    value = convert.to_json(msg)
    assert value["version"] == 7 and value["input"]["n"] == 3
    assert isinstance(value["input"]["n"], int) and value["input"]["f"] == 2.5
    assert isinstance(value["input"]["big"], float)  # past 2^53 a double is not exact
    assert value["input"]["list"] == [1, {"k": None}]
    assert convert.to_json(msg, int64_as_string=True)["version"] == "7"
    back = convert.from_json(Instance, {**value, "fieldFromANewerServer": 1})
    assert back == msg


def test_problem_types_and_statuses_map_to_connect_codes() -> None:
    base = "https://baton.dev/problems/"
    assert code_for(422, base + "validation-failed") == "invalid_argument"
    assert code_for(404, base + "not-found") == "not_found"
    assert code_for(409, base + "conflict") == "failed_precondition"
    assert code_for(429, base + "throttled") == "resource_exhausted"
    assert code_for(503, base + "unavailable") == "unavailable"
    assert code_for(401) == "unauthenticated"
    assert code_for(504) == "deadline_exceeded"
    assert code_for(418) == "unknown" and code_for(599) == "internal"
    assert set(CODE_STATUS) >= {code_for(s) for s in range(400, 600)}


def test_the_python_sdk_maps_each_rest_operation_to_the_same_rpc() -> None:
    from baton_worker.connect import _TWINS

    sdk = {(m, t): (rpc, body) for m, t, rpc, body in _TWINS}
    server = {(t.method, p): (t.rpc, t.body) for t in methods.TWINS for p in t.paths}
    assert sdk == server


def test_a_rest_answer_the_response_message_cannot_hold_is_a_plain_failed_precondition() -> None:
    """Should REST ever answer what the proto has no shape for, the call did what it asked: the
    RPC says so and names the REST read, rather than an internal error."""
    rpc = bridge.find("GetDefinition")
    assert rpc is not None
    with pytest.raises(ConnectError) as raised:
        bridge.answer(rpc, 200, {}, b'{"name": "d", "steps": "not a list"}')
    assert raised.value.code == "failed_precondition"
    assert "read it over REST: GET /v1/definitions/" in raised.value.message


def test_the_python_sdk_reads_a_steps_legacy_fields_as_their_new_ones_and_never_shows_them() -> (
    None
):
    """What the engine answers (both fields where the value fits), and what an engine older than
    the widened fields answers (the old ones alone), read as the same REST JSON over Connect."""
    from baton_worker.connect import ConnectCodec, RpcRequest

    codec = ConnectCodec()
    step = schema.message_class("workflow.v1.Step")
    today = convert.from_view(
        step, {"id": "a", "input": {"n": 1}, "optional": True, "definitionVersion": 2}
    )
    older = step(id="a", legacy_optional=True, legacy_definition_version=2)
    older.legacy_input.update({"n": 1})
    expected = {"id": "a", "input": {"n": 1}, "optional": True, "definitionVersion": 2}
    request = RpcRequest("GetDefinition", "", b"", "workflow.v1.Step")
    for message in (today, older):
        read = codec.response(request, message.SerializeToString())
        assert {k: v for k, v in read.items() if v != []} == expected
