"""The conformance scenarios (scenarios.py) with the Java SDK's worker on the Connect protocol
(BATON_PROTOCOL=connect: every call as its RPC, binary protobuf): the same runner behaviour as
over REST. And the Java codec's table of REST operations and their RPCs against the engine's."""

import re
from pathlib import Path

from baton.rpc import methods

from tests.conformance.scenarios import (  # noqa: F401 (collected by pytest)
    conformance,
    test_a_killed_worker_loses_no_job,
    test_every_handler_ends_its_instance_as_the_table_says,
    test_sigterm_finishes_the_running_handler_and_claims_nothing_more,
)

LANGUAGE = "java"
PROTOCOL = "connect"

_CODEC = Path(__file__).parents[2] / "sdk/java/src/main/java/dev/baton/worker/Connect.java"
_TWIN = re.compile(r'new Twin\("(\w+)", "([^"]+)", "(\w+)", (?:null|"(\w+)")\)')


def test_the_java_sdk_maps_each_rest_operation_to_the_same_rpc() -> None:
    sdk = {(m, t): (rpc, body or None) for m, t, rpc, body in _TWIN.findall(_CODEC.read_text())}
    server = {(t.method, p): (t.rpc, t.body) for t in methods.TWINS for p in t.paths}
    assert sdk == server
