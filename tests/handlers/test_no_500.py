"""No input produces a 500: hostile JSON bodies, path values and query strings on every route, fed
in process to the handlers (fast; ``BATON_FUZZ_EXAMPLES`` runs the property test longer).

The generators aim at what breaks stores and parsers rather than at random noise: NUL characters
and lone UTF-16 surrogates in strings and keys, integers past int32 and int64, integral and
fractional floats where integers belong, NaN, Infinity and 1e400, malformed page tokens, deep
nesting, and bodies shaped like the real requests (the right keys, against a seeded instance, job
and queue task) with one value made hostile, so the hostile value reaches the database.
"""

from __future__ import annotations

import base64
import json
import os
import re
from dataclasses import dataclass
from typing import Any

import pytest
from baton.routes import ROUTES, Route
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tests.support.lambda_events import Invoke

NUL = "\x00"
HOSTILE_CHARS = (NUL, "\ud835", "\udc00", "\udfff", "\ufffe", "\u202e", "\\", '"', "'", "%")
INT_EDGES = (2**31 - 1, 2**31, -(2**31) - 1, 3_000_000_000, 2**63 - 1, 2**63, -(2**63) - 1, 10**20)


@dataclass(frozen=True)
class Raw:
    """A JSON text that ``json.dumps`` cannot produce: 1e400, or arrays nested ``depth`` deep."""

    text: str


TOO_BIG = Raw("1e400")

# Strings a store refuses or mangles: NUL (text columns and jsonb refuse it), lone surrogates (no
# UTF-8 encoding exists), and a few characters that trip quoting.
hostile_strings = st.one_of(
    st.sampled_from([NUL, "a\x00b", "\ud835", "x\udc00", "\udfff\ud800"]),
    st.text(st.sampled_from(HOSTILE_CHARS) | st.characters(), min_size=1, max_size=12),
)
any_text = st.one_of(hostile_strings, st.text(max_size=20))
hostile_numbers = st.one_of(
    st.sampled_from(INT_EDGES),
    st.integers(),
    st.integers(-(10**6), 10**6).map(float),  # 881.0 where an integer belongs
    st.floats(),  # fractions, NaN, +-Infinity
    st.just(TOO_BIG),
)
deep = st.integers(min_value=50, max_value=20_000).map(lambda n: Raw("[" * n + "]" * n))
hostile_scalars = st.one_of(hostile_strings, hostile_numbers)
json_values = st.one_of(
    hostile_scalars,
    hostile_scalars.map(lambda v: {"k": v}),
    hostile_strings.map(lambda k: {k: 1}),
    st.recursive(
        st.one_of(st.none(), st.booleans(), hostile_scalars, any_text),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(any_text, inner, max_size=4),
        max_leaves=12,
    ),
    deep,
)


def as_url_decoded(text: str) -> str:
    """What a path or query value can be after URL decoding: a lone surrogate has no UTF-8 bytes
    to percent-encode, so its bytes arrive as replacement characters (NUL stays NUL)."""
    return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")


url_text = any_text.map(as_url_decoded)


def garbage_token(parts: list[bytes]) -> str:
    return base64.urlsafe_b64encode(b"|".join(parts)).decode()


page_tokens = st.one_of(
    url_text,
    st.lists(st.binary(max_size=20), min_size=1, max_size=3).map(garbage_token),
    st.sampled_from(["!!!", "%00", "====", garbage_token([b"2024-01-01T00:00:00Z", b"x" * 40])]),
)
query_numbers = st.one_of(hostile_numbers.map(lambda n: n.text if isinstance(n, Raw) else str(n)))


def encode(value: Any) -> str:
    """JSON text of ``value``; NUL and lone surrogates are written as \\u escapes, as a client
    would send them (the body is valid UTF-8, the decoded string is not storable)."""
    if isinstance(value, Raw):
        return value.text
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)}: {encode(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(encode(v) for v in value) + "]"
    return json.dumps(value)


@dataclass
class Seeded:
    """A definition of each step kind with an instance waiting on it, a job held by ``w`` for an
    hour, a task definition, and a queue task dequeued for an hour."""

    ids: dict[str, str]

    def base_body(self, route: Route) -> dict[str, Any]:
        """A valid request body for ``route`` against the seeded state (empty if it has none)."""
        i = self.ids
        job = {"jobId": i["job"], "workerId": "w"}
        return {
            ("POST", "/v1/definitions"): {
                **_definition(i["defn"] + "-v", i["job_type"], input={"k": "v"}, retryCount=1),
                "description": "d",
                "outputParameters": {"o": "${only.output.x}"},
                "timeoutSeconds": 60,
            },
            ("PUT", "/v1/taskdefs/{name}"): {
                "retryCount": 2,
                "description": "d",
                "ownerEmail": "o@example.com",
                "inputTemplate": {"k": "v"},
                "concurrentExecLimit": 5,
                "rateLimitPerFrequency": 5,
                "rateLimitFrequencyInSeconds": 1,
            },
            ("POST", "/v1/instances"): {
                "definitionName": i["defn"],
                "definitionVersion": 1,
                "input": {"a": 1},
                "correlationId": "c",
                "idempotencyKey": "k",
            },
            ("POST", "/v1/instances/{id}/cancel"): {"reason": "r"},
            ("POST", "/v1/instances/{id}/user-tasks/{stepId}/complete"): {
                "variablesToSet": {"a": 1}
            },
            ("POST", "/v1/instances/{id}/signals/{stepId}"): {"payload": {"a": 1}},
            ("POST", "/v1/jobs/poll"): {
                "workerId": "w2",
                "jobTypes": [i["job_type"]],
                "maxJobs": 1,
            },
            ("POST", "/v1/jobs/complete"): {**job, "variablesToSet": {"a": 1}},
            ("POST", "/v1/jobs/fail"): {**job, "errorMessage": "e", "nextRetryDelaySeconds": 1},
            ("POST", "/v1/jobs/heartbeat"): job,
            # Another worker's results (answered CONFLICT), so the seeded job stays held.
            ("POST", "/v1/jobs/complete-batch"): {
                "results": [
                    {"jobId": i["job"], "workerId": "w2", "attempt": 1, "variablesToSet": {"a": 1}},
                    {
                        "jobId": i["job"],
                        "workerId": "w2",
                        "failure": {"errorMessage": "e", "nextRetryDelaySeconds": 1},
                    },
                ]
            },
            ("POST", "/v1/queues/{name}/push"): {"title": "t", "body": "b", "priority": 1},
            ("POST", "/v1/queues/{name}/dequeue"): {"consumerId": "c", "maxTasks": 1},
            ("POST", "/v1/queues/{name}/tasks/{taskId}/ack"): {"receipt": i["receipt"]},
            ("POST", "/v1/queues/{name}/tasks/{taskId}/nack"): {
                "receipt": i["receipt"],
                "error": "e",
            },
            ("POST", "/v1/queues/{name}/redrive"): {"taskIds": [i["task"]]},
        }.get((route.method, route.path), {})

    def path_values(self, route: Route) -> dict[str, str]:
        i = self.ids
        by_route = {
            "/v1/instances/{id}/user-tasks/{stepId}/complete": {
                "id": i["user"],
                "stepId": "approve",
            },
            "/v1/instances/{id}/signals/{stepId}": {"id": i["sig"], "stepId": "go"},
            "/v1/instances/{id}/cancel": {"id": i["svc"]},
            "/v1/instances/{id}": {"id": i["svc"]},
            "/v1/definitions/{name}/versions/{version}": {"name": i["defn"], "version": "1"},
            "/v1/definitions/{name}": {"name": i["defn"]},
            "/v1/taskdefs/{name}": {"name": i["taskdef"]},
        }
        if route.path.startswith("/v1/queues/"):
            return {"name": i["queue"], "taskId": i["task"]}
        return by_route.get(route.path, {})


def _definition(name: str, job_type: str, **step: Any) -> dict[str, Any]:
    return {
        "name": name,
        "steps": [{"id": "only", "type": "SERVICE_TASK", "jobType": job_type, **step}],
    }


@pytest.fixture
def seeded(invoke: Invoke) -> Seeded:
    def call(function: str, method: str, resource: str, **kw: Any) -> Any:
        status, _, body = invoke(function, method, resource, **kw)
        assert status < 300, body
        return body

    ids = {"defn": "fuzz-def", "job_type": "fuzz-job", "taskdef": "fuzz-taskdef", "queue": "fuzz-q"}
    post = "POST"
    definition = _definition(ids["defn"], ids["job_type"], responseTimeoutSeconds=3600)
    call("definitions", post, "/v1/definitions", body=definition)
    call(
        "definitions",
        post,
        "/v1/definitions",
        body={"name": "fuzz-user", "steps": [{"id": "approve", "type": "USER_TASK"}]},
    )
    call(
        "definitions",
        post,
        "/v1/definitions",
        body={"name": "fuzz-sig", "steps": [{"id": "go", "type": "SIGNAL"}]},
    )
    for key, name in (("svc", ids["defn"]), ("user", "fuzz-user"), ("sig", "fuzz-sig")):
        ids[key] = call("instances", post, "/v1/instances", body={"definitionName": name})["id"]
    poll = {"workerId": "w", "jobTypes": [ids["job_type"]]}
    ids["job"] = call("jobs", post, "/v1/jobs/poll", body=poll)["jobs"][0]["id"]
    call("definitions", "PUT", "/v1/taskdefs/{name}", path_params={"name": ids["taskdef"]}, body={})
    queue = {"name": ids["queue"]}
    call("queues", post, "/v1/queues/{name}/push", path_params=queue, body={"title": "t"})
    dequeue = {"consumerId": "c", "visibilityTimeoutSecs": 3600}
    task = call("queues", post, "/v1/queues/{name}/dequeue", path_params=queue, body=dequeue)
    ids["task"], ids["receipt"] = task["tasks"][0]["id"], task["tasks"][0]["receipt"]
    return Seeded(ids)


ROUTE_PARAMS = [pytest.param(r, id=f"{r.method} {r.path}") for r in ROUTES]


LONGER_RUN = os.environ.get("BATON_FUZZ_EXAMPLES")
SETTINGS = settings(
    max_examples=int(LONGER_RUN or "30"),
    # The same examples on every ``make test`` (a verdict does not change from run to run);
    # fresh random ones when BATON_FUZZ_EXAMPLES asks for a longer run.
    derandomize=not LONGER_RUN,
    database=None,
    deadline=None,
    # No shrinking: a failure is reported as found, so a failing run stays as fast as a green one.
    phases=(Phase.explicit, Phase.reuse, Phase.generate),
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)


@pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisDeprecationWarning")
@pytest.mark.parametrize("route", ROUTE_PARAMS)
@SETTINGS
@given(data=st.data())
def test_no_input_produces_a_500(
    invoke: Invoke, seeded: Seeded, route: Route, data: st.DataObject
) -> None:
    real = seeded.path_values(route)
    params: dict[str, str] = {}
    for name in _params(route.path):
        hostile = st.one_of(
            hostile_strings.map(as_url_decoded).filter(lambda s: "/" not in s),
            query_numbers,
            st.just(NUL),
        )
        choices = [hostile, st.just("00000000-0000-0000-0000-000000000000")]
        if name in real:  # half the time the seeded id, so the body reaches the store
            choices = [*choices, st.just(real[name]), st.just(real[name])]
        else:
            choices.append(hostile)
        params[name] = data.draw(st.one_of(*choices), label=name)
    kw: dict[str, Any] = {"path_params": params or None}
    if route.method in ("POST", "PUT"):
        kw["raw_body"] = data.draw(_bodies(seeded.base_body(route)), label="body")
    else:
        kw["query"] = data.draw(_queries(), label="query") or None
    status, headers, payload = invoke(route.function, route.method, route.path, **kw)
    assert status < 500, payload
    if status >= 400:
        assert headers["content-type"] == "application/problem+json"


# Tried in this order, so that what a store must refuse is tried before a value the API may
# rightly accept (an accepted write changes the seeded state the later ones need).
LEAF_VALUES: tuple[Any, ...] = (
    f"x{NUL}",
    "\ud835",
    "x\udc00",
    float("nan"),
    float("-inf"),
    TOO_BIG,
    1.5,
    3_000_000_000,
    2**63,
    10**20,
)
HOSTILE_KEYS = (NUL, "\ud835")
PARAM_VALUES = (NUL, f"x{NUL}", "3000000000", "9223372036854775808", "-1", "1.5", "\ufffd")
QUERY_VALUES = (
    NUL,
    "3000000000",
    "9223372036854775808",
    "881.0",
    "!!!",
    garbage_token([b"garbage", b"more-garbage"]),
    garbage_token([b"2024-01-01T00:00:00+00:00", b"not-a-uuid"]),
)
QUERY_NAMES = ("limit", "pageToken", "status", "definitionName", "correlationId")


def _leaf_mutations(value: Any, where: str = "") -> list[tuple[int, str, Any]]:
    """(rank, where, mutated copy of ``value``) for every leaf of ``value`` set to every hostile
    value in turn, and a hostile key added to every object; rank orders them as LEAF_VALUES."""
    out: list[tuple[int, str, Any]] = []
    if isinstance(value, dict):
        out += [(0, f"{where}[{k!r}]", {**value, k: 1}) for k in HOSTILE_KEYS]
        for k, v in value.items():
            for rank, w, m in _leaf_mutations(v, f"{where}.{k}"):
                out.append((rank, w, {**value, k: m}))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            for rank, w, m in _leaf_mutations(v, f"{where}[{i}]"):
                out.append((rank, w, [*value[:i], m, *value[i + 1 :]]))
    else:
        out += [(rank, f"{where} = {h!r}", h) for rank, h in enumerate(LEAF_VALUES)]
    return out


@pytest.mark.parametrize("route", ROUTE_PARAMS)
def test_every_value_made_hostile_in_turn_never_gets_a_500(
    invoke: Invoke, seeded: Seeded, route: Route
) -> None:
    """Deterministic and exhaustive for one change at a time: each value of a valid request (body
    leaf, path parameter, query parameter) replaced by each hostile value."""
    failures: list[str] = []
    base = seeded.base_body(route)
    real = seeded.path_values(route)
    params = {p: real.get(p, "fuzz") for p in _params(route.path)}
    writes = route.method in ("POST", "PUT")

    def check(what: str, **kw: Any) -> None:
        try:
            status, headers, payload = invoke(route.function, route.method, route.path, **kw)
        except Exception as e:  # e.g. an accepted value that breaks the proto contract
            failures.append(f"{what}: {type(e).__name__}: {e}"[:300])
            return
        problem = headers.get("content-type") == "application/problem+json"
        if status >= 500 or (status >= 400 and not problem):
            failures.append(f"{what} -> {status} {payload}"[:300])

    if writes:
        for _, where, body in sorted(_leaf_mutations(base), key=lambda m: m[0]):
            check(f"body{where}", path_params=params or None, raw_body=encode(body))
    else:
        for name in QUERY_NAMES:
            for value in QUERY_VALUES:
                check(f"?{name}={value!r}", path_params=params or None, query={name: value})
    for name in params:
        for value in PARAM_VALUES:
            kw: dict[str, Any] = {"path_params": {**params, name: value}}
            if writes:
                kw["raw_body"] = encode(base)
            check(f"path {name}={value!r}", **kw)
    assert not failures, f"{len(failures)} hostile requests failed:\n" + "\n".join(failures)


def _bodies(base: dict[str, Any]) -> st.SearchStrategy[str]:
    """Mostly the real body with one value made hostile in its own kind (a string gets NUL or a
    lone surrogate, a number overflows or turns NaN, an object gains a hostile key), so that
    validation lets it through to the store; sometimes an unrelated hostile document, or the
    real body cut short (malformed JSON)."""

    @st.composite
    def body(draw: st.DrawFn) -> str:
        kind = draw(st.sampled_from(["mutated"] * 7 + ["document"] * 2 + ["cut short"]))
        if kind == "cut short":
            return encode(base)[:-1] if base else "{"
        if kind == "document" or not base:
            return encode(draw(json_values | st.dictionaries(any_text, json_values, max_size=4)))
        mutated = dict(base)
        key = draw(st.sampled_from(sorted(mutated)))
        mutated[key] = draw(_mutated(mutated[key]))
        return encode(mutated)

    return body()


def _mutated(value: Any) -> st.SearchStrategy[Any]:
    """``value`` made hostile, mostly keeping its JSON type."""
    if isinstance(value, str):
        return st.one_of(hostile_strings, hostile_strings.map(lambda h: value + h), json_values)
    if isinstance(value, bool) or value is None:
        return json_values
    if isinstance(value, int | float):
        return st.one_of(hostile_numbers, json_values)
    if isinstance(value, list):
        return st.one_of(
            st.lists(hostile_scalars, min_size=1, max_size=3), deep, st.just([]), json_values
        )
    if isinstance(value, dict) and value:
        return st.one_of(
            hostile_strings.map(lambda k: {**value, k: 1}),
            st.sampled_from(sorted(value)).flatmap(
                lambda k: _mutated(value[k]).map(lambda v: {**value, k: v})
            ),
            json_values,
        )
    return json_values


def _queries() -> st.SearchStrategy[dict[str, str]]:
    return st.fixed_dictionaries(
        {},
        optional={
            "limit": query_numbers,
            "pageToken": page_tokens,
            "status": url_text,
            "definitionName": url_text,
            "correlationId": url_text,
        },
    )


def _params(path: str) -> list[str]:
    return re.findall(r"{(\w+)}", path)
