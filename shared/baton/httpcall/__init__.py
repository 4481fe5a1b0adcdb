"""HTTP calls the engine makes for HTTP steps (Conductor's HTTP task), outside any decision: the
request read from a step's resolved ``request`` (:mod:`.request`), the address guard against
server-side request forgery (:mod:`.guard`), and the call itself, bounded in time and size, made to
the address the guard checked (:mod:`.client`)."""

from baton.httpcall.client import CallFailed, Limits, call
from baton.httpcall.guard import AddressPolicy, Refused
from baton.httpcall.request import (
    EVENT_JOB_TYPE,
    EVENT_KEY,
    HTTP_JOB_TYPE,
    MAX_CONNECT_MS,
    MAX_READ_MS,
    POLL_KEY,
    HttpRequest,
    RequestInvalid,
    parse_request,
    redacted_input,
    request_problems,
    sensitive_header,
)

__all__ = [
    "EVENT_JOB_TYPE",
    "EVENT_KEY",
    "HTTP_JOB_TYPE",
    "MAX_CONNECT_MS",
    "MAX_READ_MS",
    "POLL_KEY",
    "AddressPolicy",
    "CallFailed",
    "HttpRequest",
    "Limits",
    "Refused",
    "RequestInvalid",
    "call",
    "parse_request",
    "redacted_input",
    "request_problems",
    "sensitive_header",
]
