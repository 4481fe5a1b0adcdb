"""No input produces a 500: arbitrary JSON bodies, path values and query strings on every route."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from baton.routes import ROUTES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.lambda_events import Invoke

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=12,
)
# Bodies shaped like the real ones (right keys, wrong or odd values) reach deeper than noise.
keys = st.sampled_from(
    [
        "workerId",
        "jobTypes",
        "maxJobs",
        "jobId",
        "variablesToSet",
        "errorMessage",
        "retryable",
        "definitionName",
        "definitionVersion",
        "definition",
        "input",
        "correlationId",
        "idempotencyKey",
        "name",
        "steps",
        "title",
        "body",
        "priority",
        "consumerId",
        "receipt",
        "payload",
        "reason",
        "version",
        "trigger",
        "visibilityTimeoutSecs",
        "maxTasks",
    ]
)
bodies = st.one_of(json_values, st.dictionaries(keys, json_values, max_size=6))
path_values = st.one_of(
    st.text(min_size=1, max_size=30).filter(lambda s: "/" not in s),
    st.just("00000000-0000-0000-0000-000000000000"),
)
SETTINGS = settings(
    max_examples=int(os.environ.get("BATON_FUZZ_EXAMPLES", "20")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


@pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisDeprecationWarning")
@pytest.mark.parametrize("route", ROUTES, ids=[f"{r.method} {r.path}" for r in ROUTES])
@SETTINGS
@given(body=bodies, value=path_values, raw=st.booleans())
def test_no_input_produces_a_500(
    invoke: Invoke, route: Any, body: Any, value: str, raw: bool
) -> None:
    params = {p: value for p in _params(route.path)} or None
    kw: dict[str, Any] = {"path_params": params}
    if route.method in ("POST", "PUT"):
        kw["raw_body"] = json.dumps(body)[:-1] if raw and body is not None else json.dumps(body)
    else:
        kw["query"] = {"limit": str(value)[:5], "status": str(value)[:10], "pageToken": str(value)}
    status, headers, payload = invoke(route.function, route.method, route.path, **kw)
    assert status < 500, payload
    if status >= 400:
        assert headers["content-type"] == "application/problem+json"


def _params(path: str) -> list[str]:
    import re

    return re.findall(r"{(\w+)}", path)
