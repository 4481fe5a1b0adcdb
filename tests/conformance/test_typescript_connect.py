"""The conformance scenarios (scenarios.py) with the TypeScript SDK's worker on the Connect protocol
(BATON_PROTOCOL=connect: every call as its RPC, binary protobuf): the same runner behaviour as
over REST. And the SDK's table of REST operations and their RPCs is the engine's."""

import json
import os
import re
import subprocess
import uuid
from pathlib import Path
from typing import Any

from baton.rpc import methods

from tests.conformance.scenarios import (  # noqa: F401 (collected by pytest)
    conformance,
    test_a_killed_worker_loses_no_job,
    test_every_handler_ends_its_instance_as_the_table_says,
    test_sigterm_finishes_the_running_handler_and_claims_nothing_more,
)

LANGUAGE = "typescript"
PROTOCOL = "connect"

ROOT = Path(__file__).resolve().parents[2]
CODEC = ROOT / "sdk/typescript/src/connect.ts"
WORKER_RUN = ROOT / "tests/conformance/workers/typescript/run"
CALLS = ROOT / "tests/conformance/workers/typescript/calls.mjs"


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


def _calls(baton_server: Any, protocol: str, tag: str) -> dict[str, Any]:
    run = subprocess.run(  # noqa: PLW1510 (the code is checked below)
        ["node", str(CALLS)],
        cwd=ROOT,
        env={
            **os.environ,
            "BATON_URL": baton_server.base_url,
            "BATON_API_KEY": baton_server.api_key or "",
            "BATON_PROTOCOL": protocol,
            "CALLS_TAG": tag,
        },
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    answer: dict[str, Any] = json.loads(run.stdout.strip().splitlines()[-1])
    return answer


def _without_defaults(value: Any) -> Any:
    """``value`` without empty lists and zeros: binary protobuf cannot tell a list or number REST
    leaves out from an empty or zero one, and gives them (as numbers and lists are given at their
    defaults over Connect); the same for a reader."""
    if isinstance(value, dict):
        return {k: _without_defaults(v) for k, v in value.items() if not _default(v)}
    if isinstance(value, list):
        return [_without_defaults(v) for v in value]
    return value


def _default(value: Any) -> bool:
    return value == [] or (type(value) in (int, float) and value == 0)


def test_the_client_answers_the_same_over_connect_as_over_rest(baton_server: Any) -> None:
    """Each client call the runner and the API users make, on the real server over both wires:
    the same JSON shapes (64-bit integers and whole numbers as numbers, defaults given, empty
    texts left out) and the same errors (status, type, field paths)."""
    build = subprocess.run(  # noqa: PLW1510 (the code is checked below)
        ["bash", "-c", f"{WORKER_RUN} --build-only"], cwd=ROOT, capture_output=True, text=True
    )
    assert build.returncode == 0, build.stderr
    tag = uuid.uuid4().hex[:8]
    rest = _calls(baton_server, "rest", f"r{tag}")
    connect = _calls(baton_server, "connect", f"c{tag}")
    assert (rest.pop("protocol"), connect.pop("protocol")) == ("rest", "connect")
    # A wrong key is refused before any handler, as API Gateway refuses it: over Connect as a
    # bare Connect error, with no problem type to carry.
    assert connect["wrongKey"].pop("type", None) is None
    rest["wrongKey"].pop("type")
    assert _without_defaults(connect) == _without_defaults(rest)
    assert connect["missing"]["status"] == 404
    assert connect["invalid"]["status"] == 422 and connect["invalid"]["errors"]
    assert connect["wrongKey"]["status"] in (401, 403)
    assert connect["batch"] == ["RUNNING"] and connect["completedBatch"] == [
        ["APPLIED", "COMPLETED"]
    ]
    assert connect["started"]["input"] == {"n": 3, "f": 2.5, "s": "x", "list": [1, {"a": None}]}
    assert connect["queue"]["pending"] == 1
    assert connect["failed"] == ["FAILED", True, "undefined"]
    assert connect["cancelled"]["status"] == 409  # the failure ended the instance
    assert connect["schedule"]["spec"]["cron"] == ["0 3 * * *"] and connect["unpaused"] is False
    assert connect["openapi"] == "3." and connect["ack"] and connect["peek"] == [["t", 2]]
