"""Real-shaped API Gateway events (tests/events/) and a Lambda context to call handlers with."""

from __future__ import annotations

import copy
import importlib.util
import json
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import quote

ROOT = Path(__file__).resolve().parents[2]
EVENTS = ROOT / "tests" / "events"
_loaded: dict[str, ModuleType] = {}


def load_function(name: str) -> ModuleType:
    """Import ``functions/<name>/handler.py`` the way Lambda would (by file, not package)."""
    if name not in _loaded:
        spec = importlib.util.spec_from_file_location(
            f"baton_function_{name}", ROOT / "functions" / name / "handler.py"
        )
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        _loaded[name] = module
    return _loaded[name]


@dataclass
class FakeContext:
    function_name: str = "baton-test"
    function_version: str = "$LATEST"
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:baton-test"
    memory_limit_in_mb: int = 512
    aws_request_id: str = "6f1d2a3b-0000-4000-8000-000000000001"
    log_group_name: str = "/aws/lambda/baton-test"
    log_stream_name: str = "2026/11/22/[$LATEST]abcdef"

    def get_remaining_time_in_millis(self) -> int:
        return 29_000


def api_event(
    method: str,
    resource: str,
    path_params: dict[str, str] | None = None,
    body: Any = None,
    query: dict[str, str] | None = None,
    raw_body: str | None = None,
) -> dict[str, Any]:
    event: dict[str, Any] = copy.deepcopy(json.loads((EVENTS / "rest_api_proxy.json").read_text()))
    path = resource
    for k, v in (path_params or {}).items():
        # A REST API's ``path`` stays percent-encoded; only pathParameters arrive decoded.
        path = path.replace("{" + k + "}", quote(v, safe=""))
    event.update(
        resource=resource,
        path=path,
        httpMethod=method,
        pathParameters=path_params,
        queryStringParameters=query,
        multiValueQueryStringParameters={k: [v] for k, v in query.items()} if query else None,
        body=raw_body if raw_body is not None else (None if body is None else json.dumps(body)),
    )
    ctx = event["requestContext"]
    ctx.update(
        httpMethod=method, resourcePath=resource, path=f"/prod{path}", requestId=str(uuid.uuid4())
    )
    return event


Invoke = Callable[..., tuple[int, dict[str, str], Any]]
