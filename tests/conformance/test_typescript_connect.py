"""The conformance scenarios (scenarios.py) with the TypeScript SDK's worker on the Connect protocol
(BATON_PROTOCOL=connect: every call as its RPC, binary protobuf): the same runner behaviour as
over REST. And the SDK's table of REST operations and their RPCs is the engine's."""

import json
import re
from pathlib import Path

from baton.rpc import methods

from tests.conformance.scenarios import (  # noqa: F401 (collected by pytest)
    conformance,
    test_a_killed_worker_loses_no_job,
    test_every_handler_ends_its_instance_as_the_table_says,
    test_sigterm_finishes_the_running_handler_and_claims_nothing_more,
)

LANGUAGE = "typescript"
PROTOCOL = "connect"

CODEC = Path(__file__).resolve().parents[2] / "sdk/typescript/src/connect.ts"


def test_the_typescript_sdk_maps_each_rest_operation_to_the_same_rpc() -> None:
    source = CODEC.read_text()
    table = source[source.index("const TWINS") :]
    table = table[table.index("= [") + 2 : table.index("\n];") + 3]
    rows = [json.loads(line.strip().rstrip(",")) for line in table.splitlines()[1:-1]]
    assert rows, f"no TWINS table found in {CODEC}"
    sdk = {(row[0], row[1]): (row[2], row[3] if len(row) > 3 else None) for row in rows}
    server = {(t.method, p): (t.rpc, t.body) for t in methods.TWINS for p in t.paths}
    assert sdk == server
    assert re.search(r'SERVICE = "workflow\.v1\.WorkflowEngine"', source)
