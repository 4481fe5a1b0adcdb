"""The Connect function in the CDK app: its asset carries the REST functions it answers with, the
API treats protobuf bodies as binary, and /rpc/{proxy+} asks for the API's credentials."""

from __future__ import annotations

from pathlib import Path

import pytest
from baton.routes import ROUTES
from synth_support import Synth

pytestmark = [pytest.mark.infra, pytest.mark.xdist_group("infra")]

FUNCTIONS = Path(__file__).resolve().parents[2] / "functions"


def test_rpc_asset_holds_its_handler_and_every_rest_function() -> None:
    from baton_infra.functions import rpc_asset_excludes

    excluded = set(rpc_asset_excludes())
    kept = {p.name for p in FUNCTIONS.iterdir() if p.is_dir() and p.name not in excluded}
    kept.discard("__pycache__")
    assert kept == {"rpc", *(r.function for r in ROUTES)}
    assert {"_lib", "ui", "migrate", "conductor"} <= excluded  # the layer has _lib


def test_api_treats_protobuf_as_binary(any_synth: Synth) -> None:
    (api,) = any_synth.props("AWS::ApiGateway::RestApi")
    assert "application/proto" in api["BinaryMediaTypes"]


def test_rpc_route_needs_the_api_credentials(any_synth: Synth) -> None:
    resources = any_synth.of_type("AWS::ApiGateway::Resource")
    proxy = [
        logical_id
        for logical_id, r in resources.items()
        if r["Properties"]["PathPart"] == "{proxy+}"
        and any(
            p["Properties"]["PathPart"] == "rpc" and r["Properties"]["ParentId"] == {"Ref": parent}
            for parent, p in resources.items()
        )
    ]
    assert len(proxy) == 1
    methods = [
        m["Properties"]
        for m in any_synth.of_type("AWS::ApiGateway::Method").values()
        if m["Properties"]["ResourceId"] == {"Ref": proxy[0]}
    ]
    assert {m["HttpMethod"] for m in methods} == {"POST", "ANY"}
    for m in methods:
        assert m.get("ApiKeyRequired") or m["AuthorizationType"] == "AWS_IAM"
